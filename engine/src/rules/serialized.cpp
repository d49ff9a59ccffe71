// SPDX-License-Identifier: GPL-2.0-or-later
// serialized (docs/rules.md "Other findings"): a connection-level verdict.
#include <algorithm>
#include <cstdint>
#include <string>

#include "rules/constants.hpp"
#include "session/connection.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::session {

// Time the command's cycle spent on the network with nothing else in flight. The cycle includes
// the crossing from the previous status to this command (up to rtt(initiator)): near the target
// that is where the round trip lies, near the initiator it is ~0.
void Connection::count_serialized(const OpenCommand& c) {
  const CommandResult& r = c.r;
  const Breakdown& b = r.breakdown;
  double back = 0;
  if (latest_status_ns_ >= 0 && r.first_ns > latest_status_ns_)
    back = ms(std::min(r.first_ns - latest_status_ns_, rtt_ns(kI2T)));
  ++serial_commands_;
  serial_cycle_ms_ += r.latency_ms + back;
  double crossings = b.request_ms + b.r2t_ms + b.response_ms + back;
  serial_wait_ms_ += crossings + b.nagle_ms + b.delayed_ack_ms + b.window_ms;
  // Holds are claimed (and ranked) by their own findings; only the crossings are this one's.
  serial_crossing_ms_ += crossings;
}

// The connection's verdict at its end: commands one at a time, the link idle on round trips.
void Connection::judge_serialized() {
  if (serial_commands_ < rules::serialized_min_commands || max_outstanding_ > 1 ||
      serial_wait_ms_ < rules::serialized_wait_share * serial_cycle_ms_)
    return;
  Finding f =
      finding(FindingKind::serialized, Side::initiator, first_command_frame_, serial_crossing_ms_, nullptr);
  f.detail = std::to_string(serial_commands_) +
             " commands issued one at a time; the link sat idle waiting on round trips for " +
             whole_ms(serial_wait_ms_) + " ms (" + whole_ms(serial_crossing_ms_) +
             " ms of it crossing the network)";
  emit_finding(std::move(f));
}

}  // namespace iscsi_doctor::session
