// SPDX-License-Identifier: GPL-2.0-or-later
// The latency rules of docs/rules.md on hand-made exchanges with exact timings: the study's
// Nagle + delayed-ACK read, the Nagle-only read, the collapsed-status baseline, an R2T write.
#include <gtest/gtest.h>

#include <vector>

#include "iscsi/pdu_builder.hpp"
#include "iscsi_doctor/analyzer.hpp"

using namespace iscsi_doctor;

namespace {

constexpr int64_t kMs = 1'000'000;

struct Recorder : Sink {
  std::vector<CommandResult> commands;
  std::vector<Finding> findings;
  std::vector<ConnectionInfo> connections;
  void on_command(const CommandResult& c) override { commands.push_back(c); }
  void on_finding(const Finding& f) override { findings.push_back(f); }
  void on_connection(const ConnectionInfo& c) override { connections.push_back(c); }
  bool has(FindingKind k, Side s) const {
    for (auto& f : findings)
      if (f.kind == k && f.side == s) return true;
    return false;
  }
};

// A two-party TCP conversation seen at one capture point; times in nanoseconds.
class Wire {
public:
  explicit Wire(Analyzer& a) : a_(a) {
    ini_.addr = Address::ipv4(0x0a000001);
    ini_.port = 40000;
    tgt_.addr = Address::ipv4(0x0a000002);
    tgt_.port = 3260;
  }
  void handshake(int64_t t, int64_t rtt_target, int64_t rtt_initiator) {
    send(true, t, tcp_flag::syn, {}, 1460);
    send(false, t + rtt_target, tcp_flag::syn | tcp_flag::ack, {}, 1460);
    send(true, t + rtt_target + rtt_initiator, tcp_flag::ack, {});
  }
  // Sends bytes from one side cut into MSS-sized segments, all at time t.
  void data(bool from_initiator, int64_t t, const std::vector<uint8_t>& bytes, size_t mss = 1448) {
    for (size_t off = 0; off < bytes.size(); off += mss) {
      size_t n = std::min(mss, bytes.size() - off);
      std::vector<uint8_t> part(bytes.begin() + long(off), bytes.begin() + long(off + n));
      send(from_initiator, t, tcp_flag::ack | tcp_flag::psh, part);
    }
  }
  void ack(bool from_initiator, int64_t t) { send(from_initiator, t, tcp_flag::ack, {}); }
  uint64_t frame() const { return frame_; }

private:
  void send(bool from_initiator, int64_t t, uint8_t flags, const std::vector<uint8_t>& payload,
            uint16_t mss = 0) {
    Segment s;
    s.frame = ++frame_;
    s.time_ns = t;
    s.src = from_initiator ? ini_ : tgt_;
    s.dst = from_initiator ? tgt_ : ini_;
    uint32_t& my = from_initiator ? iseq_ : tseq_;
    uint32_t& their = from_initiator ? tseq_ : iseq_;
    s.seq = my;
    s.ack = their;
    s.flags = flags;
    s.window = 65535;
    s.mss_option = mss;
    s.payload = payload;
    s.payload_wire_len = uint32_t(payload.size());
    a_.feed(s);
    my += uint32_t(payload.size()) + ((flags & tcp_flag::syn) ? 1 : 0);
  }
  Analyzer& a_;
  Endpoint ini_, tgt_;
  uint32_t iseq_ = 0xfffff000u, tseq_ = 1000;  // initiator's sequence wraps mid-test
  uint64_t frame_ = 0;
};

std::vector<uint8_t> read10(uint32_t itt, uint32_t bytes) {
  iscsi::Bhs b;
  b.opcode = 0x01;
  b.flags = 0x80 | 0x40;  // F, R
  b.itt = itt;
  b.w20 = bytes;
  b.w24 = itt;
  b.cdb = {0x28, 0, 0, 0, 0x10, 0, 0, 0, uint8_t(bytes / 512), 0};
  return iscsi::encode_pdu(b);
}

std::vector<uint8_t> write10(uint32_t itt, uint32_t bytes, uint32_t immediate) {
  iscsi::Bhs b;
  b.opcode = 0x01;
  b.flags = 0x80 | 0x20;  // F, W
  b.itt = itt;
  b.w20 = bytes;
  b.w24 = itt;
  b.cdb = {0x2a, 0, 0, 0, 0x20, 0, 0, uint8_t((bytes / 512) >> 8), uint8_t(bytes / 512), 0};
  std::vector<uint8_t> data(immediate, 0xab);
  return iscsi::encode_pdu(b, data);
}

std::vector<uint8_t> data_in(uint32_t itt, uint32_t bytes, bool with_status) {
  iscsi::Bhs b;
  b.opcode = 0x25;
  b.flags = 0x80 | (with_status ? 0x01 : 0);
  b.itt = itt;
  b.w20 = 0xffffffff;
  std::vector<uint8_t> data(bytes, 0);
  return iscsi::encode_pdu(b, data);
}

std::vector<uint8_t> r2t(uint32_t itt, uint32_t offset, uint32_t length) {
  iscsi::Bhs b;
  b.opcode = 0x31;
  b.flags = 0x80;
  b.itt = itt;
  b.w20 = 0x100 + itt;  // TTT
  b.w40 = offset;
  b.w44 = length;
  return iscsi::encode_pdu(b);
}

std::vector<uint8_t> data_out(uint32_t itt, uint32_t ttt, uint32_t offset, uint32_t length) {
  iscsi::Bhs b;
  b.opcode = 0x05;
  b.flags = 0x80;
  b.itt = itt;
  b.w20 = ttt;
  b.w40 = offset;
  std::vector<uint8_t> data(length, 0xcd);
  return iscsi::encode_pdu(b, data);
}

std::vector<uint8_t> response(uint32_t itt) {
  iscsi::Bhs b;
  b.opcode = 0x21;
  b.flags = 0x80;
  b.itt = itt;
  return iscsi::encode_pdu(b);
}

}  // namespace

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
  double sum = c.breakdown.request_ms + c.breakdown.think_ms + c.breakdown.data_ms +
               c.breakdown.nagle_ms + c.breakdown.delayed_ack_ms + c.breakdown.r2t_ms +
               c.breakdown.window_ms + c.breakdown.loss_ms + c.breakdown.response_ms;
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
