// SPDX-License-Identifier: GPL-2.0-or-later
// The TCP layer under the rules: the same PDUs fed in order, reordered, overlapping and
// retransmitted give the same commands; a hole the receiver acknowledges is lost capture data,
// not a guess; a capture that starts mid-session finds the PDUs again.
#include <gtest/gtest.h>

#include "wire.hpp"

using namespace wire;

namespace {

std::vector<uint8_t> concat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (auto& p : parts)
    out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::vector<uint8_t> slice(const std::vector<uint8_t>& v, size_t from, size_t n) {
  return {v.begin() + long(from), v.begin() + long(std::min(v.size(), from + n))};
}

}  // namespace

// A 4 KiB read whose Data-In segments arrive in reverse order, one of them twice and one
// overlapping its neighbour: the stream is put back together, the command completes.
TEST(SessionTcp, ReorderedAndOverlappingSegmentsReassemble) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 1 * kMs, 10'000);
  w.data(true, 2 * kMs, read10(5, 4096));
  auto reply = concat({data_in(5, 4096, false), response(5)});
  uint32_t base = w.next_seq(false);
  std::vector<size_t> starts = {3000, 1448, 0};
  int64_t t = 3 * kMs;
  for (size_t s : starts)
    w.at(false, t += 10'000, base + uint32_t(s), slice(reply, s, 1448));
  w.at(false, t += 10'000, base + 1000, slice(reply, 1000, 600));  // overlap, already seen
  w.at(false, t += 10'000, base + 2896, slice(reply, 2896, reply.size() - 2896));
  an.finish();
  ASSERT_EQ(rec.commands.size(), 1u);
  EXPECT_TRUE(rec.commands[0].completed);
  EXPECT_FALSE(rec.commands[0].data_incomplete);
  EXPECT_EQ(rec.commands[0].status_frame, w.frame());
}

// The capture misses one Data-In segment that the initiator acknowledges: the bytes are
// declared missing, the command still completes on its Response, marked data_incomplete.
TEST(SessionTcp, AcknowledgedHoleIsLostDataNotAGuess) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 1 * kMs, 10'000);
  w.data(true, 2 * kMs, read10(9, 8192));
  auto din = data_in(9, 8192, false);
  w.data(false, 3 * kMs, slice(din, 0, 1448));
  w.skip(false, 1448);  // lost at the capture point
  w.data(false, 3 * kMs, slice(din, 2896, din.size() - 2896));
  w.ack(true, 3 * kMs + 100'000);
  w.data(false, 4 * kMs, response(9));
  an.finish();
  ASSERT_EQ(rec.commands.size(), 1u);
  EXPECT_TRUE(rec.commands[0].completed);
  EXPECT_TRUE(rec.commands[0].data_incomplete);
  ASSERT_EQ(rec.connections.size(), 1u);
  EXPECT_EQ(rec.connections[0].bytes_missing, 1448u);
  bool noticed = false;
  for (auto& n : rec.notices)
    noticed |= n.message.find("missing") != std::string::npos;
  EXPECT_TRUE(noticed);
}

// A segment sent again after the capture saw it: a retransmission finding on the sender's side
// with the original as evidence, and one extra round trip for the command.
TEST(SessionTcp, RetransmissionIsFoundAndCosts) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  // Midpath: near the initiator the capture would have seen the original arrive (spurious resend).
  w.handshake(0, 8 * kMs, 3 * kMs);
  w.data(true, 10 * kMs, read10(2, 1024));
  uint32_t seq = w.next_seq(false);
  auto reply = concat({data_in(2, 1024, false), response(2)});
  w.data(false, 18 * kMs, reply);
  uint64_t original = w.frame();
  w.at(false, 218 * kMs, seq, reply);  // RTO: the initiator never got it
  uint64_t again = w.frame();
  w.ack(true, 221 * kMs + 50'000);  // the resend's ACK: a round trip to the initiator (3 ms) later
  an.finish();
  bool found = false;
  for (auto& f : rec.findings)
    if (f.kind == FindingKind::retransmission) {
      found = true;
      EXPECT_EQ(f.side, Side::target);
      EXPECT_EQ(f.frame, again);
      ASSERT_FALSE(f.related.empty());
      EXPECT_EQ(f.related[0].second, original);
      EXPECT_NEAR(f.lost_ms, 200.0, 0.01);
    }
  EXPECT_TRUE(found);
}

// No handshake, the first captured bytes are the middle of a Data-In: framing resumes at the
// next plausible header and later commands are complete and paired.
TEST(SessionTcp, MidSessionStartResyncs) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  auto din = data_in(1, 4096, true);
  w.data(false, 1 * kMs, slice(din, 1000, din.size() - 1000));  // capture starts here
  for (uint32_t i = 2; i < 6; ++i) {
    int64_t t = int64_t(i) * 10 * kMs;
    w.data(true, t, read10(i, 4096));
    w.data(false, t + 1 * kMs, data_in(i, 4096, true));
    w.ack(true, t + 1 * kMs + 50'000);
  }
  an.finish();
  int completed = 0;
  for (auto& c : rec.commands)
    completed += c.completed;
  // The first command per direction may wait for the digest probe; the rest must pair.
  EXPECT_GE(completed, 3);
  ASSERT_EQ(rec.connections.size(), 1u);
  EXPECT_TRUE(rec.connections[0].mid_session_start);
}

// Every segment gets a status on its connection's timeline (docs/rules.md "TCP").
TEST(SessionTcp, EverySegmentGetsAStatus) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.send(true, 0, tcp_flag::syn, {}, 1460);
  EXPECT_EQ(w.status(), SegmentStatus::syn);
  w.send(false, 8 * kMs, tcp_flag::syn | tcp_flag::ack, {}, 1460);
  EXPECT_EQ(w.status(), SegmentStatus::syn);
  w.ack(true, 8 * kMs + 50'000);
  EXPECT_EQ(w.status(), SegmentStatus::pure_ack);
  auto cmd = read10(1, 4096);
  uint32_t seq = w.next_seq(true);
  w.data(true, 10 * kMs, cmd);
  EXPECT_EQ(w.status(), SegmentStatus::new_data);
  w.at(true, 10 * kMs + 10'000, seq, cmd);
  EXPECT_EQ(w.status(), SegmentStatus::retransmission);
  w.at(true, 10 * kMs + 20'000, seq + uint32_t(cmd.size()) - 1, {0});
  EXPECT_EQ(w.status(), SegmentStatus::keepalive);
  auto reply = data_in(1, 4096, true);
  uint32_t tseq = w.next_seq(false);
  std::vector<uint8_t> head(reply.begin(), reply.begin() + 1000), tail(reply.begin() + 1000, reply.end());
  w.at(false, 18 * kMs, tseq + 1000, tail);
  EXPECT_EQ(w.status(), SegmentStatus::out_of_order);
  w.at(false, 18 * kMs + 10'000, tseq, head);
  EXPECT_EQ(w.status(), SegmentStatus::new_data);
  w.ack(true, 18 * kMs + 20'000);
  EXPECT_EQ(w.status(), SegmentStatus::pure_ack);
  w.window = 1024;
  w.ack(true, 18 * kMs + 30'000);
  EXPECT_EQ(w.status(), SegmentStatus::window_update);
  w.send(true, 20 * kMs, tcp_flag::fin | tcp_flag::ack, {});
  EXPECT_EQ(w.status(), SegmentStatus::fin);
  Segment other;
  other.src.port = 1234;
  other.dst.port = 80;
  other.flags = tcp_flag::ack;
  other.payload_wire_len = 10;
  EXPECT_EQ(an.feed(other), SegmentStatus::ignored);
  EXPECT_EQ(segment_status_name(SegmentStatus::window_update), "window_update");
  an.finish();
  ASSERT_EQ(rec.commands.size(), 1u);
  EXPECT_TRUE(rec.commands[0].completed);
}

// ---- Sequence numbers wrapping past 2^32 in the target's stream -------------------------------
//
// A READ 8 KiB whose reply (8240-byte Data-In + 48-byte Response = 8288 bytes) is cut into six
// segments; segment 2 (bytes 2896..4343 of the reply) straddles 2^32 when the reply starts at
// kWrapFirst, and segments 3..5 carry sequence numbers below the reply's start. Then a READ 1 KiB
// (status in the Data-In) lies wholly past the wrap. Each scenario also runs with the reply at a
// small sequence number (no wrap), and the two runs must agree segment by segment.
namespace {

constexpr uint32_t kWrapFirst = 0xFFFFFFFFu - 3000u + 1u;  // reply byte 3000 has sequence number 0
constexpr uint32_t kNoWrapFirst = 1000;
constexpr size_t kSeg = 1448;

struct WrapRun {
  std::vector<std::pair<uint64_t, SegmentStatus>> segments;  // (frame, status) of interest, in order
  uint64_t frame_of[6] = {};                                 // first frame of each reply segment
  uint64_t retransmitted = 0, final_ack = 0, read2_status = 0;
  Recorder rec;
};

// Sends reply segment k of command 1 at time t (explicit sequence number: reordering, resending).
void reply_segment(Wire& w, WrapRun& run, uint32_t first, size_t k, int64_t t) {
  static const std::vector<uint8_t> reply = concat({data_in(1, 8192, false), response(1)});
  w.at(false, t, first + uint32_t(k * kSeg), slice(reply, k * kSeg, kSeg));
  if (!run.frame_of[k]) run.frame_of[k] = w.frame();
  run.segments.emplace_back(w.frame(), w.status());
}

void second_read_past_the_wrap(Wire& w, WrapRun& run) {
  w.data(true, 5 * kMs, read10(2, 1024));
  w.data(false, 6 * kMs, data_in(2, 1024, true));
  run.read2_status = w.frame();
  run.segments.emplace_back(w.frame(), w.status());
  w.ack(true, 6 * kMs + 100'000);
  run.segments.emplace_back(w.frame(), w.status());
}

// Segments 0, 1, then 3 and 4 ahead of a hole, then 2 (across the wrap) fills it, then 5.
void reordered(WrapRun& run, uint32_t first) {
  Analyzer an(Options{}, run.rec);
  Wire w(an);
  w.isn(false, first - 1);  // the SYN-ACK takes one sequence number
  w.handshake(0, 1 * kMs, 10'000);
  ASSERT_EQ(w.next_seq(false), first);
  w.data(true, 2 * kMs, read10(1, 8192));
  int64_t t = 3 * kMs;
  for (size_t k : {0, 1, 3, 4, 2, 5})
    reply_segment(w, run, first, k, t += 10'000);
  w.ack(true, 3 * kMs + 200'000);  // acknowledges the whole reply: past the wrap
  run.final_ack = w.frame();
  run.segments.emplace_back(w.frame(), w.status());
  second_read_past_the_wrap(w, run);
  an.finish();
}

// Segments 0..4 in order; the initiator acknowledges up to segment 2 (just below 2^32); segment 2
// (across the wrap) is sent again; then 5.
void resent(WrapRun& run, uint32_t first) {
  Analyzer an(Options{}, run.rec);
  Wire w(an);
  w.isn(false, first - 1);
  // A path under 0.2 ms, no side near: near the initiator the capture would have seen the
  // original arrive (a spurious resend).
  w.handshake(0, 50'000, 10'000);
  ASSERT_EQ(w.next_seq(false), first);
  w.data(true, 2 * kMs, read10(1, 8192));
  int64_t t = 3 * kMs;
  for (size_t k : {0, 1, 2, 3, 4})
    reply_segment(w, run, first, k, t += 10'000);
  w.ack_to(true, 3 * kMs + 100'000, first + uint32_t(2 * kSeg));
  run.segments.emplace_back(w.frame(), w.status());
  reply_segment(w, run, first, 2, 3 * kMs + 300'000);
  run.retransmitted = w.frame();
  reply_segment(w, run, first, 5, 3 * kMs + 310'000);
  w.ack(true, 3 * kMs + 400'000);
  run.final_ack = w.frame();
  run.segments.emplace_back(w.frame(), w.status());
  second_read_past_the_wrap(w, run);
  an.finish();
}

const CommandResult* command(const WrapRun& run, uint32_t itt) {
  for (auto& c : run.rec.commands)
    if (c.itt == itt) return &c;
  return nullptr;
}

// What must not depend on where the sequence numbers lie.
void expect_same(const WrapRun& wrapped, const WrapRun& plain) {
  EXPECT_EQ(wrapped.segments, plain.segments);
  ASSERT_EQ(wrapped.rec.commands.size(), plain.rec.commands.size());
  for (size_t i = 0; i < plain.rec.commands.size(); ++i) {
    const auto &a = wrapped.rec.commands[i], &b = plain.rec.commands[i];
    EXPECT_EQ(a.itt, b.itt);
    EXPECT_EQ(a.status_frame, b.status_frame);
    EXPECT_EQ(a.latency_ms, b.latency_ms);
    EXPECT_EQ(a.round_trips, b.round_trips);
    EXPECT_EQ(a.findings, b.findings);
  }
  ASSERT_EQ(wrapped.rec.findings.size(), plain.rec.findings.size());
  for (size_t i = 0; i < plain.rec.findings.size(); ++i) {
    EXPECT_EQ(wrapped.rec.findings[i].kind, plain.rec.findings[i].kind);
    EXPECT_EQ(wrapped.rec.findings[i].frame, plain.rec.findings[i].frame);
    EXPECT_EQ(wrapped.rec.findings[i].lost_ms, plain.rec.findings[i].lost_ms);
  }
}

void expect_statuses(const WrapRun& run, const std::vector<SegmentStatus>& want) {
  ASSERT_EQ(run.segments.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(run.segments[i].second, want[i])
        << "segment " << i << " (frame " << run.segments[i].first << ")";
}

void expect_clean_stream(const WrapRun& run) {
  ASSERT_EQ(run.rec.connections.size(), 1u);
  EXPECT_EQ(run.rec.connections[0].bytes_missing, 0u);  // no ACK across the wrap taken as a gap
  EXPECT_EQ(run.rec.connections[0].resyncs, 0u);
  for (auto& n : run.rec.notices)
    ADD_FAILURE() << "notice at frame " << n.frame << ": " << n.message;
  const CommandResult* read2 = command(run, 2);
  ASSERT_NE(read2, nullptr);
  EXPECT_TRUE(read2->completed);
  EXPECT_EQ(read2->status_frame, run.read2_status);
  EXPECT_EQ(read2->round_trips, 1);
  EXPECT_TRUE(read2->findings.empty());
  EXPECT_NEAR(read2->latency_ms, 1.0, 1e-9);
}

}  // namespace

TEST(SessionTcp, WrapScenarioStraddles2To32) {
  // The premise of the two tests below: segment 2 starts below 2^32 and ends above it.
  EXPECT_GT(uint64_t(kWrapFirst) + 3 * kSeg, uint64_t(1) << 32);
  EXPECT_LT(uint64_t(kWrapFirst) + 2 * kSeg, uint64_t(1) << 32);
  EXPECT_LT(uint32_t(kWrapFirst + 3 * kSeg), kWrapFirst);
}

// Reordering across the wrap: the segments past 2^32 that arrive before the one crossing it are
// held out of order (not taken for old data), the crossing segment fills the hole, and the read
// completes on segment 5 with the hole fill counted as a loss (docs/rules.md: a segment that fills
// a hole was lost before the capture point; +2 half trips: 2 round trips against 1).
TEST(SessionTcp, ReorderingAcrossSequenceWrap) {
  WrapRun run, control;
  reordered(run, kWrapFirst);
  reordered(control, kNoWrapFirst);
  using S = SegmentStatus;
  const std::vector<S> want = {S::new_data, S::new_data, S::out_of_order, S::out_of_order, S::new_data,
                               S::new_data, S::pure_ack, S::new_data,     S::pure_ack};
  expect_statuses(run, want);
  if (HasFatalFailure()) return;

  const CommandResult* read1 = command(run, 1);
  ASSERT_NE(read1, nullptr);
  EXPECT_TRUE(read1->completed);
  EXPECT_FALSE(read1->data_incomplete);
  EXPECT_EQ(read1->status_frame, run.frame_of[5]);
  EXPECT_NEAR(read1->latency_ms, 1.06, 1e-9);  // command at 2 ms, segment 5 at 3.06 ms
  EXPECT_EQ(read1->ideal_round_trips, 1);
  EXPECT_EQ(read1->round_trips, 2);
  ASSERT_EQ(run.rec.findings.size(), 1u);
  const Finding& f = run.rec.findings[0];
  EXPECT_EQ(f.kind, FindingKind::retransmission);
  EXPECT_EQ(f.side, Side::target);
  EXPECT_EQ(f.frame, run.frame_of[2]);
  ASSERT_TRUE(f.itt.has_value());
  EXPECT_EQ(*f.itt, 1u);
  EXPECT_NEAR(f.lost_ms, 0.02, 1e-9);  // since segment 3 opened the hole
  expect_clean_stream(run);
  expect_same(run, control);
}

// A retransmission across the wrap: the resent segment 2 (first captured before, acknowledged
// only up to its start) is a retransmission with the original as evidence, the partial ACK below
// 2^32 and the final ACK above it are plain ACKs, and the read pays one extra round trip.
TEST(SessionTcp, RetransmissionAcrossSequenceWrap) {
  WrapRun run, control;
  resent(run, kWrapFirst);
  resent(control, kNoWrapFirst);
  using S = SegmentStatus;
  const std::vector<S> want = {S::new_data, S::new_data, S::new_data,       S::new_data,
                               S::new_data, S::pure_ack, S::retransmission, S::new_data,
                               S::pure_ack, S::new_data, S::pure_ack};
  expect_statuses(run, want);
  if (HasFatalFailure()) return;

  const CommandResult* read1 = command(run, 1);
  ASSERT_NE(read1, nullptr);
  EXPECT_TRUE(read1->completed);
  EXPECT_FALSE(read1->data_incomplete);
  EXPECT_EQ(read1->status_frame, run.frame_of[5]);
  EXPECT_NEAR(read1->latency_ms, 1.31, 1e-9);
  EXPECT_EQ(read1->ideal_round_trips, 1);
  EXPECT_EQ(read1->round_trips, 2);
  ASSERT_EQ(run.rec.findings.size(), 1u);
  const Finding& f = run.rec.findings[0];
  EXPECT_EQ(f.kind, FindingKind::retransmission);
  EXPECT_EQ(f.side, Side::target);
  EXPECT_EQ(f.frame, run.retransmitted);
  ASSERT_FALSE(f.related.empty());
  EXPECT_EQ(f.related[0].first, "original");
  EXPECT_EQ(f.related[0].second, run.frame_of[2]);
  EXPECT_NEAR(f.lost_ms, 0.27, 1e-9);  // resent at 3.30 ms, first sent at 3.03 ms
  expect_clean_stream(run);
  expect_same(run, control);
}

// Joined mid-session (no SYN): the MSS comes from full segments (no PSH: more data was queued),
// not from the largest segment; aggregates of standard segments (TSO/GRO) do not set it; without
// full segments it is the Ethernet standard less the options seen. docs/rules.md "MSS".
TEST(SessionTcp, MssInferredWithoutHandshake) {
  struct Case {
    std::vector<uint32_t> full;  // sizes sent without PSH, then one 100-byte tail with PSH
    uint8_t options;
    uint16_t mss;
    const char* source;
    uint64_t aggregates;
  };
  for (const Case& k : {Case{{1448, 1448, 1448}, 12, 1448, "full segments", 0},
                        Case{{1348, 1348, 1348, 1348}, 12, 1348, "full segments", 0},  // a VPN's MTU
                        Case{{2896, 2896, 4344}, 12, 1448, "Ethernet standard", 3},    // GRO aggregates
                        Case{{}, 12, 1448, "Ethernet standard", 0}, Case{{}, 0, 1460, "Ethernet standard", 0},
                        Case{{1448, 1448}, 12, 1448, "Ethernet standard", 0}}) {  // too few to tell
    Recorder rec;
    Analyzer an(Options{}, rec);
    Wire w(an);
    w.options(k.options);
    w.data(true, kMs, read10(1, 64 * 1024));
    int64_t t = 2 * kMs;
    for (uint32_t n : k.full)
      w.send(false, t += 1000, tcp_flag::ack, std::vector<uint8_t>(n, 0));
    w.data(false, t + 1000, std::vector<uint8_t>(100, 0));
    an.finish();
    ASSERT_EQ(rec.connections.size(), 1u);
    const ConnectionInfo& c = rec.connections[0];
    EXPECT_TRUE(c.mss_inferred);
    EXPECT_EQ(c.mss_target, k.mss) << k.source;
    EXPECT_EQ(c.mss_source_target, k.source);
    EXPECT_EQ(c.offload_segments, k.aggregates);
  }
}

// Joined mid-session: the initiator's raw window of 100 cannot have held the target's 18,600
// bytes in flight unless scaled by at least 2^8; with the handshake the scale is the SYN's.
TEST(SessionTcp, WindowScaleInferredFromDataInFlight) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.window = 100;
  w.data(true, kMs, read10(1, 20000));
  std::vector<uint8_t> pdu = data_in(1, 20000, true);
  w.data(false, 2 * kMs, std::vector<uint8_t>(pdu.begin(), pdu.begin() + 1448));
  w.ack(true, 3 * kMs);  // acknowledges the first segment, window 100 as on the wire
  w.data(false, 4 * kMs, std::vector<uint8_t>(pdu.begin() + 1448, pdu.end()));  // 18,600 more in flight
  an.finish();
  ASSERT_EQ(rec.connections.size(), 1u);
  EXPECT_TRUE(rec.connections[0].wscale_inferred);
  EXPECT_EQ(rec.connections[0].wscale_initiator, 8);

  Recorder rec2;
  Analyzer an2(Options{}, rec2);
  Wire w2(an2);
  w2.handshake(0, kMs, kMs);  // no window scale option: windows are as advertised
  w2.window = 100;
  w2.data(true, 3 * kMs, read10(1, 20000));
  w2.data(false, 4 * kMs, data_in(1, 20000, true));
  an2.finish();
  ASSERT_EQ(rec2.connections.size(), 1u);
  EXPECT_FALSE(rec2.connections[0].wscale_inferred);
  EXPECT_EQ(rec2.connections[0].wscale_initiator, 0);
}

// A capture that shows the initiator's ACK of a Data-In just before the Data-In itself (reordered
// by the capture host, timestamps as captured): the Data-In is new data, not bytes declared lost,
// and the read completes whole. The same ACK with the Data-In never captured: its bytes are
// declared lost once the target's next data comes past them.
TEST(SessionTcp, DataCapturedJustAfterItsAckIsNotLost) {
  for (bool captured : {true, false}) {
    SCOPED_TRACE(captured ? "captured after its ACK" : "never captured");
    Recorder rec;
    Analyzer an(Options{}, rec);
    Wire w(an);
    w.handshake(0, 1 * kMs, 1 * kMs);
    w.data(true, 3 * kMs, read10(1, 1024));
    const uint32_t data_seq = w.next_seq(false);
    const std::vector<uint8_t> din = data_in(1, 1024, false);
    w.ack_to(true, 4 * kMs + 200'000, data_seq + uint32_t(din.size()));
    if (captured) {
      w.at(false, 4 * kMs, data_seq, din);
      EXPECT_EQ(w.status(), SegmentStatus::new_data);
    } else {
      w.skip(false, uint32_t(din.size()));
    }
    w.data(false, 4 * kMs + 300'000, response(1));
    w.ack(true, 4 * kMs + 400'000);
    an.finish();
    ASSERT_EQ(rec.commands.size(), 1u);
    EXPECT_TRUE(rec.commands[0].completed);
    if (captured) EXPECT_FALSE(rec.commands[0].data_incomplete);
    bool lost = false;
    for (const Notice& n : rec.notices)
      lost |= n.message.find("missing from the capture") != std::string::npos;
    EXPECT_EQ(lost, !captured);
  }
}
