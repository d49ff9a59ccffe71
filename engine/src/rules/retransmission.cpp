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

// seg resends bytes already seen (the tracker found the original, or says it is no longer kept).
void Connection::resent(int dir, const Segment& seg, const tcp::SentSegment* orig) {
  // Captured near the receiver, the original was seen arriving: the receiver had it, so the resend
  // is spurious (a tail-loss probe, an early timeout), no loss; the wait before it stays what it was.
  if (orig && near(dir ^ 1)) {
    if (spurious_resends_++ == 0) first_spurious_frame_ = seg.frame;
    return;
  }
  Finding fd = finding(FindingKind::retransmission, side_of(dir), seg.frame, 0, nullptr);
  if (orig) {
    fd.related.emplace_back("original", orig->frame);
    fd.lost_ms = ms(seg.time_ns - orig->t);
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
      if (tracer_) trace_path(dir, seg.frame, c);
    }
  }
  fd.detail = "segment sent again after " + whole_ms(fd.lost_ms) + " ms";
  emit_finding(std::move(fd));
}

}  // namespace iscsi_doctor::session
