// SPDX-License-Identifier: GPL-2.0-or-later
// What a front-end hands the engine for each TCP segment: plain values only, so the CLI
// (libtins), the Wireshark plugin (epan) and tests can all feed it alike.
#pragma once

#include <array>
#include <bit>
#include <compare>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace iscsi_doctor {

struct Address {
  std::array<uint8_t, 16> bytes{};  // IPv4 uses the first 4 bytes
  bool v6 = false;

  static Address ipv4(uint32_t host_order);
  static Address ipv6(const uint8_t (&b)[16]);
  std::string str() const;
  // As the defaulted ones (bytes in order, then v6), on two 64-bit words: every segment's
  // connection lookup compares addresses, and the library's memcmp call costs more than the work.
  friend bool operator==(const Address& a, const Address& b) {
    return a.word(0) == b.word(0) && a.word(1) == b.word(1) && a.v6 == b.v6;
  }
  friend std::strong_ordering operator<=>(const Address& a, const Address& b) {
    for (int i = 0; i < 2; ++i)
      if (auto c = a.key(i) <=> b.key(i); c != 0) return c;
    return a.v6 <=> b.v6;
  }

private:
  uint64_t word(int i) const {
    uint64_t w;
    std::memcpy(&w, bytes.data() + 8 * i, 8);
    return w;
  }
  uint64_t key(int i) const {  // bytes i*8.. as a big-endian number: compares as memcmp does
    const uint64_t w = word(i);
    if constexpr (std::endian::native == std::endian::little)
      return __builtin_bswap64(w);
    else
      return w;
  }
};

struct Endpoint {
  Address addr;
  uint16_t port = 0;
  std::string str() const;  // "10.0.0.1:3260", "[fe80::1]:3260"
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
  friend auto operator<=>(const Endpoint&, const Endpoint&) = default;
};

namespace tcp_flag {
inline constexpr uint8_t fin = 0x01, syn = 0x02, rst = 0x04, psh = 0x08, ack = 0x10, urg = 0x20;
}

// What a segment was to its connection's byte stream (Analyzer::feed's answer), so front-ends can
// show the timeline Wireshark-style without redoing the TCP work.
enum class SegmentStatus : uint8_t {
  ignored,         // not an iSCSI connection (or over a cap)
  syn,             // SYN or SYN-ACK
  new_data,        // in-order bytes delivered to the iSCSI framer
  out_of_order,    // beyond a hole; held until the hole fills
  retransmission,  // bytes already seen (or filling an acknowledged hole is new_data)
  keepalive,       // 0/1 byte below the next sequence number
  pure_ack,        // no data, acknowledges
  window_update,   // no data, same ACK, a new window
  fin,
  rst,
};
std::string_view segment_status_name(SegmentStatus s);

struct Segment {
  uint64_t frame = 0;   // 1-based, as Wireshark counts
  int64_t time_ns = 0;  // capture timestamp, nanoseconds since the epoch
  Endpoint src, dst;
  uint32_t seq = 0, ack = 0;
  uint8_t flags = 0;                 // tcp_flag bits
  uint16_t window = 0;               // as on the wire (unscaled)
  uint16_t mss_option = 0;           // 0 when absent
  int8_t wscale_option = -1;         // -1 when absent
  uint32_t sack_left = 0;            // the first SACK block (RFC 2018) as on the wire, equal when
  uint32_t sack_right = 0;           // absent: a D-SACK (RFC 2883) when it lies below the ACK
  bool has_timestamps = false;       // RFC 7323 TSval and TSecr as on the wire, when present
  uint32_t tsval = 0, tsecr = 0;
  uint8_t options_len = 0;           // TCP header bytes beyond the fixed 20 (0 when unknown): data
                                     // segments carry them inside the MSS (timestamps: 1460 -> 1448)
  std::span<const uint8_t> payload;  // valid only during Analyzer::feed
  uint32_t payload_wire_len = 0;     // TCP payload length on the wire; > payload.size() when the
                                     // capture's snaplen cut the packet short
};

// Reads a TCP header's options (the bytes after its fixed 20) into s: the MSS and window scale of
// a SYN (s.flags set first), the first SACK block and the timestamps of any segment
// (tcp/options.cpp).
void read_tcp_options(std::span<const uint8_t> options, Segment& s);

}  // namespace iscsi_doctor
