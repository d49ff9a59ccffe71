// SPDX-License-Identifier: GPL-2.0-or-later
// What the engine reports. Names here (finding kinds, breakdown parts) are contracts: the CLI's
// JSON keys, the Wireshark fields and the Lua plugin all use them verbatim.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "iscsi_doctor/segment.hpp"

namespace iscsi_doctor {

// network: the path between them (link_limited), no peer's own doing.
enum class Side : uint8_t { initiator, target, network };
std::string_view side_name(Side);

enum class FindingKind : uint8_t {
  nagle_hold,      // a sub-MSS segment released only by the ACK of the previous sub-MSS segment
  delayed_ack,     // an ACK held by the receiver's delayed-ACK timer while the other side waited
  r2t_round_trip,  // a write that paid an R2T round trip ImmediateData/InitialR2T could avoid
  cwnd_limited,    // sender stalled on its congestion window (slow start, also after idle)
  rwnd_limited,    // sender stalled on the receiver's advertised window
  retransmission,  // a segment sent again (loss recovery)
  target_think,    // the target itself was slow, not the network
  serialized,      // queue depth 1 with the link idle between commands (connection level)
  link_limited,    // the data moved at the path's rate: its time is what the bytes need on the link
  think_or_hold,   // the target's wait: its own time, or a hold the path's varying delay hides
  think_or_network,  // the target's wait: its own time, or a round trip known only as an upper bound
  count_
};
inline constexpr size_t finding_kind_count = static_cast<size_t>(FindingKind::count_);
std::string_view finding_name(FindingKind);
std::optional<FindingKind> finding_from_name(std::string_view);

enum class Vantage : uint8_t { unknown, initiator, target, midpath };
std::string_view vantage_name(Vantage);

// Where a command's latency went, in milliseconds (see docs/rules.md for each part).
struct Breakdown {
  double request_ms = 0;            // command PDU (and immediate/unsolicited data) crossing to the target
  double think_ms = 0;              // target's own time between the complete request and its first reply
  double data_ms = 0;               // data transfer (Data-In / Data-Out) not otherwise explained
  double nagle_ms = 0;              // segments held by Nagle's algorithm
  double delayed_ack_ms = 0;        // part of a Nagle hold spent waiting for a delayed ACK
  double r2t_ms = 0;                // R2T round trips
  double window_ms = 0;             // cwnd / rwnd stalls
  double cwnd_ms = 0, rwnd_ms = 0;  // window_ms's two parts (not in the reports' breakdown: window is)
  double loss_ms = 0;               // loss recovery (retransmissions)
  double response_ms = 0;           // status crossing back to the initiator
  double link_ms = 0;               // data serialised at the path's rate (link_limited)
};

struct CommandResult {
  uint32_t session = 0;     // Analyzer-assigned session number (from 1)
  uint32_t connection = 0;  // Analyzer-assigned connection number (from 1)
  uint32_t itt = 0;
  uint32_t cmdsn = 0;
  // The logical unit (SAM-5 §4.6): peripheral or flat-space addressing as its number (0x0001... and
  // 0x4005... are LUN 1 and 5), any other addressing as the 8 bytes read big-endian.
  uint64_t lun = 0;
  uint8_t iscsi_opcode = 0;  // 0x01 for SCSI commands; task management etc. are also tracked
  std::string op;            // "READ(10)", "WRITE(16)", "INQUIRY", "NOP-Out", ...
  char kind = 'o';           // 'r' read, 'w' write, 'o' other
  std::optional<uint64_t> lba;
  uint32_t bytes = 0;         // expected data transfer length
  uint64_t first_frame = 0;   // first segment of the command PDU
  uint64_t status_frame = 0;  // segment completing the Response / status-bearing Data-In; 0 if none
  int64_t first_ns = 0, status_ns = 0;
  double latency_ms = 0;  // status_ns - first_ns as seen at the capture point
  // At the command's report: what to add to its latency for the initiator's view, as measured so
  // far (0 near the initiator, else the round trip capture point -> initiator -> capture point;
  // -1 not measured). Reports that wait for the connection's end take its final value instead.
  double initiator_offset_ms = -1;
  int round_trips = 0;    // see docs/rules.md "Round trips"
  int ideal_round_trips = 0;
  std::optional<uint8_t> scsi_status;
  std::optional<uint8_t> iscsi_response;
  std::optional<uint8_t> sense_key, asc, ascq;
  std::vector<FindingKind> findings;  // distinct kinds, in order of first evidence
  Breakdown breakdown;
  bool completed = false;        // false: no status seen (capture ended, aborted, lost)
  bool data_incomplete = false;  // part of its PDUs was missing from the capture
};

struct Finding {
  FindingKind kind{};
  Side side{};
  uint32_t session = 0, connection = 0;
  uint64_t frame = 0;  // the evidence frame (the held segment, the late ACK, ...)
  std::vector<std::pair<std::string, uint64_t>> related;  // e.g. {"released_by", 123}, {"acks", 120}
  double lost_ms = 0;                                     // time this finding cost the command(s)
  std::optional<uint32_t> itt;                            // the command it delayed, if one
  uint64_t command_first_frame = 0;
  std::string detail;  // one line for people
  // Facts this verdict rests on that the capture did not show, so were inferred (docs/rules.md
  // "Inferred facts"): "mss", "window_scale", "keys". Empty: all seen.
  std::vector<std::string> inferred;
};

struct Notice {
  enum class Level : uint8_t { info, warning, error } level = Level::warning;
  uint64_t frame = 0;
  uint32_t connection = 0;
  std::string message;
};

struct ConnectionInfo {
  uint32_t id = 0, session = 0;
  Endpoint initiator, target;
  bool saw_handshake = false, saw_login = false, mid_session_start = false;
  uint16_t mss_initiator = 0, mss_target = 0;  // largest segment each side may send
  bool mss_inferred = false;
  // How each MSS was found: "handshake", "full segments" (sent without PSH, seen several times) or
  // "Ethernet standard" (1460 less the TCP options seen); see docs/rules.md "MSS".
  std::string mss_source_initiator, mss_source_target;
  // The window scale applied to the windows each side advertises: from the handshake, or (when
  // wscale_inferred) the least the data in flight proves.
  int wscale_initiator = -1, wscale_target = -1;
  bool wscale_inferred = false;
  uint64_t offload_segments = 0;  // segments longer than the MSS: TSO/GRO aggregates at the capture point
  // The segment that showed each side's Nagle off (docs/rules.md "Holds"): a short one sent while
  // its previous short one was unacknowledged, sooner than an ACK of it could come back; 0: none.
  uint64_t nagle_off_frame_initiator = 0, nagle_off_frame_target = 0;
  double rtt_ms = -1;             // full path round trip
  double rtt_initiator_ms = -1;   // capture point <-> initiator and back
  double rtt_target_ms = -1;      // capture point <-> target and back
  // Each round trip's evidence: "handshake", "echoed timestamps", "pure ACKs" (of more than one
  // full segment), "Nagle releases" (a round trip if that side's Nagle is on), "pure ACKs that may
  // be delayed" and "ACKs on data" (upper bounds: a delayed ACK or the side's answer time may be in
  // every sample), "" (none).
  std::string rtt_source_initiator, rtt_source_target;
  // rtt_target_ms may hold the target's own time, not only the path's: its answers or a delayed-ACK
  // timer (docs/rules.md "Measures taken from TCP"); near the initiator the round trip is at most it.
  bool rtt_target_may_hold_own_time = false;
  // The same of rtt_initiator_ms and the initiator: what it adds to a latency is at most it.
  bool rtt_initiator_may_hold_own_time = false;
  // The path's rate each way as the receiver's ACKs show it (docs/rules.md "The link"): the
  // fastest busy run of at least link_run_bytes_min; a lower bound where the data never filled it.
  // Mbit/s of payload, -1: no such run; with the bytes of that run.
  double rate_to_target_mbit_s = -1, rate_to_initiator_mbit_s = -1;
  uint64_t rate_to_target_bytes = 0, rate_to_initiator_bytes = 0;
  Vantage vantage = Vantage::unknown;
  std::vector<std::pair<std::string, std::string>> keys;  // negotiated operational values in effect
  bool header_digest = false, data_digest = false;
  uint64_t frames = 0, pdus = 0, commands = 0, resyncs = 0, digest_errors = 0;
  uint64_t bytes_missing = 0;
  uint32_t max_outstanding = 0;  // largest number of commands in flight at once
  uint64_t never_answered = 0;   // commands with no status in the capture: in flight to its end
};

// What a connection's facts were and where each came from, in the words every front-end shows
// (the CLI's text report, both Wireshark plugins); an inferred value says so, with its evidence.
std::string mss_words(const ConnectionInfo&);  // "MSS initiator 1448, target 1448 (inferred: ...)"
std::string window_scale_words(
    const ConnectionInfo&);  // "initiator 7, target 7 (handshake)" / "not in the capture: ..."
std::string keys_words(const ConnectionInfo&);     // "ImmediateData=Yes ... source=default"
std::string offload_words(const ConnectionInfo&);  // "" or "N segments longer than the MSS: TSO/GRO ..."
std::string nagle_words(const ConnectionInfo&);    // "" or "Nagle off on the target (frame N: ...)"
std::string rtt_source_words(const ConnectionInfo&);  // "initiator pure ACKs, target ACKs on data only: ..."

// Connections folded into counts (beyond a listing cap).
struct ConnectionTotals {
  uint64_t connections = 0, frames = 0, pdus = 0, commands = 0, resyncs = 0, digest_errors = 0;
  uint64_t bytes_missing = 0;
  void add(const ConnectionInfo& c) {
    ++connections;
    frames += c.frames;
    pdus += c.pdus;
    commands += c.commands;
    resyncs += c.resyncs;
    digest_errors += c.digest_errors;
    bytes_missing += c.bytes_missing;
  }
};

struct SessionInfo {
  uint32_t id = 0;
  std::string initiator_name, target_name, session_type;
  std::string isid;  // hex
  uint16_t tsih = 0;
  std::vector<uint32_t> connections;
};

}  // namespace iscsi_doctor
