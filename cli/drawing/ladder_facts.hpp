// SPDX-License-Identifier: GPL-2.0-or-later
// A ladder's facts before it is drawn: where the capture point sits, each segment as an arrow with
// its role (from the findings' evidence), the round trips numbered, the shaded waits.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "commands/ladder.hpp"

namespace iscsi_doctor::cli::ladder {

// Geometry (px): the initiator's and the target's lines, and where the first arrow may start.
constexpr double kWidth = 860, kInitiatorX = 290, kTargetX = 650, kTop = 124;

// Where the capture point sits, and how long a packet takes from it to either side.
struct CapturePoint {
  double rtt_i = 0, rtt_t = 0;  // ms, capture point <-> that side and back (split from the RTT if unmeasured)
  double share = 0.5;           // of the way from the initiator to the target
  int64_t to_initiator_ns = 0, to_target_ns = 0;  // one way
  double x = 0;
};

CapturePoint place_capture_point(const ConnectionInfo& k);
// The roles the findings give their evidence frames; the first finding to name a frame wins
// (findings are listed in order of evidence).
std::map<uint64_t, std::string> evidence_roles(const std::vector<Finding>& findings);
// One segment as drawn: when it left its sender, passed the capture point and reached its
// receiver (ns from the command's first frame).
struct Arrow {
  const LadderSeg* s;
  int64_t send, cap, arr;
  std::string role;
  int rt = 0;  // round trip completed on arrival
};

std::vector<Arrow> make_arrows(const LadderRequest& r, const CapturePoint& cp);
// Round trips as the engine counted them (docs/rules.md "Round trips"): a marker where the
// command's half trips complete another round trip (every second crossing). Should the drawn
// events end short of the round trips the command is reported with, its status says them; none
// is drawn past them (a link_limited command's holds were the link's queue, not round trips).
void number_round_trips(std::vector<Arrow>& arrows, const CommandResult& c);
const char* wait_fill(std::string_view role);
// A shaded wait: [send - lost, send] of the evidence frame, on the side that waited.
struct Shade {
  bool initiator_side;
  int64_t from, to;
  std::string what;
  const char* fill;
  std::string role;
};

std::vector<Shade> make_shades(const std::vector<Finding>& findings, const std::vector<Arrow>& arrows);
}  // namespace iscsi_doctor::cli::ladder
