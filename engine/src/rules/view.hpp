// SPDX-License-Identifier: GPL-2.0-or-later
// What a rule takes besides the command it judges (docs/architecture.md "The rules as units"): a
// read-only view of its connection, and where its findings go.
#pragma once

#include <cstdint>
#include <string>

#include "iscsi_doctor/analyzer.hpp"
#include "iscsi_doctor/results.hpp"
#include "iscsi_doctor/trace.hpp"
#include "session/command.hpp"
#include "session/constants.hpp"
#include "tcp/tracker.hpp"

namespace iscsi_doctor::rules {

using session::kI2T;
using session::kT2I;
using session::OpenCommand;

// The connection as a rule may see it: both flows and round trips (the TCP tracker), the options,
// and what follows from them. Built by the connection for each call; nothing in it changes.
struct ConnectionView {
  uint32_t id;
  const tcp::Tracker& tcp;
  const Options& options;
  Tracer* tracer;

  const tcp::Flow& flow(int dir) const { return tcp.flow(dir); }
  int64_t rtt_ns(int side_dir) const { return tcp.rtt_ns(side_dir); }  // capture point <-> that side
  int64_t full_rtt_ns() const { return tcp.full_rtt_ns(); }
  int64_t tolerance_ns() const { return session::release_tolerance_ns(full_rtt_ns()); }
  int64_t wait_min_ns() const { return session::wait_min_ns(full_rtt_ns()); }
  // The capture point is near this side (its round trip a small part of the path's).
  bool near(int side_dir) const {
    return tcp.rtt(kI2T).known() && tcp.rtt(kT2I).known() &&
           full_rtt_ns() >= to_ns(session::vantage_min_rtt_ms) &&
           rtt_ns(side_dir) * session::near_initiator_rtt_factor < full_rtt_ns();
  }
  // The tracer's fact for a segment on command c's path (when tracing).
  void trace_path(int dir, uint64_t frame, const OpenCommand& c) const {
    tracer->on_path({id, dir == kI2T, frame, c.r.itt, c.r.first_frame, dir == kI2T ? c.h_initiator : c.h_target});
  }
};

// Where a rule's findings go. The connection makes each one (its session and connection, and the
// command's ITT and first frame when there is a command), notes what its verdict inferred, and
// hands it to the Sink; its notices count against the connection's notice budget.
class FindingOut {
public:
  virtual Finding finding(FindingKind kind, Side side, uint64_t frame, double lost_ms, const OpenCommand* c) = 0;
  virtual void emit_finding(Finding f) = 0;
  virtual void notice(Notice::Level level, uint64_t frame, std::string message) = 0;

protected:
  ~FindingOut() = default;
};

}  // namespace iscsi_doctor::rules
