// SPDX-License-Identifier: GPL-2.0-or-later
// The TCP layer knows nothing of iSCSI: a Receiver that is no iSCSI connection gives each delivery
// its own cookies, and the tracker hands them back as given, the progress cookie with the ACK that
// acknowledges the bytes and the owner cookie with a resend of them. The session layer's meaning
// of the words survives the trip.
#include <gtest/gtest.h>

#include <vector>

#include "session/delivery.hpp"
#include "tcp/tracker.hpp"

using namespace iscsi_doctor;

namespace {

constexpr int64_t kMs = 1'000'000;

struct Stub final : tcp::Receiver {
  tcp::Delivery next;                  // what the next delivery is given
  std::vector<size_t> delivered;       // bytes per delivery
  std::vector<tcp::Cookie> resent_owner;
  void stream_from_syn(int) override {}
  void stream_without_syn(int, const Segment&) override {}
  tcp::Delivery deliver(int, std::span<const uint8_t> bytes, uint32_t, const Segment&, const Segment*) override {
    delivered.push_back(bytes.size());
    return next;
  }
  void hole_filled(int, const Segment&, int64_t) override {}
  void resent(int, const Segment&, const tcp::SentSegment* original) override {
    resent_owner.push_back(original ? original->owner : tcp::Cookie{});
  }
  void lost(int, uint64_t, uint64_t, const char*) override {}
  void unacked_cap_hit(int, uint64_t, size_t) override {}
};

Endpoint ep(uint32_t host, uint16_t port) { return {Address::ipv4(host), port}; }

struct Conn {
  tcp::Tracker tracker{1 << 20};
  Stub rx;
  uint64_t frame = 0;
  Endpoint a = ep(0x0a000001, 40000), b = ep(0x0a000002, 5000);  // no iSCSI port
  SegmentStatus send(int dir, int64_t t, uint32_t seq, uint32_t ack, uint8_t flags,
                     const std::vector<uint8_t>& payload = {}) {
    Segment s;
    s.frame = ++frame;
    s.time_ns = t;
    s.src = dir == 0 ? a : b;
    s.dst = dir == 0 ? b : a;
    s.seq = seq;
    s.ack = ack;
    s.flags = flags;
    s.window = 65535;
    if (flags & tcp_flag::syn) s.mss_option = 1460;
    s.payload = payload;
    s.payload_wire_len = uint32_t(payload.size());
    return tracker.on_segment(s, dir, rx);
  }
};

bool same(const tcp::Cookie& x, const tcp::Cookie& y) { return x.a == y.a && x.b == y.b; }

}  // namespace

TEST(TcpCookie, ProgressAndOwnerWordsRoundTrip) {
  const session::Progress p{0, 123456789012ull, 0xffffffffu};  // no half trip yet is progress too
  const session::Progress q = session::progress_of(session::progress_cookie(p));
  EXPECT_FALSE(session::progress_cookie(p).empty());
  EXPECT_EQ(q.h, 0);
  EXPECT_EQ(q.cmd, 123456789012ull);
  EXPECT_EQ(q.itt, 0xffffffffu);
  const session::Progress none = session::progress_of(session::progress_cookie({-1, 5, 6}));
  EXPECT_TRUE(session::progress_cookie({-1, 5, 6}).empty());  // no command: nothing to hand back
  EXPECT_EQ(none.h, -1);
  EXPECT_EQ(none.cmd, 0u);
  const session::Owner o = session::owner_of(session::owner_cookie({65535, 77}));
  EXPECT_EQ(o.slot, 65535u);
  EXPECT_EQ(o.cmd, 77u);
}

TEST(TcpCookie, TrackerHandsBackWhatTheReceiverGave) {
  Conn c;
  using namespace tcp_flag;
  c.send(0, 0, 1000, 0, syn);
  c.send(1, 1 * kMs, 5000, 1001, syn | ack);
  c.send(0, 2 * kMs, 1001, 5001, ack);
  const tcp::Cookie owner{11, 22}, progress{33, 44};
  c.rx.next = {owner, progress};
  const std::vector<uint8_t> data(100, 0xab);  // a small segment: the flow remembers it
  EXPECT_EQ(c.send(0, 3 * kMs, 1001, 5001, ack | psh, data), SegmentStatus::new_data);
  ASSERT_EQ(c.rx.delivered, std::vector<size_t>{100});
  const tcp::Flow& f = c.tracker.flow(0);
  ASSERT_TRUE(f.has_small);
  EXPECT_TRUE(same(f.last_small.progress, progress));
  // The peer acknowledges the 100 bytes: its ACK record carries the progress cookie back.
  c.rx.next = {};
  c.send(1, 4 * kMs, 5001, 1101, ack);
  ASSERT_FALSE(f.acks.empty());
  EXPECT_EQ(f.acks.back().ack - f.acks.front().ack, 100u);
  EXPECT_TRUE(same(f.acks.back().progress, progress));
  EXPECT_TRUE(same(f.acked_progress, progress));
  // Bytes delivered with empty cookies and acknowledged later leave the last progress in force.
  c.send(0, 5 * kMs, 1101, 5001, ack | psh, data);
  c.send(1, 6 * kMs, 5001, 1201, ack);
  EXPECT_TRUE(same(f.acks.back().progress, progress));
  // A resend of the first bytes, while their record is kept, brings its owner cookie back.
  c.rx.next = {owner, progress};
  c.send(0, 7 * kMs, 1201, 5001, ack | psh, data);  // new bytes, still unacknowledged
  EXPECT_EQ(c.send(0, 8 * kMs, 1201, 5001, ack | psh, data), SegmentStatus::retransmission);
  ASSERT_EQ(c.rx.resent_owner.size(), 1u);
  EXPECT_TRUE(same(c.rx.resent_owner[0], owner));
}
