// SPDX-License-Identifier: GPL-2.0-or-later
// r2t_round_trip (docs/rules.md "Other findings").
#include "rules/r2t_round_trip.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "rules/constants.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::rules {

// A write that waited for R2T round trips the keys could have avoided (docs/rules.md).
void R2tRoundTrip::judge(FindingOut& out, OpenCommand& c) const {
  const CommandResult& r = c.r;
  if (!c.write || c.r2ts == 0 || r.bytes > r2t_max_write_bytes) return;
  Finding f = out.finding(FindingKind::r2t_round_trip, Side::target, c.first_r2t_frame, r.breakdown.r2t_ms, &c);
  f.detail = std::to_string(c.r2ts) + " R2T round trip(s) for a " + std::to_string(r.bytes) + "-byte write";
  add_finding_kind(c, FindingKind::r2t_round_trip);
  out.emit_finding(std::move(f));
}

}  // namespace iscsi_doctor::rules
