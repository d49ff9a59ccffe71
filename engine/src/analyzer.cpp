// SPDX-License-Identifier: GPL-2.0-or-later
// The connection table: finds or starts the iSCSI connection each segment belongs to.
#include "iscsi_doctor/analyzer.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "iscsi/pdu.hpp"
#include "session/connection.hpp"
#include "session/sessions.hpp"

namespace iscsi_doctor {

using session::Connection;

struct Analyzer::Impl {
  Impl(Options o, Sink& s) : options(std::move(o)), sink(s) {}

  bool is_target_port(uint16_t port) const {
    return std::find(options.ports.begin(), options.ports.end(), port) != options.ports.end();
  }

  // A Login Request (immediate bit set) at the start of a segment: iSCSI on any port.
  static bool looks_like_login(const Segment& seg) {
    if (seg.payload.size() < iscsi::kBhsLength || seg.payload[0] != 0x43) return false;
    auto bhs = iscsi::parse_bhs(seg.payload);
    return bhs && iscsi::plausible_bhs(*bhs, true);
  }

  void finish_connection(Connection& c) {
    c.finish();
    infos.push_back(c.info());
  }

  Options options;
  Sink& sink;
  using Key = std::pair<Endpoint, Endpoint>;
  std::map<Key, std::unique_ptr<Connection>> live;
  // Handshakes on ports not known to be iSCSI, kept until a Login Request shows the connection is
  // (then replayed into it: MSS, window scale and round trips come from them).
  static constexpr size_t kMaxPendingHandshakes = 4096;
  std::map<Key, std::vector<Segment>> pending;
  std::deque<Key> pending_order;
  void remember_handshake(const Key& key, const Segment& seg, bool syn) {
    auto it = pending.find(key);
    if (syn) {
      if (it == pending.end()) {
        while (pending.size() >= kMaxPendingHandshakes && !pending_order.empty()) {
          pending.erase(pending_order.front());
          pending_order.pop_front();
        }
        if (pending_order.size() >= 2 * kMaxPendingHandshakes) {  // drop keys replayed since
          std::deque<Key> live_keys;
          for (const Key& k : pending_order)
            if (pending.count(k)) live_keys.push_back(k);
          pending_order.swap(live_keys);
        }
        it = pending.emplace(key, std::vector<Segment>{}).first;
        pending_order.push_back(key);
      }
      it->second.clear();
    } else if (it == pending.end() || it->second.size() >= 3) {
      return;
    }
    Segment copy = seg;
    copy.payload = {};
    it->second.push_back(copy);
  }
  std::vector<ConnectionInfo> infos;  // finished connections
  session::SessionRegistry sessions;
  uint32_t next_id = 1;
  bool cap_reported = false;
};

Analyzer::Analyzer(Options options, Sink& sink) : impl_(std::make_unique<Impl>(std::move(options), sink)) {}
Analyzer::~Analyzer() = default;

SegmentStatus Analyzer::feed(const Segment& seg) {
  Impl& m = *impl_;
  Impl::Key key = seg.src < seg.dst ? Impl::Key{seg.src, seg.dst} : Impl::Key{seg.dst, seg.src};
  auto it = m.live.find(key);
  bool syn = (seg.flags & tcp_flag::syn) && !(seg.flags & tcp_flag::ack);
  if (it != m.live.end() && syn && it->second->closed()) {
    // The 4-tuple is reused by a new connection.
    m.finish_connection(*it->second);
    m.live.erase(it);
    it = m.live.end();
  }
  if (it == m.live.end()) {
    const bool known_port = m.is_target_port(seg.dst.port) || m.is_target_port(seg.src.port);
    if (!known_port && m.options.detect_ports && seg.payload_wire_len == 0 &&
        (seg.flags & (tcp_flag::syn | tcp_flag::ack)))
      m.remember_handshake(key, seg, syn);
    if (!syn && seg.payload_wire_len == 0) return SegmentStatus::ignored;  // stray ACKs, FINs
    const Endpoint *initiator = nullptr, *target = nullptr;
    if (m.is_target_port(seg.dst.port)) initiator = &seg.src, target = &seg.dst;
    else if (m.is_target_port(seg.src.port)) initiator = &seg.dst, target = &seg.src;
    else if (m.options.detect_ports && !syn && Impl::looks_like_login(seg))
      initiator = &seg.src, target = &seg.dst;
    if (!initiator) return SegmentStatus::ignored;
    if (m.live.size() >= m.options.max_connections) {
      if (!m.cap_reported)
        m.sink.on_notice({Notice::Level::error, seg.frame, 0,
                          "connection cap (" + std::to_string(m.options.max_connections) +
                              ") hit: further connections are not analysed"});
      m.cap_reported = true;
      return SegmentStatus::ignored;
    }
    auto conn = std::make_unique<Connection>(m.next_id++, *initiator, *target, m.options, m.sink,
                                             m.sessions);
    it = m.live.emplace(key, std::move(conn)).first;
    if (auto p = m.pending.find(key); p != m.pending.end()) {
      for (const Segment& h : p->second)
        it->second->on_segment(h, h.src == *initiator ? session::kI2T : session::kT2I);
      m.pending.erase(p);
    }
  }
  Connection& c = *it->second;
  int dir = seg.src == c.info_initiator() ? session::kI2T : session::kT2I;
  return c.on_segment(seg, dir);
}

void Analyzer::finish() {
  Impl& m = *impl_;
  for (auto& [key, conn] : m.live) m.finish_connection(*conn);
  m.live.clear();
}

std::vector<ConnectionInfo> Analyzer::connections() const {
  std::vector<ConnectionInfo> out = impl_->infos;
  for (auto& [key, conn] : impl_->live) out.push_back(conn->info());
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

std::vector<SessionInfo> Analyzer::sessions() const { return impl_->sessions.all(); }

}  // namespace iscsi_doctor
