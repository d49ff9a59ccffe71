// SPDX-License-Identifier: GPL-2.0-or-later
// The memory budget (engine/src/session/memory_budget.hpp, Options::memory_budget): a connection
// whose results can no longer change is finished at once (both FINs acknowledged, or a FIN some
// round trips ago) with the results it would have had after its linger; when the budget is short,
// an idle connection is finished before a busy one, counted and said.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "iscsi_doctor/finding_kinds.hpp"
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

// n 4 KiB READs one at a time, ITTs from `itt`, the k-th sent at from + k * every and answered
// 1 ms later.
void reads(Wire& w, uint32_t itt, uint32_t n, int64_t from, int64_t every) {
  for (uint32_t k = 0; k < n; ++k) {
    const int64_t t = from + k * every;
    w.data(true, t, read10(itt + k, 4096));
    w.data(false, t + 1 * kMs, data_in(itt + k, 4096, true));
    w.ack(true, t + 1 * kMs + 10'000);
  }
}

// Eight READs one at a time (serialized, docs/rules.md) from 2 ms, then the initiator's FIN at
// 20 ms, acknowledged at 21 ms: half-closed.
void serialized_then_half_closed(Wire& w) {
  w.handshake(0, 1 * kMs, 10'000);
  reads(w, 10, 8, 2 * kMs, 2 * kMs);
  w.fin(true, 20 * kMs);
  w.ack(false, 21 * kMs);
}

// answered_read from 0, then FIN both ways (4 and 5 ms), the last acknowledged: closed.
void answered_then_closed(Wire& w) {
  answered_read(w, 0);
  w.fin(true, 4 * kMs);
  w.fin(false, 5 * kMs);
  w.ack(true, 5 * kMs + 10'000);
}

Options with_budget(size_t bytes) {
  Options o;
  o.memory_budget = bytes;
  return o;
}

// A scenario run on one connection without a budget and with a roomy one (64 MiB), each checked by
// `run(budget, recorder, analyzer, wire)`: a budget that is not short must change nothing.
template <typename Run>
void without_and_with_a_budget(Run run) {
  for (size_t budget : {size_t(0), size_t(64) << 20}) {
    Recorder rec;
    Analyzer an(with_budget(budget), rec);
    Wire w(an);
    run(budget, rec, an, w);
  }
}

// answered_read from 0, then the target's FIN at 4 ms, acknowledged: half-closed.
void answered_then_half_closed(Wire& w) {
  answered_read(w, 0);
  w.fin(false, 4 * kMs);
  w.ack(true, 4 * kMs + 10'000);
}

}  // namespace

// Closed with FIN both ways, each acknowledged, its command reported: finished on the final ACK,
// not a second later; a FIN resent after that still counts in its frames, as it did before.
TEST(SessionMemoryBudget, ClosedConnectionRetiredOnItsFinalAck) {
  without_and_with_a_budget([](size_t budget, Recorder& rec, Analyzer& an, Wire& w) {
    answered_then_closed(w);
    EXPECT_EQ(rec.connections.size(), budget ? 1u : 0u) << budget;  // without a budget: its linger (1 s)
    w.send(false, 300 * kMs, tcp_flag::fin | tcp_flag::ack, {});   // resent
    an.finish();
    ASSERT_EQ(rec.commands.size(), 1u);
    EXPECT_TRUE(rec.commands[0].completed);
    const auto conns = an.connections();
    ASSERT_EQ(conns.size(), 1u);
    EXPECT_EQ(conns[0].frames, 12u) << budget;  // 3 handshake, 4 the READ, 4 the close, 1 resent
    EXPECT_EQ(an.evictions().connections, 0u);
  });
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

namespace {

// What a run says, in the order it says it.
struct Said : Sink {
  std::vector<std::string> events;
  void on_notice(const Notice& n) override { events.push_back("notice " + n.message); }
  void on_command(const CommandResult& c) override {
    events.push_back("command " + std::to_string(c.connection) + " itt " + std::to_string(c.itt));
  }
  void on_finding(const Finding& f) override {
    events.push_back("finding " + std::string(finding_kind(f.kind).name) + " " + std::to_string(f.connection));
  }
  void on_connection(const ConnectionInfo&) override {}  // their order is not reported
};

// What the analyzer says while `drive` feeds two connections (the second on port 40001) and
// at the end: [0] without a budget, [1] with one.
template <typename Drive>
std::array<std::vector<std::string>, 2> said_without_and_with_a_budget(Drive drive) {
  std::array<std::vector<std::string>, 2> order;
  for (int pass = 0; pass < 2; ++pass) {
    Said said;
    Analyzer an(with_budget(pass ? size_t(64) << 20 : 0), said);
    Wire w(an), other(an, 40001);
    drive(w, other);
    an.finish();
    order[size_t(pass)] = said.events;
  }
  return order;
}

// A one-step Login Request or Response (RFC 7143 §11.12, §11.13) going to full feature phase.
std::vector<uint8_t> login(bool request) {
  iscsi::Bhs b;
  b.opcode = request ? 0x03 : 0x23;
  b.immediate = request;
  b.flags = 0x87;  // T, CSG operational, NSG full feature
  b.lun = 0x023d000100000000ull;  // ISID
  b.itt = 1;
  static constexpr char kKeys[] = "HeaderDigest=None\0DataDigest=None";
  return iscsi::encode_pdu(b, std::vector<uint8_t>(kKeys, kKeys + sizeof kKeys));
}

}  // namespace

// Half-closed and retired, its `serialized` verdict is said when the capture ends, as without a
// budget (the connection would still be open), not when it was retired nor when its linger ended.
TEST(SessionMemoryBudget, HalfClosedVerdictSaidInTheOrderWithoutABudget) {
  const auto order = said_without_and_with_a_budget([](Wire& w, Wire& other) {
    serialized_then_half_closed(w);
    answered_read(other, 1500 * kMs);  // past the linger (1 s) of the first
  });
  ASSERT_EQ(order[0].size(), 10u);
  EXPECT_EQ(order[0][8], "command 2 itt 5");
  EXPECT_EQ(order[0][9], "finding serialized 1");
  EXPECT_EQ(order[1], order[0]);
}

// Closed both ways, then a SYN-ACK on its 4-tuple while it lingers (the SYN not captured): it
// answers a new connection's SYN (RFC 9293 §3.5), whose command is a new connection's.
TEST(SessionMemoryBudget, SynAckAfterTheCloseStartsANewConnection) {
  without_and_with_a_budget([](size_t budget, Recorder& rec, Analyzer& an, Wire& w) {
    answered_then_closed(w);
    w.isn(true, 0x40000001u);  // the new SYN's sequence number + 1: that SYN is not captured
    w.isn(false, 0x7000);
    w.send(false, 10 * kMs, tcp_flag::syn | tcp_flag::ack, {}, 1460);
    w.ack(true, 10 * kMs + 10'000);
    w.data(true, 10 * kMs + 20'000, login(true));
    w.data(false, 11 * kMs, login(false));
    w.data(true, 12 * kMs, read10(6, 4096));
    w.data(false, 13 * kMs, data_in(6, 4096, true));
    w.ack(true, 13 * kMs + 10'000);
    an.finish();
    ASSERT_EQ(rec.commands.size(), 2u) << budget;
    EXPECT_EQ(rec.commands[1].itt, 6u);
    EXPECT_TRUE(rec.commands[1].completed);
    EXPECT_NE(rec.commands[1].connection, rec.commands[0].connection);
    EXPECT_EQ(an.connections().size(), 2u);
  });
}

// A FIN, then the conversation goes on (data both ways, each pause shorter than 4 round trips):
// not retired while it does, so every command is reported, as without a budget.
TEST(SessionMemoryBudget, HalfClosedNotRetiredWhileDataFlows) {
  without_and_with_a_budget([](size_t budget, Recorder& rec, Analyzer& an, Wire& w) {
    answered_then_half_closed(w);
    reads(w, 20, 10, 5 * kMs, 2 * kMs);  // 2 ms apart: the round trip is 1.01 ms
    an.finish();
    EXPECT_EQ(rec.commands.size(), 11u) << budget;
    ASSERT_EQ(an.connections().size(), 1u);
    EXPECT_EQ(an.connections()[0].commands, 11u) << budget;
  });
}

// Data from a side after its own FIN (a damaged capture: no peer sends past its FIN, RFC 9293
// §3.6): that FIN was not its end, so a pause of many round trips does not retire it.
TEST(SessionMemoryBudget, DataAfterItsOwnFinKeepsItOpen) {
  without_and_with_a_budget([](size_t budget, Recorder& rec, Analyzer& an, Wire& w) {
    answered_then_half_closed(w);
    reads(w, 20, 5, 5 * kMs, 10 * kMs);  // 10 ms apart: 10 round trips
    an.finish();
    EXPECT_EQ(rec.commands.size(), 6u) << budget;
  });
}

// The next command 30 ms (30 round trips) after a FIN or RST, as at queue depth 1 behind an
// initiator's think time, after a budget retired the connection: the initiator's FIN (a flipped
// flag: no peer sends past its own FIN), the target's (a half-close) or the initiator's RST (one
// its receiver ignored, RFC 5961) shows it was not the end only then. Every command is still
// analysed: with a budget those after it on a connection joined mid-session, which a warning
// names at the first of them.
TEST(SessionMemoryBudget, AFinOrRstThatWasNotTheEndShowsItselfAThinkLater) {
  enum class End { initiator_fin, target_fin, initiator_rst };
  for (const End end : {End::initiator_fin, End::target_fin, End::initiator_rst}) {
    without_and_with_a_budget([&](size_t budget, Recorder& rec, Analyzer& an, Wire& w) {
      answered_read(w, 0);
      if (end == End::initiator_rst) {
        w.send(true, 4 * kMs, tcp_flag::rst | tcp_flag::ack, {});
      } else {
        w.fin(end == End::initiator_fin, 4 * kMs);
        w.ack(end != End::initiator_fin, 4 * kMs + 10'000);
      }
      reads(w, 20, 5, 34 * kMs, 30 * kMs);
      an.finish();
      const int e = int(end);
      ASSERT_EQ(rec.commands.size(), 6u) << budget << " end " << e;
      for (const CommandResult& c : rec.commands)
        EXPECT_TRUE(c.completed) << budget << " end " << e << " itt " << c.itt;
      const auto conns = an.connections();
      ASSERT_EQ(conns.size(), budget ? 2u : 1u) << e;
      EXPECT_EQ(conns[0].commands, budget ? 1u : 6u) << e;
      size_t said = 0;
      for (const Notice& n : rec.notices) {
        if (n.message.find("new data came after the memory budget") == std::string::npos) continue;
        ++said;
        EXPECT_EQ(n.frame, rec.commands[1].first_frame) << e;  // the READ 30 ms after the FIN
        EXPECT_EQ(n.connection, conns[0].id) << e;
      }
      EXPECT_EQ(said, budget ? 1u : 0u) << e;
    });
  }
}

// After an RST, what the peer had in flight still reaches the capture point: a PDU that comes
// after it is the connection's, with a budget as without one.
TEST(SessionMemoryBudget, PeerDataInFlightAfterAnRst) {
  without_and_with_a_budget([](size_t budget, Recorder& rec, Analyzer& an, Wire& w) {
    answered_read(w, 0);
    w.send(true, 4 * kMs, tcp_flag::rst | tcp_flag::ack, {});
    iscsi::Bhs nop;  // NOP-In (RFC 7143 §11.19), sent before the RST reached the target
    nop.opcode = 0x20;
    nop.flags = 0x80;
    nop.itt = 0xffffffff;
    nop.w20 = 0x77;
    w.data(false, 4 * kMs + 500'000, iscsi::encode_pdu(nop));
    an.finish();
    ASSERT_EQ(an.connections().size(), 1u);
    EXPECT_EQ(an.connections()[0].pdus, 3u) << budget;  // the READ, its Data-In, the NOP-In
    EXPECT_EQ(an.connections()[0].frames, 10u) << budget;
  });
}

// Half-closed and retired, then the other side's FIN: closed from then, so what it held is said
// when its linger from that FIN ends, as without a budget, not when the capture ends.
TEST(SessionMemoryBudget, RetiredHalfClosedClosedByALaterFin) {
  const auto order = said_without_and_with_a_budget([](Wire& w, Wire& other) {
    serialized_then_half_closed(w);
    w.fin(false, 200 * kMs);  // long after 4 round trips: retired by then with a budget
    w.ack(true, 200 * kMs + 10'000);
    answered_read(other, 1500 * kMs);  // past the linger (1 s) from that FIN
  });
  ASSERT_EQ(order[0].size(), 10u);
  EXPECT_EQ(order[0][8], "finding serialized 1");
  EXPECT_EQ(order[0][9], "command 2 itt 5");
  EXPECT_EQ(order[1], order[0]);
}
