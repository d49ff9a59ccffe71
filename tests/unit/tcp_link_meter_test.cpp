// SPDX-License-Identifier: GPL-2.0-or-later
// The path's rate and busy time as the receiver's ACKs show them (docs/rules.md "The link"): a
// link clocking data out gives its rate and keeps it busy; a window's flights separated by most
// of a round trip, or an application's trickle of small PDUs, do not.
#include <gtest/gtest.h>

#include "tcp/constants.hpp"
#include "tcp/flow.hpp"

using iscsi_doctor::tcp::LinkMeter;

namespace {
constexpr int64_t kRtt = 2'000'000;  // 2 ms
constexpr uint64_t kAck = 2 * 1448;  // an ACK every two segments
// One ACK per two segments of a link of `mbit` Mbit/s (payload), `n` of them from `t`.
int64_t feed(LinkMeter& m, int64_t t, double mbit, int n) {
  const int64_t gap = int64_t(double(kAck) * 8 * 1e3 / mbit);  // ns
  for (int i = 0; i < n; ++i) {
    t += gap;
    m.advanced(kAck, t, kRtt);
  }
  return t;
}
}  // namespace

TEST(LinkMeter, TrainGivesTheRateAndKeepsTheLinkBusy) {
  LinkMeter m;
  m.advanced(0, 0, kRtt);
  const int64_t end = feed(m, 0, 100, 400);  // 1.1 MiB at 100 Mbit/s
  EXPECT_NEAR(m.rate * 8 / 1e6, 100, 1);
  EXPECT_GE(m.rate_bytes, iscsi_doctor::tcp::link_run_bytes_min);
  // Busy from the moment the rate was known: all but the train's first 256 KiB.
  EXPECT_GT(m.busy_ns, end * 3 / 4);
  EXPECT_LE(m.busy_ns, end);
}

TEST(LinkMeter, WindowFlightsAreNotATrainNorBusy) {
  // 14 segments per round trip (a receive window of 20 KiB): flights of 7 ACKs, then most of a
  // round trip idle. No train of 256 KiB, so no rate, so nothing busy.
  LinkMeter m;
  int64_t t = 0;
  m.advanced(0, t, kRtt);
  for (int flight = 0; flight < 100; ++flight) {
    t = feed(m, t, 1000, 7);
    t += kRtt;
  }
  EXPECT_EQ(m.rate, 0);
  EXPECT_EQ(m.busy_ns, 0);
}

TEST(LinkMeter, SlowAcksAfterAFastTrainAreNotBusy) {
  // Once the path has shown 1 Gbit/s, ACKs of a trickle (4 KiB a millisecond: 33 Mbit/s) are
  // not the link at work; the train's own gaps are.
  LinkMeter m;
  m.advanced(0, 0, kRtt);
  int64_t t = feed(m, 0, 1000, 200);
  const int64_t busy = m.busy_ns;
  EXPECT_NEAR(m.rate * 8 / 1e6, 1000, 10);
  for (int i = 0; i < 100; ++i) {
    t += 1'000'000;
    m.advanced(4096, t, kRtt);
  }
  EXPECT_EQ(m.busy_ns, busy);
  // A gap past two round trips is idle whatever it acknowledged.
  t += 3 * kRtt;
  m.advanced(1 << 20, t, kRtt);
  EXPECT_EQ(m.busy_ns, busy);
}
