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
  for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
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
  for (size_t s : starts) w.at(false, t += 10'000, base + uint32_t(s), slice(reply, s, 1448));
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
  for (auto& n : rec.notices) noticed |= n.message.find("missing") != std::string::npos;
  EXPECT_TRUE(noticed);
}

// A segment sent again after the capture saw it: a retransmission finding on the sender's side
// with the original as evidence, and one extra round trip for the command.
TEST(SessionTcp, RetransmissionIsFoundAndCosts) {
  Recorder rec;
  Analyzer an(Options{}, rec);
  Wire w(an);
  w.handshake(0, 8 * kMs, 50'000);
  w.data(true, 10 * kMs, read10(2, 1024));
  uint32_t seq = w.next_seq(false);
  auto reply = concat({data_in(2, 1024, false), response(2)});
  w.data(false, 18 * kMs, reply);
  uint64_t original = w.frame();
  w.at(false, 218 * kMs, seq, reply);  // RTO: the initiator never got it
  uint64_t again = w.frame();
  w.ack(true, 218 * kMs + 50'000);
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
  for (auto& c : rec.commands) completed += c.completed;
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
