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
void Connection::report_hole_filled(int dir, const Segment& seg) {
  ++retransmissions_;
  uint32_t slot = current_pdu_slot_[dir];
  OpenCommand* c = slot && slots_[slot].used ? &slots_[slot] : nullptr;
  Finding fd = finding(FindingKind::retransmission, side_of(dir), seg.frame,
                       ms(seg.time_ns - flow_[dir].hole_since), c);
  fd.detail = "retransmission fills a hole: the original was lost before the capture point";
  if (c) {
    c->loss_pending_ms += fd.lost_ms;
    c->h_initiator += dir == kI2T ? 2 : 0;
    c->h_target += dir == kT2I ? 2 : 0;
    add_finding_kind(*c, FindingKind::retransmission);
  }
  emit_finding(std::move(fd));
}

void Connection::note_retransmission(int dir, const Segment& seg, uint64_t start, uint64_t end) {
  tcp::Flow& f = flow_[dir];
  ++retransmissions_;
  // The first record holding the resent byte: records end in increasing order, so a binary search
  // finds the first that ends past it; one that starts later is an overlap resend, looked for a
  // few records on (a bounded walk: the work per segment stays bounded).
  const tcp::SentSegment* orig = nullptr;
  auto it = std::upper_bound(f.unacked.begin(), f.unacked.end(), start,
                             [](uint64_t v, const tcp::SentSegment& s) { return v < s.end; });
  for (int n = 0; it != f.unacked.end() && n < 8; ++it, ++n)
    if (it->start <= start) {
      orig = &*it;
      break;
    }
  if (f.una_known && end <= f.una && !orig) return;  // spurious, already acknowledged
  Finding fd = finding(FindingKind::retransmission, side_of(dir), seg.frame, 0, nullptr);
  if (orig) {
    fd.related.emplace_back("original", orig->frame);
    fd.lost_ms = ms(seg.time_ns - orig->t);
    if (orig->cmd) {  // named even when the command completed before its data was resent
      fd.itt = orig->itt;
      fd.command_first_frame = orig->cmd;
    }
    if (orig->owner && slots_[orig->owner].used) {
      OpenCommand& c = slots_[orig->owner];
      fd.itt = c.r.itt;
      fd.command_first_frame = c.r.first_frame;
      // (A settling command's status was captured before this resend, near the target: its
      // latency stays as captured; the round trip it cost the initiator counts below.)
      if (!c.settling) c.loss_pending_ms += fd.lost_ms;
      (dir == kI2T ? c.h_initiator : c.h_target) += 2;
      add_finding_kind(c, FindingKind::retransmission);
    }
  }
  fd.detail = "segment sent again after " + whole_ms(fd.lost_ms) + " ms";
  emit_finding(std::move(fd));
}

}  // namespace iscsi_doctor::session
