// SPDX-License-Identifier: GPL-2.0-or-later
#include "reports/interval.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace iscsi_doctor::cli {

IntervalCounter::IntervalCounter(double seconds, std::function<void(const IntervalStats&)> emit)
    : length_ns_(std::max<int64_t>(1, int64_t(std::llround(seconds * 1e9)))), emit_(std::move(emit)) {}

void IntervalCounter::start(int64_t t) {
  if (open_) return;
  open_ = true;
  origin_ = t;
  index_ = 0;
  cur_ = {};
  cur_.origin_ns = cur_.start_ns = origin_;
}

void IntervalCounter::command(const CommandResult& c) {
  const int64_t t = c.completed && c.status_ns ? c.status_ns : c.first_ns;
  start(t);
  const int64_t k = t >= origin_ ? (t - origin_) / length_ns_ : 0;
  if (k > index_) {
    flush();
    index_ = k;
    cur_ = {};
    cur_.origin_ns = origin_;
    cur_.start_ns = origin_ + k * length_ns_;
  }
  last_ns_ = std::max(last_ns_, t);
  ++cur_.commands;
  if (!c.completed) return;
  ++cur_.completed;
  if (c.kind == 'r' || c.kind == 'w') cur_.bytes += c.bytes;
  latencies_.push_back(c.latency_ms);
  if (c.round_trips > c.ideal_round_trips)
    cur_.excess_round_trips += uint64_t(c.round_trips - c.ideal_round_trips);
}

void IntervalCounter::finding(const Finding& f) {
  if (size_t(f.kind) < cur_.findings.size()) ++cur_.findings[size_t(f.kind)];
}

void IntervalCounter::flush(bool last) {
  cur_.end_ns = cur_.start_ns + length_ns_;
  if (last) cur_.end_ns = std::min(cur_.end_ns, std::max(last_ns_, cur_.start_ns + 1'000'000));
  cur_.seconds = double(cur_.end_ns - cur_.start_ns) / 1e9;
  if (!latencies_.empty()) {
    // nearest rank, as the reports' percentiles
    auto rank = [&](double p) {
      const size_t n = latencies_.size();
      size_t i = size_t(std::ceil(p * double(n)));
      i = std::clamp<size_t>(i, 1, n) - 1;
      std::nth_element(latencies_.begin(), latencies_.begin() + long(i), latencies_.end());
      return latencies_[i];
    };
    cur_.p50_ms = rank(0.50);
    cur_.p90_ms = rank(0.90);
    cur_.p99_ms = rank(0.99);
    cur_.max_ms = *std::max_element(latencies_.begin(), latencies_.end());
  }
  emit_(cur_);
  latencies_.clear();
}

void IntervalCounter::finish() {
  if (!open_ || (!cur_.commands && cur_.findings == decltype(cur_.findings){})) return;
  flush(true);
  open_ = false;
}

}  // namespace iscsi_doctor::cli
