// SPDX-License-Identifier: GPL-2.0-or-later
// Percentiles in bounded memory (iscsi_doctor/quantiles.hpp): exact nearest rank up to kExact
// values, within 0.5% beyond, merges as if added one by one.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "iscsi_doctor/quantiles.hpp"

using iscsi_doctor::CountQuantiles;
using iscsi_doctor::LatencyQuantiles;

namespace {
double nearest_rank(std::vector<float> v, double q) {
  const size_t k = size_t(std::floor(q * double(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return v[k];
}
std::vector<float> lognormal(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<float> d(2.0f, 1.0f);  // ms: mostly 1-50, a long tail
  std::vector<float> v(n);
  for (float& x : v)
    x = d(rng);
  return v;
}
}  // namespace

TEST(Quantiles, ExactUpToTheCap) {
  const auto v = lognormal(LatencyQuantiles::kExact, 1);
  LatencyQuantiles q;
  for (float x : v)
    q.add(x);
  ASSERT_TRUE(q.exact());
  const auto got = q.quantiles({0.5, 0.9, 0.99, 0.999, 1});
  const double want[] = {0.5, 0.9, 0.99, 0.999, 1};
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(got[i], nearest_rank(v, want[i])) << want[i];
  EXPECT_EQ(q.quantile(0.5), nearest_rank(v, 0.5));
}

TEST(Quantiles, BeyondTheCapWithinHalfAPercentAndBounded) {
  const auto v = lognormal(LatencyQuantiles::kExact * 4, 2);
  LatencyQuantiles q;
  for (float x : v)
    q.add(x);
  EXPECT_FALSE(q.exact());
  EXPECT_EQ(q.size(), v.size());
  for (double p : {0.01, 0.5, 0.9, 0.99, 0.999})
    EXPECT_NEAR(q.quantile(p), nearest_rank(v, p), nearest_rank(v, p) * 0.005) << p;
  EXPECT_EQ(q.max(), *std::max_element(v.begin(), v.end()));
  EXPECT_EQ(q.quantile(1), q.max());
}

TEST(Quantiles, MergeIsAsIfAddedOneByOne) {
  const auto a = lognormal(40000, 3), b = lognormal(40000, 4);
  LatencyQuantiles qa, qb, all;
  for (float x : a)
    qa.add(x), all.add(x);
  for (float x : b)
    qb.add(x), all.add(x);
  qa.merge(qb);
  EXPECT_EQ(qa.size(), all.size());
  for (double p : {0.5, 0.9, 0.99})
    EXPECT_DOUBLE_EQ(qa.quantile(p), all.quantile(p)) << p;
  LatencyQuantiles small;  // both exact: stays exact
  small.add(3);
  small.merge(LatencyQuantiles{});
  EXPECT_TRUE(small.exact());
  EXPECT_EQ(small.quantile(0.5), 3);
}

TEST(Quantiles, RoundTripsCountedExactly) {
  CountQuantiles c;
  for (int i = 0; i < 100000; ++i)
    c.add(i % 10 == 0 ? 3 : 1);
  EXPECT_EQ(c.quantile(0.5), 1);
  EXPECT_EQ(c.quantile(0.95), 3);
  EXPECT_EQ(CountQuantiles{}.quantile(0.5), 0);
}
