// SPDX-License-Identifier: GPL-2.0-or-later
// The session layer's constants: the critical path's tolerances and waits, settling and closing,
// the vantage point, and the probation of joined connections (the analyzer's). One named value
// each, in the order of docs/rules.md's table "Rule constants" (its session part); tests/lua
// compares them with the document: a number used by the session layer lives here, never inline.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>

#include "util/units.hpp"

namespace iscsi_doctor::session {

inline constexpr double release_tolerance_ms = 0.3;
inline constexpr int64_t release_tolerance_rtt_divisor = 10;
inline constexpr double wait_min_ms = 0.5;
inline constexpr int64_t wait_min_rtt_divisor = 4;
inline constexpr int64_t near_initiator_rtt_factor = 5;
inline constexpr double settle_max_ms = 1000;
inline constexpr double closed_linger_ms = 1000;
inline constexpr int64_t closed_linger_rtts = 4;
inline constexpr double vantage_initiator_share = 0.2;
inline constexpr double vantage_target_share = 0.8;
inline constexpr double vantage_min_rtt_ms = 0.2;
inline constexpr uint64_t probation_rtt_samples = 4;
inline constexpr size_t probation_segments_max = 4096;
inline constexpr size_t probation_segment_cost = 128;
inline constexpr size_t probation_bytes_max = 1048576;
inline constexpr double probation_ms = 10000;
inline constexpr size_t probation_bytes_all_max = 67108864;
inline constexpr size_t probation_connections_max = 4096;

// Jitter allowance when matching a release to the ACK that caused it, on a path of that round trip.
constexpr int64_t release_tolerance_ns(int64_t full_rtt_ns) {
  return to_ns(release_tolerance_ms) + full_rtt_ns / release_tolerance_rtt_divisor;
}
// A rest longer than this is a wait (docs/rules.md "The critical path").
constexpr int64_t wait_min_ns(int64_t full_rtt_ns) {
  return std::max<int64_t>(to_ns(wait_min_ms), full_rtt_ns / wait_min_rtt_divisor);
}

}  // namespace iscsi_doctor::session
