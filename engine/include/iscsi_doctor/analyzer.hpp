// SPDX-License-Identifier: GPL-2.0-or-later
// The engine's entry point: feed every TCP segment of a capture in capture order, once; results
// arrive through a Sink as soon as they are known (a command when its status is seen, a finding
// when its evidence is complete), so memory depends on open commands, not on capture length.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "iscsi_doctor/results.hpp"
#include "iscsi_doctor/segment.hpp"
#include "iscsi_doctor/trace.hpp"
// The rule constants the options' defaults come from (in the engine's sources, beside the rules).
#include "../../src/rules/constants.hpp"

namespace iscsi_doctor {

struct Options {
  std::vector<uint16_t> ports{3260};         // iSCSI target ports
  bool detect_ports = true;                  // also follow connections on other ports that speak iSCSI
  double delayed_ack_min_ms = rules::delayed_ack_min_ms;  // an ACK later than this (beyond the RTT) counts as delayed
  double think_min_ms = rules::think_min_ms;  // target think time below this is never a finding
  size_t max_connections = 65536;            // caps: open connections at once; when hit, a Notice says so
  size_t max_connections_listed = 4096;      // finished connections kept for connections(); the rest counted
  double idle_timeout_s = 60;                // at the connection cap, connections idle this long are finished
  size_t max_open_commands = 65536;          // per connection
  size_t max_out_of_order_bytes = 4u << 20;  // per direction
  // Bytes of analysis state (open connections, their commands and buffers, estimated) to stay
  // within; 0: no budget (the plugins keep everything). With one, a connection is finished as soon
  // as nothing more can change its results (every command reported, and both FINs acknowledged, an
  // RST, or a FIN a few round trips ago), and when the budget is short, connections are finished
  // early, ended ones first, then idle ones, then busy ones, each counted (Evictions) and said.
  size_t memory_budget = 0;
};

// Connections finished early because the memory budget was short, by what they were doing.
struct Evictions {
  uint64_t connections = 0;
  uint64_t ended = 0;  // a FIN or RST seen, waiting out the linger for its last segments
  uint64_t idle = 0;   // open, no command open or awaiting its report
  uint64_t busy = 0;   // with commands open: reported as never answered
  uint64_t commands_open = 0;
};

class Sink {
public:
  virtual ~Sink() = default;
  virtual void on_command(const CommandResult&) {}
  virtual void on_finding(const Finding&) {}
  virtual void on_notice(const Notice&) {}
  // A connection's facts are final (FIN/RST seen, or finish()).
  virtual void on_connection(const ConnectionInfo&) {}
};

class Analyzer {
public:
  Analyzer(Options options, Sink& sink);
  ~Analyzer();
  Analyzer(const Analyzer&) = delete;
  Analyzer& operator=(const Analyzer&) = delete;

  // Segments must come in capture order. Non-iSCSI segments are ignored cheaply.
  SegmentStatus feed(const Segment& segment);
  // End of capture: reports still-open commands (completed = false) and every connection.
  void finish();
  // Per-segment facts (trace.hpp) for connections created from now on; nullptr: none.
  void set_tracer(Tracer* tracer);

  // Connections finished so far (up to max_connections_listed) and those still open, by id.
  std::vector<ConnectionInfo> connections() const;
  // Finished connections beyond max_connections_listed: analysed, counted here, not listed.
  const ConnectionTotals& unlisted_connections() const;
  std::vector<SessionInfo> sessions() const;
  const Evictions& evictions() const;
  // The largest analysis state the budget counted at once (0 without a budget).
  size_t memory_peak() const;
  // The endpoints of a connection still open (its commands are reported while it is, from a Sink's
  // on_command too): false when there is none by that number.
  bool endpoints(uint32_t connection, Endpoint& initiator, Endpoint& target) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace iscsi_doctor
