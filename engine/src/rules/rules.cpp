// SPDX-License-Identifier: GPL-2.0-or-later
#include "rules/rules.hpp"

namespace iscsi_doctor::rules {

void Rules::judge_command(const ConnectionView& v, FindingOut& out, OpenCommand& c, bool one_at_a_time,
                          int64_t latest_status_ns) {
  link_limited.judge(v, out, c);  // before the holds are given: those the link explains are not
  link_limited.give_held_findings(v, out, c);
  r2t_round_trip.judge(out, c);
  target_think.judge(v, out, c);
  if (one_at_a_time) serialized.count(v, c, latest_status_ns);
}

void Rules::finish(FindingOut& out, uint32_t max_outstanding, uint64_t first_command_frame) const {
  serialized.judge(out, max_outstanding, first_command_frame);
  retransmission.finish(out);
}

}  // namespace iscsi_doctor::rules
