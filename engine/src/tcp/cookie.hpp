// SPDX-License-Identifier: GPL-2.0-or-later
// What a Receiver says a delivery of bytes was part of, opaque to the TCP layer: it keeps the
// words with the segment's record and hands them back unread (tcp/tracker.hpp). The session layer
// gives them their meaning (session/delivery.hpp).
#pragma once

#include <cstdint>

namespace iscsi_doctor::tcp {

struct Cookie {
  uint64_t a = 0, b = 0;  // zero: part of nothing
  bool empty() const { return a == 0 && b == 0; }
};

// A delivery's two cookies. owner: given back with a resend of the segment (its SentSegment);
// progress: given back with the ACKs that acknowledge the segment (AckRecord, the flow's last
// small segment), the latest non-empty one acknowledged.
struct Delivery {
  Cookie owner;
  Cookie progress;
};

}  // namespace iscsi_doctor::tcp
