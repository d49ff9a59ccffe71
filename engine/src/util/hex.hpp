// SPDX-License-Identifier: GPL-2.0-or-later
// A task tag as every message writes it: "0x0000002a".
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace iscsi_doctor {

inline std::string hex_itt(uint32_t itt) {
  char b[11];
  std::snprintf(b, sizeof b, "0x%08x", itt);
  return b;
}

}  // namespace iscsi_doctor
