// SPDX-License-Identifier: GPL-2.0-or-later
#include <array>
#include <cstdio>

#include "iscsi_doctor/finding_kinds.hpp"
#include "iscsi_doctor/results.hpp"

namespace iscsi_doctor {

std::string_view side_name(Side s) {
  return s == Side::initiator ? "initiator" : s == Side::target ? "target" : "network";
}

std::string_view finding_name(FindingKind k) {
  return static_cast<size_t>(k) < kFindingKinds.size() ? finding_kind(k).name : "unknown";
}

std::optional<FindingKind> finding_from_name(std::string_view name) {
  for (const FindingKindInfo& i : kFindingKinds)
    if (i.name == name) return i.kind;
  return std::nullopt;
}

std::string_view segment_status_name(SegmentStatus s) {
  switch (s) {
    case SegmentStatus::syn:
      return "syn";
    case SegmentStatus::new_data:
      return "new_data";
    case SegmentStatus::out_of_order:
      return "out_of_order";
    case SegmentStatus::retransmission:
      return "retransmission";
    case SegmentStatus::keepalive:
      return "keepalive";
    case SegmentStatus::pure_ack:
      return "pure_ack";
    case SegmentStatus::window_update:
      return "window_update";
    case SegmentStatus::fin:
      return "fin";
    case SegmentStatus::rst:
      return "rst";
    default:
      return "ignored";
  }
}

std::string_view vantage_name(Vantage v) {
  switch (v) {
    case Vantage::initiator:
      return "initiator";
    case Vantage::target:
      return "target";
    case Vantage::midpath:
      return "midpath";
    default:
      return "unknown";
  }
}

Address Address::ipv4(uint32_t host_order) {
  Address a;
  a.bytes[0] = uint8_t(host_order >> 24);
  a.bytes[1] = uint8_t(host_order >> 16);
  a.bytes[2] = uint8_t(host_order >> 8);
  a.bytes[3] = uint8_t(host_order);
  return a;
}

Address Address::ipv6(const uint8_t (&b)[16]) {
  Address a;
  a.v6 = true;
  for (int i = 0; i < 16; ++i)
    a.bytes[i] = b[i];
  return a;
}

std::string Address::str() const {
  char buf[48];
  if (!v6) {
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", bytes[0], bytes[1], bytes[2], bytes[3]);
    return buf;
  }
  // RFC 5952: lower case, longest run of zero groups compressed.
  uint16_t g[8];
  for (int i = 0; i < 8; ++i)
    g[i] = uint16_t(bytes[2 * i] << 8 | bytes[2 * i + 1]);
  int best = -1, best_len = 0;
  for (int i = 0; i < 8;) {
    int j = i;
    while (j < 8 && g[j] == 0)
      ++j;
    if (j - i > best_len && j - i > 1) best = i, best_len = j - i;
    i = (j == i) ? i + 1 : j;
  }
  std::string out;
  for (int i = 0; i < 8; ++i) {
    if (i == best) {
      out += "::";
      i += best_len - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    std::snprintf(buf, sizeof buf, "%x", g[i]);
    out += buf;
  }
  return out;
}

std::string Endpoint::str() const {
  return addr.v6 ? "[" + addr.str() + "]:" + std::to_string(port) : addr.str() + ":" + std::to_string(port);
}

}  // namespace iscsi_doctor
