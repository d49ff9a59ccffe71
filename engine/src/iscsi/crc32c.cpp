// SPDX-License-Identifier: GPL-2.0-or-later
#include "iscsi/crc32c.hpp"

#include <array>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define ISCSI_DOCTOR_CRC32C_X86 1
#endif

namespace iscsi_doctor::iscsi {
namespace {

// Reflected Castagnoli polynomial 0x1EDC6F41.
constexpr uint32_t kPoly = 0x82f63b78u;

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  // Slice-by-8: t[k][i] is the CRC of byte i followed by k zero bytes.
  for (uint32_t i = 0; i < 256; ++i)
    for (size_t k = 1; k < 8; ++k)
      t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  return t;
}

constexpr Tables kTables = make_tables();

#ifdef ISCSI_DOCTOR_CRC32C_X86
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t state, const uint8_t* p, size_t n) {
  uint64_t c = state;
  while (n >= 8) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
      v = (v << 8) | p[i];  // little-endian load without aliasing tricks
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = uint32_t(c);
  while (n--)
    c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

bool detect_sse42() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
const bool kHaveSse42 = detect_sse42();
#endif

}  // namespace

namespace detail {
uint32_t crc32c_portable(uint32_t c, std::span<const uint8_t> bytes) {
  const uint8_t* p = bytes.data();
  size_t n = bytes.size();
  while (n >= 8) {
    const uint32_t lo =
        c ^ (uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24));
    c = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
        kTables[4][lo >> 24] ^ kTables[3][p[4]] ^ kTables[2][p[5]] ^ kTables[1][p[6]] ^ kTables[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n--)
    c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xff];
  return c;
}
}  // namespace detail

uint32_t crc32c(uint32_t state, std::span<const uint8_t> bytes) {
#ifdef ISCSI_DOCTOR_CRC32C_X86
  if (kHaveSse42) return crc32c_sse42(state, bytes.data(), bytes.size());
#endif
  return detail::crc32c_portable(state, bytes);
}

bool crc32c_uses_hardware() {
#ifdef ISCSI_DOCTOR_CRC32C_X86
  return kHaveSse42;
#else
  return false;
#endif
}

}  // namespace iscsi_doctor::iscsi
