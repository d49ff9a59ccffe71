// SPDX-License-Identifier: GPL-2.0-or-later
// --interval: a capture's commands summed per interval of capture time (live: of the wall clock
// as the packets come), one line or JSON Lines record per interval with commands, as soon as a
// later command shows it is over. Memory holds one interval's latencies only.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "iscsi_doctor/finding_kinds.hpp"
#include "iscsi_doctor/results.hpp"

namespace iscsi_doctor::cli {

struct IntervalStats {
  int64_t origin_ns = 0;             // the capture's first packet: intervals are counted from it
  int64_t start_ns = 0, end_ns = 0;  // [start, end) of capture time
  double seconds = 0;                // its length (the last one: up to the last command)
  uint64_t commands = 0, completed = 0, bytes = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;  // latency of the completed ones
  uint64_t excess_round_trips = 0;
  std::array<uint64_t, finding_kind_count> findings{};  // new ones, by kind
  double iops() const { return seconds > 0 ? double(commands) / seconds : 0; }
  double mb_per_s() const { return seconds > 0 ? double(bytes) / 1e6 / seconds : 0; }
};

class IntervalCounter {
public:
  IntervalCounter(double seconds, std::function<void(const IntervalStats&)> emit);
  // The capture's first packet; else intervals are counted from the first command.
  void start(int64_t t);
  // A command counts in the interval its status came in (its first segment if none): a command
  // reported after its interval was written counts in the current one.
  void command(const CommandResult&);
  void finding(const Finding&);
  void finish();  // writes the last interval

private:
  void flush(bool last = false);
  int64_t length_ns_;
  std::function<void(const IntervalStats&)> emit_;
  bool open_ = false;
  int64_t origin_ = 0;  // the first command's interval start
  int64_t index_ = 0, last_ns_ = 0;
  IntervalStats cur_;
  std::vector<double> latencies_;
};

}  // namespace iscsi_doctor::cli
