// SPDX-License-Identifier: GPL-2.0-or-later
// Rules as units (docs/architecture.md): a rule judges a command's facts through a read-only view
// of its connection and gives its findings to whatever stands for the connection, here a stub
// with no iSCSI connection behind it. Thresholds from docs/rules.md ("Other findings").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rules/r2t_round_trip.hpp"
#include "rules/serialized.hpp"
#include "rules/target_think.hpp"

using namespace iscsi_doctor;
using rules::OpenCommand;

namespace {

struct Out final : rules::FindingOut {
  std::vector<Finding> findings;
  std::vector<std::string> notices;
  Finding finding(FindingKind kind, Side side, uint64_t frame, double lost_ms, const OpenCommand* c) override {
    Finding f;
    f.kind = kind;
    f.side = side;
    f.frame = frame;
    f.lost_ms = lost_ms;
    if (c) f.command_first_frame = c->r.first_frame;
    return f;
  }
  void emit_finding(Finding f) override { findings.push_back(std::move(f)); }
  void notice(Notice::Level, uint64_t, std::string m) override { notices.push_back(std::move(m)); }
};

struct View {
  tcp::Tracker tracker{1 << 20};
  Options options;
  rules::ConnectionView view() const { return {1, tracker, options, nullptr}; }
};

OpenCommand write_with_r2ts(uint32_t bytes, uint32_t r2ts) {
  OpenCommand c;
  c.used = true;
  c.write = true;
  c.r.first_frame = 10;
  c.r.bytes = bytes;
  c.r.completed = true;
  c.r2ts = r2ts;
  c.first_r2t_frame = 12;
  c.r.breakdown.r2t_ms = 3.5;
  return c;
}

}  // namespace

TEST(RulesUnits, R2tRoundTripOnAWriteThatGotR2tsUpTo16MiB) {
  Out out;
  OpenCommand c = write_with_r2ts(65536, 2);
  rules::R2tRoundTrip().judge(out, c);
  ASSERT_EQ(out.findings.size(), 1u);
  EXPECT_EQ(out.findings[0].kind, FindingKind::r2t_round_trip);
  EXPECT_EQ(out.findings[0].side, Side::target);
  EXPECT_EQ(out.findings[0].frame, 12u);          // the first R2T
  EXPECT_DOUBLE_EQ(out.findings[0].lost_ms, 3.5);  // the R2T part of the breakdown
  EXPECT_EQ(c.r.findings, std::vector<FindingKind>{FindingKind::r2t_round_trip});

  Out none;
  OpenCommand big = write_with_r2ts(16u << 20, 2);  // 16 MiB: no keys avoid its R2Ts
  rules::R2tRoundTrip().judge(none, big);
  OpenCommand unsolicited = write_with_r2ts(65536, 0);
  rules::R2tRoundTrip().judge(none, unsolicited);
  EXPECT_TRUE(none.findings.empty());
}

TEST(RulesUnits, TargetThinkNeedsTwoMsAndHalfTheLatency) {
  View v;
  auto judged = [&](double think, double latency) {
    Out out;
    OpenCommand c;
    c.used = true;
    c.r.completed = true;
    c.r.latency_ms = latency;
    c.r.breakdown.think_ms = think;
    rules::TargetThink().judge(v.view(), out, c);
    return out.findings;
  };
  ASSERT_EQ(judged(2.0, 4.0).size(), 1u);
  EXPECT_EQ(judged(2.0, 4.0)[0].kind, FindingKind::target_think);
  EXPECT_TRUE(judged(1.9, 2.0).empty());  // under think_min_ms
  EXPECT_TRUE(judged(2.0, 4.1).empty());  // under half the latency
  v.options.think_min_ms = 1;             // the option moves the floor
  EXPECT_EQ(judged(1.5, 2.0).size(), 1u);
}

TEST(RulesUnits, SerializedKeepsItsOwnCountsAndNeedsEightCommands) {
  View v;
  auto run = [&](int commands, uint32_t max_outstanding) {
    rules::Serialized s;
    for (int i = 0; i < commands; ++i) {
      OpenCommand c;
      c.used = true;
      c.r.completed = true;
      c.r.first_ns = int64_t(i) * 10'000'000;
      c.r.latency_ms = 4;
      c.r.breakdown.request_ms = 1;  // a quarter of each cycle crossing the network
      s.count(v.view(), c, i ? int64_t(i - 1) * 10'000'000 + 4'000'000 : -1);
    }
    Out out;
    s.judge(out, max_outstanding, 10);
    return out.findings;
  };
  const auto eight = run(8, 1);
  ASSERT_EQ(eight.size(), 1u);
  EXPECT_EQ(eight[0].kind, FindingKind::serialized);
  EXPECT_EQ(eight[0].side, Side::initiator);
  EXPECT_EQ(eight[0].frame, 10u);
  EXPECT_DOUBLE_EQ(eight[0].lost_ms, 8.0);  // the crossings only (no round trip measured: no way back)
  EXPECT_TRUE(run(7, 1).empty());
  EXPECT_TRUE(run(8, 2).empty());  // two in flight once: not one at a time
}
