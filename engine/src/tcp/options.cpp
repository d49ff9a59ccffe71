// SPDX-License-Identifier: GPL-2.0-or-later
// TCP options as on the wire (RFC 9293 3.1), for front-ends that read raw headers.
#include <algorithm>

#include "iscsi_doctor/segment.hpp"

namespace iscsi_doctor {

namespace {
uint32_t be32(std::span<const uint8_t> b, size_t i) {
  return uint32_t(b[i]) << 24 | uint32_t(b[i + 1]) << 16 | uint32_t(b[i + 2]) << 8 | b[i + 3];
}
}  // namespace

void read_tcp_options(std::span<const uint8_t> opts, Segment& s) {
  // Nearly every segment carries NOP, NOP, timestamps (RFC 7323 Appendix A): read it at once.
  if (opts.size() == 12 && opts[0] == 1 && opts[1] == 1 && opts[2] == 8 && opts[3] == 10) {
    s.has_timestamps = true;
    s.tsval = be32(opts, 4);
    s.tsecr = be32(opts, 8);
    return;
  }
  size_t i = 0;
  while (i < opts.size()) {
    const uint8_t kind = opts[i];
    if (kind == 0) break;  // end of option list
    if (kind == 1) {       // no-operation
      ++i;
      continue;
    }
    if (i + 1 >= opts.size()) break;
    const uint8_t len = opts[i + 1];
    if (len < 2 || i + len > opts.size()) break;  // malformed options: keep what we have
    // MSS and window scale only mean something on a SYN (RFC 9293 3.7.1, RFC 7323 2.2).
    if (s.flags & tcp_flag::syn) {
      if (kind == 2 && len == 4) s.mss_option = uint16_t(opts[i + 2] << 8 | opts[i + 3]);
      if (kind == 3 && len == 3) s.wscale_option = int8_t(std::min<uint8_t>(opts[i + 2], 14));
    }
    if (kind == 5 && len >= 10 && s.sack_left == s.sack_right) {  // the first SACK block (RFC 2018)
      s.sack_left = be32(opts, i + 2);
      s.sack_right = be32(opts, i + 6);
    }
    if (kind == 8 && len == 10) {  // timestamps (RFC 7323 3.2)
      s.has_timestamps = true;
      s.tsval = be32(opts, i + 2);
      s.tsecr = be32(opts, i + 6);
    }
    i += len;
  }
}

}  // namespace iscsi_doctor
