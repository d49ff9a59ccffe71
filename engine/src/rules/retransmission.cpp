// SPDX-License-Identifier: GPL-2.0-or-later
// retransmission (docs/rules.md "Other findings"): a segment resent after a loss, before or after
// the capture point.
#include "rules/retransmission.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "rules/constants.hpp"
#include "session/constants.hpp"
#include "session/delivery.hpp"
#include "tcp/constants.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::rules {

// A segment fills a hole in the stream: the original was lost before the capture point.
void Retransmission::hole_filled(const ConnectionView& v, FindingOut& out, int dir, const Segment& seg,
                                 int64_t since, OpenCommand* c) const {
  Finding fd = out.finding(FindingKind::retransmission, session::side_of(dir), seg.frame, ms(seg.time_ns - since), c);
  fd.detail = "retransmission fills a hole: the original was lost before the capture point";
  if (c) {
    c->loss_pending_ms += fd.lost_ms;
    c->h_initiator += dir == kI2T ? 2 : 0;
    c->h_target += dir == kT2I ? 2 : 0;
    add_finding_kind(*c, FindingKind::retransmission);
    if (v.tracer) v.trace_path(dir, seg.frame, *c);
  }
  out.emit_finding(std::move(fd));
}

void Retransmission::spurious(uint64_t frame, bool dsack) {
  if (dsack) {
    if (dsack_++ == 0) first_dsack_frame_ = frame;
  } else if (spurious_++ == 0) {
    first_spurious_frame_ = frame;
  }
}

// seg resends bytes already seen (the tracker found the original, or says it is no longer kept).
void Retransmission::resent(const ConnectionView& v, FindingOut& out, session::CommandTable& commands, int dir,
                            const Segment& seg, const tcp::SentSegment* orig) {
  // Captured near the receiver, the original was seen arriving: the receiver had it, so the resend
  // is spurious (a tail-loss probe, an early timeout), no loss; the wait before it stays what it was.
  if (orig && v.near(dir ^ 1)) {
    spurious(seg.frame, false);
    return;
  }
  // Elsewhere a resend of the sender's latest bytes (a tail-loss probe, a timeout) waits for the
  // receiver's ACK that covers it: a D-SACK for it says the original had arrived.
  const tcp::Flow& f = v.flow(dir);
  const uint64_t start = f.unwrap(seg.seq), end = start + seg.payload_wire_len;
  if (orig && end >= f.max_end && pending_.size() < kMaxPending) {
    pending_.push_back({dir, seg.frame, seg.time_ns, start, end, *orig});
    return;
  }
  report(v, out, commands, dir, seg.frame, seg.time_ns, orig);
}

// seg from dir: its ACK settles the other direction's pending resends it covers, as spurious when
// it carries a D-SACK of them or left the receiver before the resend could have reached it (the
// original had arrived); all: the rest (the capture ended) are reported as resends.
void Retransmission::settle(const ConnectionView& v, FindingOut& out, session::CommandTable& commands,
                            const Segment& seg, int dir, bool all) {
  auto p = pending_.begin();
  while (p != pending_.end()) {
    bool settled = all;
    if (!all && p->dir == (dir ^ 1) && (seg.flags & tcp_flag::ack)) {
      const tcp::Flow& f = v.flow(p->dir);
      const uint64_t ack = f.unwrap(seg.ack);
      if (seg.sack_left != seg.sack_right) {
        const uint64_t l = f.unwrap(seg.sack_left), r = f.unwrap(seg.sack_right);
        if (l < ack && l < p->end && r > p->start) {  // a D-SACK of these bytes (RFC 2883)
          spurious(p->frame, true);
          p = pending_.erase(p);
          continue;
        }
      }
      settled = ack >= p->end;
      // Sooner than the receiver's round trip (less the timing noise; jitter only delays), the ACK
      // cannot answer the resend. Only a round trip measured on the handshake is proof: samples
      // taken later are upper bounds (think time, delayed ACKs), so the resend waits on, for a
      // D-SACK or an ACK a round trip after it.
      if (settled && v.rtt_ns(dir) > 0 &&
          seg.time_ns - p->t + to_ns(session::release_tolerance_ms) < v.rtt_ns(dir)) {
        if (v.tcp.rtt(dir).from_handshake()) {
          spurious(p->frame, true);
          p = pending_.erase(p);
          continue;
        }
        settled = false;
      }
    }
    if (settled) {
      report(v, out, commands, p->dir, p->frame, p->t, &p->orig);
      p = pending_.erase(p);
    } else {
      ++p;
    }
  }
}

void Retransmission::report(const ConnectionView& v, FindingOut& out, session::CommandTable& commands, int dir,
                            uint64_t frame, int64_t t, const tcp::SentSegment* orig) const {
  Finding fd = out.finding(FindingKind::retransmission, session::side_of(dir), frame, 0, nullptr);
  if (orig) {
    fd.related.emplace_back("original", orig->frame);
    fd.lost_ms = ms(t - orig->t);
    const session::Progress sent = session::progress_of(orig->progress);
    if (sent.cmd) {  // named even when the command completed before its data was resent
      fd.itt = sent.itt;
      fd.command_first_frame = sent.cmd;
    }
    // The command in the owner's slot, if it is still the one that sent the segment.
    const session::Owner owner = session::owner_of(orig->owner);
    if (owner.slot && commands[owner.slot].used && commands[owner.slot].r.first_frame == owner.cmd) {
      OpenCommand& c = commands[owner.slot];
      fd.itt = c.r.itt;
      fd.command_first_frame = c.r.first_frame;
      // (A settling command's status was captured before this resend, near the target: its
      // latency stays as captured; the round trip it cost the initiator counts below.)
      if (!c.settling) c.loss_pending_ms += fd.lost_ms;
      (dir == kI2T ? c.h_initiator : c.h_target) += 2;
      add_finding_kind(c, FindingKind::retransmission);
      if (v.tracer) v.trace_path(dir, frame, c);
    }
  }
  fd.detail = "segment sent again after " + whole_ms(fd.lost_ms) + " ms";
  out.emit_finding(std::move(fd));
}

void Retransmission::finish(FindingOut& out) const {
  const auto said = [&](uint64_t n, uint64_t first, const char* why) {
    if (n)
      out.notice(Notice::Level::info, first,
                 std::to_string(n) + (n == 1 ? " segment" : " segments") + " resent although " + why +
                     "first at frame " + std::to_string(first) +
                     "): spurious retransmissions (tail-loss probes, early timeouts), not counted as loss");
  };
  said(spurious_, first_spurious_frame_, "the capture point, near the receiver, saw the original arrive (");
  said(dsack_, first_dsack_frame_,
       "the receiver had the original (its ACK carried a D-SACK, or left it before the resend could "
       "have arrived; ");
}

}  // namespace iscsi_doctor::rules
