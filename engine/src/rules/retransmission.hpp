// SPDX-License-Identifier: GPL-2.0-or-later
// retransmission (docs/rules.md "Other findings"): a segment resent after a loss, before or after
// the capture point; resends the receiver proves spurious are counted, not findings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rules/view.hpp"
#include "session/command_table.hpp"

namespace iscsi_doctor::rules {

class Retransmission {
public:
  // seg fills a hole open since `since` (the original was lost before the capture point); c: the
  // command whose PDU was in progress in that direction, if any.
  void hole_filled(const ConnectionView& v, FindingOut& out, int dir, const Segment& seg, int64_t since,
                   OpenCommand* c) const;
  // seg resends bytes already seen; orig: the tracker's record of the first send, if still kept.
  void resent(const ConnectionView& v, FindingOut& out, session::CommandTable& commands, int dir,
              const Segment& seg, const tcp::SentSegment* orig);
  // seg from dir: its ACK settles the other direction's pending resends it covers; all: the rest
  // (the capture ended) are reported as resends.
  void settle(const ConnectionView& v, FindingOut& out, session::CommandTable& commands, const Segment& seg,
              int dir, bool all = false);
  bool pending() const { return !pending_.empty(); }
  size_t memory_bytes() const { return pending_.capacity() * sizeof(PendingResend); }
  // At the connection's end: the spurious resends, counted in a notice each way they were proven.
  void finish(FindingOut& out) const;

private:
  void spurious(uint64_t frame, bool dsack);
  void report(const ConnectionView& v, FindingOut& out, session::CommandTable& commands, int dir, uint64_t frame,
              int64_t t, const tcp::SentSegment* orig) const;

  uint64_t spurious_ = 0, first_spurious_frame_ = 0;
  uint64_t dsack_ = 0, first_dsack_frame_ = 0;  // spurious by the receiver's D-SACK
  // Tail resends seen near the sender or midpath, waiting for the receiver's ACK that covers them:
  // a D-SACK makes one spurious.
  struct PendingResend {
    int dir = 0;
    uint64_t frame = 0;
    int64_t t = 0;
    uint64_t start = 0, end = 0;
    tcp::SentSegment orig;
  };
  std::vector<PendingResend> pending_;
  static constexpr size_t kMaxPending = 64;
};

}  // namespace iscsi_doctor::rules
