// SPDX-License-Identifier: GPL-2.0-or-later
// Fuzzes text-key parsing and login negotiation. The input is split at 0xff bytes into PDU
// data segments; the byte after each 0xff picks the opcode and flags (T, C, stages).
#include <cstdint>
#include <span>
#include <string_view>

#include "iscsi/login_keys.hpp"

using namespace iscsi_doctor::iscsi;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  for (const auto& kv : parse_text_keys(in)) {
    if (kv.key.empty() || kv.key.size() > 63 || kv.value.size() > 8192) __builtin_trap();
    (void)parse_number(kv.value);
  }
  (void)parse_number(std::string_view(reinterpret_cast<const char*>(data), size));

  static constexpr uint8_t kOps[] = {0x03, 0x23, 0x04, 0x24, 0x01};
  Negotiation n;
  size_t start = 0;
  uint8_t ctl = size ? data[0] : 0;
  for (size_t i = 1; i <= size; ++i) {
    if (i == size || data[i] == 0xff) {
      Bhs b;
      b.opcode = kOps[ctl % sizeof kOps];
      b.flags = uint8_t(ctl & 0xcf);
      b.w36 = uint32_t(ctl & 0x30) << 20;  // sometimes a non-zero status class
      const size_t from = start + 1;
      n.add_pdu(b, in.subspan(std::min(from, size), (i > from ? i - from : 0)), ctl & 0x80 && ctl & 0x08);
      start = i + 1;
      ctl = i + 1 < size ? data[i + 1] : 0;
      ++i;
    }
  }
  const auto& r = n.result();
  if (r.keys_seen.size() > 4096) __builtin_trap();
  if (r.max_burst_length.value < 512 || r.max_burst_length.value > 16777215) __builtin_trap();
  if (r.error_recovery_level.value > 2) __builtin_trap();
  (void)n.framer_config();
  return 0;
}
