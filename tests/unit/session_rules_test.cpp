// SPDX-License-Identifier: GPL-2.0-or-later
// The latency rules of docs/rules.md on hand-made exchanges with exact timings: the study's
// Nagle + delayed-ACK read, the Nagle-only read, the collapsed-status baseline, an R2T write.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "rules/constants.hpp"
#include "wire.hpp"

using namespace iscsi_doctor;

using namespace wire;

// The options a front-end may change start at the documented rule constants.
TEST(SessionRules, OptionDefaultsAreTheRuleConstants) {
  Options o;
  EXPECT_EQ(o.delayed_ack_min_ms, rules::delayed_ack_min_ms);
  EXPECT_EQ(o.think_min_ms, rules::think_min_ms);
}

// What a ladder draws of that read (trace.hpp): each PDU at the segment that carried it, and the
// command's half trips as its round trips count them: 1 (command), 2 (Data-In), 4 (Response,
// released by the ACK of the Data-In: that ACK's crossing and its own).
TEST(SessionRules, TracerGivesPdusAndHalfTripsOfEachSegment) {
  struct Trace : Tracer {
    std::vector<PduTrace> pdus;
    std::vector<PathTrace> path;
    void on_pdu(const PduTrace& t) override { pdus.push_back(t); }
    void on_path(const PathTrace& t) override { path.push_back(t); }
  } trace;
  Recorder rec;
  Analyzer an(Options{}, rec);
  an.set_tracer(&trace);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  w.data(true, 10 * kMs, read10(1, 1024));
  const uint64_t cmd = w.frame();
  w.data(false, 18 * kMs + 100'000, data_in(1, 1024, false));
  const uint64_t data = w.frame();
  w.ack(true, 58 * kMs + 100'000);
  w.data(false, 66 * kMs + 100'000, response(1));
  const uint64_t resp = w.frame();
  an.finish();
  ASSERT_EQ(rec.commands.size(), 1u);
  std::vector<std::tuple<uint64_t, uint64_t, uint8_t>> pdus;
  for (const PduTrace& t : trace.pdus)
    pdus.emplace_back(t.first_frame, t.last_frame, t.opcode);
  const std::vector<std::tuple<uint64_t, uint64_t, uint8_t>> want_pdus = {
      {cmd, 0, 0x01},     {cmd, cmd, 0x01}, {data, 0, 0x25},
      {data, data, 0x25}, {resp, 0, 0x21},  {resp, resp, 0x21}};
  EXPECT_EQ(pdus, want_pdus);
  std::vector<std::pair<uint64_t, int>> path;
  for (const PathTrace& t : trace.path) {
    EXPECT_EQ(t.command_first_frame, cmd);
    path.emplace_back(t.frame, t.half_trips);
  }
  const std::vector<std::pair<uint64_t, int>> want_path = {{cmd, 1}, {data, 2}, {resp, 4}};
  EXPECT_EQ(path, want_path);
  EXPECT_EQ(rec.commands[0].round_trips, 2);
}

// The study's 1 KiB read at the initiator: the single sub-MSS Data-In is ACKed 40 ms late, and
// the Response waits for that ACK: Nagle on the target, delayed ACK on the initiator, 2 trips.
TEST(SessionRules, NagleAndDelayedAckOnOneKibRead) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  w.data(true, 10 * kMs, read10(1, 1024));
  w.data(false, 18 * kMs + 100'000, data_in(1, 1024, false));
  uint64_t data_frame = w.frame();
  w.ack(true, 58 * kMs + 100'000);  // 40 ms delayed ACK
  uint64_t ack_frame = w.frame();
  w.data(false, 66 * kMs + 100'000, response(1));
  uint64_t response_frame = w.frame();
  an.finish();

  ASSERT_EQ(rec.commands.size(), 1u);
  const auto& c = rec.commands[0];
  EXPECT_EQ(c.status_frame, response_frame);
  EXPECT_EQ(c.round_trips, 2);
  EXPECT_EQ(c.ideal_round_trips, 1);
  EXPECT_NEAR(c.latency_ms, 56.1, 0.01);
  EXPECT_TRUE(rec.has(FindingKind::nagle_hold, Side::target));
  EXPECT_TRUE(rec.has(FindingKind::delayed_ack, Side::initiator));
  for (auto& f : rec.findings) {
    if (f.kind == FindingKind::delayed_ack) {
      EXPECT_EQ(f.frame, ack_frame);
      EXPECT_NEAR(f.lost_ms, 40.0, 0.2);
    }
    if (f.kind == FindingKind::nagle_hold) {
      EXPECT_EQ(f.frame, response_frame);
      ASSERT_FALSE(f.related.empty());
      EXPECT_EQ(f.related[0].second, ack_frame);
      (void)data_frame;
    }
  }
  double sum = c.breakdown.request_ms + c.breakdown.think_ms + c.breakdown.data_ms + c.breakdown.nagle_ms +
               c.breakdown.delayed_ack_ms + c.breakdown.r2t_ms + c.breakdown.window_ms + c.breakdown.loss_ms +
               c.breakdown.response_ms;
  EXPECT_NEAR(sum, c.latency_ms, 0.01);
  EXPECT_NEAR(c.breakdown.delayed_ack_ms, 40.0, 0.2);
  ASSERT_EQ(rec.connections.size(), 1u);
  EXPECT_EQ(rec.connections[0].vantage, Vantage::initiator);
  EXPECT_NEAR(rec.connections[0].rtt_ms, 8.05, 0.01);
}

// 8 KiB: the initiator ACKs the Data-In tail at once, yet the Response still costs a round trip.
TEST(SessionRules, NagleWithoutDelayedAckOnEightKibRead) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  w.data(true, 10 * kMs, read10(7, 8192));
  w.data(false, 18 * kMs + 100'000, data_in(7, 8192, false));
  w.ack(true, 18 * kMs + 150'000);
  w.data(false, 26 * kMs + 150'000, response(7));
  an.finish();
  ASSERT_EQ(rec.commands.size(), 1u);
  EXPECT_EQ(rec.commands[0].round_trips, 2);
  EXPECT_TRUE(rec.has(FindingKind::nagle_hold, Side::target));
  EXPECT_FALSE(rec.has(FindingKind::delayed_ack, Side::initiator));
}

// Status in the final Data-In (phase collapse): one round trip and nothing to report.
TEST(SessionRules, CollapsedStatusIsOneRoundTrip) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  for (uint32_t i = 0; i < 3; ++i) {
    int64_t t = (10 + 20 * i) * kMs;
    w.data(true, t, read10(i + 1, 8192));
    w.data(false, t + 8 * kMs + 100'000, data_in(i + 1, 8192, true));
    w.ack(true, t + 8 * kMs + 150'000);
  }
  an.finish();
  ASSERT_EQ(rec.commands.size(), 3u);
  for (auto& c : rec.commands) {
    EXPECT_TRUE(c.completed);
    EXPECT_EQ(c.round_trips, 1);
    EXPECT_TRUE(c.findings.empty());
  }
}

// A 64 KiB write with InitialR2T=Yes and no immediate data pays one R2T round trip.
TEST(SessionRules, R2TWriteIsTwoRoundTrips) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  w.data(true, 10 * kMs, write10(3, 65536, 0));
  w.data(false, 18 * kMs + 100'000, r2t(3, 0, 65536));
  w.data(true, 18 * kMs + 200'000, data_out(3, 0x103, 0, 65536));
  w.data(false, 26 * kMs + 500'000, response(3));
  an.finish();
  ASSERT_EQ(rec.commands.size(), 1u);
  const auto& c = rec.commands[0];
  EXPECT_TRUE(c.completed);
  EXPECT_EQ(c.round_trips, 2);
  EXPECT_EQ(c.ideal_round_trips, 2);  // RFC defaults: InitialR2T=Yes, 8 KiB immediate at most
  EXPECT_TRUE(rec.has(FindingKind::r2t_round_trip, Side::target));
  EXPECT_FALSE(rec.has(FindingKind::nagle_hold, Side::target));
}

// Two reads issued together (QD2, as the lab's target-nagle batch): the second's Data-In with
// status is itself the held segment; it still pays the ACK's crossing and its own: 2 trips.
TEST(SessionRules, HeldFirstReplyOfSecondCommandIsTwoRoundTrips) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  w.data(true, 10 * kMs, read10(1, 1024));
  w.data(true, 10 * kMs + 20'000, read10(2, 512));
  w.data(false, 18 * kMs + 100'000, data_in(1, 1024, true));
  w.ack(true, 58 * kMs + 100'000);  // delayed ACK of the first reply
  uint64_t ack_frame = w.frame();
  w.data(false, 66 * kMs + 100'000, data_in(2, 512, true));
  an.finish();
  ASSERT_EQ(rec.commands.size(), 2u);
  EXPECT_EQ(rec.commands[0].round_trips, 1);
  EXPECT_TRUE(rec.commands[0].findings.empty());
  EXPECT_EQ(rec.commands[1].round_trips, 2);
  EXPECT_TRUE(rec.has(FindingKind::nagle_hold, Side::target));
  EXPECT_TRUE(rec.has(FindingKind::delayed_ack, Side::initiator));
  for (auto& f : rec.findings)
    if (f.kind == FindingKind::delayed_ack) EXPECT_EQ(f.frame, ack_frame);
}

// A full-sized segment is never held by Nagle, whatever the pause before it: with timestamps on,
// 1448 bytes fill an MSS option of 1460.
TEST(SessionRules, FullSegmentAfterPauseIsNotNagle) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  w.options(12);
  w.data(true, 10 * kMs, read10(5, 2896));
  auto di = data_in(5, 2896, true);
  auto part = [&](size_t from, size_t n) {
    return std::vector<uint8_t>(di.begin() + long(from), di.begin() + long(std::min(di.size(), from + n)));
  };
  w.data(false, 18 * kMs + 100'000, part(0, 952));  // a sub-MSS piece first
  w.ack(true, 18 * kMs + 150'000);
  w.data(false, 26 * kMs + 150'000, part(952, 1448));  // full: released by the ACK, not Nagle
  w.data(false, 26 * kMs + 160'000, part(952 + 1448, 4096));
  an.finish();
  ASSERT_EQ(rec.commands.size(), 1u);
  EXPECT_FALSE(rec.has(FindingKind::nagle_hold, Side::target));
}

// Slow start against a delayed ACK: the initiator holds its ACK of the target's whole first flight
// (ten segments) for 40 ms; the target's next flight leaves only when that ACK arrives. A cwnd hold
// of the target (ten segments in flight), released by a delayed ACK.
namespace {
void flight_then_delayed_ack(Recorder& rec, bool nine_acked_at_once, uint64_t& tenth, uint64_t& late_ack) {
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);  // near the initiator
  w.data(true, 10 * kMs, read10(3, 32768));
  std::vector<uint8_t> pdu = data_in(3, 32768, true);
  const size_t flight = 10 * 1448;
  w.data(false, 18 * kMs + 100'000, std::vector<uint8_t>(pdu.begin(), pdu.begin() + long(flight)));
  tenth = w.frame();
  if (nine_acked_at_once) w.ack_to(true, 18 * kMs + 150'000, w.next_seq(false) - 1448);
  w.ack(true, 58 * kMs + 150'000);  // (the tenth,) 40 ms late
  late_ack = w.frame();
  w.data(false, 66 * kMs + 150'000, std::vector<uint8_t>(pdu.begin() + long(flight), pdu.end()));
  an.finish();
}
}  // namespace

TEST(SessionRules, WindowHoldReleasedByDelayedAck) {
  Recorder rec;
  uint64_t tenth = 0, late_ack = 0;
  flight_then_delayed_ack(rec, false, tenth, late_ack);
  ASSERT_EQ(rec.commands.size(), 1u);
  const auto& c = rec.commands[0];
  EXPECT_EQ(c.round_trips, 2);
  EXPECT_TRUE(rec.has(FindingKind::cwnd_limited, Side::target));
  EXPECT_TRUE(rec.has(FindingKind::delayed_ack, Side::initiator));
  EXPECT_FALSE(rec.has(FindingKind::nagle_hold, Side::target));
  for (auto& f : rec.findings)
    if (f.kind == FindingKind::delayed_ack) {
      EXPECT_EQ(f.frame, late_ack);
      EXPECT_NEAR(f.lost_ms, 40.0, 0.2);
      ASSERT_FALSE(f.related.empty());
      EXPECT_EQ(f.related[0].second, tenth);
    }
  EXPECT_NEAR(c.breakdown.delayed_ack_ms, 40.0, 0.2);
  double sum = c.breakdown.request_ms + c.breakdown.think_ms + c.breakdown.data_ms + c.breakdown.nagle_ms +
               c.breakdown.delayed_ack_ms + c.breakdown.r2t_ms + c.breakdown.window_ms + c.breakdown.loss_ms +
               c.breakdown.response_ms;
  EXPECT_NEAR(sum, c.latency_ms, 0.01);
}

// The same flight with nine segments acknowledged at once and only the odd tenth's ACK delayed: one
// segment in flight, which no congestion window (at least two segments) holds back, and no loss.
// The target's wait ending one round trip after that ACK is its own time (docs/rules.md
// "cwnd_limited"), not a window hold, and the late ACK cost the target nothing.
TEST(SessionRules, OneSegmentInFlightHoldsNoCongestionWindow) {
  Recorder rec;
  uint64_t tenth = 0, late_ack = 0;
  flight_then_delayed_ack(rec, true, tenth, late_ack);
  ASSERT_EQ(rec.commands.size(), 1u);
  EXPECT_FALSE(rec.has(FindingKind::cwnd_limited, Side::target));
  EXPECT_FALSE(rec.has(FindingKind::delayed_ack, Side::initiator));
}

// The receiver's window, not the congestion window: the initiator advertises 8 segments
// (11584 bytes, no window scaling), the target fills it at once and waits for the ACK that
// opens it, one round trip from the capture point near the initiator.
namespace {
// A 16-segment read into an 8-segment receive window, the target answering after `think`: the
// second half waits for the initiator's ACK that opens the window again.
void rwnd_read(int64_t think) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.window = 8 * 1448;
  w.handshake(0, 8 * kMs, 50'000);
  w.data(true, 10 * kMs, read10(4, 16 * 1448 - 48));
  std::vector<uint8_t> pdu = data_in(4, 16 * 1448 - 48, true);
  const size_t flight = 8 * 1448;
  w.data(false, think + 18 * kMs + 100'000, std::vector<uint8_t>(pdu.begin(), pdu.begin() + long(flight)));
  w.ack(true, think + 18 * kMs + 150'000);  // all eight at once: the window opens again
  uint64_t opening_ack = w.frame();
  w.data(false, think + 26 * kMs + 150'000, std::vector<uint8_t>(pdu.begin() + long(flight), pdu.end()));
  uint64_t held = w.frame() - 7;
  an.finish();

  ASSERT_EQ(rec.commands.size(), 1u);
  EXPECT_EQ(rec.commands[0].round_trips, 2);
  EXPECT_TRUE(rec.has(FindingKind::rwnd_limited, Side::target));
  EXPECT_FALSE(rec.has(FindingKind::cwnd_limited, Side::target));
  EXPECT_FALSE(rec.has(FindingKind::delayed_ack, Side::initiator));
  for (auto& f : rec.findings)
    if (f.kind == FindingKind::rwnd_limited) {
      EXPECT_EQ(f.frame, held);
      ASSERT_FALSE(f.related.empty());
      EXPECT_EQ(f.related[0].first, "released_by");
      EXPECT_EQ(f.related[0].second, opening_ack);
      EXPECT_NEAR(f.lost_ms, 8.05, 0.01);
    }
  EXPECT_NEAR(rec.commands[0].breakdown.window_ms, 8.05, 0.01);
}
}  // namespace

TEST(SessionRules, RwndLimitedWhenTheReceiverWindowIsFull) { rwnd_read(0); }

// The same read answered after 60 ms of the target's think time: the window the command's
// segment advertised is older than the ACK records kept for matching releases (2 x RTT + 10 ms),
// yet it is the edge in force until the release, so the stall is still the receiver's window.
TEST(SessionRules, RwndLimitedAfterALongThink) { rwnd_read(60 * kMs); }

// A target that takes 20 ms to answer a read (1 ms round trip each side of the capture point):
// target_think with the think time; the same read answered after 1 ms is no finding.
TEST(SessionRules, TargetThinkWhenTheTargetIsSlow) {
  for (int64_t think : {20 * kMs, 1 * kMs}) {
    Recorder rec;
    Analyzer an(Options{}, rec);
    Wire w(an);
    w.handshake(0, kMs, kMs);
    w.data(true, 10 * kMs, read10(5, 512));
    w.data(false, 11 * kMs + think, data_in(5, 512, true));
    uint64_t reply = w.frame();
    w.ack(true, 12 * kMs + think);
    an.finish();
    ASSERT_EQ(rec.commands.size(), 1u);
    EXPECT_NEAR(rec.commands[0].breakdown.think_ms, double(think) / 1e6, 0.01);
    EXPECT_EQ(rec.has(FindingKind::target_think, Side::target), think == 20 * kMs);
    for (auto& f : rec.findings)
      if (f.kind == FindingKind::target_think) {
        EXPECT_EQ(f.frame, reply);
        EXPECT_NEAR(f.lost_ms, 20.0, 0.01);
      }
  }
}

// Ten 512-byte reads one at a time across 4 ms each side of a mid-path capture point: the link
// idles on round trips, `serialized` on the initiator with the crossings as its time. The same
// reads two at a time are not serialized.
TEST(SessionRules, SerializedAtQueueDepthOne) {
  for (int depth : {1, 2}) {
    Recorder rec;
    Analyzer an(Options{}, rec);
    Wire w(an);
    w.handshake(0, 4 * kMs, 4 * kMs);
    int64_t t = 10 * kMs;
    uint32_t itt = 1;
    for (int round = 0; round < 10; ++round) {
      for (int k = 0; k < depth; ++k)
        w.data(true, t + k * 10'000, read10(itt + k, 512));
      for (int k = 0; k < depth; ++k)
        w.data(false, t + 4 * kMs + 100'000 + k * 10'000, data_in(itt + k, 512, true));
      itt += depth;
      t += 8 * kMs + 200'000;  // the status reaches the initiator, the next command comes back
    }
    an.finish();
    ASSERT_EQ(rec.commands.size(), size_t(10 * depth));
    EXPECT_EQ(rec.has(FindingKind::serialized, Side::initiator), depth == 1);
    for (auto& f : rec.findings)
      if (f.kind == FindingKind::serialized) {
        // request crossings (4 ms each) and the way back to each next command (4 ms, 9 times)
        EXPECT_NEAR(f.lost_ms, 10 * 4.0 + 9 * 4.0, 1.0);
        EXPECT_LE(f.lost_ms, 10 * 8.3);
      }
  }
}

// A resend of a command's segment after that command was answered and released, when the next
// command has taken its slot: the loss is the first command's, never the newcomer's.
TEST(SessionRules, ResendAfterSlotReuseBlamesTheSender) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  // Midpath (near the receiver the capture would have seen the original arrive: a spurious resend)
  w.handshake(0, 8 * kMs, 3 * kMs);
  w.data(true, 10 * kMs, read10(1, 2000));
  const uint32_t first_seq = w.next_seq(false), before_second = w.next_seq(true);
  std::vector<uint8_t> pdu = data_in(1, 2000, true);
  std::vector<uint8_t> head(pdu.begin(), pdu.begin() + 1448);
  w.data(false, 18 * kMs + 100'000, pdu);  // two segments; the second completes ITT 1
  // ITT 2 takes the freed slot; its segment does not acknowledge ITT 1's data yet
  w.data_acking(true, 18 * kMs + 200'000, read10(2, 512), first_seq);
  // ITT 1's first segment again, sent before ITT 2's command reached the target
  w.at_acking(false, 19 * kMs, first_seq, head, before_second);
  w.data(false, 26 * kMs + 200'000, data_in(2, 512, true));
  an.finish();

  ASSERT_EQ(rec.commands.size(), 2u);
  const CommandResult& second = rec.commands[1];
  EXPECT_EQ(second.itt, 2u);
  EXPECT_EQ(second.round_trips, 1);
  for (FindingKind k : second.findings)
    ADD_FAILURE() << "second command has " << finding_name(k);
  EXPECT_DOUBLE_EQ(second.breakdown.loss_ms, 0);
  int resends = 0;
  for (auto& f : rec.findings)
    if (f.kind == FindingKind::retransmission) {
      ++resends;
      ASSERT_TRUE(f.itt.has_value());
      EXPECT_EQ(*f.itt, 1u);
    }
  EXPECT_EQ(resends, 1);
}

// The path's jitter (docs/rules.md "Holds"): warm-up reads whose replies (each carrying the ACK of
// its command, so a round-trip sample of the target side) arrive 0-3 ms above the minimum, then
// the study's 8 KiB read whose Response comes 2.5 ms later than one round trip after the ACK that
// released it. On that path it is still the Nagle hold; on a steady path 2.5 ms late is not.
namespace {
void warm_up(Wire& w, const std::vector<int64_t>& excess_us, bool initiator_acks) {
  int64_t t = 10 * kMs;
  uint32_t itt = 1;
  for (int round = 0; round < 4; ++round)
    for (int64_t ex : excess_us) {
      w.data(true, t, read10(itt, 1024));
      w.data(false, t + 8 * kMs + ex * 1000, data_in(itt, 1024, true));
      if (initiator_acks) w.ack(true, t + 8 * kMs + ex * 1000 + 50'000);
      t += 20 * kMs;
      ++itt;
    }
}

bool nagle_on_last_command(const Recorder& rec, uint64_t first_frame) {
  for (const auto& f : rec.findings)
    if (f.kind == FindingKind::nagle_hold && f.command_first_frame == first_frame) return true;
  return false;
}

bool study_read_after(std::vector<int64_t> excess_us, int64_t late_us) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  warm_up(w, excess_us, true);
  const int64_t t = 500 * kMs;
  w.data(true, t, read10(100, 8192));
  const uint64_t first = w.frame();
  w.data(false, t + 8 * kMs + 100'000, data_in(100, 8192, false));
  w.ack(true, t + 8 * kMs + 150'000);
  w.data(false, t + 16 * kMs + 150'000 + late_us * 1000, response(100));
  an.finish();
  return nagle_on_last_command(rec, first);
}
}  // namespace

TEST(SessionRules, NagleReleaseLateByThePathsJitterIsStillAHold) {
  EXPECT_TRUE(study_read_after({0, 1000, 2000, 3000, 3000}, 2500));  // jitter(target) = 3 ms
  EXPECT_FALSE(study_read_after({0, 0, 0, 0, 0}, 2500));             // steady: 2.5 ms is not the path
  EXPECT_TRUE(study_read_after({0, 0, 0, 0, 0}, 500));               // within 0.3 ms + RTT/10
}

// The case at the initiator: the target's Response held by Nagle until the initiator's
// delayed ACK. Released within the path's shown spread, a hold; later than it, but within the most
// the path may add (RTT/2), the capture cannot tell the target's time from the hold: think_or_hold,
// naming the ACK, never the disks' advice; later still, the target's think.
namespace {
std::set<FindingKind> delayed_study_read(int64_t late_us, uint64_t& may_be_released_by) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  warm_up(w, {0, 0, 0, 0, 0}, true);
  const int64_t t = 500 * kMs;
  w.data(true, t, read10(100, 8192));
  w.data(false, t + 8 * kMs + 100'000, data_in(100, 8192, false));
  const int64_t ack = t + 48 * kMs + 100'000;  // the initiator's 40 ms delayed ACK
  w.ack(true, ack);
  const uint64_t ack_frame = w.frame();
  w.data(false, ack + 8 * kMs + late_us * 1000, response(100));
  w.ack(true, ack + 8 * kMs + late_us * 1000 + 50'000);
  an.finish();
  may_be_released_by = 0;
  for (const auto& f : rec.findings)
    for (const auto& [name, frame] : f.related)
      if (f.kind == FindingKind::think_or_hold && name == "may_be_released_by" && frame == ack_frame)
        may_be_released_by = frame;
  const CommandResult& c = rec.commands.back();
  return std::set<FindingKind>(c.findings.begin(), c.findings.end());
}
}  // namespace

TEST(SessionRules, ThinkOrHoldWhenTheReleaseIsLaterThanThePathHasShown) {
  uint64_t ack = 0;
  auto held = delayed_study_read(500, ack);  // within 0.3 ms + RTT/10
  EXPECT_TRUE(held.count(FindingKind::nagle_hold) && held.count(FindingKind::delayed_ack));
  auto undecided = delayed_study_read(3000, ack);  // a steady path never showed 3 ms; RTT/2 is 4 ms
  EXPECT_TRUE(undecided.count(FindingKind::think_or_hold));
  EXPECT_FALSE(undecided.count(FindingKind::target_think));
  EXPECT_FALSE(undecided.count(FindingKind::nagle_hold));
  EXPECT_NE(ack, 0u);
  auto think = delayed_study_read(7000, ack);  // past RTT/2: not the path
  EXPECT_TRUE(think.count(FindingKind::target_think));
  EXPECT_FALSE(think.count(FindingKind::think_or_hold));
}

// Nagle shown off by the stream (docs/rules.md "Holds"): the target sent its Response 50 us after
// a 256-byte Data-In, before any ACK of it could have come back (round trip 8 ms), so nothing holds
// its short segments. The study's read that follows, its Response one round trip after the
// initiator's late ACK, is then a coincidence of timing, not a hold; the same read without that
// first exchange is a Nagle hold.
namespace {
std::set<FindingKind> study_read_after_nagle_shown(bool shown) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  w.data(true, 10 * kMs, read10(1, 256));
  w.data(false, 18 * kMs + 100'000, data_in(1, 256, false));
  if (!shown) w.ack(true, 18 * kMs + 120'000);
  w.data(false, shown ? 18 * kMs + 150'000 : 26 * kMs + 150'000, response(1));
  w.ack(true, 26 * kMs + 200'000);
  const int64_t t = 100 * kMs;
  w.data(true, t, read10(2, 1024));
  w.data(false, t + 8 * kMs + 100'000, data_in(2, 1024, false));
  w.ack(true, t + 48 * kMs + 100'000);  // the initiator's 40 ms delayed ACK
  w.data(false, t + 56 * kMs + 100'000, response(2));
  w.ack(true, t + 56 * kMs + 150'000);
  an.finish();
  std::set<FindingKind> kinds;
  for (const auto& f : rec.findings)
    if (f.side == Side::target || f.kind == FindingKind::delayed_ack) kinds.insert(f.kind);
  return kinds;
}
}  // namespace

TEST(SessionRules, NagleShownOffByTheStreamHoldsNothing) {
  const auto before = study_read_after_nagle_shown(false);
  EXPECT_TRUE(before.count(FindingKind::nagle_hold) && before.count(FindingKind::delayed_ack));
  const auto shown = study_read_after_nagle_shown(true);
  EXPECT_FALSE(shown.count(FindingKind::nagle_hold));
  // Nor a window's: one segment in flight (the Data-In) when the ACK reached the target, no loss;
  // a congestion window is at least two segments (docs/rules.md "cwnd_limited").
  EXPECT_FALSE(shown.count(FindingKind::cwnd_limited));
  EXPECT_FALSE(shown.count(FindingKind::delayed_ack));
}

// Nagle holds a send shorter than the MSS, not the short tail of a longer one (TSO). Two reads at
// once: the first answered by a short Data-In with status, the second by 8 KiB sent at once behind
// it, its tail short. The tail left while the short Data-In was unacknowledged, but behind full
// segments, so it proves nothing (tgtd with Nagle on showed this in tests/captures/test_probe_live.py);
// a short segment right after the previous short one does (NagleShownOffByTheStreamHoldsNothing).
TEST(SessionRules, ShortTailOfALongerSendProvesNoNagleOff) {
  for (const bool tail_alone : {false, true}) {
    Recorder rec;
    Analyzer an(Options{}, rec);
    Wire w(an);
    w.handshake(0, 8 * kMs, 50'000);
    w.data(true, 10 * kMs, read10(1, 1024));
    w.data(true, 10 * kMs, read10(2, 8192));
    w.data(false, 18 * kMs + 100'000, data_in(1, 1024, true));  // 1072 bytes: short
    const auto second = data_in(2, 8192, true);                   // 5 x 1448 + 1000
    if (tail_alone) {  // the same bytes, the short one first: right after the previous short one
      w.data(false, 18 * kMs + 120'000, std::vector<uint8_t>(second.begin(), second.begin() + 1000));
      w.data(false, 18 * kMs + 120'000, std::vector<uint8_t>(second.begin() + 1000, second.end()));
    } else {
      w.data(false, 18 * kMs + 120'000, second);
    }
    w.ack(true, 18 * kMs + 200'000);
    an.finish();
    ASSERT_EQ(rec.connections.size(), 1u);
    EXPECT_EQ(rec.connections[0].nagle_off_frame_target != 0, tail_alone) << tail_alone;
  }
}

// Joined on a path whose capture host merges the target's 1398-byte segments in pairs (GRO): the
// MSS inferred from those frames is 2796, so a full wire segment looks short. A full segment and
// its tail sent at once prove nothing (Nagle, in Linux's form, holds a short segment only behind an
// unacknowledged short one); without the handshake only segments under 536 bytes prove Nagle off
// (docs/rules.md "Holds", `nagle_off_short_bytes`). Each Response here leaves one round trip after
// the initiator's ACK: all four are Nagle holds.
TEST(SessionRules, FullSegmentsBelowAnInferredMssProveNoNagleOff) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  const auto cut = [&](int64_t t, const std::vector<uint8_t>& bytes, size_t first, size_t second) {
    const auto at = [&](size_t from, size_t n) {
      return std::vector<uint8_t>(bytes.begin() + long(from), bytes.begin() + long(from + n));
    };
    w.send(false, t, tcp_flag::ack, at(0, first));  // no PSH: more data queued behind it
    size_t off = first;
    if (second) {
      w.send(false, t, tcp_flag::ack, at(off, second));
      off += second;
    }
    w.send(false, t + 10'000, tcp_flag::ack | tcp_flag::psh, at(off, bytes.size() - off));
  };
  for (uint32_t i = 0; i < 4; ++i) {
    const int64_t t = (10 + 100 * int64_t(i)) * kMs;
    const bool merged = i < 2;  // 8 KiB reads seen as two 2796-byte frames and a tail; then 2 KiB
    w.data(true, t, read10(i + 1, merged ? 8192 : 2048));
    w.ack(false, t + 8 * kMs);  // the target's pure ACK: its round trip free of think time
    const auto bytes = data_in(i + 1, merged ? 8192 : 2048, false);
    if (merged)
      cut(t + 8 * kMs + 100'000, bytes, 2796, 2796);
    else
      cut(t + 8 * kMs + 100'000, bytes, 1398, 0);  // a full wire segment, then the tail at once
    w.ack(true, t + 8 * kMs + 200'000);
    w.data(false, t + 16 * kMs + 200'000, response(i + 1));  // released by that ACK
    w.ack(true, t + 16 * kMs + 300'000);
  }
  an.finish();
  ASSERT_EQ(rec.connections.size(), 1u);
  EXPECT_EQ(rec.connections[0].nagle_off_frame_target, 0u);
  ASSERT_EQ(rec.commands.size(), 4u);
  for (const auto& c : rec.commands) {
    std::set<FindingKind> kinds(c.findings.begin(), c.findings.end());
    EXPECT_TRUE(kinds.count(FindingKind::nagle_hold)) << c.first_frame;
  }
}

// A reply can only be held by an ACK that reached the target after the reply was ready: the
// command that carries the ACK of the previous reply released nothing, however late its own reply.
TEST(SessionRules, ReplyLateOnAJitteryPathAfterTheCommandThatAckedIsNotAHold) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  warm_up(w, {0, 1000, 2000, 3000, 3000}, false);
  an.finish();
  EXPECT_FALSE(rec.has(FindingKind::nagle_hold, Side::target));
  EXPECT_EQ(rec.commands.size(), 20u);
}

// A connection joined mid-stream (docs/rules.md "Joined connections"): the study's 1 KiB read
// five times, no handshake in the capture. The first ACK from the initiator is its 40 ms delayed
// one; judged on that alone, the first command's delayed ACK would vanish into the round trip.
// Held until both sides have round-trip samples, every command gets both findings.
TEST(SessionRules, JoinedConnectionIsJudgedWithItsMeasuredRoundTrips) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  for (uint32_t i = 0; i < 5; ++i) {
    const int64_t t = (10 + 100 * int64_t(i)) * kMs;
    w.data(true, t, read10(i + 1, 1024));
    w.data(false, t + 8 * kMs + 100'000, data_in(i + 1, 1024, false));
    w.ack(true, t + 48 * kMs + 100'000);  // 40 ms delayed ACK
    w.data(false, t + 56 * kMs + 100'000, response(i + 1));
    w.ack(true, t + 56 * kMs + 150'000);  // the Response acknowledged at once
  }
  an.finish();
  ASSERT_EQ(rec.commands.size(), 5u);
  for (const auto& c : rec.commands) {
    EXPECT_EQ(c.round_trips, 2) << c.first_frame;
    std::set<FindingKind> kinds(c.findings.begin(), c.findings.end());
    EXPECT_TRUE(kinds.count(FindingKind::nagle_hold)) << c.first_frame;
    EXPECT_TRUE(kinds.count(FindingKind::delayed_ack)) << c.first_frame;
  }
}

// Joined at the target: every ACK from the target rides on its reply, 5 ms after the command (its
// think time), so those samples make its round trip 5 ms and the think vanish into the network.
// A pure ACK from the target (here of a later command) is the sample free of think time; the
// joined connection is held until it comes, and every read is the target's think.
namespace {
ConnectionInfo think_reads_at_target(bool pure_ack, std::vector<CommandResult>& commands) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  int64_t t = 10 * kMs;
  for (uint32_t i = 0; i < 8; ++i, t += 20 * kMs) {
    w.data(true, t, read10(i + 1, 1024));
    w.data(false, t + 5 * kMs, data_in(i + 1, 1024, true));  // the ACK of the command rides on it
    w.ack(true, t + 13 * kMs);                                // the initiator, 8 ms away
  }
  w.data(true, t, read10(9, 1024));
  if (pure_ack) w.ack(false, t + 50'000);
  w.data(false, t + 5 * kMs, data_in(9, 1024, true));
  w.ack(true, t + 13 * kMs);
  an.finish();
  commands = rec.commands;
  return rec.connections.at(0);
}
}  // namespace

TEST(SessionRules, JoinedAtTheTargetThinkTimeIsNotTakenForTheNetwork) {
  std::vector<CommandResult> commands;
  const ConnectionInfo c = think_reads_at_target(true, commands);
  // Each a pure ACK of one segment: free of think time, but one a receiver may delay.
  EXPECT_EQ(c.rtt_source_target, "pure ACKs that may be delayed");
  EXPECT_EQ(c.rtt_source_initiator, "pure ACKs that may be delayed");
  ASSERT_EQ(commands.size(), 9u);
  for (const auto& cmd : commands)
    EXPECT_NE(std::find(cmd.findings.begin(), cmd.findings.end(), FindingKind::target_think), cmd.findings.end())
        << cmd.first_frame;
  // Without the pure ACK the target's round trip is an upper bound, and the report says so.
  EXPECT_EQ(think_reads_at_target(false, commands).rtt_source_target, "ACKs on data");
}

// Joined, no timestamps, at the initiator 8 ms from the target (docs/rules.md "Nagle releases"): a busy
// target (60 ms a read) whose only pure ACKs are its delayed ACKs of the commands, 48 ms after each;
// Nagle on, the Data-In and the Response sent apart. 1 KiB reads: the initiator delays its ACK of the
// Data-In 40 ms; 3 KiB reads: it ACKs the 224-byte tail at once. The Response leaves 8 ms after
// that ACK either way. The delayed ACKs are no round trip to prove Nagle off by (48 ms: the Response
// 8 ms after the tail looked too soon for any ACK); the Response following the ACK however late it
// came shows the round trip. With 1 KiB reads alone (every ACK 40 ms late) nothing shows it: the
// capture cannot tell the Response's wait from the target's think, and says so.
namespace {
enum class Reads { three_k, mixed, one_k };
ConnectionInfo busy_nagle_target(Reads reads, std::vector<CommandResult>& commands) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  int64_t t = 10 * kMs;
  for (uint32_t i = 0; i < 12; ++i, t += 200 * kMs) {
    const bool one_k = reads == Reads::one_k || (reads == Reads::mixed && i % 2 == 0);
    const uint32_t n = one_k ? 1024 : 3072;
    w.data(true, t, read10(i + 1, n));
    w.ack(false, t + 48 * kMs);  // the target's delayed ACK of the command
    const auto bytes = data_in(i + 1, n, false);
    size_t off = 0;
    for (; bytes.size() - off > 1448; off += 1448)  // full segments, no PSH: more queued
      w.send(false, t + 68 * kMs, tcp_flag::ack,
             std::vector<uint8_t>(bytes.begin() + long(off), bytes.begin() + long(off + 1448)));
    w.send(false, t + 68 * kMs + 10'000, tcp_flag::ack | tcp_flag::psh,
           std::vector<uint8_t>(bytes.begin() + long(off), bytes.end()));
    const int64_t a = t + 68 * kMs + (one_k ? 40 * kMs : 100'000);
    w.ack(true, a);
    w.data(false, a + 8 * kMs, response(i + 1));  // Nagle: released by that ACK
    w.ack(true, a + 8 * kMs + 100'000);
  }
  an.finish();
  commands = rec.commands;
  return rec.connections.at(0);
}
}  // namespace

TEST(SessionRules, DelayedPureAcksProveNoNagleOffNagleReleasesTimeTheTarget) {
  std::vector<CommandResult> commands;
  ConnectionInfo c = busy_nagle_target(Reads::three_k, commands);
  EXPECT_EQ(c.nagle_off_frame_target, 0u);
  EXPECT_EQ(c.rtt_source_target, "pure ACKs that may be delayed");
  EXPECT_EQ(c.rtt_source_initiator, "pure ACKs");  // of the 3 KiB Data-In: more than one segment
  // With 1 KiB reads between: the Response follows the ACK, 8 ms, whether it came at once or 40 ms
  // late, while the time since the Data-In varies by 40 ms.
  c = busy_nagle_target(Reads::mixed, commands);
  EXPECT_EQ(c.nagle_off_frame_target, 0u);
  EXPECT_EQ(c.rtt_source_target, "Nagle releases");
  EXPECT_NEAR(c.rtt_target_ms, 8.0, 0.01);
  ASSERT_EQ(commands.size(), 12u);
  for (const auto& cmd : commands) {
    std::set<FindingKind> kinds(cmd.findings.begin(), cmd.findings.end());
    EXPECT_TRUE(kinds.count(FindingKind::nagle_hold)) << cmd.first_frame;
    EXPECT_TRUE(kinds.count(FindingKind::target_think)) << cmd.first_frame;
    EXPECT_EQ(kinds.count(FindingKind::delayed_ack), cmd.bytes == 1024 ? 1u : 0u) << cmd.first_frame;
  }
  // 1 KiB reads alone: the target's round trip only an upper bound (48 ms), the Response 8 ms after
  // the initiator's delayed ACK may be its release: think or hold, never the disks' advice.
  c = busy_nagle_target(Reads::one_k, commands);
  EXPECT_EQ(c.nagle_off_frame_target, 0u);
  EXPECT_EQ(c.rtt_source_target, "pure ACKs that may be delayed");
  ASSERT_EQ(commands.size(), 12u);
  for (const auto& cmd : commands) {
    std::set<FindingKind> kinds(cmd.findings.begin(), cmd.findings.end());
    EXPECT_TRUE(kinds.count(FindingKind::think_or_hold)) << cmd.first_frame;
    EXPECT_FALSE(kinds.count(FindingKind::target_think)) << cmd.first_frame;
  }
}

// The same busy target with 1 KiB reads, captured at the target: its own delayed ACKs, 40 ms after
// each command, make rtt(target) 40 ms, and the initiator's 8 ms looks a small share of the path, as
// if the capture were near the initiator. An upper bound may be any shorter: the place is not known.
TEST(SessionRules, VantageIsNotClaimedFromARoundTripThatIsOnlyAnUpperBound) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  int64_t t = 10 * kMs;
  for (uint32_t i = 0; i < 8; ++i, t += 200 * kMs) {
    w.data(true, t, read10(i + 1, 1024));
    w.ack(false, t + 40 * kMs);                             // the target's delayed ACK
    w.data(false, t + 60 * kMs, data_in(i + 1, 1024, false));
    w.ack(true, t + 108 * kMs);                             // the initiator's, 40 ms late, 8 ms away
    w.data(false, t + 108 * kMs + 30'000, response(i + 1));  // Nagle: released by it
    w.ack(true, t + 116 * kMs + 100'000);
  }
  an.finish();
  ASSERT_EQ(rec.connections.size(), 1u);
  EXPECT_EQ(rec.connections[0].rtt_source_target, "pure ACKs that may be delayed");
  EXPECT_EQ(rec.connections[0].vantage, Vantage::unknown);
  EXPECT_EQ(rec.connections[0].nagle_off_frame_target, 0u);
}

// A busy TCP_NODELAY target without timestamps, joined, its connection's end not captured: 8 ms
// away, it acknowledges each command 48 ms late (its delayed-ACK timer) and answers after 60 ms.
// rtt(target) is then only that 48 ms upper bound, and 48 of the 68 ms may be the target's or the
// round trip's: think_or_network (at least the 20 ms after the bound, at most all), never the
// network's for serialized. With the handshake the round trip is known: target_think.
namespace {
Recorder busy_open_target(bool handshake) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  if (handshake) w.handshake(0, 8 * kMs, 50'000);
  int64_t t = 10 * kMs;
  for (uint32_t i = 0; i < 12; ++i, t += 80 * kMs) {
    w.data(true, t, read10(i + 1, 1024));
    w.ack(false, t + 48 * kMs);                            // the target's delayed ACK of the command
    w.data(false, t + 68 * kMs, data_in(i + 1, 1024, true));  // its answer, status in the Data-In
    w.ack(true, t + 68 * kMs + 50'000);
  }
  an.finish();
  return rec;
}
}  // namespace

TEST(SessionRules, ARoundTripBoundByDelayedPureAcksLeavesThinkOrNetworkOpen) {
  Recorder rec = busy_open_target(false);
  ASSERT_EQ(rec.connections.size(), 1u);
  EXPECT_EQ(rec.connections[0].rtt_source_target, "pure ACKs that may be delayed");
  EXPECT_NEAR(rec.connections[0].rtt_target_ms, 48.0, 0.01);
  ASSERT_GE(rec.commands.size(), 8u);
  for (const auto& cmd : rec.commands) {
    std::set<FindingKind> kinds(cmd.findings.begin(), cmd.findings.end());
    EXPECT_TRUE(kinds.count(FindingKind::think_or_network)) << cmd.first_frame;
    EXPECT_FALSE(kinds.count(FindingKind::target_think)) << cmd.first_frame;
  }
  EXPECT_FALSE(rec.has(FindingKind::serialized, Side::initiator));
  for (const auto& f : rec.findings)
    if (f.kind == FindingKind::think_or_network) {
      EXPECT_NEAR(f.lost_ms, 20.0, 0.2);  // the least: the think after the bound
      EXPECT_NE(f.detail.find("between 20 and 68 ms"), std::string::npos) << f.detail;
    }
  rec = busy_open_target(true);
  ASSERT_EQ(rec.connections.size(), 1u);
  EXPECT_EQ(rec.connections[0].rtt_source_target, "handshake");
  ASSERT_EQ(rec.commands.size(), 12u);
  for (const auto& cmd : rec.commands) {
    std::set<FindingKind> kinds(cmd.findings.begin(), cmd.findings.end());
    EXPECT_TRUE(kinds.count(FindingKind::target_think)) << cmd.first_frame;
    EXPECT_FALSE(kinds.count(FindingKind::think_or_network)) << cmd.first_frame;
  }
}

// A TCP_NODELAY target without timestamps, joined, its connection's end not captured, that answers
// each READ after 25 ms, under its delayed-ACK timer: its replies carry its ACKs of the commands
// (ACKs on data), so rtt(target) is only the time of its answers. Captured at the target, 8 ms
// from the initiator, that 25 ms proves no mid-path (the target may be the near side); near the
// initiator the round trip is at most 33 ms; serialized never calls that time the network's alone.
namespace {
Recorder answers_only_target(bool at_target) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  const int64_t to_target = at_target ? 0 : 8 * kMs, to_initiator = at_target ? 8 * kMs : 50'000;
  int64_t t = 10 * kMs;
  for (uint32_t i = 0; i < 12; ++i, t += 60 * kMs) {
    w.data(true, t, read10(i + 1, 8192));
    const int64_t answer = t + to_target + 25 * kMs;
    w.data(false, answer, data_in(i + 1, 8192, true));  // acknowledges the command
    w.ack(true, answer + to_initiator);                  // of its six segments: at once
  }
  an.finish();
  return rec;
}
const Finding* serialized_of(const Recorder& rec) {
  for (const auto& f : rec.findings)
    if (f.kind == FindingKind::serialized) return &f;
  return nullptr;
}
}  // namespace

TEST(SessionRules, ARoundTripKnownOnlyFromTheTargetsAnswersProvesNoMidpathNorTheNetwork) {
  Recorder rec = answers_only_target(false);
  ASSERT_EQ(rec.connections.size(), 1u);
  EXPECT_EQ(rec.connections[0].rtt_source_target, "ACKs on data");
  EXPECT_NEAR(rec.connections[0].rtt_target_ms, 33.0, 0.01);
  EXPECT_TRUE(rec.connections[0].rtt_target_may_hold_own_time);
  EXPECT_EQ(rec.connections[0].vantage, Vantage::initiator);
  const Finding* f = serialized_of(rec);
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->lost_ms, 12 * 33.0, 1.0);  // counted as before: the advice holds either way
  // the way back to each next command (0.05 ms, the initiator's prompt ACKs) is the network's
  EXPECT_NE(f->detail.find("(1 ms of it crossing the network and 396 ms either that or the answering side's"),
            std::string::npos) << f->detail;
  EXPECT_FALSE(rec.has(FindingKind::target_think, Side::target));

  rec = answers_only_target(true);
  ASSERT_EQ(rec.connections.size(), 1u);
  EXPECT_EQ(rec.connections[0].rtt_source_initiator, "pure ACKs");
  EXPECT_NEAR(rec.connections[0].rtt_initiator_ms, 8.0, 0.01);
  EXPECT_NEAR(rec.connections[0].rtt_target_ms, 25.0, 0.01);
  EXPECT_EQ(rec.connections[0].vantage, Vantage::unknown);  // share 0.24: mid-path, or at the target
  f = serialized_of(rec);
  ASSERT_NE(f, nullptr);
  // the way back to each next command (8 ms, timed by the initiator's prompt ACKs) is the network's
  EXPECT_NE(f->detail.find("(88 ms of it crossing the network and 300 ms either that or the answering"),
            std::string::npos) << f->detail;
}

// ACK causality by timestamps (docs/rules.md "Round trips"), at the initiator 8 ms from the target:
// a 20-segment read whose first flight of 10 reaches the capture spread over 8 ms (a jittery path)
// and whose second flight, released by the initiator's first ACK, comes right behind it. No gap
// shows the wait for that ACK; the second flight echoing the ACK's timestamp proves it. Without
// timestamps the capture cannot tell, and the read counts one round trip.
namespace {
CommandResult blurred_flights(bool timestamps, bool handshake, ConnectionInfo& info) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.options(12);
  w.timestamps(timestamps);
  if (handshake) w.handshake(0, 8 * kMs, 50'000);
  for (uint32_t i = 0; i < 2; ++i) {  // two small reads before (a joined stream's framing starts)
    const int64_t t = (100 + 20 * int64_t(i)) * kMs;
    w.echo(true, uint32_t(t / kMs) - 1);
    w.data(true, t, read10(i + 1, 1024));
    w.echo(false, uint32_t(t / kMs));
    w.data(false, t + 8 * kMs, data_in(i + 1, 1024, true));
    w.echo(true, uint32_t((t + 8 * kMs) / kMs));
    w.ack(true, t + 8 * kMs + 50'000);
  }
  w.data(true, 210 * kMs, read10(3, 20 * 1448 - 48));
  const std::vector<uint8_t> pdu = data_in(3, 20 * 1448 - 48, true);
  auto part = [&](int k) {
    return std::vector<uint8_t>(pdu.begin() + long(k) * 1448, pdu.begin() + long(k + 1) * 1448);
  };
  w.echo(false, 210);  // the command's
  int64_t first_ack = 0;
  for (int k = 0; k < 10; ++k) {
    const int64_t t = 218 * kMs + k * 900'000;
    w.send(false, t, tcp_flag::ack, part(k));
    if (k % 2 == 1) {
      w.ack(true, t + 50'000);
      if (!first_ack) first_ack = t + 50'000;
    }
  }
  w.echo(false, uint32_t(first_ack / kMs));  // released by the first ACK, 8 ms after it
  for (int k = 10; k < 20; ++k)
    w.send(false, first_ack + 8 * kMs + (k - 10) * 10'000, tcp_flag::ack | (k == 19 ? tcp_flag::psh : 0), part(k));
  w.ack(true, first_ack + 8 * kMs + 200'000);
  an.finish();
  info = rec.connections.at(0);
  return rec.commands.at(2);
}
}  // namespace

TEST(SessionRules, EchoedTimestampsCountAFlightTheJitterBlurred) {
  ConnectionInfo info;
  const CommandResult with = blurred_flights(true, true, info);
  EXPECT_EQ(with.round_trips, 2);
  EXPECT_EQ(std::find(with.findings.begin(), with.findings.end(), FindingKind::target_think), with.findings.end());
  EXPECT_EQ(blurred_flights(false, true, info).round_trips, 1);
  // Joined (no handshake): the target's only other samples ride on its replies; the release is
  // the round trip's evidence.
  EXPECT_EQ(blurred_flights(true, false, info).round_trips, 2);
  EXPECT_EQ(info.rtt_source_target, "echoed timestamps");
  EXPECT_NEAR(info.rtt_target_ms, 8.0, 0.01);
  blurred_flights(false, false, info);
  EXPECT_EQ(info.rtt_source_target, "ACKs on data");
}

// A resend of a segment the capture saw arrive at the receiver (capture point near it) is a
// spurious retransmission (a tail-loss probe while the ACK is late): not a loss. The same exchange
// captured near the sender, with a plain ACK one round trip after the probe, cannot tell, and
// stays a retransmission.
namespace {
// how: 0 a plain ACK one round trip after the probe, 1 the same ACK with a D-SACK of the probe,
// 2 a plain ACK that left the receiver before the probe could have reached it.
// joined: no handshake; four reads before, each acknowledged 2 ms late, so the round-trip
// estimate is 2 ms over the true one.
std::vector<FindingKind> probed_read(bool near_initiator, int how = 0, bool joined = false) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  const int64_t rtt_t = near_initiator ? 8 * kMs : 50'000, rtt_i = near_initiator ? 50'000 : 8 * kMs;
  int64_t t = 20 * kMs;
  if (joined) {
    for (uint32_t i = 0; i < 4; ++i, t += 50 * kMs) {
      w.data(true, t, read10(100 + i, 1024));
      w.data(false, t + rtt_t + rtt_i + 100'000, data_in(100 + i, 1024, true));
      w.ack(true, t + 2 * (rtt_t + rtt_i) + 2 * kMs + 100'000);
    }
  } else {
    w.handshake(0, rtt_t, rtt_i);
  }
  w.data(true, t, read10(1, 2048));
  const auto data = data_in(1, 2048, true);
  const uint32_t start = w.next_seq(false);
  w.data(false, t + rtt_t + rtt_i + 100'000, data);
  // The initiator's ACK is late; the target probes with its last segment, then the ACK comes.
  w.at(false, t + 3 * (rtt_t + rtt_i), start + 1448, std::vector<uint8_t>(data.begin() + 1448, data.end()));
  const int64_t probe_t = t + 3 * (rtt_t + rtt_i);
  if (how == 1)
    w.ack_sack(true, probe_t + rtt_i + rtt_t, start + 1448, start + uint32_t(data.size()));
  else
    w.ack(true, probe_t + (how == 2 ? (rtt_i + rtt_t) / 2 : rtt_i + rtt_t));
  an.finish();
  std::vector<FindingKind> kinds;
  for (const auto& f : rec.findings)
    kinds.push_back(f.kind);
  return kinds;
}
bool has(const std::vector<FindingKind>& v, FindingKind k) {
  return std::find(v.begin(), v.end(), k) != v.end();
}
}  // namespace

TEST(SessionRules, ResendOfDataSeenArrivingIsSpurious) {
  EXPECT_FALSE(has(probed_read(true), FindingKind::retransmission));  // near the receiver
  EXPECT_TRUE(has(probed_read(false), FindingKind::retransmission));  // near the sender
}

// Near the sender, the receiver's ACK tells: a D-SACK of the probe, or an ACK that left before
// the probe could have arrived, says the original had arrived (no loss).
TEST(SessionRules, ResendTheReceiverHadIsSpuriousNearTheSender) {
  EXPECT_FALSE(has(probed_read(false, 1), FindingKind::retransmission));
  EXPECT_FALSE(has(probed_read(false, 2), FindingKind::retransmission));
}

// Joined mid-session, the round-trip estimate is only an upper bound: an ACK sooner than it may
// answer the resend itself (a real loss). Only a D-SACK then proves the original had arrived.
TEST(SessionRules, ResendInAJoinedCaptureIsSpuriousOnlyByDSack) {
  EXPECT_TRUE(has(probed_read(false, 0, true), FindingKind::retransmission));  // ACK at the true RTT
  EXPECT_FALSE(has(probed_read(false, 1, true), FindingKind::retransmission));
}
