// SPDX-License-Identifier: GPL-2.0-or-later
// Every finding kind in one table: its name (a contract: JSON, --fail-on, Wireshark fields), the
// part of a command's latency it explains, the fix for each side, its weight in Wireshark's
// Expert Information, and the words front-ends show. Adding a kind adds a row here (and the rule
// under engine/src/rules/); every front-end reads this table (the Lua plugin is checked against it).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "iscsi_doctor/results.hpp"

namespace iscsi_doctor {

enum class Severity : uint8_t { warning, note };  // Wireshark: PI_WARN (network holds, losses) or PI_NOTE

struct FindingKindInfo {
  FindingKind kind;
  std::string_view name;
  std::string_view label;  // a few words, for drawings ("" : not drawn on a ladder)
  std::string_view title;  // one line, Wireshark's expert info
  Severity severity;
  // The breakdown part whose time the finding explains, its own (null: none, a connection-level
  // verdict), and one more its fix removes too (a Nagle hold's wait for a delayed ACK).
  double Breakdown::*part = nullptr;
  double Breakdown::*part2 = nullptr;
  // What the side that should change does; fix_initiator empty: the same as fix_target.
  std::string_view fix_target, fix_initiator;
  // The capture cannot tell whether the time is the side's at all (think_or_network): no side is
  // told to change, and the fix's gain holds only if it is.
  bool side_unsure = false;
};

inline constexpr std::array<FindingKindInfo, finding_kind_count> kFindingKinds{{
    {FindingKind::nagle_hold, "nagle_hold", "Nagle hold", "Segment held by Nagle's algorithm",
     Severity::warning, &Breakdown::nagle_ms, &Breakdown::delayed_ack_ms,  // no hold, no wait for the ACK
     "set TCP_NODELAY on the target's socket, or send the final Data-In and the SCSI Response in one write "
     "(or put the status in the final Data-In, S bit)",
     "set TCP_NODELAY on the initiator's socket, or send the command header and its immediate data in one "
     "write (writev/MSG_MORE)"},
    {FindingKind::delayed_ack, "delayed_ack", "delayed ACK",
     "ACK held by the delayed-ACK timer while the sender waited", Severity::warning,
     &Breakdown::delayed_ack_ms, nullptr,
     "quick-ACK on the target (TCP_QUICKACK after each receive); removing the Nagle hold on the initiator "
     "removes the wait",
     "quick-ACK on the initiator (TCP_QUICKACK after each receive, or a lower delayed-ACK timeout); removing "
     "the Nagle hold on the target removes the wait"},
    {FindingKind::r2t_round_trip, "r2t_round_trip", "", "Write paid an avoidable R2T round trip",
     Severity::note, &Breakdown::r2t_ms, nullptr,
     "negotiate ImmediateData=Yes and InitialR2T=No, with FirstBurstLength at least the write size, so write "
     "data travels with the command",
     ""},
    {FindingKind::cwnd_limited, "cwnd_limited", "cwnd wait", "Sender stalled on its congestion window",
     Severity::warning, &Breakdown::cwnd_ms, nullptr,
     "keep the congestion window open between bursts: net.ipv4.tcp_slow_start_after_idle=0 on the sender, "
     "and "
     "a larger initial window (ip route ... initcwnd)",
     ""},
    {FindingKind::rwnd_limited, "rwnd_limited", "rwnd wait", "Sender stalled on the receive window",
     Severity::warning, &Breakdown::rwnd_ms, nullptr,
     "raise the initiator's receive buffer (net.ipv4.tcp_rmem, window scaling)",
     "raise the target's receive buffer (net.ipv4.tcp_rmem, window scaling)"},
    {FindingKind::retransmission, "retransmission", "loss recovery", "Retransmission delayed a command",
     Severity::warning, &Breakdown::loss_ms, nullptr,
     "find the loss on the path (interface errors, drops, duplex, MTU); losses cost a timeout or a round "
     "trip "
     "each",
     ""},
    {FindingKind::target_think, "target_think", "target think", "The target was slow", Severity::note,
     &Breakdown::think_ms, nullptr,
     "the target itself is slow (backing store, CPU, locking): look at the target's disks and its own "
     "latency, "
     "not the network",
     ""},
    {FindingKind::serialized, "serialized", "", "Commands issued one at a time", Severity::note, nullptr,
     nullptr,
     "keep more commands outstanding (queue depth > 1: more I/O threads, async I/O, a larger "
     "nr_requests/queue "
     "depth) or larger transfers, so round trips overlap",
     ""},
    {FindingKind::link_limited, "link_limited", "link", "Transfer bound by the link's rate", Severity::note,
     &Breakdown::link_ms, nullptr,
     "the transfer is bound by the link's rate: a faster link or path, or fewer bytes; larger blocks, TCP "
     "tuning and the target do not help",
     ""},
    {FindingKind::think_or_hold, "think_or_hold", "think or hold?",
     "The target was slow, or its reply waited for an ACK: the capture cannot tell", Severity::note,
     &Breakdown::think_ms, nullptr,
     "capture at the target (or on its host), from the connection's start or with TCP timestamps on, to tell "
     "its own time from a reply held until the initiator's ACK reached it; if held, set TCP_NODELAY on the "
     "target's socket or send the final Data-In and the SCSI Response in one write",
     ""},
    {FindingKind::think_or_network, "think_or_network", "think or network?",
     "The target was slow, or the round trip was long: the capture cannot tell", Severity::note,
     &Breakdown::think_ms, nullptr,
     "capture from the connection's start, with TCP timestamps on, or at the target (or on its host), to "
     "tell the target's own time from the round trip; or compare the target's own latency statistics with "
     "the command's",
     "", true},
}};

constexpr bool finding_kinds_in_enum_order() {
  for (size_t i = 0; i < kFindingKinds.size(); ++i)
    if (static_cast<size_t>(kFindingKinds[i].kind) != i) return false;
  return true;
}
static_assert(finding_kinds_in_enum_order(), "kFindingKinds rows follow the FindingKind enum");

constexpr const FindingKindInfo& finding_kind(FindingKind k) { return kFindingKinds[static_cast<size_t>(k)]; }

// The milliseconds of a command's latency the kind explains (0 for a connection-level verdict).
inline double explained_ms(FindingKind k, const Breakdown& b) {
  const FindingKindInfo& i = finding_kind(k);
  return (i.part ? b.*i.part : 0) + (i.part2 ? b.*i.part2 : 0);
}

// The milliseconds of a command's latency that are the kind's own: no two kinds share one, so
// over all kinds they add up to at most the latency (docs/cli.md "Time lost").
inline double exclusive_ms(FindingKind k, const Breakdown& b) {
  const FindingKindInfo& i = finding_kind(k);
  return i.part ? b.*i.part : 0;
}

constexpr std::string_view fix_text(FindingKind k, Side side) {
  const FindingKindInfo& i = finding_kind(k);
  return side == Side::initiator && !i.fix_initiator.empty() ? i.fix_initiator : i.fix_target;
}

}  // namespace iscsi_doctor
