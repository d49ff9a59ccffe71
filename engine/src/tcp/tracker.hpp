// SPDX-License-Identifier: GPL-2.0-or-later
// Both directions of one TCP connection as the capture point saw them: the handshake, ACKs and
// windows, round trips, and the byte streams put back in order. It gives each segment its status
// and tells a Receiver what the streams carry, in stream order: bytes delivered in order, a hole
// filled (and since when), a resend (and of which original), bytes declared lost. It knows
// nothing of iSCSI: the Receiver (session::Connection) frames the bytes and gives each delivery
// opaque cookies (tcp/cookie.hpp), which the tracker keeps with the segment and hands back with
// its resend and with the ACKs that acknowledge it.
#pragma once

#include <cstdint>
#include <span>

#include "iscsi_doctor/segment.hpp"
#include "tcp/cookie.hpp"
#include "tcp/flow.hpp"

namespace iscsi_doctor::tcp {

class Receiver {
public:
  virtual ~Receiver() = default;
  // A SYN starts dir's stream: its bytes will come from the first on.
  virtual void stream_from_syn(int dir) = 0;
  // dir's first bytes arrive without a SYN: the capture may have begun mid-stream.
  virtual void stream_without_syn(int dir, const Segment& seg) = 0;
  // New bytes in order; wire_len > bytes.size() when the snaplen cut the packet. filled_by: the
  // segment that filled the hole these bytes waited behind (they reach the receiver only then).
  virtual Delivery deliver(int dir, std::span<const uint8_t> bytes, uint32_t wire_len, const Segment& seg,
                              const Segment* filled_by) = 0;
  // seg fills a hole open since `since` (the original was lost before the capture point).
  virtual void hole_filled(int dir, const Segment& seg, int64_t since) = 0;
  // seg resends bytes already seen; original: the record of the first send, if still kept.
  virtual void resent(int dir, const Segment& seg, const SentSegment* original) = 0;
  // `bytes` never captured are given up for lost (acknowledged past them, buffer cap, end).
  virtual void lost(int dir, uint64_t bytes, uint64_t frame, const char* why) = 0;
  // The record of unacknowledged segments is full: later ones are not timed until ACKs catch up.
  virtual void unacked_cap_hit(int dir, uint64_t frame, size_t cap) = 0;
};

class Tracker {
public:
  explicit Tracker(size_t max_out_of_order_bytes) : max_out_of_order_bytes_(max_out_of_order_bytes) {}

  SegmentStatus on_segment(const Segment& seg, int dir, Receiver& r);
  // End of capture: holes still open are declared lost.
  void finish(Receiver& r);

  const Flow& flow(int dir) const { return flow_[dir]; }
  void share_link(int dir, LinkMeter* path) { flow_[dir].path = path; }
  const RttEstimate& rtt(int side_dir) const { return rtt_[side_dir]; }
  void seed_rtt(int side_dir, const RttEstimate& scout) { rtt_[side_dir] = scout; }
  int64_t rtt_ns(int side_dir) const { return rtt_[side_dir].ns(); }  // capture point <-> that side
  int64_t full_rtt_ns() const { return rtt_[0].ns() + rtt_[1].ns(); }
  bool saw_syn() const { return saw_syn_; }
  bool closed() const { return closed_; }
  // A side ended its stream (FIN or RST): since when (capture time), and how it ended.
  bool ending() const { return flow_[0].fin_seen || flow_[1].fin_seen; }
  int64_t first_fin_t() const { return first_fin_t_; }
  int64_t fin_t(int dir) const { return fin_t_[dir]; }  // that side's first FIN or RST
  bool reset() const { return reset_; }
  // Both sides sent FIN and each was acknowledged: only strays (a resent FIN, a final ACK again) may follow.
  bool fins_acked() const { return flow_[0].fin_acked && flow_[1].fin_acked; }

  static constexpr size_t kMaxUnackedRecords = 1 << 16;

private:
  void handshake(const Segment& seg, int dir, Receiver& r);
  void ack(const Segment& seg, int dir, Receiver& r);
  int64_t echo(const Segment& seg, int dir);  // a release's round-trip sample, or -1
  void payload(const Segment& seg, int dir, Receiver& r);
  void drain_out_of_order(int dir, const Segment& seg, Receiver& r);
  static void infer_window_scale(Flow& f);
  bool shows_nagle_off(const Flow& f, int dir, int64_t t) const;  // docs/rules.md "Holds"
  void declare_gap(int dir, uint64_t upto, uint64_t frame, const char* why, Receiver& r);
  void declare_unseen(int dir, Receiver& r);  // the bytes an ACK covered never came
  void resend(int dir, const Segment& seg, uint64_t start, uint64_t end, Receiver& r);

  size_t max_out_of_order_bytes_;
  Flow flow_[2];
  RttEstimate rtt_[2];  // capture point <-> initiator (index 0), <-> target (1)
  bool saw_syn_ = false, saw_synack_ = false, closed_ = false, reset_ = false;
  int64_t first_fin_t_ = 0;
  int64_t fin_t_[2] = {INT64_MIN, INT64_MIN};
  int64_t syn_t_ = 0, synack_t_ = 0;
  SegmentStatus status_ = SegmentStatus::ignored;  // of the segment being handled
  const Segment* filling_ = nullptr;               // while draining: the segment that filled the hole
};

}  // namespace iscsi_doctor::tcp
