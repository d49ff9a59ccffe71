// SPDX-License-Identifier: GPL-2.0-or-later
// One direction of a TCP connection as seen at the capture point: sequence space (64-bit,
// unwrapped), what the peer has acknowledged, the peer's window, the MSS, the segments still
// unacknowledged, and the out-of-order buffer used to put the byte stream back in order.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "tcp/constants.hpp"
#include "tcp/cookie.hpp"
#include "util/fifo.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::tcp {

struct SentSegment {
  uint64_t start = 0, end = 0;  // absolute sequence numbers
  int64_t t = 0;
  uint64_t frame = 0;
  Cookie owner;        // the Receiver's cookies for its delivery (tcp/cookie.hpp)
  Cookie progress;
  bool small = false;  // shorter than the MSS
};

// An ACK from the peer that moved the edge of what this side may send (acknowledged more or
// changed the window): kept a while, since a sender may be released by an ACK older than the
// latest (the capture point is one side's round trip away from the sender).
struct AckRecord {
  uint64_t ack = 0;  // cumulative
  int64_t t = 0;
  uint64_t frame = 0;
  uint32_t window = 0;      // advertised with it (scaled)
  uint32_t raw_window = 0;  // as sent (without both SYNs, rescaled by the bound proven later)
  Cookie progress;          // the latest non-empty progress cookie of the data acknowledged so far
  int64_t data_t = 0;   // capture time and frame of the latest segment it acknowledged in full
  uint64_t data_frame = 0;
  uint32_t tsval = 0;       // its timestamp (RFC 7323), when has_ts
  bool has_ts = false;
  // The sender's data segments (Flow::data_segments) out of flight just before it: sent by then,
  // less those unacknowledged at the capture point or held past a hole. The rest of those it has
  // sent since may have been in flight when it arrived (rules/holds.cpp).
  uint64_t out_of_flight = 0;
  uint64_t edge() const { return ack + window; }
};

// The path's rate as the peer's ACKs show it (docs/rules.md "The link"). Its rate: the fastest
// run of ACKs each less than a quarter round trip after the previous one (a train clocked by
// the link) over at least link_run_bytes_min. Its busy time: the gaps, up to two round trips
// (stretch ACKs), whose ACK acknowledged data at no less than a quarter of that rate (an
// application's trickle of small PDUs, or a window's idle wait, is not the link at work).
struct LinkMeter {
  int64_t last_t = -1;      // the latest ACK that advanced una
  int64_t busy_ns = 0;      // cumulative busy time (commands take differences)
  uint64_t busy_bytes = 0;  // and the bytes acknowledged in it
  int64_t run_ns = 0;       // the current train
  uint64_t run_bytes = 0;
  double rate = 0;          // bytes per second: the fastest train (0: none yet)
  uint64_t rate_bytes = 0;  // that train's bytes
  void advanced(uint64_t bytes, int64_t t, int64_t rtt) {
    const int64_t gap = last_t < 0 ? -1 : t - last_t;
    last_t = t;
    if (gap < 0) return;
    if (gap <= rtt / tcp::link_train_gap_rtt_divisor) {
      run_ns += gap;
      run_bytes += bytes;
      if (run_bytes >= tcp::link_run_bytes_min && run_ns > 0) {
        const double r = double(run_bytes) * 1e9 / double(run_ns);
        if (r > rate) {
          rate = r;
          rate_bytes = run_bytes;
        }
      }
    } else {
      run_ns = 0;
      run_bytes = 0;
    }
    if (rate > 0 && gap <= rtt * tcp::link_busy_gap_rtts &&
        double(bytes) * 1e9 >= double(gap) * rate / tcp::link_busy_rate_divisor) {
      busy_ns += gap;
      busy_bytes += bytes;
    }
  }
};

// A TSval of this side at its first sight (RFC 7323): the peer echoes the latest it has received,
// so the peer's first segment echoing it left after it arrived (Tracker::echo).
struct TsFirst {
  uint32_t val = 0;
  int64_t t = 0;
  bool pure = false;  // it came on a segment without data
};

struct SmallSegment {
  uint64_t end = 0;
  uint32_t len = 0;
  int64_t t = 0;
  uint64_t frame = 0;
  Cookie progress;  // its delivery's
  bool acked = false;
  int64_t ack_t = 0;
  uint64_t ack_frame = 0;
  bool ack_pure = false;  // that ACK carried no data
};

class Flow {
public:
  // 32-bit wire sequence number to the 64-bit absolute space, relative to the latest position.
  uint64_t unwrap(uint32_t seq) const { return uint64_t(int64_t(ref_) + int32_t(seq - uint32_t(ref_))); }
  void anchor(uint32_t seq) {
    ref_ = (uint64_t(1) << 32) + seq;
    started = true;
    next = max_end = una = ref_;
  }
  void move_ref(uint64_t abs) { ref_ = abs; }

  bool started = false;  // we know where the byte stream is
  bool syn_seen = false;
  bool fin_seen = false;
  bool fin_acked = false;  // the peer acknowledged the FIN
  uint64_t next = 0;     // next byte expected in order
  uint64_t max_end = 0;  // highest sequence number sent + 1
  uint64_t una = 0;      // highest cumulative ACK from the peer
  bool una_known = false;

  uint32_t peer_window = 0;  // bytes the peer last advertised (scaled)
  bool peer_window_known = false;
  // The peer's window scale, known from both SYNs; without them a lower bound: the data this side
  // had in flight must have fitted the window (docs/rules.md "Window scale").
  bool peer_wscale_known = false;
  uint8_t peer_wscale_min = 0;
  uint32_t peer_window_raw = 0;  // as on the wire
  int8_t wscale_offered = -1;    // this side's own SYN option
  uint16_t mss = 0;              // largest segment this side may send
  bool mss_from_syn = false;
  uint32_t largest_payload = 0;
  uint8_t data_options_len = 0;  // TCP option bytes on the last data segment

  bool has_small = false;
  SmallSegment last_small;
  // The first short segment this side sent while its previous short one was unacknowledged,
  // sooner after it than any ACK of that one could have come back (Tracker::shows_nagle_off):
  // Nagle is off (0: not seen).
  uint64_t nagle_off_frame = 0;
  uint64_t data_segments = 0;       // new-data segments seen
  int64_t last_resend_t = INT64_MIN;  // the latest loss: a segment sent again, a hole or its fill

  int64_t last_data_t = 0;  // previous new-data segment from this side
  uint64_t last_data_frame = 0;

  LinkMeter link;                   // this side's data through the path, by the peer's ACKs
  // The same for every connection between these two hosts, in this direction (a link they
  // share: SessionRegistry::path); null: none (the registry's cap).
  LinkMeter* path = nullptr;
  util::Fifo<SentSegment> unacked;  // bounded by the window, capped by the tracker
  util::Fifo<AckRecord> acks;       // recent advancing ACKs, oldest first (see record_ack)
  util::Fifo<TsFirst> ts_firsts;    // this side's recent TSvals, each at its first sight
  int64_t last_payload_t = INT64_MIN;  // this side's latest segment with data
  // The latest timestamp this side's data echoed, and the frame of its latest data segment that
  // echoed a newer one than the data before it: an ACK reached it between the two
  // (rules::Holds::on_release).
  uint32_t data_echo = 0;
  bool data_echo_seen = false;
  uint64_t echo_moved_frame = 0;
  // The first kept ACK record with timestamp `val` (acks.size(): none). Timestamps only grow.
  size_t first_with_ts(uint32_t val) const {
    size_t lo = 0, hi = acks.size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (!acks[mid].has_ts || int32_t(acks[mid].tsval - val) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo < acks.size() && acks[lo].has_ts && acks[lo].tsval == val ? lo : acks.size();
  }
  struct Held {
    std::vector<uint8_t> bytes;
    int64_t t = 0;
    uint64_t frame = 0;
  };
  std::map<uint64_t, Held> out_of_order;  // start -> bytes
  size_t out_of_order_bytes = 0;
  int64_t hole_since = 0;  // capture time the current hole was first seen

  uint64_t bytes_missing = 0;

  // MSS to judge "small" by (docs/rules.md "MSS"). The SYN's MSS option does not count TCP options
  // in data segments (timestamps take 12 bytes: 1460 becomes 1448): the option less the options of
  // the last data segment; when the front-end gives no option length, a largest segment within 40
  // bytes below the option is the real maximum. Without a SYN: the size of the full segments seen
  // (sent with more data queued behind them: no PSH), unless it is a multiple of the Ethernet
  // standard (a TSO/GRO aggregate); else the Ethernet standard less the options seen. Never the
  // largest segment: on a host with TSO/GRO that is an aggregate, and with small I/O a PDU.
  uint32_t effective_mss() const {
    if (mss) {
      if (data_options_len && data_options_len < mss) return mss - data_options_len;
      if (largest_payload <= mss && largest_payload + 40 >= mss) return largest_payload;
      return mss;
    }
    const uint32_t standard = tcp::mss_standard - std::min<uint32_t>(data_options_len, 40);
    if (full_count >= tcp::mss_full_segments_min && !(full_min > standard && full_min % standard == 0))
      return full_min;
    return standard;
  }
  // Shorter than the MSS; a segment longer than the MSS (a TSO/GRO aggregate of wire segments) is
  // small when its last wire segment was.
  bool is_small(uint32_t len) const {
    const uint32_t m = effective_mss();
    return len < m || (len > m && len % m != 0);
  }
  const char* mss_source() const {
    if (mss) return "handshake";
    const uint32_t standard = tcp::mss_standard - std::min<uint32_t>(data_options_len, 40);
    if (full_count >= tcp::mss_full_segments_min && !(full_min > standard && full_min % standard == 0))
      return "full segments";
    return "Ethernet standard";
  }
  // The scale of the peer's windows: known, or the inferred lower bound.
  int peer_wscale(int8_t peer_offered, int8_t own_offered) const {
    if (!peer_wscale_known) return peer_wscale_min;
    return peer_offered >= 0 && own_offered >= 0 ? std::min<int>(peer_offered, 14) : 0;
  }
  uint64_t aggregates = 0;  // segments longer than the MSS (TSO/GRO at the capture point)
  // Of those, whole multiples of the MSS: TSO/GRO proven at that MSS (a longer segment with a
  // partial tail may else be one jumbo frame of an MSS the capture never showed).
  uint64_t aggregates_whole = 0;
  // A new-data segment without PSH: its sender had more data queued, so it was full.
  void saw_full(uint32_t len) {
    if (!full_min || len < full_min) {
      full_min = len;
      full_count = 0;
    }
    if (len == full_min) ++full_count;
  }
  uint32_t full_min = 0, full_count = 0;  // smallest full segment seen, and how often

  // The peer acknowledged up to `ack`: trims unacked segments; returns true if una advanced.
  bool acked(uint64_t ack, int64_t t, uint64_t frame);
  // Trims the unacked segments una covers (a segment captured after the ACK that covers it);
  // t and frame: that ACK's.
  void trim_acked(int64_t t, uint64_t frame);
  // Bytes the peer acknowledged that the capture has not shown yet: declared missing only once
  // they are still absent tcp::reorder_wait_ms after that ACK (tracker.cpp).
  uint64_t unseen_upto = 0;  // pending while > next
  int64_t unseen_t = 0;
  uint64_t unseen_frame = 0;
  // Records an ACK that moved the edge; forgets records older than `horizon` (capture time) but
  // the newest of those (the edge in force), keeping at most kMaxAckRecords.
  void record_ack(const AckRecord& r, int64_t horizon);
  // The edge an ACK offered (ack + window): its window scaled as known, or by the lower bound the
  // data in flight proves now (docs/rules.md "Window scale").
  uint64_t edge(const AckRecord& a) const {
    return a.ack + (peer_wscale_known ? a.window : uint64_t(a.raw_window) << peer_wscale_min);
  }
  // The first kept ACK whose edge takes in `end` (acks.size(): none). Edges only grow (a receiver
  // does not shrink its window), so a binary search: it runs for every segment of a flight.
  size_t first_opening(uint64_t end) const {
    size_t lo = 0, hi = acks.size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (edge(acks[mid]) < end)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  }
  // The end of a segment's first wire segment (of a TSO/GRO aggregate, the rest may have left on
  // later ACKs): what a window must take in for the segment to leave.
  uint64_t first_wire_end(uint32_t seq, uint32_t len) const {
    return unwrap(seq) + std::min<uint64_t>(len, effective_mss());
  }
  // The link this side's data crosses: shared with the other connections between the two hosts
  // when there is such a meter, else this connection's own.
  const LinkMeter& link_meter() const { return path ? *path : link; }
  Cookie acked_progress;  // the latest non-empty progress cookie of the data acknowledged
  int64_t acked_data_t = 0;  // the latest segment acknowledged in full
  uint64_t acked_data_frame = 0;
  static constexpr size_t kMaxAckRecords = 4096;

private:
  uint64_t ref_ = 0;
};

// Minimum-filtered round-trip estimate between the capture point and one side, and the path's
// jitter: how far the latest samples spread above that minimum (docs/rules.md "Holds").
class RttEstimate {
public:
  // `clean`: the ACK carried no data (a pure ACK or the handshake), so the sample holds no
  // answer time of the side's application (a reply's ACK rides on it after the think time).
  // `prompt`: nor a delayed-ACK timer's or a late read's wait: a handshake, or a pure ACK of more
  // than one full segment, which a receiver sends at once.
  void sample(int64_t ns, bool from_handshake = false, bool clean = true, bool prompt = true) {
    // Past TCP's longest retransmission timeout a gap is not a round trip (timestamps are input:
    // bounding the estimate keeps every product of it in range).
    if (ns < 0 || ns > to_ns(tcp::rtt_max_ms)) return;
    if (from_handshake) handshake_ = true;
    if (clean) ++clean_samples_;
    if (clean && prompt) ++prompt_samples_;
    if (!known_ || ns < min_) {
      min_ = ns;
      nagle_bound_ = false;
      min_clean_ = clean;
    }
    known_ = true;
    ++samples_;
    recent_[ring_++ % tcp::jitter_window] = ns;
  }
  bool known() const { return known_; }
  int64_t ns() const { return known_ ? min_ : 0; }
  uint64_t samples() const { return samples_; }
  uint64_t clean_samples() const { return clean_samples_; }
  bool from_handshake() const { return handshake_; }
  // A sample from data the side sent after it received the pure ACK whose timestamp it echoes
  // (Tracker::echo): a release, no answer to data, so the path's spread too. Not counted as a
  // sample of the ACKs (probation waits for those).
  void released(int64_t ns) {
    if (ns < 0 || ns > to_ns(tcp::rtt_max_ms)) return;
    if (!known_ || ns <= min_) {
      min_ = ns;
      released_ = true;
    }
    known_ = true;
    recent_[ring_++ % tcp::jitter_window] = ns;
  }
  // A short segment that followed the side's previous short one in its stream and left `after`
  // the pure ACK covering that one, `since` after it (Tracker::payload): were Nagle on, the ACK
  // released it, and `after` bounds rtt(S). Taken once the releases show it (docs/rules.md
  // "Nagle releases"): returns true when that lowered the estimate.
  bool nagle_release(int64_t after, int64_t since);
  // The minimum came from such releases, a handshake or pure ACKs that were not delayed: not only
  // an upper bound that may hold the side's answer time or a delayed ACK.
  bool tight() const { return handshake_ || prompt_samples_ || released_; }
  // Only an upper bound, which may hold a delayed ACK or the side's answer time: neither tight nor
  // from the releases of a Nagle the stream never showed off (those time holds, never prove Nagle off).
  bool upper_bound_only() const { return !tight() && !nagle_bound_; }
  // Only an upper bound whose least sample was a pure ACK: it may hold a delayed-ACK timer's wait,
  // tens to hundreds of milliseconds, not the side's answer (docs/rules.md think_or_network).
  bool bound_by_pure_acks() const { return upper_bound_only() && min_clean_; }
  // Only an upper bound that may hold more than the path: the side's answer time (ACKs on data) or
  // a delayed-ACK timer's wait (pure ACKs as late as one): the side's own time, or the network's.
  bool may_hold_side_time(int64_t delayed_ack_min_ns) const {
    return upper_bound_only() && (!min_clean_ || min_ >= delayed_ack_min_ns);
  }
  // Where the estimate comes from (docs/rules.md "Joined connections"): only ACKs that rode on
  // data, or pure ACKs of a segment or less (delayed-ACK timer), make it an upper bound, which may
  // hold the side's answer time.
  const char* source() const {
    return handshake_             ? "handshake"
           : released_            ? "echoed timestamps"
           : prompt_samples_      ? "pure ACKs"
           : nagle_bound_         ? "Nagle releases"
           : clean_samples_       ? "pure ACKs that may be delayed"
           : samples_             ? "ACKs on data"
                                  : "";
  }
  // The jitter percentile of the latest samples' excess over the minimum, counting only excesses
  // below jitter_excess_max_ms (beyond are delayed ACKs, not the path); 0 with too few such
  // samples. (The caller bounds it by the RTT: on a LAN the excess is think
  // time, not jitter.)
  int64_t jitter_ns(size_t percentile = tcp::jitter_percentile) const {
    return jitter_ns(percentile, percentile).first;
  }
  // Two percentiles of the same samples, from one pass over them.
  std::pair<int64_t, int64_t> jitter_ns(size_t percentile, size_t other) const {
    std::array<int64_t, tcp::jitter_window> ex;
    size_t n = 0;
    const size_t have = size_t(std::min<uint64_t>(ring_, tcp::jitter_window));
    const int64_t cap = std::max(to_ns(tcp::jitter_excess_max_ms), min_ / tcp::jitter_rtt_divisor);
    // The largest three kept on the way (asked for per held segment: the rules' percentiles of a
    // window this size are among them; a selection only for others).
    std::array<int64_t, 3> top{};
    for (size_t i = 0; i < have; ++i) {
      const int64_t e = recent_[i] - min_;
      if (e > cap) continue;
      ex[n++] = e;
      if (n <= 3 || e > top[2]) {
        size_t j = std::min<size_t>(n, 3) - 1;
        for (; j > 0 && top[j - 1] < e; --j)
          top[j] = top[j - 1];
        top[j] = e;
      }
    }
    if (n < tcp::jitter_samples_min) return {0, 0};
    const auto at = [&](size_t p) {
      const size_t k = (n - 1) * p / 100;
      if (n - 1 - k < top.size()) return top[n - 1 - k];
      std::nth_element(ex.begin(), ex.begin() + ptrdiff_t(k), ex.begin() + ptrdiff_t(n));
      return ex[k];
    };
    const int64_t first = at(percentile);
    return {first, other == percentile ? first : at(other)};
  }

private:
  int64_t min_ = 0;
  bool known_ = false, handshake_ = false, released_ = false, nagle_bound_ = false;
  bool min_clean_ = false;  // the least sample came from a pure ACK
  uint64_t samples_ = 0, clean_samples_ = 0, prompt_samples_ = 0, ring_ = 0;
  std::array<int64_t, tcp::jitter_window> recent_{};
  // The latest Nagle releases (after, since), oldest first overwritten.
  std::array<std::pair<int64_t, int64_t>, tcp::nagle_release_window> nagle_{};
  size_t nagle_count_ = 0;
};

}  // namespace iscsi_doctor::tcp
