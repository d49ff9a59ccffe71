// SPDX-License-Identifier: GPL-2.0-or-later
#include "tcp/flow.hpp"

namespace iscsi_doctor::tcp {

bool Flow::acked(uint64_t ack, int64_t t, uint64_t frame) {
  if (una_known && ack <= una) return false;
  prev_una = una_known ? una : ack;
  una = ack;
  una_known = true;
  una_t = t;
  una_frame = frame;
  while (!unacked.empty() && unacked.front().end <= ack) unacked.pop_front();
  if (has_small && !last_small.acked && ack >= last_small.end) {
    last_small.acked = true;
    last_small.ack_t = t;
    last_small.ack_frame = frame;
  }
  return true;
}

}  // namespace iscsi_doctor::tcp
