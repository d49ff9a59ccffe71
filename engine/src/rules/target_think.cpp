// SPDX-License-Identifier: GPL-2.0-or-later
// target_think (docs/rules.md "Other findings").
#include <algorithm>
#include <cstdint>
#include <string>

#include "rules/constants.hpp"
#include "session/connection.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::session {

// Most of the latency spent inside the target (docs/rules.md).
void Connection::judge_target_think(OpenCommand& c) {
  const CommandResult& r = c.r;
  const double think = r.breakdown.think_ms;
  if (think < options_.think_min_ms || think < rules::think_share * r.latency_ms) return;
  Finding f = finding(FindingKind::target_think, Side::target,
                      c.first_reply_frame ? c.first_reply_frame : r.status_frame, think, &c);
  f.related.emplace_back("command", r.first_frame);
  f.detail = "the target took " + whole_ms(think) + " ms to answer: the target, not the network";
  add_finding_kind(c, FindingKind::target_think);
  emit_finding(std::move(f));
}

}  // namespace iscsi_doctor::session
