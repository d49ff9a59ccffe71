// SPDX-License-Identifier: GPL-2.0-or-later
#include "tcp/tracker.hpp"

#include <algorithm>
#include <string>

#include "tcp/constants.hpp"

namespace iscsi_doctor::tcp {

namespace {
constexpr const char* kUnseen = "acknowledged by the receiver but missing from the capture";
}  // namespace

SegmentStatus Tracker::on_segment(const Segment& seg, int dir, Receiver& r) {
  status_ = SegmentStatus::pure_ack;
  for (int d = 0; d < 2; ++d) {
    Flow& f = flow_[d];
    if (f.unseen_upto > f.next && seg.time_ns - f.unseen_t > to_ns(tcp::reorder_wait_ms))
      declare_unseen(d, r);
  }
  uint64_t una_before = flow_[dir ^ 1].una;
  // The other side's segments in flight before this ACK trims them (an ACK record's out_of_flight).
  const size_t flight_before = flow_[dir ^ 1].unacked.size() + flow_[dir ^ 1].out_of_order.size();
  if (seg.flags & tcp_flag::syn) {
    status_ = SegmentStatus::syn;
    handshake(seg, dir, r);
  }
  int64_t released = -1;  // given after the segment is judged: it may not bound its own release
  if (seg.has_timestamps) released = echo(seg, dir);
  if (seg.payload_wire_len > 0) flow_[dir].last_payload_t = seg.time_ns;
  if (seg.flags & tcp_flag::ack) ack(seg, dir, r);
  if (seg.payload_wire_len > 0 && !(seg.flags & tcp_flag::syn)) payload(seg, dir, r);
  if (released >= 0) rtt_[dir].released(released);
  bool no_data = status_ == SegmentStatus::pure_ack;
  if (no_data && (seg.flags & tcp_flag::rst))
    status_ = SegmentStatus::rst;
  else if (no_data && (seg.flags & tcp_flag::fin))
    status_ = SegmentStatus::fin;
  Flow& f = flow_[dir];
  if (seg.flags & (tcp_flag::fin | tcp_flag::rst)) {
    if (!flow_[0].fin_seen && !flow_[1].fin_seen && !closed_) first_fin_t_ = seg.time_ns;
    if (!f.fin_seen) fin_t_[dir] = seg.time_ns;
    f.fin_seen = true;
    if (seg.flags & tcp_flag::rst) reset_ = true;
    if ((seg.flags & tcp_flag::rst) || flow_[dir ^ 1].fin_seen) closed_ = true;
  }
  // The window this side advertises limits what the other side may send. Its scale is known from
  // both SYNs (0 when either lacks the option); else the least the data in flight proves.
  Flow& other = flow_[dir ^ 1];
  const uint32_t raw = seg.window;
  uint32_t win = raw;
  const bool scale_known = f.syn_seen && other.syn_seen;
  if (!(seg.flags & tcp_flag::syn)) {
    if (scale_known && f.wscale_offered >= 0 && other.wscale_offered >= 0)
      win = raw << std::min<int>(f.wscale_offered, 14);
    else if (!scale_known)
      win = raw << other.peer_wscale_min;
  }
  bool window_changed =
      other.peer_window_known && (scale_known ? other.peer_window != win : other.peer_window_raw != raw);
  other.peer_window = win;
  other.peer_window_raw = raw;
  other.peer_wscale_known = scale_known;
  other.peer_window_known = true;
  if (other.una_known && (other.una != una_before || window_changed || other.acks.empty()))
    other.record_ack(
        {other.una, seg.time_ns, seg.frame, win, raw, other.acked_progress, other.acked_data_t,
         other.acked_data_frame, seg.tsval, seg.has_timestamps, other.data_segments - flight_before},
        // what a hold's release may be matched against (rules/holds.cpp)
        seg.time_ns - tcp::ack_record_keep_rtts * full_rtt_ns() - to_ns(tcp::ack_record_keep_ms));
  if (status_ == SegmentStatus::pure_ack && window_changed && flow_[dir ^ 1].una == una_before)
    status_ = SegmentStatus::window_update;
  return status_;
}

void Tracker::handshake(const Segment& seg, int dir, Receiver& r) {
  Flow& f = flow_[dir];
  if (f.syn_seen && f.started && f.unwrap(seg.seq) == f.next - 1) return;  // SYN retransmitted
  f.anchor(seg.seq + 1);
  f.syn_seen = true;
  r.stream_from_syn(dir);
  f.wscale_offered = seg.wscale_option;
  // A side's MSS option says what it can receive: it bounds what the other side sends.
  if (seg.mss_option) {
    flow_[dir ^ 1].mss = seg.mss_option;
    flow_[dir ^ 1].mss_from_syn = true;
  }
  if (!(seg.flags & tcp_flag::ack)) {
    saw_syn_ = true;
    syn_t_ = seg.time_ns;
  } else if (saw_syn_ && !saw_synack_) {
    saw_synack_ = true;
    synack_t_ = seg.time_ns;
    rtt_[1].sample(seg.time_ns - syn_t_, true);
  }
}

// Timestamps (RFC 7323; docs/rules.md "Measures taken from TCP"): a side echoes the latest TSval
// it has received. A data segment echoing a newer one than the side's data before it left after
// that TSval's first segment arrived: with that segment a pure ACK (no data to answer), a release,
// so a round-trip sample that data released by ACKs makes tight.
int64_t Tracker::echo(const Segment& seg, int dir) {
  Flow& f = flow_[dir];
  if (f.ts_firsts.empty() || f.ts_firsts.back().val != seg.tsval) {
    while (!f.ts_firsts.empty() && (f.ts_firsts.size() >= tcp::echo_records_max ||
                                    f.ts_firsts.front().t < seg.time_ns - to_ns(tcp::echo_keep_ms)))
      f.ts_firsts.pop_front();
    f.ts_firsts.push_back({seg.tsval, seg.time_ns, seg.payload_wire_len == 0});
  }
  if (seg.payload_wire_len == 0 || !(seg.flags & tcp_flag::ack)) return -1;
  const bool newer = !f.data_echo_seen || int32_t(seg.tsecr - f.data_echo) > 0;
  if (!newer) return -1;
  if (f.data_echo_seen) f.echo_moved_frame = seg.frame;
  f.data_echo_seen = true;
  f.data_echo = seg.tsecr;
  const Flow& peer = flow_[dir ^ 1];
  for (size_t i = peer.ts_firsts.size(); i > 0; --i) {
    const TsFirst& e = peer.ts_firsts[i - 1];
    if (e.val != seg.tsecr) continue;
    // Not when the peer sent data since: this may answer that data after a think time.
    return e.pure && peer.last_payload_t < e.t ? seg.time_ns - e.t : -1;
  }
  return -1;
}

void Tracker::ack(const Segment& seg, int dir, Receiver& r) {
  Flow& peer = flow_[dir ^ 1];  // the direction whose data this segment acknowledges
  if (!peer.started) return;
  if (saw_synack_ && dir == 0 && !rtt_[0].from_handshake() && !(seg.flags & tcp_flag::syn)) {
    rtt_[0].sample(seg.time_ns - synack_t_, true);
  }
  uint64_t ack = peer.unwrap(seg.ack);
  if (ack > peer.max_end + (uint64_t(1) << 30)) return;        // nonsense ack
  if (peer.fin_seen && ack == peer.next + 1) {  // the FIN's sequence number
    ack = peer.next;
    peer.fin_acked = true;
  }
  // An ACK for the segment that ended exactly here: a round-trip sample for this side.
  if (!peer.unacked.empty() && (!peer.una_known || ack > peer.una)) {
    // Records end in increasing order (each carries new data): a binary search, not a scan.
    auto it = std::lower_bound(peer.unacked.begin(), peer.unacked.end(), ack,
                               [](const SentSegment& s, uint64_t v) { return s.end < v; });
    if (it != peer.unacked.end() && it->end == ack) {
      // A receiver ACKs more than one full segment at once (Linux, Windows and BSD alike); one
      // segment or less it may hold for its delayed-ACK timer or its application's read.
      const bool pure = seg.payload_wire_len == 0;
      const bool prompt =
        pure && peer.una_known && it != peer.unacked.begin() && ack - peer.una > peer.effective_mss();
      rtt_[dir].sample(seg.time_ns - it->t, false, pure, prompt);
    }
  }
  if (ack > peer.next && peer.started) {
    // The receiver has bytes the capture has not shown: missing at the capture point. Unless they
    // come soon after: a capture can show a segment just after the ACK that covers it. (Not when
    // later data is already held: the receiver acknowledged past a hole the capture skipped.)
    const uint64_t upto = std::min(ack, peer.max_end > peer.next ? peer.max_end : ack);
    if (!peer.out_of_order.empty()) {
      declare_gap(dir ^ 1, upto, seg.frame, kUnseen, r);
    } else {
      if (peer.unseen_upto <= peer.next) {
        peer.unseen_t = seg.time_ns;
        peer.unseen_frame = seg.frame;
      }
      peer.unseen_upto = std::max(peer.unseen_upto, upto);
    }
  }
  const uint64_t before = peer.una_known ? peer.una : ack;
  if (peer.acked(ack, seg.time_ns, seg.frame)) {
    peer.link.advanced(ack - before, seg.time_ns, full_rtt_ns());
    if (peer.path) peer.path->advanced(ack - before, seg.time_ns, full_rtt_ns());
    if (peer.last_small.ack_frame == seg.frame) peer.last_small.ack_pure = seg.payload_wire_len == 0;
  }
}

void Tracker::declare_unseen(int dir, Receiver& r) {
  Flow& f = flow_[dir];
  declare_gap(dir, f.unseen_upto, f.unseen_frame, kUnseen, r);  // then next >= unseen_upto: none pending
}

void Tracker::payload(const Segment& seg, int dir, Receiver& r) {
  Flow& f = flow_[dir];
  uint32_t len = seg.payload_wire_len;
  if (!f.started) {
    f.anchor(seg.seq);
    r.stream_without_syn(dir, seg);
  }
  f.largest_payload = std::max(f.largest_payload, len);
  if (seg.options_len) f.data_options_len = seg.options_len;
  uint64_t start = f.unwrap(seg.seq);
  uint64_t end = start + len;
  // Acknowledged bytes still unseen when the sender's next data comes past them: they are missing.
  if (start > f.next && f.unseen_upto > f.next) declare_unseen(dir, r);
  if (end <= f.next) {
    bool keepalive = len <= 1 && start + 1 >= f.next;
    status_ = keepalive ? SegmentStatus::keepalive : SegmentStatus::retransmission;
    if (!keepalive) resend(dir, seg, start, end, r);
    return;
  }
  if (start > f.next) {
    // Beyond a hole: keep it until the hole fills, the receiver acknowledges past it, or the
    // buffer cap is hit (then the hole is declared lost).
    status_ = SegmentStatus::out_of_order;
    f.last_resend_t = seg.time_ns;  // a loss before the capture point: the sender recovers from it
    if (f.out_of_order.empty()) f.hole_since = seg.time_ns;
    auto& held = f.out_of_order[start];
    if (held.bytes.size() < seg.payload.size()) {
      f.out_of_order_bytes += seg.payload.size() - held.bytes.size();
      held.bytes.assign(seg.payload.begin(), seg.payload.end());
      held.t = seg.time_ns;
      held.frame = seg.frame;
    }
    f.max_end = std::max(f.max_end, end);
    f.move_ref(end);
    if (f.out_of_order_bytes > max_out_of_order_bytes_) {
      const std::string why = "out-of-order buffer cap (" + std::to_string(max_out_of_order_bytes_) +
                              " bytes) hit; hole declared lost";
      declare_gap(dir, f.out_of_order.begin()->first, seg.frame, why.c_str(), r);
    }
    return;
  }
  status_ = SegmentStatus::new_data;
  if (!(seg.flags & tcp_flag::psh)) f.saw_full(len);
  if (const uint32_t m = f.effective_mss(); len > m) {
    ++f.aggregates;
    if (len % m == 0) ++f.aggregates_whole;
  }
  if (!f.out_of_order.empty()) {
    f.last_resend_t = seg.time_ns;  // the hole's fill: most often the lost segment sent again
    r.hole_filled(dir, seg, f.hole_since);
  }
  // Overlap with bytes already delivered is trimmed; the rest is new, in order.
  size_t skip = size_t(f.next - start);
  std::span<const uint8_t> bytes = seg.payload;
  uint32_t wire_rest = len - uint32_t(skip);
  bytes = skip < bytes.size() ? bytes.subspan(skip) : std::span<const uint8_t>{};
  if (bytes.size() < wire_rest) f.bytes_missing += wire_rest - bytes.size();  // cut by the snaplen
  f.next += wire_rest;  // before delivery: a status delivered now is settled against this position
  f.move_ref(f.next);
  const Delivery d = r.deliver(dir, bytes, wire_rest, seg, filling_);
  SentSegment rec{start, end, seg.time_ns, seg.frame, d.owner, d.progress, f.is_small(len)};
  ++f.data_segments;
  if (f.unacked.size() < kMaxUnackedRecords)
    f.unacked.push_back(rec);
  else
    r.unacked_cap_hit(dir, seg.frame, kMaxUnackedRecords);
  if (f.una_known && f.una >= end) f.trim_acked(f.unseen_t, f.unseen_frame);  // its ACK came first
  if (rec.small) {
    if (!f.nagle_off_frame && f.has_small && !(seg.flags & tcp_flag::fin)) {
      // Partial whatever the MSS: the handshake's, or (inferred) below the least a host may send.
      // And right after the previous short one: then it was sent alone. After full segments it may
      // be the tail of one TSO send longer than the MSS, which Nagle does not hold.
      const uint32_t partial = f.mss_from_syn ? f.effective_mss() : tcp::nagle_off_short_bytes;
      if (len < partial && f.last_small.len < partial && f.last_small.end == start &&
          shows_nagle_off(f, dir, seg.time_ns))
        f.nagle_off_frame = seg.frame;
    }
    // Right after the previous short one and after the pure ACK of it, the peer silent since that
    // one (nothing to answer): were Nagle on, that ACK released it (docs/rules.md "Nagle releases").
    const SmallSegment& p = f.last_small;
    if (!f.nagle_off_frame && f.has_small && p.end == start && p.acked && p.ack_pure &&
        seg.time_ns > p.ack_t && flow_[dir ^ 1].last_payload_t < p.t && !(seg.flags & tcp_flag::fin) &&
        !rtt_[dir].tight())
      rtt_[dir].nagle_release(seg.time_ns - p.ack_t, seg.time_ns - p.t);
    f.has_small = true;
    f.last_small = {end, len, seg.time_ns, seg.frame, rec.progress, false, 0, 0, false};
  }
  f.max_end = std::max(f.max_end, end);
  infer_window_scale(f);
  f.last_data_t = seg.time_ns;
  f.last_data_frame = seg.frame;
  drain_out_of_order(dir, seg, r);
}

// A short segment at t, the previous short one unacknowledged when it left its sender: no ACK
// covering that one had passed the capture point, or one had but could not have reached the sender
// by then (rtt(S)); and sooner after that one than any ACK of it could have come back, however the
// capture missed ACKs. Nagle in either form would have held it (docs/rules.md "Holds"). Round trips
// taken only from ACKs on data or ACKs that may be delayed may hold answer time, and Nagle releases
// assume Nagle on: not enough to prove.
bool Tracker::shows_nagle_off(const Flow& f, int dir, int64_t t) const {
  const RttEstimate &s = rtt_[dir], &peer = rtt_[dir ^ 1];
  if (f.last_small.acked && 2 * (t - f.last_small.ack_t) >= s.ns()) return false;  // most often
  return s.tight() && peer.tight() && 2 * (t - f.last_small.t) < s.ns() + peer.ns();
}

// Without both SYNs the peer's window scale is unknown: the data in flight must have fitted the
// window the peer last advertised, so the scale is at least what makes it fit.
void Tracker::infer_window_scale(Flow& f) {
  if (f.peer_wscale_known || !f.una_known || !f.peer_window_raw || f.max_end <= f.una) return;
  const uint64_t in_flight = f.max_end - f.una;
  while (f.peer_wscale_min < 14 && (uint64_t(f.peer_window_raw) << f.peer_wscale_min) < in_flight)
    ++f.peer_wscale_min;
}

void Tracker::drain_out_of_order(int dir, const Segment& seg, Receiver& r) {
  Flow& f = flow_[dir];
  // Held bytes reach the receiver only now, when seg fills the hole before them.
  const Segment* outer = filling_;
  filling_ = &seg;
  while (!f.out_of_order.empty()) {
    auto it = f.out_of_order.begin();
    uint64_t start = it->first;
    if (start > f.next) break;
    auto held = std::move(it->second);
    f.out_of_order.erase(it);
    f.out_of_order_bytes -= held.bytes.size();
    uint64_t end = start + held.bytes.size();
    if (end <= f.next) continue;
    size_t skip = size_t(f.next - start);
    Segment s = seg;
    s.frame = held.frame;
    s.time_ns = held.t;
    auto bytes = std::span<const uint8_t>(held.bytes).subspan(skip);
    s.payload_wire_len = uint32_t(bytes.size());
    s.seq = uint32_t(f.next);  // where the delivered bytes start (holds compare it with an edge)
    f.next += bytes.size();
    f.move_ref(f.next);
    r.deliver(dir, bytes, uint32_t(bytes.size()), s, filling_);
  }
  filling_ = outer;
}

void Tracker::declare_gap(int dir, uint64_t upto, uint64_t frame, const char* why, Receiver& r) {
  Flow& f = flow_[dir];
  while (f.next < upto || (!f.out_of_order.empty() && f.out_of_order.begin()->first <= upto)) {
    uint64_t hole_end = upto;
    if (!f.out_of_order.empty()) hole_end = std::min(hole_end, f.out_of_order.begin()->first);
    if (hole_end > f.next) {
      uint64_t lost = hole_end - f.next;
      f.bytes_missing += lost;
      f.next = hole_end;
      f.move_ref(f.next);
      r.lost(dir, lost, frame, why);
    }
    if (f.out_of_order.empty()) break;
    Segment s{};
    s.frame = f.out_of_order.begin()->second.frame;
    s.time_ns = f.out_of_order.begin()->second.t;
    drain_out_of_order(dir, s, r);
    if (f.out_of_order.empty() || f.next >= upto) break;
  }
}

void Tracker::resend(int dir, const Segment& seg, uint64_t start, uint64_t end, Receiver& r) {
  Flow& f = flow_[dir];
  f.last_resend_t = seg.time_ns;
  // The first record holding the resent byte: records end in increasing order, so a binary search
  // finds the first that ends past it; one that starts later is an overlap resend, looked for a
  // few records on (a bounded walk: the work per segment stays bounded).
  const SentSegment* orig = nullptr;
  auto it = std::upper_bound(f.unacked.begin(), f.unacked.end(), start,
                             [](uint64_t v, const SentSegment& s) { return v < s.end; });
  for (int n = 0; it != f.unacked.end() && n < 8; ++it, ++n)
    if (it->start <= start) {
      orig = &*it;
      break;
    }
  if (f.una_known && end <= f.una && !orig) return;  // spurious, already acknowledged
  r.resent(dir, seg, orig);
}

void Tracker::finish(Receiver& r) {
  for (int d = 0; d < 2; ++d) {
    Flow& f = flow_[d];
    if (f.unseen_upto > f.next) declare_unseen(d, r);
    if (!f.out_of_order.empty())
      declare_gap(d, f.max_end, f.out_of_order.begin()->second.frame,
                  "the capture ended before the hole was filled", r);
  }
}

}  // namespace iscsi_doctor::tcp
