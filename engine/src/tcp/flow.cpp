// SPDX-License-Identifier: GPL-2.0-or-later
#include "tcp/flow.hpp"

#include <algorithm>

namespace iscsi_doctor::tcp {

bool Flow::acked(uint64_t ack, int64_t t, uint64_t frame) {
  if (una_known && ack <= una) return false;
  una = ack;
  una_known = true;
  trim_acked(t, frame);
  return true;
}

void Flow::trim_acked(int64_t t, uint64_t frame) {
  const uint64_t ack = una;
  auto take = [&](const SentSegment& s) {
    if (!s.progress.empty()) acked_progress = s.progress;
  };
  while (!unacked.empty() && unacked.front().end <= ack) {
    take(unacked.front());
    acked_data_t = unacked.front().t;
    acked_data_frame = unacked.front().frame;
    unacked.pop_front();
  }
  if (!unacked.empty() && unacked.front().start < ack) take(unacked.front());
  if (has_small && !last_small.acked && ack >= last_small.end) {
    last_small.acked = true;
    last_small.ack_t = t;
    last_small.ack_frame = frame;
  }
}

bool RttEstimate::nagle_release(int64_t after, int64_t since) {
  if (after < 0 || after > to_ns(tcp::rtt_max_ms)) return false;
  nagle_[nagle_count_++ % nagle_.size()] = {after, since};
  const size_t n = std::min(nagle_count_, nagle_.size());
  if (n < tcp::nagle_release_samples_min) return false;
  // The least delay after the ACK that enough releases share (within a band: the path's own
  // spread), while the time since the previous short segment varied between them by more than the
  // path could: the segment followed the ACK, not its predecessor (pairs compare by `after` only:
  // the result does not depend on the order of ties).
  auto v = nagle_;
  std::sort(v.begin(), v.begin() + ptrdiff_t(n));
  for (size_t i = 0; i + tcp::nagle_release_samples_min <= n; ++i) {
    const int64_t top =
      v[i].first + to_ns(tcp::nagle_release_band_ms) + v[i].first / tcp::nagle_release_band_divisor;
    int64_t lo = v[i].second, hi = lo;
    size_t k = 0;
    for (size_t j = i; j < n && v[j].first <= top; ++j, ++k) {
      lo = std::min(lo, v[j].second);
      hi = std::max(hi, v[j].second);
    }
    if (k < tcp::nagle_release_samples_min || hi - lo <= to_ns(tcp::nagle_release_spread_ms)) continue;
    if (known_ && v[i].first >= min_) return false;
    min_ = v[i].first;
    known_ = true;
    nagle_bound_ = true;
    return true;
  }
  return false;
}

void Flow::record_ack(const AckRecord& r, int64_t horizon) {
  // The newest record older than the horizon stays: it is the edge in force until the next one
  // (a hold after a long wait, e.g. the target's think time, is judged against it).
  while (!acks.empty() && ((acks.size() > 1 && acks[1].t < horizon) || acks.size() >= kMaxAckRecords))
    acks.pop_front();
  acks.push_back(r);
}

}  // namespace iscsi_doctor::tcp
