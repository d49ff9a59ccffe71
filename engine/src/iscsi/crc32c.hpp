// SPDX-License-Identifier: GPL-2.0-or-later
// CRC32C (Castagnoli), the iSCSI header and data digest (RFC 7143 §13.1, RFC 3720 Appendix B.4).
//
// Usage:  uint32_t s = crc32c_init(); s = crc32c(s, part1); s = crc32c(s, part2);
//         uint32_t digest = crc32c_final(s);
// On the wire the digest is the CRC value sent least-significant byte first: RFC 3720 B.4
// shows 32 zero bytes giving "aa 36 91 8a" for the value 0x8a9136aa (Wireshark reads the
// wire with ntohl and compares against the byte-swapped CRC, which is the same thing).
#pragma once

#include <cstdint>
#include <span>

namespace iscsi_doctor::iscsi {

constexpr uint32_t crc32c_init() { return 0xffffffffu; }
constexpr uint32_t crc32c_final(uint32_t state) { return ~state; }

// Feeds bytes into a running state (from crc32c_init() or an earlier call).
uint32_t crc32c(uint32_t state, std::span<const uint8_t> bytes);

// One-shot: init, update, final.
inline uint32_t crc32c_of(std::span<const uint8_t> bytes) {
  return crc32c_final(crc32c(crc32c_init(), bytes));
}

// The digest value carried in 4 wire bytes (little-endian, see above). `wire` must hold >= 4 bytes.
inline uint32_t digest_from_wire(std::span<const uint8_t> wire) {
  return uint32_t(wire[0]) | (uint32_t(wire[1]) << 8) | (uint32_t(wire[2]) << 16) | (uint32_t(wire[3]) << 24);
}
// The 4 wire bytes for a digest value.
inline void digest_to_wire(uint32_t digest, std::span<uint8_t, 4> out) {
  for (int i = 0; i < 4; ++i)
    out[i] = uint8_t(digest >> (8 * i));
}

// True when the running process uses the SSE4.2 crc32 instruction (for tests and diagnostics).
bool crc32c_uses_hardware();

namespace detail {
// The portable slice-by-8 path, exposed so tests can compare it with the hardware path.
uint32_t crc32c_portable(uint32_t state, std::span<const uint8_t> bytes);
}  // namespace detail

}  // namespace iscsi_doctor::iscsi
