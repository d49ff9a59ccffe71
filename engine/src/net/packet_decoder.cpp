// SPDX-License-Identifier: GPL-2.0-or-later
// The fast decoder: link layer -> (VLAN, MPLS, PPPoE) -> IPv4/IPv6 -> TCP, parsed in place.
// Each header is length-checked once, then read with the engine's big-endian loads
// (util/byte_reader.hpp); nothing is allocated and nothing is copied except the Segment's fields.
//
// Lengths. The TCP payload handed to the engine is cut at the IP datagram's end (Ethernet pads
// short frames; the padding is not payload), and `payload_wire_len` is what the IP header says the
// wire carried, bounded by the frame's original length (pcap `len`): a capture whose snaplen cut the
// packet yields payload.size() < payload_wire_len, which the engine reports as lost data.
// A zero IPv4 total length / IPv6 payload length (TSO/GSO super-packets captured on the sender,
// jumbograms) means "as long as the frame".
#include "net/packet_decoder.hpp"

#include "net/dlt.hpp"

#include <algorithm>
#include <array>

#include "util/byte_reader.hpp"

namespace iscsi_doctor::net {
namespace {

using Bytes = std::span<const uint8_t>;

constexpr uint16_t kEtherIPv4 = 0x0800, kEtherIPv6 = 0x86dd, kEtherVlan = 0x8100, kEtherQinQ = 0x88a8,
                   kEtherQinQOld = 0x9100, kEtherMpls = 0x8847, kEtherMplsMulticast = 0x8848,
                   kEtherPppoeSession = 0x8864;
constexpr uint8_t kIpProtoTcp = 6;
constexpr int kMaxNesting = 8;  // VLAN tags, MPLS labels, IPv6 extension headers

// ---- TCP (RFC 9293 section 3.1) -------------------------------------------------------------
//  0                   1                   2                   3
//  |          Source Port          |       Destination Port        |
//  |                        Sequence Number                        |
//  |                    Acknowledgment Number                      |
//  |  Data |       |C|E|U|A|P|R|S|F|                               |
//  | Offset| Rsrvd |W|C|R|C|S|S|Y|I|            Window             |
//  |           Checksum            |         Urgent Pointer        |
//  |                    Options                    |    Padding    |
// `tcp` is the captured part of the TCP segment (already cut at the IP datagram's end); `wire_len`
// the segment's length on the wire according to IP.
Decoded decode_tcp(Bytes tcp, uint32_t wire_len, Segment& s, std::string_view& why) {
  if (tcp.size() < 20) {
    why = "TCP header";
    return Decoded::truncated;
  }
  s.src.port = load_be16(tcp, 0);
  s.dst.port = load_be16(tcp, 2);
  s.seq = load_be32(tcp, 4);
  s.ack = load_be32(tcp, 8);
  const size_t header_len = size_t(tcp[12] >> 4) * 4;
  s.flags = tcp[13] & 0x3f;  // FIN..URG; ECE/CWR are not part of the engine's flag set
  s.window = load_be16(tcp, 14);
  s.mss_option = 0;
  s.wscale_option = -1;
  s.sack_left = s.sack_right = 0;
  s.has_timestamps = false;
  if (header_len < 20 || header_len > wire_len) {
    why = header_len < 20 ? "TCP data offset < 5" : "TCP header longer than the IP payload";
    return Decoded::malformed;
  }
  s.payload_wire_len = wire_len - uint32_t(header_len);
  s.options_len = uint8_t(header_len - 20);
  s.payload = tcp.size() > header_len ? tcp.subspan(header_len) : Bytes{};
  if (header_len > 20) read_tcp_options(tcp.subspan(20, std::min(tcp.size(), header_len) - 20), s);
  return Decoded::tcp;
}

// ---- IPv4 (RFC 791 section 3.1) -------------------------------------------------------------
Decoded decode_ipv4(Frame f, Segment& s, std::string_view& why) {
  Bytes b = f.bytes;
  if (b.size() < 20) {
    why = "IPv4 header";
    return Decoded::truncated;
  }
  const size_t header_len = size_t(b[0] & 0x0f) * 4;
  if ((b[0] >> 4) != 4 || header_len < 20) {
    why = "IPv4 version/IHL";
    return Decoded::malformed;
  }
  if (b.size() < header_len) {
    why = "IPv4 options";
    return Decoded::truncated;
  }
  if (b[9] != kIpProtoTcp) return Decoded::not_tcp;
  if (load_be16(b, 6) & 0x3fff) {  // MF set or a fragment offset
    why = "IPv4 fragment";
    return Decoded::fragment;
  }
  const size_t on_wire = b.size() + f.wire_extra;
  size_t total = load_be16(b, 2);
  if (total == 0) total = on_wire;  // TSO/GSO: length left to the frame
  if (total < header_len) {
    why = "IPv4 total length < header length";
    return Decoded::malformed;
  }
  total = std::min(total, on_wire);
  s.src.addr = Address::ipv4(load_be32(b, 12));
  s.dst.addr = Address::ipv4(load_be32(b, 16));
  const size_t captured = std::min(total, b.size());
  return decode_tcp(b.subspan(header_len, captured - header_len), uint32_t(total - header_len), s, why);
}

// ---- IPv6 (RFC 8200 sections 3 and 4) -------------------------------------------------------
Decoded decode_ipv6(Frame f, Segment& s, std::string_view& why) {
  Bytes b = f.bytes;
  if (b.size() < 40) {
    why = "IPv6 header";
    return Decoded::truncated;
  }
  if ((b[0] >> 4) != 6) {
    why = "IPv6 version";
    return Decoded::malformed;
  }
  const size_t on_wire = b.size() + f.wire_extra;
  size_t total = 40 + size_t(load_be16(b, 4));
  if (total == 40) total = on_wire;  // jumbogram or TSO: length left to the frame
  total = std::min(total, on_wire);
  uint8_t next = b[6];
  size_t off = 40;
  for (int depth = 0; next != kIpProtoTcp; ++depth) {
    if (depth == kMaxNesting) return Decoded::not_tcp;
    size_t len = 0;
    switch (next) {
      case 0:   // hop-by-hop options
      case 43:  // routing
      case 60:  // destination options
        if (b.size() < off + 2) break;
        len = (size_t(b[off + 1]) + 1) * 8;
        break;
      case 51:  // authentication header (RFC 4302): length in 4-octet units, minus 2
        if (b.size() < off + 2) break;
        len = (size_t(b[off + 1]) + 2) * 4;
        break;
      case 44:  // fragment header: an atomic fragment (offset 0, M = 0) is a whole datagram
        if (b.size() < off + 8) break;
        if (load_be16(b, off + 2) & 0xfff9) {
          why = "IPv6 fragment";
          return Decoded::fragment;
        }
        len = 8;
        break;
      default:
        return Decoded::not_tcp;  // UDP, ICMPv6, ESP, no next header, ...
    }
    if (len == 0) {
      why = "IPv6 extension header";
      return Decoded::truncated;
    }
    next = b[off];
    off += len;
    if (off > total) {
      why = "IPv6 extension headers longer than the payload";
      return Decoded::malformed;
    }
  }
  if (b.size() < off) {
    why = "IPv6 extension header";
    return Decoded::truncated;
  }
  uint8_t src[16], dst[16];
  std::copy_n(b.data() + 8, 16, src);
  std::copy_n(b.data() + 24, 16, dst);
  s.src.addr = Address::ipv6(src);
  s.dst.addr = Address::ipv6(dst);
  const size_t captured = std::min(total, b.size());
  return decode_tcp(b.subspan(off, captured - off), uint32_t(total - off), s, why);
}

// IP with the version taken from the first nibble (raw IP, loopback, MPLS payloads).
Decoded decode_ip_any(Frame f, Segment& s, std::string_view& why) {
  if (f.bytes.empty()) {
    why = "IP header";
    return Decoded::truncated;
  }
  switch (f.bytes[0] >> 4) {
    case 4:
      return decode_ipv4(f, s, why);
    case 6:
      return decode_ipv6(f, s, why);
    default:
      return Decoded::not_tcp;
  }
}

Frame skip(Frame f, size_t n) { return {f.bytes.subspan(n), f.wire_extra}; }

// ---- Ethertype dispatch: IP, 802.1Q / 802.1ad tags, MPLS label stacks, PPPoE sessions ----------
Decoded decode_ethertype(uint16_t type, Frame f, Segment& s, std::string_view& why) {
  for (int depth = 0; depth < kMaxNesting; ++depth) {
    switch (type) {
      case kEtherIPv4:
        return decode_ipv4(f, s, why);
      case kEtherIPv6:
        return decode_ipv6(f, s, why);
      case kEtherVlan:
      case kEtherQinQ:
      case kEtherQinQOld:  // TCI (2 bytes), then the inner type
        if (f.bytes.size() < 4) {
          why = "802.1Q tag";
          return Decoded::truncated;
        }
        type = load_be16(f.bytes, 2);
        f = skip(f, 4);
        continue;
      case kEtherMpls:
      case kEtherMplsMulticast: {  // label entries until bottom-of-stack, then IP by its version
        size_t off = 0;
        for (;;) {
          if (f.bytes.size() < off + 4) {
            why = "MPLS label";
            return Decoded::truncated;
          }
          const bool bottom = f.bytes[off + 2] & 0x01;
          off += 4;
          if (bottom) break;
          if (off / 4 >= kMaxNesting) return Decoded::not_tcp;
        }
        return decode_ip_any(skip(f, off), s, why);
      }
      case kEtherPppoeSession:  // RFC 2516: 6-byte PPPoE header, then the PPP protocol
        if (f.bytes.size() < 8) {
          why = "PPPoE header";
          return Decoded::truncated;
        }
        switch (load_be16(f.bytes, 6)) {
          case 0x0021:
            return decode_ipv4(skip(f, 8), s, why);
          case 0x0057:
            return decode_ipv6(skip(f, 8), s, why);
          default:
            return Decoded::not_tcp;
        }
      default:
        return Decoded::not_tcp;
    }
  }
  return Decoded::not_tcp;
}

// ---- Link layers ----------------------------------------------------------------------------
Decoded decode_ethernet(Frame f, Segment& s, std::string_view& why) {
  if (f.bytes.size() < 14) {
    why = "Ethernet header";
    return Decoded::truncated;
  }
  uint16_t type = load_be16(f.bytes, 12);
  if (type <= 1500) {  // 802.3 length: only LLC/SNAP (AA AA 03 + OUI + ethertype) can carry IP
    if (f.bytes.size() < 22 || f.bytes[14] != 0xaa || f.bytes[15] != 0xaa || f.bytes[16] != 0x03)
      return Decoded::not_tcp;
    return decode_ethertype(load_be16(f.bytes, 20), skip(f, 22), s, why);
  }
  return decode_ethertype(type, skip(f, 14), s, why);
}

// Linux cooked capture v1: 16 bytes, protocol (an ethertype) in the last two.
Decoded decode_sll(Frame f, Segment& s, std::string_view& why) {
  if (f.bytes.size() < 16) {
    why = "Linux cooked header";
    return Decoded::truncated;
  }
  return decode_ethertype(load_be16(f.bytes, 14), skip(f, 16), s, why);
}

// Linux cooked capture v2: 20 bytes, protocol first.
Decoded decode_sll2(Frame f, Segment& s, std::string_view& why) {
  if (f.bytes.size() < 20) {
    why = "Linux cooked v2 header";
    return Decoded::truncated;
  }
  return decode_ethertype(load_be16(f.bytes, 0), skip(f, 20), s, why);
}

// BSD loopback / null: a 4-byte address family in the writer's byte order (2 for IPv4; 10, 24, 28
// or 30 for IPv6 depending on the OS). The IP version nibble says the same without the guessing.
Decoded decode_null(Frame f, Segment& s, std::string_view& why) {
  if (f.bytes.size() < 4) {
    why = "loopback header";
    return Decoded::truncated;
  }
  return decode_ip_any(skip(f, 4), s, why);
}

// PPP (RFC 1661), with or without the HDLC address/control bytes FF 03.
Decoded decode_ppp(Frame f, Segment& s, std::string_view& why) {
  if (f.bytes.size() >= 2 && f.bytes[0] == 0xff && f.bytes[1] == 0x03) f = skip(f, 2);
  if (f.bytes.size() < 2) {
    why = "PPP header";
    return Decoded::truncated;
  }
  switch (load_be16(f.bytes, 0)) {
    case 0x0021:
      return decode_ipv4(skip(f, 2), s, why);
    case 0x0057:
      return decode_ipv6(skip(f, 2), s, why);
    default:
      return Decoded::not_tcp;
  }
}

// A file's link type 14 is raw IP as OpenBSD writes it (its DLT_RAW; Wireshark reads it so);
// libpcap on other systems hands the number through.
constexpr int kDltRawOpenBsd = 14;

struct LinkEntry {
  int dlt;
  DecodeFn fn;
};
constexpr std::array kLinkTable{
    LinkEntry{DLT_EN10MB, decode_ethernet}, LinkEntry{DLT_LINUX_SLL, decode_sll},
    LinkEntry{DLT_LINUX_SLL2, decode_sll2}, LinkEntry{DLT_RAW, decode_ip_any},
    LinkEntry{DLT_IPV4, decode_ipv4},       LinkEntry{DLT_IPV6, decode_ipv6},
    LinkEntry{DLT_NULL, decode_null},       LinkEntry{DLT_LOOP, decode_null},
    LinkEntry{DLT_PPP, decode_ppp},         LinkEntry{DLT_PPP_SERIAL, decode_ppp},
    LinkEntry{kDltRawOpenBsd, decode_ip_any},
};

}  // namespace

DecodeFn fast_decoder(int dlt) {
  for (const auto& e : kLinkTable)
    if (e.dlt == dlt) return e.fn;
  return nullptr;
}

}  // namespace iscsi_doctor::net
