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

void Flow::record_ack(const AckRecord& r, int64_t horizon) {
  // The newest record older than the horizon stays: it is the edge in force until the next one
  // (a hold after a long wait, e.g. the target's think time, is judged against it).
  while (!acks.empty() && ((acks.size() > 1 && acks[1].t < horizon) || acks.size() >= kMaxAckRecords))
    acks.pop_front();
  acks.push_back(r);
}

}  // namespace iscsi_doctor::tcp
