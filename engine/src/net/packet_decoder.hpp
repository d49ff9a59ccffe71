// SPDX-License-Identifier: GPL-2.0-or-later
// From one captured frame to a TCP Segment, for every front-end that reads frame bytes (the CLI,
// the Wireshark plugin). Two decoders share this interface:
//  - the fast decoder (packet_decoder.cpp): link, VLAN/MPLS, IPv4/IPv6 and TCP headers parsed in
//    place, every field read after an explicit length check; no allocation per packet;
//  - the libtins decoder (cli/input/tins_decoder.cpp, the CLI's only): the same result built from libtins PDU objects, for
//    link types the fast decoder does not know (802.11, radiotap, PPI, PKTAP) and as a
//    cross-check of the fast one (`--decoder libtins`).
// Neither decoder ever reads outside `frame`; a short or malformed header yields a status, not a
// crash, and the caller turns it into a Notice naming the frame.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "iscsi_doctor/segment.hpp"

namespace iscsi_doctor::net {

enum class Decoded : uint8_t {
  tcp,        // `out` holds a TCP segment (addresses, ports, seq, ack, flags, window, options,
              // payload span into `frame`, payload_wire_len)
  not_tcp,    // a well-formed packet of another protocol (ARP, UDP, ICMP, ...): ignored
  fragment,   // an IP fragment: not reassembled (iSCSI over fragmented IP is skipped, with a notice)
  truncated,  // the capture cut the packet inside a header we need
  malformed,  // a header contradicts itself (IHL < 5, total length < header, ...)
};

// A captured frame: the bytes captured and how many more the wire carried (pcap len - caplen).
struct Frame {
  std::span<const uint8_t> bytes;
  uint32_t wire_extra = 0;
};

// Fills the address/port/seq/ack/flags/window/options/payload fields of `out` (and resets the
// option fields); frame number and time are the caller's. `why` names the failing header.
using DecodeFn = Decoded (*)(Frame frame, Segment& out, std::string_view& why);

// The fast decoder for a pcap link type (DLT_*), or nullptr when it does not know it.
DecodeFn fast_decoder(int dlt);


}  // namespace iscsi_doctor::net
