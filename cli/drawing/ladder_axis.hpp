// SPDX-License-Identifier: GPL-2.0-or-later
// A ladder's vertical layout: time to y, bursts kept readable, idle stretches cut short.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "drawing/ladder_facts.hpp"

namespace iscsi_doctor::cli::ladder {

// The body (first arrow to last) stays within kBodyMax whatever the idle time or the transfer
// length: the part drawn to scale shrinks until it fits, idle gaps outside the command become
// breaks of fixed height, and long transfers are elided by the second pass (ladder.cpp).
constexpr double kBodyMax = 1000, kBreakPx = 36;

// An idle stretch drawn shorter than it was.
struct Break {
  double y0, y1;
  int64_t ns;
};

// Time to y: proportional within the command, with a minimum spacing between captured segments
// so that bursts stay readable, and long idle stretches outside the command cut short.
class TimeAxis {
public:
  // `end_ns`: the command's status (or last evidence) from its first frame.
  TimeAxis(const std::vector<Arrow>& arrows, const std::vector<Shade>& shades, int64_t end_ns,
           int64_t round_trip_ns) {
    for (const Arrow& a : arrows)
      keys_.insert(keys_.end(), {a.send, a.cap, a.arr});
    for (const Shade& s : shades)
      keys_.insert(keys_.end(), {s.from, s.to});
    keys_.push_back(0);
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    // Rows 19 px apart, closer (down to 14, a line of 11 px text) when many segments are drawn.
    size_t elided = 0;
    for (const Arrow& a : arrows)
      elided += a.s->elided_before > 0;
    spacing_ = std::clamp((kBodyMax - 200) / (double(arrows.size()) + 1.5 * double(elided)), 14.0, 19.0);
    const int64_t span = std::max<int64_t>(end_ns + round_trip_ns, 1000);
    lo_ = -round_trip_ns - span / 20, hi_ = end_ns + round_trip_ns + span / 20;
    // 440 px for the command and a round trip, less when the whole does not fit.
    double px_per_ns = 440.0 / double(span);
    for (int i = 0; i < 24; ++i, px_per_ns /= 2) {
      scale(px_per_ns);
      space_out(arrows);
      if (last_y() - kTop <= kBodyMax) break;
    }
  }

  double y(int64_t t) const {
    auto it = std::lower_bound(keys_.begin(), keys_.end(), t);
    if (it == keys_.end()) return ys_.back();
    const size_t i = size_t(it - keys_.begin());
    if (*it == t || i == 0) return ys_[i];
    const double f = double(t - keys_[i - 1]) / double(*it - keys_[i - 1]);
    return ys_[i - 1] + f * (ys_[i] - ys_[i - 1]);
  }
  double last_y() const { return ys_.empty() ? kTop : ys_.back(); }
  const std::vector<Break>& breaks() const { return breaks_; }
  double elided_spacing() const { return 2 * spacing_ + 6; }  // room for the "not drawn" line

private:
  // A gap mostly outside [lo_, hi_] longer than 40 px becomes a break.
  void scale(double px_per_ns);

  // Captured segments at least spacing() apart (elided_spacing() where elided ones are marked): the
  // space is added just before the arrow leaves its sender, so that the arrow itself keeps its
  // slope, unless the previous arrow is still under way then.
  void space_out(const std::vector<Arrow>& arrows);

  std::vector<int64_t> keys_;  // every time drawn, sorted, unique
  std::vector<double> ys_;     // their y
  std::vector<Break> breaks_;
  int64_t lo_ = 0, hi_ = 0;  // the command's window, a round trip either side
  double spacing_ = 19;
};


}  // namespace iscsi_doctor::cli::ladder
