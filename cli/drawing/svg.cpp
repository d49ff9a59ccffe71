// SPDX-License-Identifier: GPL-2.0-or-later
#include "drawing/svg.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace iscsi_doctor::cli::svg {

namespace {
// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, surrogates or code
// points past U+10FFFF), or 0.
size_t utf8_len(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned c = b(i);
  size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  if (n == 2 && c < 0xc2) return 0;
  if (n == 3 && ((c == 0xe0 && b(i + 1) < 0xa0) || (c == 0xed && b(i + 1) >= 0xa0))) return 0;
  if (n == 4 && ((c == 0xf0 && b(i + 1) < 0x90) || c > 0xf4 || (c == 0xf4 && b(i + 1) >= 0x90))) return 0;
  return n;
}
}  // namespace

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default: {
        // Names come from the wire: control characters are not allowed in XML 1.0, and a byte
        // that is not UTF-8 would make the page ill-formed (U+FFFD stands in for it).
        const size_t n = utf8_len(s, i);
        if (n == 0) {
          out += "\xef\xbf\xbd";
          ++i;
          continue;
        }
        if (n == 1 && static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
          out += '?';
        else
          out.append(s.substr(i, n));
        i += n;
        continue;
      }
    }
    ++i;
  }
  return out;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "0";
  std::string s = fmt::format("{:.1f}", v);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  if (s == "-0") s = "0";
  return s;
}

void LogHistogram::add(double ms) {
  int i = 0;
  if (ms > kMinMs) i = int(std::floor(std::log10(ms / kMinMs) * kPerDecade));
  bins[size_t(std::clamp(i, 0, kBins - 1))]++;
  ++total;
}

double LogHistogram::edge_ms(int i) { return kMinMs * std::pow(10.0, double(i) / kPerDecade); }

void TimeBins::start(int64_t t0) {
  if (started) return;
  started = true;
  origin_ns = t0;
}

void TimeBins::grow_to(int64_t t) {
  while (t - origin_ns >= width_ns * int64_t(kBins)) {
    for (size_t i = 0; i < kBins / 2; ++i)
      for (size_t k = 0; k < 3; ++k)
        v[i][k] = v[2 * i][k] + v[2 * i + 1][k];
    for (size_t i = kBins / 2; i < kBins; ++i)
      v[i] = {};
    width_ns *= 2;
  }
}

void TimeBins::add_span(size_t k, int64_t from, int64_t to, double amount) {
  if (!started) start(from);
  from = std::max(from, origin_ns);
  to = std::max(to, from);
  grow_to(to);
  const int64_t b0 = (from - origin_ns) / width_ns, b1 = (to - origin_ns) / width_ns;
  if (b0 == b1) {
    v[size_t(b0)][k] += amount;
    return;
  }
  const double per_ns = amount / double(to - from);
  for (int64_t b = b0; b <= b1; ++b) {
    const int64_t lo = std::max(from, origin_ns + b * width_ns);
    const int64_t hi = std::min(to, origin_ns + (b + 1) * width_ns);
    v[size_t(b)][k] += per_ns * double(hi - lo);
  }
}

size_t TimeBins::used() const {
  size_t n = 0;
  for (size_t i = 0; i < kBins; ++i)
    if (v[i][0] != 0 || v[i][1] != 0 || v[i][2] != 0) n = i + 1;
  return n;
}

}  // namespace iscsi_doctor::cli::svg
