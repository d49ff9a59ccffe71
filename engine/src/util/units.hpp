// SPDX-License-Identifier: GPL-2.0-or-later
// Capture time is integer nanoseconds; rules and messages speak milliseconds.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace iscsi_doctor {

constexpr double ms(int64_t ns) { return double(ns) / 1e6; }

// Milliseconds as integer nanoseconds (rounded: 0.3 ms is not exact in binary).
constexpr int64_t to_ns(double ms) { return int64_t(ms * 1e6 + (ms >= 0 ? 0.5 : -0.5)); }

// Rounded milliseconds for messages: int overflows past 24 days (or on corrupt timestamps).
// Rounded to the microsecond first: sums in another order (the Lua port) differ in the last bits.
inline std::string whole_ms(double v) {
  return std::to_string(int64_t(std::floor(v * 1000 + 0.5) / 1000 + 0.5));
}

}  // namespace iscsi_doctor
