// SPDX-License-Identifier: GPL-2.0-or-later
// A connection's rules (docs/architecture.md "The rules as units"): each rule a unit of its own
// file under rules/, and here the order in which a reported command meets them.
#pragma once

#include <cstdint>

#include "rules/holds.hpp"
#include "rules/link_limited.hpp"
#include "rules/r2t_round_trip.hpp"
#include "rules/retransmission.hpp"
#include "rules/serialized.hpp"
#include "rules/target_think.hpp"
#include "rules/view.hpp"

namespace iscsi_doctor::rules {

struct Rules {
  Holds holds;                    // on the critical path, segment by segment (session/critical_path.cpp)
  Retransmission retransmission;  // on the tracker's hole and resend events
  LinkLimited link_limited;
  R2tRoundTrip r2t_round_trip;
  TargetThink target_think;
  Serialized serialized;

  // A completed command as it is reported. one_at_a_time: no other command was ever in flight with
  // it; latest_status_ns: the latest status of the commands completed before it (-1: none).
  void judge_command(const ConnectionView& v, FindingOut& out, OpenCommand& c, bool one_at_a_time,
                     int64_t latest_status_ns);
  // Any command as it is reported (an open one too): the held findings not given yet.
  void give_held_findings(const ConnectionView& v, FindingOut& out, OpenCommand& c) const {
    link_limited.give_held_findings(v, out, c);
  }
  // The connection's end: its connection-level verdicts and notices.
  void finish(FindingOut& out, uint32_t max_outstanding, uint64_t first_command_frame) const;
};

}  // namespace iscsi_doctor::rules
