// SPDX-License-Identifier: GPL-2.0-or-later
#include "drawing/ladder_axis.hpp"

namespace iscsi_doctor::cli::ladder {

void TimeAxis::scale(double px_per_ns) {
  ys_.assign(keys_.size(), kTop);
  breaks_.clear();
  double y = kTop;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (i) {
      const int64_t a = keys_[i - 1], b = keys_[i], g = b - a;
      const int64_t out =
          std::max<int64_t>(0, std::min(b, lo_) - a) + std::max<int64_t>(0, b - std::max(a, hi_));
      double px = double(g) * px_per_ns;
      if (out * 2 > g && px > 40) {
        breaks_.push_back({y, y + kBreakPx, g});
        px = kBreakPx;
      }
      y += px;
    }
    ys_[i] = y;
  }
}

void TimeAxis::space_out(const std::vector<Arrow>& arrows) {
  auto index = [&](int64_t t) {
    return size_t(std::lower_bound(keys_.begin(), keys_.end(), t) - keys_.begin());
  };
  double last_cap_y = -1e9;
  size_t last_cap_i = 0;
  bool first = true;
  for (const Arrow& a : arrows) {
    const size_t ci = index(a.cap);
    const double need = last_cap_y + (a.s->elided_before ? elided_spacing() : spacing_) - ys_[ci];
    if (!first && need > 0) {
      const size_t from = std::max(index(a.send), last_cap_i + 1);
      for (size_t j = std::min(from, ci); j < ys_.size(); ++j)
        ys_[j] += need;
      for (Break& b : breaks_)
        if (b.y0 >= ys_[std::min(from, ci)] - need - 0.01) b.y0 += need, b.y1 += need;
    }
    first = false;
    last_cap_y = ys_[ci];
    last_cap_i = std::max(last_cap_i, ci);
  }
}

}  // namespace iscsi_doctor::cli::ladder
