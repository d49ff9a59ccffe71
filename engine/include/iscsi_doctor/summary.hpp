// SPDX-License-Identifier: GPL-2.0-or-later
// Aggregates a capture's results into what a person acts on: per finding kind, the commands it
// cost, the time lost, the fix, and the latency expected after the fix, computed from the capture.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "iscsi_doctor/analyzer.hpp"
#include "iscsi_doctor/quantiles.hpp"

namespace iscsi_doctor {

struct Advice {
  FindingKind kind{};
  Side side{};
  uint64_t commands = 0;                 // commands that carry this finding
  uint64_t occurrences = 0;              // findings of this kind
  double lost_ms = 0;                    // sum of the findings' lost_ms (they overlap: "touched")
  double exclusive_ms = 0;               // latency of its commands that is this kind's alone
  double median_latency_ms = 0;          // of the affected commands, as captured
  double median_fixed_ms = 0;            // of the same commands without the time this kind cost
  std::string fix;                       // what to change, for people
  std::vector<uint64_t> example_frames;  // a few evidence frames
  std::string detail;                    // the first finding's sentence (a connection-level verdict's)
  // target_think on commands whose time is the device's own work (a media changer's robot, tape
  // motion, FORMAT UNIT, SYNCHRONIZE CACHE, START STOP UNIT): how many, and what they were.
  std::string note;
  std::vector<std::string> inferred;  // facts some of its findings rest on that were inferred
};

// Latency statistics of one command class (op kind + transfer size + ideal round trips: writes of
// one size may need one round trip or two, by the keys each connection negotiated).
struct ClassStats {
  char kind = 'o';
  uint32_t bytes = 0;
  uint64_t commands = 0;
  double median_ms = 0, p90_ms = 0, max_ms = 0;
  double median_round_trips = 0;
  int ideal_round_trips = 0;
};

// What a storage engineer looks at first, per logical unit: a target's LUN as the initiators used
// it in this capture (its completed commands).
struct LunStats {
  std::string target;  // the target's address and port, "10.77.0.2:3260"
  uint64_t lun = 0;
  uint64_t commands = 0;    // completed ones
  uint64_t incomplete = 0;  // never answered in the capture
  uint64_t bytes_read = 0, bytes_written = 0;
  double seconds = 0;  // from its first command to its last status
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;
  uint64_t excess_round_trips = 0;
  double iops() const { return seconds > 0 ? double(commands) / seconds : 0; }
  double mb_per_s() const { return seconds > 0 ? double(bytes_read + bytes_written) / 1e6 / seconds : 0; }
};

// SCSI commands by how they ended: SCSI status, sense (key, ASC, ASCQ), iSCSI response, or no
// answer in the capture; with the first one as an example.
struct StatusStats {
  int status = -1;  // SCSI status byte; -1: none (never answered, or an iSCSI-level failure); -2: other
  int iscsi_response = 0;
  int sense_key = -1, asc = -1, ascq = -1;
  bool answered = true;
  uint64_t commands = 0;
  std::string example_op;
  uint32_t example_itt = 0;
  uint64_t example_frame = 0;  // its status frame, or its first frame when never answered
};

// What makes a command one of the worst kept: most round trips beyond the ideal, then latency
// (the default); or latency alone.
enum class WorstOrder : uint8_t { excess, latency };
std::string_view worst_order_words(WorstOrder);  // "by excess round trips, then latency", ...

class Summary : public Sink {
public:
  // per_lun: keep the LUN table (needs on_connection; a summary over several captures gets none).
  explicit Summary(size_t worst_kept = 10, bool per_lun = true, WorstOrder order = WorstOrder::excess)
      : worst_kept_(worst_kept), per_lun_(per_lun), order_(order) {}
  WorstOrder worst_order() const { return order_; }
  void on_command(const CommandResult&) override;
  void on_finding(const Finding&) override;
  void on_notice(const Notice&) override;
  // A connection's facts are final: its commands' LUN figures go under its target.
  void on_connection(const ConnectionInfo&) override;

  std::vector<Advice> advice() const;  // ranked by exclusive time lost, then by time touched
  std::vector<ClassStats> classes() const;
  // Most frequent first; at most kMaxStatuses rows (then one with status -2 holds the rest).
  std::vector<StatusStats> statuses() const;
  static constexpr size_t kMaxStatuses = 256;
  // Per target and LUN, busiest first; at most kMaxLuns rows (the rest folded into the last).
  std::vector<LunStats> luns() const;
  // The same figures per initiator (its address; `target` holds it, `lun` is ~0), busiest first.
  std::vector<LunStats> initiators() const;
  // The same per target (its address and port; `lun` is ~0) and per session (`lun` holds the
  // session's number in the capture, `target` its target's address), busiest first.
  std::vector<LunStats> targets() const;
  std::vector<LunStats> sessions() const;
  static constexpr size_t kMaxLuns = 1024;
  const std::vector<CommandResult>& worst() const {
    return worst_;
  }  // slowest, by excess round trips then latency
  const std::vector<Notice>& notices() const { return notices_; }
  uint64_t commands() const { return commands_; }
  uint64_t completed() const { return completed_; }
  uint64_t excess_round_trips() const { return excess_round_trips_; }
  double latency_total_ms() const { return latency_total_ms_; }  // of the completed commands
  double exclusive_total_ms() const;                             // over all kinds: at most that
  std::array<uint64_t, finding_kind_count> finding_counts() const { return counts_; }

private:
  struct PerKind {
    Side side{};
    uint64_t commands = 0, occurrences = 0;
    double lost_ms = 0, exclusive_ms = 0;
    LatencyQuantiles latency, fixed;
    std::vector<uint64_t> examples;
    std::string detail;
    std::vector<std::string> inferred;
    uint64_t device_work = 0;
    std::vector<std::string> device_ops;  // distinct, at most 4
  };
  struct PerLun {
    LatencyQuantiles latency;
    uint64_t incomplete = 0, bytes_read = 0, bytes_written = 0, excess = 0;
    int64_t first_ns = 0, last_ns = 0;
    void add(const PerLun& o);
  };
  // Open connections' LUNs (by connection, LUN) until the connection's target is known; then under
  // (target, LUN), at most kMaxLuns keys (later ones fold into the last key, marked by lun ~0).
  std::map<std::pair<uint32_t, uint64_t>, PerLun> open_luns_;
  std::map<std::pair<std::string, uint64_t>, PerLun> luns_;
  std::map<std::pair<std::string, uint64_t>, PerLun> initiators_, targets_, sessions_;
  static std::vector<LunStats> rows(const std::map<std::pair<std::string, uint64_t>, PerLun>&);
  std::map<std::tuple<bool, int, int, int, int, int>, StatusStats> statuses_;
  struct PerClass {
    LatencyQuantiles latency;
    CountQuantiles round_trips;
  };
  size_t worst_kept_;
  bool per_lun_;
  WorstOrder order_;
  std::array<PerKind, finding_kind_count> kinds_{};
  std::array<uint64_t, finding_kind_count> counts_{};
  std::map<std::tuple<char, uint32_t, int>, PerClass> classes_;
  std::vector<CommandResult> worst_;
  std::vector<Notice> notices_;
  uint64_t commands_ = 0, completed_ = 0, excess_round_trips_ = 0;
  double latency_total_ms_ = 0;
  uint64_t notices_dropped_ = 0;
};

// The fix text for a finding kind and side (also used by the Wireshark and Lua plugins).
std::string fix_for(FindingKind kind, Side side);

}  // namespace iscsi_doctor
