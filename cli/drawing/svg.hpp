// SPDX-License-Identifier: GPL-2.0-or-later
// Small helpers shared by the HTML report and the ladder diagrams: XML escaping, compact
// coordinates, and the fixed-bin aggregates the charts are drawn from (so that a report never grows
// with the number of packets or commands). Words and numbers for people: formatting.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace iscsi_doctor::cli::svg {

std::string esc(std::string_view s);  // &, <, >, " and ' escaped (text and attribute values)
std::string num(double v);            // coordinates: at most one decimal, no trailing ".0"

// Latency histogram on a log scale: 10 bins per decade from 1 us to 1000 s.
struct LogHistogram {
  static constexpr double kMinMs = 1e-3;
  static constexpr int kPerDecade = 10, kDecades = 9, kBins = kPerDecade * kDecades;
  std::array<uint64_t, kBins> bins{};
  uint64_t total = 0;
  void add(double ms);
  static double edge_ms(int i);  // lower edge of bin i (i == kBins: upper edge of the last)
};

// A time series over fixed bins whose width doubles (pairs merged) whenever the series outgrows
// them: bounded memory whatever the capture's duration.
struct TimeBins {
  static constexpr size_t kBins = 400;
  int64_t origin_ns = 0;
  int64_t width_ns = 1'000'000;  // 1 ms to start with
  bool started = false;
  std::vector<std::array<double, 3>> v = std::vector<std::array<double, 3>>(kBins);  // per bin sums
  void start(int64_t t0);
  // Adds `amount` to series `k` spread evenly over [from, to] (a point when from == to).
  void add_span(size_t k, int64_t from_ns, int64_t to_ns, double amount);
  size_t used() const;  // bins up to the last non-empty one

private:
  void grow_to(int64_t t);
};

}  // namespace iscsi_doctor::cli::svg
