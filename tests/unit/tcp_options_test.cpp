// SPDX-License-Identifier: GPL-2.0-or-later
// TCP options as on the wire (RFC 9293 3.1): the layout nearly every segment carries (NOP, NOP,
// timestamps; RFC 7323 Appendix A) is read without the general loop, and must read as the same
// options in any other order do.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "iscsi_doctor/segment.hpp"

using iscsi_doctor::read_tcp_options;
using iscsi_doctor::Segment;
namespace tcp_flag = iscsi_doctor::tcp_flag;

namespace {

Segment read(const std::vector<uint8_t>& opts, uint8_t flags = tcp_flag::ack) {
  Segment s;
  s.flags = flags;
  read_tcp_options(opts, s);
  return s;
}

// Timestamps option (kind 8, length 10): TSval 0x01020304, TSecr 0xa0b0c0d0.
const std::vector<uint8_t> kTs = {8, 10, 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0};

std::vector<uint8_t> cat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

void expect_ts(const Segment& s) {
  EXPECT_TRUE(s.has_timestamps);
  EXPECT_EQ(s.tsval, 0x01020304u);
  EXPECT_EQ(s.tsecr, 0xa0b0c0d0u);
  EXPECT_EQ(s.sack_left, s.sack_right);
  EXPECT_EQ(s.mss_option, 0);
}

}  // namespace

TEST(TcpOptions, TimestampsReadAlikeInAnyLayout) {
  expect_ts(read(cat({{1, 1}, kTs})));        // RFC 7323 Appendix A: the common layout
  expect_ts(read(cat({kTs, {1, 1}})));        // the same options, padding after
  expect_ts(read(cat({{1}, kTs, {1}})));      // and around
  expect_ts(read(cat({{1, 1}, kTs}), tcp_flag::syn | tcp_flag::ack));
}

TEST(TcpOptions, OtherOptionsBesideTimestamps) {
  // NOP, NOP, SACK (one block), then NOP, NOP, timestamps: 24 bytes, the general loop.
  const auto s = read(cat({{1, 1, 5, 10, 0, 0, 0x10, 0, 0, 0, 0x20, 0}, {1, 1}, kTs}));
  EXPECT_TRUE(s.has_timestamps);
  EXPECT_EQ(s.tsval, 0x01020304u);
  EXPECT_EQ(s.sack_left, 0x1000u);
  EXPECT_EQ(s.sack_right, 0x2000u);
  // A SYN's MSS, window scale and timestamps (Linux's SYN layout).
  const auto syn = read(cat({{2, 4, 0x05, 0xb4, 4, 2}, kTs, {1, 3, 3, 7}}), tcp_flag::syn);
  EXPECT_EQ(syn.mss_option, 1460);
  EXPECT_EQ(syn.wscale_option, 7);
  EXPECT_TRUE(syn.has_timestamps);
}

TEST(TcpOptions, TwelveBytesThatAreNotNopNopTimestamps) {
  // The first bytes of the common layout, but a timestamps option of the wrong length: none read.
  EXPECT_FALSE(read({1, 1, 8, 8, 1, 2, 3, 4, 5, 6, 0, 0}).has_timestamps);
  // End of list first: nothing after it is read.
  EXPECT_FALSE(read(cat({{0, 1}, kTs})).has_timestamps);
  // Cut short: a timestamps option that does not fit is not read.
  EXPECT_FALSE(read({1, 1, 8, 10, 1, 2, 3, 4, 5, 6}).has_timestamps);
}
