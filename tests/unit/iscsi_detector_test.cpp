// SPDX-License-Identifier: GPL-2.0-or-later
// StreamDetector (docs/rules.md "Ports"): iSCSI joined mid-session on an unknown port.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "iscsi/detector.hpp"
#include "wire.hpp"

using iscsi_doctor::iscsi::StreamDetector;
using Verdict = StreamDetector::Verdict;

namespace {
std::vector<uint8_t> join(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
}  // namespace

TEST(IscsiDetector, CommandsAnsweredByTheirTagsFromTheOtherSide) {
  StreamDetector d;
  // Side 1 sends first (the target's answer to a command before the capture), then the commands.
  EXPECT_EQ(d.feed(1, wire::response(7)), Verdict::undecided);
  EXPECT_EQ(d.feed(0, wire::read10(8, 4096)), Verdict::undecided);
  EXPECT_EQ(d.feed(1, wire::data_in(8, 4096, true)), Verdict::undecided);  // one answered
  EXPECT_EQ(d.feed(0, join(wire::read10(9, 512), wire::read10(10, 512))), Verdict::undecided);
  EXPECT_EQ(d.feed(1, join(wire::data_in(9, 512, true), wire::data_in(10, 512, true))), Verdict::iscsi);
  EXPECT_EQ(d.initiator_side(), 0);
}

TEST(IscsiDetector, ALengthThatLeadsIntoNoHeaderRulesItOut) {
  StreamDetector d;
  auto bytes = join(wire::read10(1, 512), std::vector<uint8_t>(100, 0x5a));
  EXPECT_EQ(d.feed(0, bytes), Verdict::not_iscsi);
}

TEST(IscsiDetector, OneSideSendingBothPartsRulesItOut) {
  StreamDetector d;
  EXPECT_EQ(d.feed(0, wire::read10(1, 512)), Verdict::undecided);
  EXPECT_EQ(d.feed(0, wire::response(1)), Verdict::not_iscsi);
}

TEST(IscsiDetector, CommandsNobodyAnswersAreNeverIscsi) {
  StreamDetector d;
  std::mt19937 rng(3);
  Verdict v = Verdict::undecided;
  for (uint32_t i = 0; i < 200 && v == Verdict::undecided; ++i) {
    v = d.feed(0, wire::read10(i, 512));
    std::vector<uint8_t> noise(600);
    for (auto& b : noise) b = uint8_t(rng());
    if (v == Verdict::undecided) v = d.feed(1, noise);
  }
  EXPECT_EQ(v, Verdict::not_iscsi);
}
