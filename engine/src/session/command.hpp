// SPDX-License-Identifier: GPL-2.0-or-later
// A SCSI command while it is open: its result so far and the state of its critical path.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "iscsi_doctor/results.hpp"

namespace iscsi_doctor::session {

// The two directions of a connection's streams.
enum Dir : int { kI2T = 0, kT2I = 1 };
inline Side side_of(int dir) { return dir == kI2T ? Side::initiator : Side::target; }

struct OpenCommand {
  bool used = false;
  CommandResult r;
  bool write = false;

  // Half trips: crossings of the network along the critical path (docs/rules.md). The command
  // PDU arrives at the target with 1; round trips = ceil(h_target / 2) at the status.
  int h_initiator = 1, h_target = 0;
  int64_t last_event_t = 0;        // latest segment on the critical path, either side
  int64_t last_seg_t[2] = {0, 0};  // latest segment carrying this command's bytes, per direction
  bool has_seg[2] = {false, false};
  int64_t needed_t = 0;  // when the bytes the target waits for were complete (capture time)
  uint32_t r2ts = 0;
  uint64_t first_r2t_frame = 0;
  int64_t last_r2t_t = 0;
  int h_at_r2t = 0;
  uint64_t first_reply_frame = 0;
  bool solicited_data = false;
  double loss_pending_ms = 0;
  // Completed, waiting for the initiator's ACK of its status before it is reported: a segment of
  // its data lost after the capture point is resent meanwhile (docs/rules.md "Commands").
  bool settling = false;
  uint64_t settle_seq = 0;  // target stream position the ACK must reach
  uint32_t open_pos = 0;    // index in Connection::open_slots_ while open (not yet answered)
  // The link (rules/link_limited.cpp): the busy time of the data's flow when the command began,
  // the half trips its holds added, and their findings, given when the command is reported (a
  // hold the link explains is not one).
  int64_t link_busy0 = 0;      // of the path (all connections between the two hosts)
  uint64_t link_bytes0 = 0;    // of this connection's own data
  int64_t link_busy_reply = -1;  // the path's busy time at the first reply
  int held_h = 0;
  // Waits of the target that may have been holds the capture cannot tell from think time
  // (HoldVerdict::undecided): their time, and the latest ACK that may have released one.
  double undecided_ms = 0;
  uint64_t undecided_ack_frame = 0;
  // Crossings before the target's replies timed by a round trip known only as an upper bound: any
  // part of them may be the target's own time (rules/target_think.cpp, think_or_network).
  double unsure_ms = 0;
  // Crossings before any side's answer (a reply, solicited data) timed by a round trip that may hold
  // that side's own time (RttEstimate::may_hold_side_time): the network's or the side's (serialized).
  double bound_ms = 0;
  std::vector<Finding> held_findings;
};

// The command's result names each kind of finding it had once.
inline void add_finding_kind(OpenCommand& c, FindingKind k) {
  if (std::find(c.r.findings.begin(), c.r.findings.end(), k) == c.r.findings.end()) c.r.findings.push_back(k);
}

}  // namespace iscsi_doctor::session
