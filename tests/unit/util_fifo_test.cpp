// SPDX-License-Identifier: GPL-2.0-or-later
// util::Fifo, the engine's queue: order, random access and iteration survive the compaction of
// popped slots, and an empty queue holds no memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>

#include "util/fifo.hpp"

using iscsi_doctor::util::Fifo;

TEST(UtilFifo, BehavesAsADequeAcrossCompactions) {
  Fifo<int> f;
  std::deque<int> d;
  int next = 0;
  for (int round = 0; round < 2000; ++round) {
    for (int k = 0; k < round % 7 + 1; ++k) {
      f.push_back(next);
      d.push_back(next++);
    }
    for (int k = 0; k < round % 5 && !d.empty(); ++k) {
      f.pop_front();
      d.pop_front();
    }
    ASSERT_EQ(f.size(), d.size());
    ASSERT_TRUE(std::equal(f.begin(), f.end(), d.begin(), d.end()));
    if (!d.empty()) {
      EXPECT_EQ(f.front(), d.front());
      EXPECT_EQ(f.back(), d.back());
      EXPECT_EQ(f[d.size() / 2], d[d.size() / 2]);
      // sorted contents: the binary searches the tracker does
      auto it = std::lower_bound(f.begin(), f.end(), d.back());
      EXPECT_EQ(*it, d.back());
      EXPECT_EQ(*f.rbegin(), d.back());
      EXPECT_EQ(std::distance(f.rbegin(), f.rend()), std::ptrdiff_t(d.size()));
    }
  }
  while (!f.empty()) f.pop_front();
  EXPECT_EQ(f.size(), 0u);
}
