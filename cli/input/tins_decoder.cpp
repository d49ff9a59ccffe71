// SPDX-License-Identifier: GPL-2.0-or-later
// The libtins decoder: a frame becomes a libtins PDU chain (link -> IP/IPv6 -> TCP -> RawPDU), and
// the Segment is read from those objects. Built as the module iscsi-doctor-tins.so, which the
// binary loads when a run first needs it (tins_decoder_loader.cpp); tests/fuzz links it directly.
// It serves two purposes:
//  - link types the fast decoder does not parse (802.11, radiotap, PPI, PKTAP) are still read;
//  - `--decoder libtins` decodes every frame this way, so the tests can check that the fast
//    decoder and libtins agree on every capture.
// It allocates several objects per packet (the reader runs about 1.7x slower than with the fast
// decoder: 1.58 s against 0.93 s for 2.5 M packets, 2 GB), which is
// why it is not the default. libtins' own sniffer loop is not used: it silently skips packets it
// cannot parse (breaking Wireshark's frame numbering) and keeps only microsecond timestamps.
#include <tins/dot11/dot11_base.h>
#include <tins/dot3.h>
#include <tins/endianness.h>
#include <tins/ethernetII.h>
#include <tins/exceptions.h>
#include <tins/ip.h>
#include <tins/ipv6.h>
#include <tins/loopback.h>
#include <tins/pktap.h>
#include <tins/ppi.h>
#include <tins/radiotap.h>
#include <tins/rawpdu.h>
#include <tins/sll.h>
#include <tins/tcp.h>

#include "net/dlt.hpp"

#include <array>
#include <memory>
#include <string>

#include "input/tins_decoder.hpp"

namespace iscsi_doctor::cli {
namespace {

// The PDU chain of the last frame decoded on this thread: Segment::payload points into it and
// must stay valid until the caller has fed the segment to the engine.
thread_local std::unique_ptr<Tins::PDU> held_pdu;
thread_local std::string held_reason;

Tins::PDU* ip_from_bytes(const uint8_t* data, uint32_t size) {
  if (size == 0) return nullptr;
  if ((data[0] >> 4) == 4) return new Tins::IP(data, size);
  if ((data[0] >> 4) == 6) return new Tins::IPv6(data, size);
  return nullptr;
}

using Factory = Tins::PDU* (*)(const uint8_t*, uint32_t);
template <typename T>
Tins::PDU* make(const uint8_t* data, uint32_t size) {
  return new T(data, size);
}
Tins::PDU* make_dot11(const uint8_t* data, uint32_t size) { return Tins::Dot11::from_bytes(data, size); }
Tins::PDU* make_ethernet(const uint8_t* data, uint32_t size) {
  // As libtins' own sniffer does: a type/length field below 8 in its high byte is an 802.3 length.
  if (size >= 13 && data[12] < 8) return new Tins::Dot3(data, size);
  return new Tins::EthernetII(data, size);
}

template <Factory F>
Decoded decode_with(Frame f, Segment& s, std::string_view& why) {
  s.mss_option = 0;
  s.wscale_option = -1;
  s.sack_left = s.sack_right = 0;
  s.has_timestamps = false;
  try {
    held_pdu.reset(F(f.bytes.data(), uint32_t(f.bytes.size())));
    if (!held_pdu) return Decoded::not_tcp;
    const auto* tcp = held_pdu->find_pdu<Tins::TCP>();
    if (!tcp) {
      if (const auto* ip = held_pdu->find_pdu<Tins::IP>(); ip && ip->is_fragmented()) {
        why = "IPv4 fragment";
        return Decoded::fragment;
      }
      if (const auto* ip6 = held_pdu->find_pdu<Tins::IPv6>();
          ip6 && ip6->search_header(Tins::IPv6::FRAGMENT)) {
        why = "IPv6 fragment";
        return Decoded::fragment;
      }
      return Decoded::not_tcp;
    }
    const uint32_t tcp_header = uint32_t(tcp->data_offset()) * 4;
    int64_t wire = -1;  // TCP segment length on the wire, from the enclosing IP header
    const Tins::PDU* parent = tcp->parent_pdu();
    if (const auto* ip = dynamic_cast<const Tins::IP*>(parent)) {
      s.src.addr = Address::ipv4(Tins::Endian::be_to_host(uint32_t(ip->src_addr())));
      s.dst.addr = Address::ipv4(Tins::Endian::be_to_host(uint32_t(ip->dst_addr())));
      if (ip->tot_len() != 0) wire = int64_t(ip->tot_len()) - int64_t(ip->head_len()) * 4;
    } else if (const auto* ip6 = dynamic_cast<const Tins::IPv6*>(parent)) {
      // src_addr() returns by value: one copy each, so begin and end point into the same one.
      const Tins::IPv6Address sa = ip6->src_addr(), da = ip6->dst_addr();
      uint8_t src[16], dst[16];
      std::copy(sa.begin(), sa.end(), src);
      std::copy(da.begin(), da.end(), dst);
      s.src.addr = Address::ipv6(src);
      s.dst.addr = Address::ipv6(dst);
      if (ip6->payload_length() != 0)
        wire = 40 + int64_t(ip6->payload_length()) - int64_t(ip6->header_size());
    } else {
      return Decoded::not_tcp;
    }
    const auto* raw = tcp->find_pdu<Tins::RawPDU>();
    const uint32_t captured = raw ? uint32_t(raw->payload().size()) : 0;
    if (wire < 0) wire = int64_t(tcp_header) + captured + f.wire_extra;  // TSO / jumbogram
    if (wire < int64_t(tcp_header)) {
      why = "TCP header longer than the IP payload";
      return Decoded::malformed;
    }
    s.src.port = tcp->sport();
    s.dst.port = tcp->dport();
    s.seq = tcp->seq();
    s.ack = tcp->ack_seq();
    s.flags = uint8_t(tcp->flags() & 0x3f);
    s.window = tcp->window();
    s.payload_wire_len = uint32_t(wire - tcp_header);
    s.options_len = tcp_header > 20 ? uint8_t(tcp_header - 20) : 0;
    s.payload = raw ? std::span<const uint8_t>(raw->payload().data(), captured) : std::span<const uint8_t>{};
    if (s.flags & tcp_flag::syn) {
      if (const auto* o = tcp->search_option(Tins::TCP::MSS); o && o->data_size() == 2)
        s.mss_option = uint16_t((o->data_ptr()[0] << 8) | o->data_ptr()[1]);
      if (const auto* o = tcp->search_option(Tins::TCP::WSCALE); o && o->data_size() == 1)
        s.wscale_option = int8_t(std::min<uint8_t>(o->data_ptr()[0], 14));
    }
    if (const auto* o = tcp->search_option(Tins::TCP::SACK); o && o->data_size() >= 8) {
      const uint8_t* d = o->data_ptr();  // the first block
      s.sack_left = uint32_t(d[0]) << 24 | uint32_t(d[1]) << 16 | uint32_t(d[2]) << 8 | d[3];
      s.sack_right = uint32_t(d[4]) << 24 | uint32_t(d[5]) << 16 | uint32_t(d[6]) << 8 | d[7];
    }
    if (const auto* o = tcp->search_option(Tins::TCP::TSOPT); o && o->data_size() == 8) {
      const uint8_t* d = o->data_ptr();
      s.has_timestamps = true;
      s.tsval = uint32_t(d[0]) << 24 | uint32_t(d[1]) << 16 | uint32_t(d[2]) << 8 | d[3];
      s.tsecr = uint32_t(d[4]) << 24 | uint32_t(d[5]) << 16 | uint32_t(d[6]) << 8 | d[7];
    }
    return Decoded::tcp;
  } catch (const std::exception& e) {  // Tins::malformed_packet and friends
    held_reason = std::string("libtins: ") + e.what();
    why = held_reason;
    return Decoded::malformed;
  }
}

struct LinkEntry {
  int dlt;
  DecodeFn fn;
};
const std::array kTinsTable{
    LinkEntry{DLT_EN10MB, decode_with<make_ethernet>},
    LinkEntry{DLT_LINUX_SLL, decode_with<make<Tins::SLL>>},
    LinkEntry{DLT_NULL, decode_with<make<Tins::Loopback>>},
    LinkEntry{DLT_LOOP, decode_with<make<Tins::Loopback>>},
    LinkEntry{DLT_RAW, decode_with<ip_from_bytes>},
    LinkEntry{14, decode_with<ip_from_bytes>},  // raw IP as OpenBSD numbers it (packet_decoder.cpp)
    LinkEntry{DLT_IPV4, decode_with<ip_from_bytes>},
    LinkEntry{DLT_IPV6, decode_with<ip_from_bytes>},
    LinkEntry{DLT_IEEE802_11, decode_with<make_dot11>},
    LinkEntry{DLT_IEEE802_11_RADIO, decode_with<make<Tins::RadioTap>>},
    LinkEntry{DLT_PPI, decode_with<make<Tins::PPI>>},
    LinkEntry{DLT_PKTAP, decode_with<make<Tins::PKTAP>>},
};

}  // namespace

DecodeFn tins_decoder(int dlt) {
  for (const auto& e : kTinsTable)
    if (e.dlt == dlt) return e.fn;
  return nullptr;
}

}  // namespace iscsi_doctor::cli

// The module's entry point (the name carries the version of its interface: net::DecodeFn).
extern "C" __attribute__((visibility("default"))) iscsi_doctor::net::DecodeFn iscsi_doctor_tins_decoder_v1(int dlt) {
  return iscsi_doctor::cli::tins_decoder(dlt);
}
