// SPDX-License-Identifier: GPL-2.0-or-later
// The memory budget (engine/src/session/memory_budget.hpp, Options::memory_budget): a connection
// whose results can no longer change is finished at once (both FINs acknowledged, or a FIN some
// round trips ago) with the results it would have had after its linger; when the budget is short,
// an idle connection is finished before a busy one, counted and said.
#include <gtest/gtest.h>

#include "wire.hpp"

using namespace wire;

namespace {

// A login-less connection: handshake (RTT 1 ms to the target), one 4 KiB READ answered at 3 ms.
void answered_read(Wire& w, int64_t t0) {
  w.handshake(t0, 1 * kMs, 10'000);
  w.data(true, t0 + 2 * kMs, read10(5, 4096));
  w.data(false, t0 + 3 * kMs, data_in(5, 4096, true));
  w.ack(true, t0 + 3 * kMs + 10'000);
}

Options with_budget(size_t bytes) {
  Options o;
  o.memory_budget = bytes;
  return o;
}

}  // namespace

// Closed with FIN both ways, each acknowledged, its command reported: finished on the final ACK,
// not a second later; a FIN resent after that still counts in its frames, as it did before.
TEST(SessionMemoryBudget, ClosedConnectionRetiredOnItsFinalAck) {
  for (size_t budget : {size_t(0), size_t(64) << 20}) {
    Recorder rec;
    Analyzer an(with_budget(budget), rec);
    Wire w(an);
    answered_read(w, 0);
    w.fin(true, 4 * kMs);
    w.fin(false, 5 * kMs);
    w.ack(true, 5 * kMs + 10'000);
    EXPECT_EQ(rec.connections.size(), budget ? 1u : 0u) << budget;  // without a budget: its linger (1 s)
    w.send(false, 300 * kMs, tcp_flag::fin | tcp_flag::ack, {});   // resent
    an.finish();
    ASSERT_EQ(rec.commands.size(), 1u);
    EXPECT_TRUE(rec.commands[0].completed);
    const auto conns = an.connections();
    ASSERT_EQ(conns.size(), 1u);
    EXPECT_EQ(conns[0].frames, 12u) << budget;  // 3 handshake, 4 the READ, 4 the close, 1 resent
    EXPECT_EQ(an.evictions().connections, 0u);
  }
}

// Half-closed (the initiator's FIN acknowledged, the target's never seen): finished once 4 round
// trips have passed since the FIN, by the clock of the capture's other segments.
TEST(SessionMemoryBudget, HalfClosedConnectionRetiredAfterRoundTrips) {
  Recorder rec;
  Analyzer an(with_budget(size_t(64) << 20), rec);
  Wire w(an), other(an, 40001);
  answered_read(w, 0);
  w.fin(true, 4 * kMs);
  w.ack(false, 4 * kMs + 500'000);
  other.handshake(6 * kMs, 1 * kMs, 10'000);  // 2 ms after the FIN: not yet (4 x 1.01 ms)
  EXPECT_EQ(rec.connections.size(), 0u);
  other.data(true, 9 * kMs, read10(7, 512));
  ASSERT_EQ(rec.connections.size(), 1u);
  EXPECT_EQ(rec.connections[0].commands, 1u);
  EXPECT_EQ(an.evictions().connections, 0u);
}

// The budget is short when a third connection begins: the idle one goes, although the busy one
// (a command open) is older; the busy one's command is still answered.
TEST(SessionMemoryBudget, IdleFinishedBeforeBusy) {
  size_t two = 0;
  for (int pass = 0; pass < 2; ++pass) {
    Recorder rec;
    Analyzer an(with_budget(pass == 0 ? size_t(1) << 40 : two + 1024), rec);
    Wire busy(an, 40001), idle(an, 40002), third(an, 40003);
    busy.handshake(0, 1 * kMs, 10'000);
    busy.data(true, 2 * kMs, read10(9, 4096));
    answered_read(idle, 3 * kMs);
    if (pass == 0) {
      two = an.memory_peak();
      continue;
    }
    third.handshake(10 * kMs, 1 * kMs, 10'000);
    EXPECT_EQ(an.evictions().connections, 1u);
    EXPECT_EQ(an.evictions().idle, 1u);
    EXPECT_EQ(an.evictions().busy, 0u);
    ASSERT_EQ(rec.connections.size(), 1u);
    EXPECT_EQ(rec.connections[0].initiator.port, 40002);
    ASSERT_FALSE(rec.notices.empty());
    EXPECT_NE(rec.notices[0].message.find("memory budget"), std::string::npos) << rec.notices[0].message;
    busy.data(false, 11 * kMs, data_in(9, 4096, true));
    busy.ack(true, 11 * kMs + 10'000);
    an.finish();
    ASSERT_EQ(rec.commands.size(), 2u);
    EXPECT_TRUE(rec.commands[1].completed);
    EXPECT_NEAR(rec.commands[1].latency_ms, 9.0, 1e-9);
    EXPECT_NE(rec.notices.back().message.find("1 connection finished early by the memory budget"), std::string::npos)
        << rec.notices.back().message;
  }
}
