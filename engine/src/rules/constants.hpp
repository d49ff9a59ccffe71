// SPDX-License-Identifier: GPL-2.0-or-later
// The finding rules' constants. One named value each, in the order of docs/rules.md's table
// "Rule constants" (its rules part); tests/lua compares them with the document and with the Lua
// plugin's RULES: a number used by a rule lives here, never inline. The TCP and session layers'
// constants are in tcp/constants.hpp and session/constants.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace iscsi_doctor::rules {

inline constexpr double delayed_ack_min_ms = 10;
inline constexpr double think_min_ms = 2;
inline constexpr double think_share = 0.5;
inline constexpr size_t nagle_jitter_percentile = 100;
inline constexpr uint64_t serialized_min_commands = 8;
inline constexpr double serialized_wait_share = 0.25;
inline constexpr uint32_t r2t_max_write_bytes = 16777215;
inline constexpr uint64_t rwnd_edge_window_divisor = 4;
inline constexpr double cwnd_recovery_ms = 1000;
inline constexpr int64_t cwnd_recovery_rtts = 4;
inline constexpr uint32_t link_command_bytes_min = 65536;
inline constexpr double link_share = 0.5;
inline constexpr double link_shared_rate_share = 0.7;

}  // namespace iscsi_doctor::rules
