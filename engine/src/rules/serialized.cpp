// SPDX-License-Identifier: GPL-2.0-or-later
// serialized (docs/rules.md "Other findings"): a connection-level verdict.
#include "rules/serialized.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "rules/constants.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::rules {

// Time the command's cycle spent on the network with nothing else in flight. The cycle includes
// the crossing from the previous status to this command (up to rtt(initiator)): near the target
// that is where the round trip lies, near the initiator it is ~0.
void Serialized::count(const ConnectionView& v, const OpenCommand& c, int64_t latest_status_ns) {
  const CommandResult& r = c.r;
  const Breakdown& b = r.breakdown;
  double back = 0;
  if (latest_status_ns >= 0 && r.first_ns > latest_status_ns)
    back = ms(std::min(r.first_ns - latest_status_ns, v.rtt_ns(kI2T)));
  ++commands_;
  cycle_ms_ += r.latency_ms + back;
  double crossings = b.request_ms + b.r2t_ms + b.response_ms + back;
  // Crossings timed by a round trip that may hold the answering side's own time (the initiator's
  // for the way back to its next command).
  double bound = c.bound_ms;
  if (back > 0 && v.tcp.rtt(kI2T).may_hold_side_time(to_ns(v.options.delayed_ack_min_ms))) bound += back;
  // Where think_or_network said a crossing may be the target's own time, it is not the network's.
  if (std::find(r.findings.begin(), r.findings.end(), FindingKind::think_or_network) != r.findings.end()) {
    const double unsure = std::min(c.unsure_ms, crossings);
    crossings -= unsure;
    bound -= unsure;
    unsure_ms_ += unsure;
  }
  wait_ms_ += crossings + b.nagle_ms + b.delayed_ack_ms + b.window_ms;
  // Holds are claimed (and ranked) by their own findings; only the crossings are this one's.
  crossing_ms_ += crossings;
  bound_ms_ += std::clamp(bound, 0.0, crossings);
}

// The connection's verdict at its end: commands one at a time, the link idle on round trips.
void Serialized::judge(FindingOut& out, uint32_t max_outstanding, uint64_t first_command_frame) const {
  if (commands_ < serialized_min_commands || max_outstanding > 1 ||
      wait_ms_ < serialized_wait_share * cycle_ms_)
    return;
  Finding f =
      out.finding(FindingKind::serialized, Side::initiator, first_command_frame, crossing_ms_, nullptr);
  f.detail = std::to_string(commands_) +
             " commands issued one at a time; the link sat idle waiting on round trips for " +
             whole_ms(wait_ms_) + " ms (";
  const std::string network = whole_ms(crossing_ms_ - bound_ms_), bound = whole_ms(bound_ms_);
  if (bound == "0" || network != "0") f.detail += network + " ms of it crossing the network";
  if (bound != "0")
    f.detail += (network != "0" ? " and " + bound + " ms either that"
                                : bound + " ms of it either crossing the network") +
                " or the answering side's own time, which this capture cannot tell apart: its round trip is "
                "known only as an upper bound";
  f.detail += ")";
  if (unsure_ms_ > 0)
    f.detail += "; " + whole_ms(unsure_ms_) +
                " ms more may have been the network or the target (think_or_network), not counted";
  out.emit_finding(std::move(f));
}

}  // namespace iscsi_doctor::rules
