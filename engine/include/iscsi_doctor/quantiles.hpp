// SPDX-License-Identifier: GPL-2.0-or-later
// Latencies kept for percentiles in bounded memory, so that a live run of hours does not grow:
// every value while a row has at most kExact of them (nearest-rank percentiles, exact), then a
// histogram of logarithmic buckets 1% wide (each percentile within 0.5% of the exact one; the
// maximum stays exact). docs/cli.md "Percentiles" says so to the reader.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

namespace iscsi_doctor {

class LatencyQuantiles {
public:
  static constexpr size_t kExact = size_t(1) << 16;

  void add(float v) {
    if (n_ == 0 || v > max_) max_ = v;
    if (n_ == 0 || v < min_) min_ = v;
    ++n_;
    if (buckets_.empty() && exact_.size() < kExact) {
      exact_.push_back(v);
      return;
    }
    if (!exact_.empty()) bin_exact();
    ++buckets_[bucket(v)];
  }
  void merge(const LatencyQuantiles& o) {
    if (o.n_ == 0) return;
    const uint64_t n = n_;
    if (o.buckets_.empty() && exact_.size() + o.exact_.size() <= kExact && buckets_.empty()) {
      exact_.insert(exact_.end(), o.exact_.begin(), o.exact_.end());
    } else {
      if (!exact_.empty()) bin_exact();
      for (float v : o.exact_)
        ++buckets_[bucket(v)];
      for (const auto& [b, c] : o.buckets_)
        buckets_[b] += c;
    }
    max_ = n ? std::max(max_, o.max_) : o.max_;
    min_ = n ? std::min(min_, o.min_) : o.min_;
    n_ = n + o.n_;
  }
  uint64_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  double max() const { return n_ ? double(max_) : 0.0; }
  bool exact() const { return buckets_.empty(); }
  // The nearest-rank q-quantile: the k-th smallest, k = floor(q (n - 1) + 0.5); 0 when empty.
  double quantile(double q) const {
    if (n_ == 0) return 0;
    const uint64_t k = uint64_t(std::floor(q * double(n_ - 1) + 0.5));
    if (k + 1 >= n_) return double(max_);
    if (buckets_.empty()) {
      std::vector<float> v = exact_;
      std::nth_element(v.begin(), v.begin() + long(k), v.end());
      return double(v[k]);
    }
    uint64_t seen = 0;
    for (const auto& [b, c] : buckets_) {
      seen += c;
      if (seen > k) return std::clamp(value(b), double(min_), double(max_));
    }
    return double(max_);
  }
  // Several quantiles, ascending q, exact while exact: one copy, each selected above the last.
  std::vector<double> quantiles(const std::vector<double>& qs) const {
    std::vector<double> out;
    if (!buckets_.empty() || n_ == 0) {
      for (double q : qs)
        out.push_back(quantile(q));
      return out;
    }
    std::vector<float> v = exact_;
    auto lo = v.begin();
    for (double q : qs) {
      const auto k = v.begin() + long(std::floor(q * double(v.size() - 1) + 0.5));
      if (k >= lo) {
        std::nth_element(lo, k, v.end());
        lo = k + 1;
      }
      out.push_back(double(*k));
    }
    return out;
  }

private:
  static constexpr double kWidth = 0.01;  // relative bucket width
  static int32_t bucket(float v) {
    if (!(v > 0)) return INT32_MIN;  // zero, negative, NaN: the lowest bucket
    return int32_t(std::floor(std::log(double(v)) / std::log1p(kWidth)));
  }
  static double value(int32_t b) {
    return b == INT32_MIN ? 0.0 : std::exp((double(b) + 0.5) * std::log1p(kWidth));
  }
  void bin_exact() {
    for (float v : exact_)
      ++buckets_[bucket(v)];
    exact_.clear();
    exact_.shrink_to_fit();
  }

  std::vector<float> exact_;
  std::map<int32_t, uint64_t> buckets_;
  uint64_t n_ = 0;
  float min_ = 0, max_ = 0;
};

// Small integers (round trips) counted by value: exact quantiles in memory bounded by the values.
class CountQuantiles {
public:
  void add(uint32_t v) { ++counts_[v], ++n_; }
  uint64_t size() const { return n_; }
  double quantile(double q) const {
    if (n_ == 0) return 0;
    const uint64_t k = uint64_t(std::floor(q * double(n_ - 1) + 0.5));
    uint64_t seen = 0;
    for (const auto& [v, c] : counts_) {
      seen += c;
      if (seen > k) return double(v);
    }
    return double(counts_.rbegin()->first);
  }

private:
  std::map<uint32_t, uint64_t> counts_;
  uint64_t n_ = 0;
};

}  // namespace iscsi_doctor
