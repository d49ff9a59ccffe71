// SPDX-License-Identifier: GPL-2.0-or-later
// serialized (docs/rules.md "Other findings"): a connection-level verdict.
#pragma once

#include <cstdint>

#include "rules/view.hpp"

namespace iscsi_doctor::rules {

class Serialized {
public:
  // A completed command reported while no other was ever in flight with it; latest_status_ns:
  // the latest status of the commands completed before it (-1: none).
  void count(const ConnectionView& v, const OpenCommand& c, int64_t latest_status_ns);
  // The connection's verdict at its end: max_outstanding, the most commands in flight at once;
  // first_command_frame, where its first command began.
  void judge(FindingOut& out, uint32_t max_outstanding, uint64_t first_command_frame) const;

private:
  uint64_t commands_ = 0;
  double wait_ms_ = 0, cycle_ms_ = 0;
  double crossing_ms_ = 0;
  double bound_ms_ = 0;  // of crossing_ms_, timed by a round trip that may hold a side's own time
  double unsure_ms_ = 0;  // crossings think_or_network left undecided
};

}  // namespace iscsi_doctor::rules
