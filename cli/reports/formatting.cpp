// SPDX-License-Identifier: GPL-2.0-or-later
#include "reports/formatting.hpp"

#include <cmath>

#include <fmt/format.h>

namespace iscsi_doctor::cli {

std::string ms_text(double v) {
  if (!std::isfinite(v) || v < 0) return "-";
  if (v >= 1000) return fmt::format("{:.2f} s", v / 1000);
  if (v >= 100) return fmt::format("{:.0f} ms", v);
  if (v >= 10) return fmt::format("{:.1f} ms", v);
  if (v >= 1) return fmt::format("{:.2f} ms", v);
  return fmt::format("{:.3f} ms", v);
}

std::string size_text(uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

std::string file_size_text(uint64_t b) {
  if (b >= 1'000'000'000) return fmt::format("{:.1f} GB", b / 1e9);
  if (b >= 1'000'000) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1'000) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", b);
}

std::string compression_text(Compression c) {
  return c == Compression::none ? "" : fmt::format(" ({})", compression_name(c));
}

std::string count_text(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string frames_text(const std::vector<uint64_t>& frames) {
  std::string s;
  for (size_t i = 0; i < frames.size(); ++i)
    s += fmt::format("{}{}", i ? ", " : "", frames[i]);
  return s;
}

std::string hex32(uint32_t v) { return fmt::format("0x{:08x}", v); }

std::string_view vantage_words(Vantage v) {
  switch (v) {
    case Vantage::initiator:
      return "near the initiator";
    case Vantage::target:
      return "near the target";
    case Vantage::midpath:
      return "mid-path";
    default:
      return "unknown";
  }
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

}  // namespace iscsi_doctor::cli
