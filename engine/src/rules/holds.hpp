// SPDX-License-Identifier: GPL-2.0-or-later
// Holds (docs/rules.md "Holds"): a segment that was ready earlier and left only when an ACK from
// the peer released it: nagle_hold, cwnd_limited, rwnd_limited, and delayed_ack when that ACK was
// late. One decision over one ACK decides all four (classify_hold); the waits it cannot tell from
// think time are the target's (think_or_hold, rules/target_think.cpp).
#pragma once

#include <cstdint>

#include "iscsi_doctor/segment.hpp"
#include "rules/view.hpp"
#include "tcp/flow.hpp"

namespace iscsi_doctor::rules {

struct HoldVerdict {
  bool held = false;
  FindingKind kind = FindingKind::cwnd_limited;
  uint64_t release_frame = 0;
  double delayed_ack_ms = 0;
  uint64_t acked_frame = 0;
  tcp::Cookie release_progress;  // of the data the releasing ACK acknowledged (session/delivery.hpp)
  // Not held within the bounds the path has shown, but an ACK the wait had to follow (Nagle's
  // previous segment, a window's edge) fits within the most the path may add: the capture
  // cannot tell think from a hold (release_frame is that ACK).
  bool undecided = false;
  bool reported = false;  // judged for this segment already (or not to be judged)
};

// Whether segment seg, ready at `ready` (capture time), waited for an ACK to release it, and
// which: over the sender's flow, the round trips between the capture point and the sender and
// its peer, and whether the sender is the target (at the target's host an ACK's arrival is seen).
HoldVerdict classify_hold(const tcp::Flow& flow, const tcp::RttEstimate& sender, const tcp::RttEstimate& receiver,
                          bool sender_is_target, double delayed_ack_min_ms, const Segment& seg, int64_t ready);

class Holds {
public:
  // A rest (ns) longer than a wait before seg on command c's path: judged once per segment
  // (verdict); a hold's findings are kept with c until it is reported, its time goes to c's
  // breakdown and half trips. Returns the rest a hold did not explain.
  int64_t on_wait(const ConnectionView& v, FindingOut& out, int dir, const Segment& seg, OpenCommand& c,
                  int64_t ready, int64_t rest, HoldVerdict& verdict) const;
  // seg went on from c's flight without a wait of its own: the ACK that released it (a window's
  // edge: window_edge_half_trips; an echoed timestamp: echo_half_trips) still counts its crossings
  // (docs/rules.md "Round trips").
  void on_release(const ConnectionView& v, int dir, const Segment& seg, OpenCommand& c) const;

private:
  // The hold's findings (nagle_hold, cwnd_limited, rwnd_limited; delayed_ack), kept with c.
  void report(FindingOut& out, int dir, const Segment& seg, OpenCommand& c, const HoldVerdict& verdict,
              double held_ms) const;
  void window_edge_half_trips(const ConnectionView& v, int dir, const Segment& seg, OpenCommand& c) const;
  void echo_half_trips(const ConnectionView& v, int dir, const Segment& seg, OpenCommand& c) const;
  void release_half_trips(const ConnectionView& v, int dir, const Segment& seg, OpenCommand& c,
                          const tcp::AckRecord& a) const;
};

}  // namespace iscsi_doctor::rules
