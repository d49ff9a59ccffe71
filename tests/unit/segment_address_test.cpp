// SPDX-License-Identifier: GPL-2.0-or-later
// Address and Endpoint comparisons, written on 64-bit words for speed, order as their bytes do
// (the connection table is ordered by them, and connections still open at the end of a capture
// are reported in that order).
#include <gtest/gtest.h>

#include <array>
#include <compare>
#include <cstdint>
#include <random>

#include "iscsi_doctor/segment.hpp"

using iscsi_doctor::Address;
using iscsi_doctor::Endpoint;

namespace {

std::strong_ordering by_bytes(const Address& a, const Address& b) {
  if (auto c = a.bytes <=> b.bytes; c != 0) return c;
  return a.v6 <=> b.v6;
}

Address random_address(std::mt19937_64& rng) {
  Address a;
  // Few distinct byte values, so that equal prefixes (and equal addresses) are common.
  for (auto& b : a.bytes)
    b = uint8_t(rng() % 3 == 0 ? rng() : rng() % 2);
  a.v6 = rng() % 2;
  return a;
}

}  // namespace

TEST(SegmentAddress, OrdersAndComparesAsItsBytes) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const Address a = random_address(rng), b = rng() % 4 ? random_address(rng) : a;
    ASSERT_EQ(a <=> b, by_bytes(a, b)) << i;
    ASSERT_EQ(a == b, by_bytes(a, b) == 0) << i;
  }
}

TEST(SegmentAddress, EndpointsOrderByAddressThenPort) {
  Endpoint a{Address::ipv4(0x0a000001), 3260}, b{Address::ipv4(0x0a000002), 1};
  EXPECT_LT(a, b);
  b.addr = a.addr;
  EXPECT_GT(a, b);
  b.port = 3260;
  EXPECT_EQ(a, b);
  EXPECT_LT(Address::ipv4(0x0a0000ff), Address::ipv4(0x0a000100));  // byte order, not host order
}
