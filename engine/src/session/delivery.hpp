// SPDX-License-Identifier: GPL-2.0-or-later
// What a connection's delivery cookies (tcp/cookie.hpp) carry: the TCP layer keeps them with each
// segment and its ACKs without reading them.
#pragma once

#include <cstdint>

#include "tcp/cookie.hpp"

namespace iscsi_doctor::session {

// owner: the command whose PDU was in progress when the bytes came: its slot, and its first frame
// (the slot may hold another command later).
struct Owner {
  uint32_t slot = 0;  // 0: none
  uint64_t cmd = 0;
};
inline tcp::Cookie owner_cookie(const Owner& o) { return {o.cmd, o.slot}; }
inline Owner owner_of(const tcp::Cookie& k) { return {uint32_t(k.b), k.a}; }

// progress: the half trips the command carried by the bytes had reached with them, its first frame
// and its ITT; an ACK that acknowledges them counts its crossings from there.
struct Progress {
  int32_t h = -1;  // -1: no command
  uint64_t cmd = 0;
  uint32_t itt = 0;
};
inline tcp::Cookie progress_cookie(const Progress& p) {
  if (p.h < 0) return {};
  return {p.cmd, uint64_t(p.itt) << 32 | uint32_t(p.h + 1)};
}
inline Progress progress_of(const tcp::Cookie& k) {
  if (k.empty()) return {};
  return {int32_t(uint32_t(k.b)) - 1, k.a, uint32_t(k.b >> 32)};
}

}  // namespace iscsi_doctor::session
