// SPDX-License-Identifier: GPL-2.0-or-later
// The TCP layer's constants: round-trip samples and jitter, the MSS, ACK records, reassembly, the
// link's rate, echoed timestamps. One named value each, in the order of docs/rules.md's table
// "Rule constants" (its TCP part); tests/lua compares them with the document: a number used by the
// TCP layer lives here, never inline.
#pragma once

#include <cstddef>
#include <cstdint>

namespace iscsi_doctor::tcp {

inline constexpr size_t jitter_window = 32;
inline constexpr size_t jitter_samples_min = 4;
inline constexpr double jitter_excess_max_ms = 8;
inline constexpr size_t jitter_percentile = 95;
inline constexpr int64_t jitter_rtt_divisor = 2;
inline constexpr uint32_t mss_standard = 1460;
inline constexpr uint32_t mss_full_segments_min = 3;
inline constexpr int64_t ack_record_keep_rtts = 2;
inline constexpr double ack_record_keep_ms = 10;
inline constexpr double reorder_wait_ms = 2;
inline constexpr double rtt_max_ms = 120000;
inline constexpr int64_t link_train_gap_rtt_divisor = 4;
inline constexpr uint64_t link_run_bytes_min = 262144;
inline constexpr int64_t link_busy_gap_rtts = 2;
inline constexpr double link_busy_rate_divisor = 4;
inline constexpr double echo_keep_ms = 1000;
inline constexpr size_t echo_records_max = 256;
inline constexpr uint32_t nagle_off_short_bytes = 536;
inline constexpr size_t nagle_release_window = 16;
inline constexpr size_t nagle_release_samples_min = 3;
inline constexpr double nagle_release_band_ms = 0.3;
inline constexpr int64_t nagle_release_band_divisor = 10;
inline constexpr double nagle_release_spread_ms = 10;

}  // namespace iscsi_doctor::tcp
