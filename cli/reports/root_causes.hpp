// SPDX-License-Identifier: GPL-2.0-or-later
// Root causes (#27): findings that hold the same commands in one causal chain are one cause with
// contributing factors (a Nagle hold released by a delayed ACK; a window that closed after a loss),
// ranked by what fixing them gains, each fix with the median latency after it.
#pragma once

#include <array>
#include <map>
#include <set>
#include <utility>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "iscsi_doctor/finding_kinds.hpp"
#include "iscsi_doctor/quantiles.hpp"
#include "iscsi_doctor/results.hpp"

namespace iscsi_doctor::cli {

struct RootFix {
  FindingKind kind{};  // the finding whose fix this is
  Side side{};
  double gain_ms = 0;             // latency it removes, summed over the cause's commands
  double median_after_ms = 0;     // the cause's commands' median latency after it
};

struct RootCause {
  FindingKind kind{};  // the cause
  Side side{};
  std::vector<FindingKind> factors;     // contributing kinds, on some of its commands
  std::vector<uint64_t> factor_commands;  // how many of its commands each factor held
  uint64_t commands = 0;
  double time_lost_ms = 0;  // each millisecond counted once: its chain's own parts
  double median_latency_ms = 0;
  std::vector<RootFix> fixes;  // most gain first
  // target_think: of its commands, those that are a device's mechanical work (a changer's robot,
  // tape motion, spin-up, formatting, a cache flush, or any command to a tape drive or medium
  // changer), their time and their operations (at most 4): slow by design, no disk behind them.
  uint64_t mechanical = 0;
  double mechanical_ms = 0;
  std::vector<std::string> mechanical_ops;
  bool tape_or_changer = false;  // some of them went to a tape drive or a medium changer
};

// A SCSI operation whose time is the device's mechanical work, not a slow backing store.
bool mechanical_op(std::string_view op);
// An operation only a tape drive (SSC) or a medium changer (SMC) takes: its LUN is one.
bool tape_or_changer_op(std::string_view op);

// The kind a command's finding is a contributing factor to, on that command (the cause it is
// chained to), or the kind itself.
FindingKind cause_of(FindingKind k, const std::vector<FindingKind>& on_command);

// The fix to tell for a finding kind, fitted to the device: none for a cause made only of a
// device's mechanical work (no disk is behind it), the rest's fix otherwise.
std::string device_fix(FindingKind kind, const std::string& fix, const std::vector<RootCause>& roots);

class RootCauses {
public:
  void add(const CommandResult&);  // completed commands only count
  void side(FindingKind k, Side s);  // from the findings (first seen wins, as the summary's)
  // floor_ms: no "after" median below it (a round trip as the capture point sees it).
  std::vector<RootCause> ranked(double floor_ms) const;

private:
  static constexpr size_t N = finding_kind_count;
  struct PerCause {
    uint64_t commands = 0;
    double time_lost_ms = 0;
    LatencyQuantiles latency;
    std::array<uint64_t, N> factor_commands{};
    std::array<double, N> gain_ms{};  // per fix (the cause's own, or a factor's)
    std::array<LatencyQuantiles, N> after;
  };
  // target_think's commands per LUN (connection, LUN): told apart at the end, once each LUN's
  // operations show whether it is a tape drive or a changer.
  struct LunThink {
    uint64_t commands = 0, mech_op_commands = 0;
    double ms = 0, mech_op_ms = 0;
    std::vector<std::string> ops, mech_ops;  // distinct, at most 4 each
  };
  static constexpr size_t kLunsKept = 1024;
  std::map<std::pair<uint32_t, uint64_t>, LunThink> think_;
  std::set<std::pair<uint32_t, uint64_t>> tape_or_changer_;
  std::array<PerCause, N> causes_{};
  std::array<int, N> sides_{};  // Side + 1; 0: not seen
};

}  // namespace iscsi_doctor::cli
