// SPDX-License-Identifier: GPL-2.0-or-later
// retransmission (docs/rules.md "Other findings"): a segment resent after a loss, before or after
// the capture point.
#include <algorithm>
#include <cstdint>
#include <string>

#include "rules/constants.hpp"
#include "session/connection.hpp"
#include "util/units.hpp"

namespace iscsi_doctor::session {

// A segment fills a hole in the stream: the original was lost before the capture point.
void Connection::hole_filled(int dir, const Segment& seg, int64_t since) {
  uint32_t slot = current_pdu_slot_[dir];
  OpenCommand* c = slot && slots_[slot].used ? &slots_[slot] : nullptr;
  Finding fd = finding(FindingKind::retransmission, side_of(dir), seg.frame, ms(seg.time_ns - since), c);
  fd.detail = "retransmission fills a hole: the original was lost before the capture point";
  if (c) {
    c->loss_pending_ms += fd.lost_ms;
    c->h_initiator += dir == kI2T ? 2 : 0;
    c->h_target += dir == kT2I ? 2 : 0;
    add_finding_kind(*c, FindingKind::retransmission);
    if (tracer_) trace_path(dir, seg.frame, *c);
  }
  emit_finding(std::move(fd));
}

bool Connection::near(int side_dir) const {
  return tcp_.rtt(kI2T).known() && tcp_.rtt(kT2I).known() &&
         full_rtt_ns() >= rules::ns(rules::vantage_min_rtt_ms) &&
         rtt_ns(side_dir) * rules::near_initiator_rtt_factor < full_rtt_ns();
}

void Connection::spurious_resend(uint64_t frame, bool dsack) {
  if (dsack) {
    if (dsack_resends_++ == 0) first_dsack_frame_ = frame;
  } else if (spurious_resends_++ == 0) {
    first_spurious_frame_ = frame;
  }
}

// seg resends bytes already seen (the tracker found the original, or says it is no longer kept).
void Connection::resent(int dir, const Segment& seg, const tcp::SentSegment* orig) {
  // Captured near the receiver, the original was seen arriving: the receiver had it, so the resend
  // is spurious (a tail-loss probe, an early timeout), no loss; the wait before it stays what it was.
  if (orig && near(dir ^ 1)) {
    spurious_resend(seg.frame, false);
    return;
  }
  // Elsewhere a resend of the sender's latest bytes (a tail-loss probe, a timeout) waits for the
  // receiver's ACK that covers it: a D-SACK for it says the original had arrived.
  const tcp::Flow& f = tcp_.flow(dir);
  const uint64_t start = f.unwrap(seg.seq), end = start + seg.payload_wire_len;
  if (orig && end >= f.max_end && pending_resends_.size() < kMaxPendingResends) {
    pending_resends_.push_back({dir, seg.frame, seg.time_ns, start, end, *orig});
    return;
  }
  report_resend(dir, seg.frame, seg.time_ns, orig);
}

// seg from dir: its ACK settles the other direction's pending resends it covers, as spurious when
// it carries a D-SACK of them or left the receiver before the resend could have reached it (the
// original had arrived); all: the rest (the capture ended) are reported as resends.
void Connection::settle_resends(const Segment& seg, int dir, bool all) {
  auto p = pending_resends_.begin();
  while (p != pending_resends_.end()) {
    bool settled = all;
    if (!all && p->dir == (dir ^ 1) && (seg.flags & tcp_flag::ack)) {
      const tcp::Flow& f = tcp_.flow(p->dir);
      const uint64_t ack = f.unwrap(seg.ack);
      if (seg.sack_left != seg.sack_right) {
        const uint64_t l = f.unwrap(seg.sack_left), r = f.unwrap(seg.sack_right);
        if (l < ack && l < p->end && r > p->start) {  // a D-SACK of these bytes (RFC 2883)
          spurious_resend(p->frame, true);
          p = pending_resends_.erase(p);
          continue;
        }
      }
      settled = ack >= p->end;
      // Sooner than the receiver's round trip (less the timing noise; jitter only delays), the ACK
      // cannot answer the resend. Only a round trip measured on the handshake is proof: samples
      // taken later are upper bounds (think time, delayed ACKs), so the resend waits on, for a
      // D-SACK or an ACK a round trip after it.
      if (settled && rtt_ns(dir) > 0 &&
          seg.time_ns - p->t + rules::ns(rules::release_tolerance_ms) < rtt_ns(dir)) {
        if (tcp_.rtt(dir).from_handshake()) {
          spurious_resend(p->frame, true);
          p = pending_resends_.erase(p);
          continue;
        }
        settled = false;
      }
    }
    if (settled) {
      report_resend(p->dir, p->frame, p->t, &p->orig);
      p = pending_resends_.erase(p);
    } else {
      ++p;
    }
  }
}

void Connection::report_resend(int dir, uint64_t frame, int64_t t, const tcp::SentSegment* orig) {
  Finding fd = finding(FindingKind::retransmission, side_of(dir), frame, 0, nullptr);
  if (orig) {
    fd.related.emplace_back("original", orig->frame);
    fd.lost_ms = ms(t - orig->t);
    if (orig->cmd) {  // named even when the command completed before its data was resent
      fd.itt = orig->itt;
      fd.command_first_frame = orig->cmd;
    }
    // The command in the owner's slot, if it is still the one that sent the segment.
    if (orig->owner && slots_[orig->owner].used && slots_[orig->owner].r.first_frame == orig->owner_cmd) {
      OpenCommand& c = slots_[orig->owner];
      fd.itt = c.r.itt;
      fd.command_first_frame = c.r.first_frame;
      // (A settling command's status was captured before this resend, near the target: its
      // latency stays as captured; the round trip it cost the initiator counts below.)
      if (!c.settling) c.loss_pending_ms += fd.lost_ms;
      (dir == kI2T ? c.h_initiator : c.h_target) += 2;
      add_finding_kind(c, FindingKind::retransmission);
      if (tracer_) trace_path(dir, frame, c);
    }
  }
  fd.detail = "segment sent again after " + whole_ms(fd.lost_ms) + " ms";
  emit_finding(std::move(fd));
}

}  // namespace iscsi_doctor::session
