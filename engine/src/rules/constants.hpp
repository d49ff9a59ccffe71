// SPDX-License-Identifier: GPL-2.0-or-later
// The rule constants, one named value each, in the order of the table "Rule constants" of
// docs/rules.md. tests/lua compares this table with the document's and with the Lua plugin's RULES:
// a number used by a rule lives here, never inline.
#pragma once

#include <cstdint>

namespace iscsi_doctor::rules {

inline constexpr double delayed_ack_min_ms = 10;
inline constexpr double think_min_ms = 2;
inline constexpr double think_share = 0.5;
inline constexpr double release_tolerance_ms = 0.3;
inline constexpr int64_t release_tolerance_rtt_divisor = 10;
inline constexpr size_t jitter_window = 32;
inline constexpr size_t jitter_samples_min = 4;
inline constexpr double jitter_excess_max_ms = 8;
inline constexpr size_t jitter_percentile = 95;
inline constexpr size_t nagle_jitter_percentile = 100;
inline constexpr int64_t jitter_rtt_divisor = 2;
inline constexpr double wait_min_ms = 0.5;
inline constexpr int64_t wait_min_rtt_divisor = 4;
inline constexpr uint64_t serialized_min_commands = 8;
inline constexpr double serialized_wait_share = 0.25;
inline constexpr uint32_t r2t_max_write_bytes = 16777215;
inline constexpr uint32_t mss_standard = 1460;
inline constexpr uint32_t mss_full_segments_min = 3;
inline constexpr int64_t ack_record_keep_rtts = 2;
inline constexpr double ack_record_keep_ms = 10;
inline constexpr double reorder_wait_ms = 2;
inline constexpr uint64_t rwnd_edge_window_divisor = 4;
inline constexpr int64_t near_initiator_rtt_factor = 5;
inline constexpr double settle_max_ms = 1000;
inline constexpr double closed_linger_ms = 1000;
inline constexpr int64_t closed_linger_rtts = 4;
inline constexpr double vantage_initiator_share = 0.2;
inline constexpr double vantage_target_share = 0.8;
inline constexpr double vantage_min_rtt_ms = 0.2;
inline constexpr double rtt_max_ms = 120000;
inline constexpr uint64_t probation_rtt_samples = 4;
inline constexpr size_t probation_segments_max = 4096;
inline constexpr size_t probation_segment_cost = 128;
inline constexpr size_t probation_bytes_max = 1048576;
inline constexpr double probation_ms = 10000;
inline constexpr size_t probation_bytes_all_max = 67108864;
inline constexpr size_t probation_connections_max = 4096;
inline constexpr int64_t link_train_gap_rtt_divisor = 4;
inline constexpr uint64_t link_run_bytes_min = 262144;
inline constexpr int64_t link_busy_gap_rtts = 2;
inline constexpr double link_busy_rate_divisor = 4;
inline constexpr uint32_t link_command_bytes_min = 65536;
inline constexpr double link_share = 0.5;
inline constexpr double link_shared_rate_share = 0.7;
inline constexpr double echo_keep_ms = 1000;
inline constexpr size_t echo_records_max = 256;

// Milliseconds as integer nanoseconds (rounded: 0.3 ms is not exact in binary).
constexpr int64_t ns(double ms) { return int64_t(ms * 1e6 + (ms >= 0 ? 0.5 : -0.5)); }

}  // namespace iscsi_doctor::rules
