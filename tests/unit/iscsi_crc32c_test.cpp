// SPDX-License-Identifier: GPL-2.0-or-later
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "iscsi/crc32c.hpp"

using namespace iscsi_doctor::iscsi;

namespace {
std::vector<uint8_t> bytes_of(std::initializer_list<int> v) {
  return std::vector<uint8_t>(v.begin(), v.end());
}
}  // namespace

// RFC 3720 Appendix B.4: the CRC bytes are listed in wire order.
TEST(Crc32c, Rfc3720Zeros) {
  std::vector<uint8_t> d(32, 0x00);
  EXPECT_EQ(crc32c_of(d), 0x8a9136aau);
  std::array<uint8_t, 4> wire{};
  digest_to_wire(crc32c_of(d), wire);
  EXPECT_EQ(wire, (std::array<uint8_t, 4>{0xaa, 0x36, 0x91, 0x8a}));  // "aa 36 91 8a"
}

TEST(Crc32c, Rfc3720Ones) {
  std::vector<uint8_t> d(32, 0xff);
  EXPECT_EQ(crc32c_of(d), 0x62a8ab43u);  // "43 ab a8 62"
}

TEST(Crc32c, Rfc3720Incrementing) {
  std::vector<uint8_t> d(32);
  std::iota(d.begin(), d.end(), uint8_t{0});
  EXPECT_EQ(crc32c_of(d), 0x46dd794eu);  // "4e 79 dd 46"
}

TEST(Crc32c, Rfc3720Decrementing) {
  std::vector<uint8_t> d(32);
  for (int i = 0; i < 32; ++i)
    d[i] = uint8_t(31 - i);
  EXPECT_EQ(crc32c_of(d), 0x113fdb5cu);  // "5c db 3f 11"
}

TEST(Crc32c, Rfc3720ReadCommandPdu) {
  // An iSCSI SCSI Read (10) command PDU from B.4; CRC "56 3a 96 d9".
  const auto pdu = bytes_of({0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                             0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                             0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                             0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00});
  EXPECT_EQ(crc32c_of(pdu), 0xd9963a56u);
  EXPECT_EQ(digest_from_wire(bytes_of({0x56, 0x3a, 0x96, 0xd9})), 0xd9963a56u);
}

TEST(Crc32c, CheckValue) {
  const std::string s = "123456789";
  EXPECT_EQ(crc32c_of(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size())), 0xe3069283u);
  EXPECT_EQ(crc32c_of({}), 0u);
}

TEST(Crc32c, IncrementalEqualsOneShotAtEverySplit) {
  std::mt19937 rng(7);
  std::vector<uint8_t> d(301);
  for (auto& b : d)
    b = uint8_t(rng());
  const uint32_t whole = crc32c_of(d);
  for (size_t cut = 0; cut <= d.size(); ++cut) {
    uint32_t s = crc32c_init();
    s = crc32c(s, std::span(d).first(cut));
    s = crc32c(s, std::span(d).subspan(cut));
    ASSERT_EQ(crc32c_final(s), whole) << "cut " << cut;
  }
}

TEST(Crc32c, PortableMatchesDispatchedForAllLengthsAndAlignments) {
  std::mt19937 rng(11);
  std::vector<uint8_t> d(200);
  for (auto& b : d)
    b = uint8_t(rng());
  for (size_t off = 0; off < 9; ++off)
    for (size_t len = 0; off + len <= d.size(); len += 7) {
      const auto s = std::span(d).subspan(off, len);
      ASSERT_EQ(detail::crc32c_portable(0x12345678u, s), crc32c(0x12345678u, s)) << off << "/" << len;
    }
  (void)crc32c_uses_hardware();
}
