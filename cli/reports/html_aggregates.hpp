// SPDX-License-Identifier: GPL-2.0-or-later
// The HTML report's first pass: while the engine reports, each command and finding goes into fixed
// bins (latency per command class, time series, LBA gaps) and a few picked commands per finding
// kind (their ladders are drawn after a second pass). Memory does not grow with the packets.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <queue>
#include <vector>

#include "commands/ladder.hpp"
#include "drawing/svg.hpp"
#include "iscsi_doctor/finding_kinds.hpp"
#include "iscsi_doctor/summary.hpp"
#include "reports/report.hpp"
#include "reports/root_causes.hpp"

namespace iscsi_doctor::cli::html {

constexpr size_t kSlowest = finding_kind_count;  // pick slot for "slowest commands"
constexpr size_t kPendingCap = 200000;           // findings waiting for their command
constexpr size_t kClassesDrawn = 8;              // latency charts per capture
constexpr size_t kBreakdownRows = 12;
constexpr size_t kScatterPoints = 2000;
constexpr size_t kReorder = 64;  // commands re-ordered by first frame for LBA gaps
constexpr int kGapBins = 48;     // |gap| up to 2^47 bytes, per sign

struct ClassAgg {
  svg::LogHistogram hist;
  Breakdown sum;
  uint64_t n = 0;
};

struct Pick {
  double score = 0;
  LadderRequest req;
  // Completed commands rank first: the findings table counts those, and an unanswered command's
  // score runs to the end of the capture.
  bool before(const Pick& o) const {
    return req.command.completed != o.req.command.completed ? req.command.completed : score > o.score;
  }
};

struct LbaState {
  struct Item {
    uint64_t first_frame;
    uint64_t lba;
    uint32_t bytes;
    bool operator>(const Item& o) const { return first_frame > o.first_frame; }
  };
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> pending;
  bool have_prev = false;
  uint64_t prev_lba = 0;
  uint32_t prev_bytes = 0;
};

struct Aggregates {
  RootCauses roots;  // for advice that fits the device (a tape drive's or changer's mechanical work)
  std::map<std::pair<char, uint32_t>, ClassAgg> classes;
  svg::TimeBins time;  // series 0: commands in flight (ns), 1: bytes read, 2: bytes written
  // Gap between consecutive commands' LBAs, as bytes, for 512- and 4096-byte blocks (the block
  // size is not on the wire; the one that makes more accesses sequential is shown).
  std::array<std::array<uint64_t, 2 * kGapBins + 1>, 2> gaps{};
  std::array<uint64_t, 2> sequential{};
  uint64_t gap_pairs = 0;
  std::map<uint32_t, LbaState> lba;
  struct Point {
    int64_t t;
    uint64_t lba;
    char kind;
  };
  std::vector<Point> scatter;
  uint64_t scatter_seen = 0, scatter_stride = 1;
  uint64_t max_lba = 0;
  std::array<std::vector<Pick>, finding_kind_count + 1> picks;
  std::map<std::pair<uint32_t, uint64_t>, std::vector<Finding>> pending;
  int64_t first_ns = 0;
  bool have_first = false;
};

// The first pass's share of the HTML report: each command and finding into the aggregates.
class Aggregator {
public:
  Aggregator(Aggregates& a, size_t per_kind, Sink& notices) : a_(a), per_kind_(per_kind), notices_(notices) {}

  void first_time(int64_t t);

  void command(const CommandResult& c);

  void finding(const Finding& f);

  void finish_lba();

private:
  void consider(size_t kind, const CommandResult& c, const std::vector<Finding>& mine);

  void lba(const CommandResult& c);

  void step(LbaState& st, const LbaState::Item& it);

  Aggregates& a_;
  size_t per_kind_;
  Sink& notices_;
  bool pending_cap_said_ = false;
};

}  // namespace iscsi_doctor::cli::html
