// SPDX-License-Identifier: GPL-2.0-or-later
// target_think and think_or_hold (docs/rules.md "Other findings").
#include "rules/target_think.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "rules/constants.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::rules {

// Most of the latency spent inside the target (docs/rules.md). When that is so only with waits
// the capture cannot tell from holds, think_or_hold says so instead, and think_or_network when it
// is so only with crossings timed by a round trip known only as an upper bound (any part of them
// may be the target's own time): never the disks' advice for what may be a hold or the network.
void TargetThink::judge(const ConnectionView& v, FindingOut& out, OpenCommand& c) const {
  const CommandResult& r = c.r;
  const double think = r.breakdown.think_ms;
  auto enough = [&](double ms) { return ms >= v.options.think_min_ms && ms >= think_share * r.latency_ms; };
  FindingKind kind = FindingKind::target_think;
  if (!enough(think)) {
    if (!(c.unsure_ms > 0 && think >= v.options.think_min_ms && enough(think + c.unsure_ms))) return;
    kind = FindingKind::think_or_network;
  } else if (c.undecided_ms > 0 && !enough(think - c.undecided_ms)) {
    kind = FindingKind::think_or_hold;
  }
  Finding f = out.finding(kind, Side::target, c.first_reply_frame ? c.first_reply_frame : r.status_frame, think, &c);
  f.related.emplace_back("command", r.first_frame);
  if (kind == FindingKind::think_or_hold) {
    f.related.emplace_back("may_be_released_by", c.undecided_ack_frame);
    f.detail = "the target took " + whole_ms(think) + " ms to answer, or " + whole_ms(c.undecided_ms) +
               " ms of it was a reply held until the ACK in frame " + std::to_string(c.undecided_ack_frame) +
               " reached the target: this capture cannot tell them apart (the path's delay varies more than it "
               "has shown, or the target's round trip is known only as an upper bound)";
  } else if (kind == FindingKind::think_or_network) {
    f.detail = "the target took between " + whole_ms(think) + " and " + whole_ms(think + c.unsure_ms) +
               " ms to answer: " + whole_ms(c.unsure_ms) +
               " ms of it was the network's round trip or the target's own time (its round trip is known "
               "only as an upper bound: its pure ACKs may have waited for a delayed-ACK timer)";
  } else {
    f.detail = "the target took " + whole_ms(think) + " ms to answer: the target, not the network";
  }
  add_finding_kind(c, kind);
  out.emit_finding(std::move(f));
}

}  // namespace iscsi_doctor::rules
