// SPDX-License-Identifier: GPL-2.0-or-later
// Holds (docs/rules.md "Holds"): a segment that was ready earlier and left only when an ACK from
// the peer released it: nagle_hold, cwnd_limited, rwnd_limited, and delayed_ack when that ACK was
// late; their time on the command's critical path, and the half trips of a release.
#include "rules/holds.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "rules/constants.hpp"
#include "session/constants.hpp"
#include "session/delivery.hpp"
#include "tcp/constants.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::rules {

namespace {
// A congestion window is at least two segments (RFC 5681; Linux after idle keeps the smaller of
// its window and the initial one), one only after a retransmission timeout or in a loss's
// recovery: with at most one segment in flight when the release reached the sender (the ones the
// capture point saw unacknowledged before it, and any it saw after it from the sender before this
// one), outside recovery, no window of the sender held this segment. Aggregates (TSO/GRO) hold
// several segments each: not counted here.
bool cwnd_could_hold(const tcp::Flow& f, const tcp::AckRecord& rel, int64_t now, int64_t full_rtt) {
  if (f.aggregates) return true;
  if (f.last_resend_t != INT64_MIN && now - f.last_resend_t < to_ns(cwnd_recovery_ms) + cwnd_recovery_rtts * full_rtt)
    return true;
  return f.data_segments - rel.out_of_flight >= 2;
}
}  // namespace

HoldVerdict classify_hold(const tcp::Flow& f, const tcp::RttEstimate& sender, const tcp::RttEstimate& receiver,
                          bool sender_is_target, double delayed_ack_min_ms, const Segment& seg, int64_t ready) {
  // A segment that was ready earlier and shows up one capture-to-sender round trip after an
  // ACK from the peer was released by that ACK (docs/rules.md "Holds").
  HoldVerdict v;
  if (!sender.known()) return v;
  const int64_t rtt_side = sender.ns(), rtt_receiver = receiver.ns();
  const int64_t full_rtt = rtt_side + rtt_receiver;
  // Jitter only delays: a release may come later than rtt(S) by the path's measured jitter, which
  // the path between the capture point and S bounds (at S's own host there is no path to delay
  // the ACK: the excess of its samples is S's answer time).
  const int64_t bound = std::min(full_rtt / tcp::jitter_rtt_divisor, rtt_side);
  const auto [jitter, nagle_jitter] = sender.jitter_ns(tcp::jitter_percentile, nagle_jitter_percentile);
  const int64_t tol = session::release_tolerance_ns(full_rtt), late = tol + std::min(jitter, bound);
  // A Nagle hold has its proof in the stream (the earlier partial segment was unacknowledged when
  // this one was ready, so it could not leave before the ACK reached S): its release may come as
  // late as the path's largest recent round trip, not only its usual spread.
  const int64_t nagle_late = tol + std::min(nagle_jitter, bound);
  // How late the path alone may bring the receiver's ACK (its largest recent round trip, within the
  // same bounds): an ACK later than its round trip by no more is not proven delayed.
  const int64_t receiver_jitter = std::min(receiver.jitter_ns(nagle_jitter_percentile),
                                           std::min(full_rtt / tcp::jitter_rtt_divisor, rtt_receiver));
  // rtt(S) measured only from ACKs that rode on S's data is an upper bound (S's answer time may be
  // in every sample): with the capture point near S (that bound a small part of the path's round
  // trip) a release may come as soon as just after the ACK.
  const tcp::RttEstimate& est = sender;
  const int64_t early = !est.tight() &&
                                rtt_side * session::wait_min_rtt_divisor < full_rtt
                            ? std::max(tol, rtt_side)
                            : tol;
  auto released_within = [&](int64_t ack_t, int64_t upto, int64_t soonest = -1) {
    const int64_t e = soonest < 0 ? early : soonest;  // how much sooner than rtt(S) after the ACK
    const int64_t d = seg.time_ns - (ack_t + rtt_side);
    return d >= -e && d <= upto && ack_t + rtt_side - e + tol > ready;
  };
  // ACK causality by timestamps (RFC 7323): a segment echoing the ACK's timestamp or a later one
  // left after that ACK reached its sender, however late the path brought it; only the earliest
  // the release can be seen is timing's.
  auto echoes = [&](const tcp::AckRecord& a) {
    return a.has_ts && seg.has_timestamps && int32_t(seg.tsecr - a.tsval) >= 0 &&
           released_within(a.t, seg.time_ns - a.t);
  };
  uint32_t len = seg.payload_wire_len;
  const tcp::SmallSegment& small = f.last_small;
  // Nagle holds one partial segment: a TSO/GRO aggregate carries full segments that Nagle would
  // have sent, so its wait is the window's (Linux defers TSO sends). A segment longer than the
  // MSS is such an aggregate once the flow has shown whole-multiple ones; before, it may be one
  // jumbo frame of a larger MSS than the one inferred, and is judged by its tail.
  const bool nagle_candidate = len < f.effective_mss() || (f.aggregates_whole == 0 && f.is_small(len));
  if (!f.nagle_off_frame && f.has_small && small.acked && small.frame != seg.frame && nagle_candidate &&
      released_within(small.ack_t, nagle_late)) {
    // Nagle (Minshall's variant, as in Linux): a partial segment waits while the previous
    // partial segment is unacknowledged.
    v.held = true;
    v.kind = FindingKind::nagle_hold;
    v.release_frame = small.ack_frame;
    v.acked_frame = small.frame;
    v.release_progress = small.progress;
    // Delayed ACK: the receiver sat on the ACK beyond its round trip from the capture point, by
    // more than the path's jitter could have delayed it.
    int64_t ack_delay = small.ack_t - small.t - rtt_receiver;
    if (ms(ack_delay - receiver_jitter) >= delayed_ack_min_ms) v.delayed_ack_ms = ms(ack_delay);
    return v;
  }
  // Window holds: released by the first ACK that could have reached the sender when this segment
  // left, not always the latest one captured (near the receiver, later ACKs of the same flight
  // pass the capture point before the released data comes back). An ACK that fits a steady path
  // first; only without one a later ACK within the path's jitter (else jitter would hand the
  // release to an earlier ACK of the flight).
  auto first_release = [&](int64_t upto) {
    size_t i = f.acks.size();
    while (i > 0 && f.acks[i - 1].t + rtt_side + upto >= seg.time_ns)
      --i;
    for (; i < f.acks.size() && !released_within(f.acks[i].t, upto); ++i) {
    }
    return i;
  };
  // Window arithmetic first: where the sender stopped at the edge an ACK had offered (this segment
  // starts within a segment of it) and this segment lies past it, the first ACK that opened the
  // window past it released it, if the path's bounds let it reach the sender by then (near the
  // receiver the later ACKs of the flight pass the capture point before the data comes back).
  const uint64_t seg_start = f.unwrap(seg.seq);
  size_t i = f.first_opening(f.first_wire_end(seg.seq, seg.payload_wire_len));
  const bool at_edge = i > 0 && i < f.acks.size() && seg_start <= f.edge(f.acks[i - 1]) &&
                       seg_start + f.effective_mss() > f.edge(f.acks[i - 1]);
  const size_t at_edge_i = i;
  if (!(at_edge && (released_within(f.acks[i].t, late) || echoes(f.acks[i])))) {
    i = first_release(tol);
    if (i == f.acks.size() && late > tol) i = first_release(late);
  }
  if (i == f.acks.size()) {
    // Beyond what the path has shown, within the most it may add (the bound): an ACK this wait had
    // to follow (the Nagle invariant, a window's edge) still fits. Away from the target only: at
    // its host the ACK's arrival is seen. When rtt(S) is only an upper bound (its ACKs may have
    // been delayed or ridden on its replies), the round trip may be any shorter, and so may the
    // release: down to just after the ACK.
    const int64_t most = tol + bound;
    const bool upper_bound = sender.upper_bound_only();
    auto may_follow = [&](int64_t ack_t) {
      return released_within(ack_t, most, upper_bound ? rtt_side : -1);
    };
    if (sender_is_target && (most > std::max(late, nagle_late) || upper_bound)) {
      if (!f.nagle_off_frame && f.has_small && small.acked && small.frame != seg.frame && nagle_candidate &&
          may_follow(small.ack_t)) {
        v.undecided = true;
        v.release_frame = small.ack_frame;
      } else if (at_edge && may_follow(f.acks[at_edge_i].t)) {
        v.undecided = true;
        v.release_frame = f.acks[at_edge_i].frame;
      }
    }
    return v;
  }
  const tcp::AckRecord& rel = f.acks[i];
  v.held = true;
  v.release_frame = rel.frame;
  v.release_progress = rel.progress;
  // The release may itself have been held by the receiver's delayed-ACK timer (an odd segment
  // at the end of a flight): measured as for Nagle holds.
  const bool acknowledged_more = i == 0 || rel.ack > f.acks[i - 1].ack;  // not a window update
  if (rel.data_frame && acknowledged_more) {
    int64_t ack_delay = rel.t - rel.data_t - rtt_receiver;
    if (ms(ack_delay - receiver_jitter) >= delayed_ack_min_ms) {
      v.delayed_ack_ms = ms(ack_delay);
      v.acked_frame = rel.data_frame;
    }
  }
  // The edge in force until the release: data that came within a quarter window (at least one
  // segment) of it means the receiver's window held the sender, not the congestion window
  // (senders do not split their bursts to fill a nearly full window: Linux defers TSO then). With
  // the window scale unknown (no SYNs) the edge is the lower bound the data in flight proves by
  // now (an ACK recorded before the bound rose would understate its window). Data sent past that
  // edge before this segment proves it was not in force: no receive-window stall is proven.
  const tcp::AckRecord* before = i > 0 ? &f.acks[i - 1] : nullptr;
  const uint64_t window = before ? f.edge(*before) - before->ack : 0;
  if (before && f.unwrap(seg.seq) <= before->ack + window &&
      f.max_end + std::max<uint64_t>(f.effective_mss(), window / rwnd_edge_window_divisor) >
          before->ack + window)
    v.kind = FindingKind::rwnd_limited;
  else if (cwnd_could_hold(f, rel, seg.time_ns, full_rtt))
    v.kind = FindingKind::cwnd_limited;
  else
    v = HoldVerdict{};  // nothing in flight to hold it: a coincidence of timing (S's own time)
  return v;
}

// A held segment: nagle_hold, cwnd_limited or rwnd_limited on its sender, and delayed_ack on the
// peer when the releasing ACK was itself late; kept with the command until it is reported.
void Holds::report(FindingOut& out, int dir, const Segment& seg, OpenCommand& c, const HoldVerdict& verdict,
                   double held_ms) const {
  Finding fd = out.finding(verdict.kind, session::side_of(dir), seg.frame, held_ms, &c);
  fd.related.reserve(2);
  fd.related.emplace_back("released_by", verdict.release_frame);
  if (verdict.acked_frame) fd.related.emplace_back("previous_small", verdict.acked_frame);
  fd.detail = verdict.kind == FindingKind::nagle_hold
                  ? "sub-MSS segment held until the peer acknowledged the previous one"
              : verdict.kind == FindingKind::rwnd_limited
                  ? "sender waited for the receiver's window to open"
                  : "sender waited for ACKs to grow its congestion window";
  c.held_findings.push_back(std::move(fd));  // given with the command (rules/link_limited.cpp)
  if (verdict.delayed_ack_ms > 0) {
    Finding da = out.finding(FindingKind::delayed_ack, session::side_of(dir ^ 1), verdict.release_frame,
                         std::min(verdict.delayed_ack_ms, held_ms), &c);
    da.related.reserve(2);
    da.related.emplace_back("acks", verdict.acked_frame);
    da.related.emplace_back("released", seg.frame);
    da.detail = "ACK sent " + whole_ms(verdict.delayed_ack_ms) +
                " ms late by the delayed-ACK timer while the peer waited";
    c.held_findings.push_back(std::move(da));
  }
}

// The hold's time on the critical path (docs/rules.md "The critical path").
int64_t Holds::on_wait(const ConnectionView& v, FindingOut& out, int dir, const Segment& seg, OpenCommand& c,
                       int64_t ready, int64_t rest, HoldVerdict& verdict) const {
  if (!verdict.reported) {
    verdict = classify_hold(v.flow(dir), v.tcp.rtt(dir), v.tcp.rtt(dir ^ 1), dir == kT2I,
                            v.options.delayed_ack_min_ms, seg, ready);
    verdict.reported = true;
    if (verdict.held) report(out, dir, seg, c, verdict, ms(rest));
  }
  if (verdict.undecided) {
    c.undecided_ms += ms(rest);
    c.undecided_ack_frame = verdict.release_frame;
  }
  if (!verdict.held) return rest;
  Breakdown& bd = c.r.breakdown;
  double held_ms = ms(rest);
  double dack = std::min(verdict.delayed_ack_ms, held_ms);
  bd.delayed_ack_ms += dack;
  (verdict.kind == FindingKind::nagle_hold ? bd.nagle_ms : bd.window_ms) += held_ms - dack;
  if (verdict.kind != FindingKind::nagle_hold)
    (verdict.kind == FindingKind::cwnd_limited ? bd.cwnd_ms : bd.rwnd_ms) += held_ms - dack;
  add_finding_kind(c, verdict.kind);
  if (dack > 0) add_finding_kind(c, FindingKind::delayed_ack);
  // Two crossings after the data the releasing ACK acknowledged: that ACK's, and this one's.
  // (Data of another command says nothing of this one's progress: then on top of it.)
  int32_t& h = dir == kI2T ? c.h_initiator : c.h_target;
  const int32_t h_before = h;
  const session::Progress rel = session::progress_of(verdict.release_progress);
  h = rel.h >= 0 && rel.cmd == c.r.first_frame ? std::max(h, rel.h + 2) : h + 2;
  c.held_h += h - h_before;
  return 0;
}

void Holds::on_release(const ConnectionView& v, int dir, const Segment& seg, OpenCommand& c) const {
  window_edge_half_trips(v, dir, seg, c);
  echo_half_trips(v, dir, seg, c);
}

// Window arithmetic (docs/rules.md "Round trips"): more of a flight that lies past the edge the
// ACKs had offered when its command's data began to flow could leave only once an ACK opening
// that far reached the sender; without a wait of its own (its flight went on from a hold released
// earlier) it still counts that ACK's crossings.
void Holds::window_edge_half_trips(const ConnectionView& v, int dir, const Segment& seg, OpenCommand& c) const {
  const tcp::Flow& f = v.flow(dir);
  if (!v.tcp.rtt(dir).known()) return;
  const size_t i = f.first_opening(f.first_wire_end(seg.seq, seg.payload_wire_len));
  if (i == f.acks.size()) return;
  release_half_trips(v, dir, seg, c, f.acks[i]);  // the first ACK that opened the window this far
}

// ACK causality by timestamps (docs/rules.md "Round trips"): a data segment that echoes a newer
// timestamp than the data segment before it left after an ACK reached its sender in between; had
// it been sendable before, it would have left right behind that one. So that ACK (the first with
// the echoed timestamp, at the least) released it: two crossings after the data it acknowledged.
void Holds::echo_half_trips(const ConnectionView& v, int dir, const Segment& seg, OpenCommand& c) const {
  const tcp::Flow& f = v.flow(dir);
  if (!seg.has_timestamps || f.echo_moved_frame != seg.frame || !v.tcp.rtt(dir).known()) return;
  const size_t i = f.first_with_ts(seg.tsecr);
  if (i < f.acks.size()) release_half_trips(v, dir, seg, c, f.acks[i]);
}

// A segment released by ACK a without a wait of its own: two crossings after the data a
// acknowledged, when that was this command's and a could have reached the sender by then.
void Holds::release_half_trips(const ConnectionView& v, int dir, const Segment& seg, OpenCommand& c,
                               const tcp::AckRecord& a) const {
  const session::Progress p = session::progress_of(a.progress);
  if (p.h < 0 || p.cmd != c.r.first_frame || a.t + v.rtt_ns(dir) - v.tolerance_ns() > seg.time_ns) return;
  int32_t& h = dir == kI2T ? c.h_initiator : c.h_target;
  if (p.h + 2 > h) {
    c.held_h += p.h + 2 - h;  // as a hold's (a link-bound command takes them back)
    h = p.h + 2;
  }
}

}  // namespace iscsi_doctor::rules
