// SPDX-License-Identifier: GPL-2.0-or-later
// Frame reading: one frame's TCP segment, decoded from the frame's bytes by the CLI's own packet
// decoder (engine/src/net/packet_decoder.cpp), into the engine's Segment.
//
// Not from Wireshark's fields: a post-dissector that asks for fields
// (set_postdissector_wanted_hfids) makes tshark and the GUI build a protocol tree for every frame
// of the first pass, which cost more than everything else the plugin does (dissector/README.md
// "Cost"). Without it the first pass has no tree and the bytes are all there is; the segments are
// then exactly those the CLI reads, which the tests compare the plugin with.
#include <epan/tvbuff.h>
#include <wiretap/wtap.h>

#include <span>
#include <string_view>

#include "net/dlt.hpp"
#include "net/packet_decoder.hpp"
#include "iscsi-doctor.hpp"

namespace iscsi_doctor::plugin {

namespace {

int proto_tcp = -1, proto_icmp = -1, proto_icmpv6 = -1;

// Wireshark's encapsulation as the pcap link type the decoder is chosen by (the link types the
// fast decoder reads; Wireshark reads DLT_RAW and OpenBSD's 14 both as RAW_IP).
int link_type(int encap) {
  switch (encap) {
    case WTAP_ENCAP_ETHERNET:
      return DLT_EN10MB;
    case WTAP_ENCAP_SLL:
      return DLT_LINUX_SLL;
    case WTAP_ENCAP_SLL2:
      return DLT_LINUX_SLL2;
    case WTAP_ENCAP_RAW_IP:
      return DLT_RAW;
    case WTAP_ENCAP_RAW_IP4:
      return DLT_IPV4;
    case WTAP_ENCAP_RAW_IP6:
      return DLT_IPV6;
    case WTAP_ENCAP_NULL:
      return DLT_NULL;
    case WTAP_ENCAP_LOOP:
      return DLT_LOOP;
    case WTAP_ENCAP_PPP:
      return DLT_PPP;
    default:
      return -1;
  }
}

// Wireshark's TCP dissector saw the frame's one TCP header, not inside an ICMP error: the frames
// whose segment is read (a frame with TCP disabled, or decoded as something else, is not).
bool one_tcp_layer(packet_info* pinfo) {
  unsigned tcp = 0;
  for (wmem_list_frame_t* f = wmem_list_head(pinfo->layers); f; f = wmem_list_frame_next(f)) {
    const int id = GPOINTER_TO_INT(wmem_list_frame_data(f));
    if (id == proto_tcp)
      ++tcp;
    else if (id == proto_icmp || id == proto_icmpv6)
      return false;
  }
  return tcp == 1;
}

}  // namespace

void find_protocols() {
  proto_tcp = proto_get_id_by_filter_name("tcp");
  proto_icmp = proto_get_id_by_filter_name("icmp");
  proto_icmpv6 = proto_get_id_by_filter_name("icmpv6");
}

void feed_frame(packet_info* pinfo, tvbuff_t* tvb) {
  if (!pinfo->rec || pinfo->rec->rec_type != REC_TYPE_PACKET || proto_tcp <= 0) return;
  if (pinfo->ptype != PT_TCP || !one_tcp_layer(pinfo)) return;
  const net::DecodeFn decode = net::fast_decoder(link_type(pinfo->rec->rec_header.packet_header.pkt_encap));
  if (!decode) return;
  const guint captured = tvb_captured_length(tvb);
  const guint reported = tvb_reported_length(tvb);
  net::Frame frame{std::span<const uint8_t>(tvb_get_ptr(tvb, 0, static_cast<gint>(captured)), captured),
                   reported > captured ? reported - captured : 0};
  Segment s;
  std::string_view why;
  if (decode(frame, s, why) != net::Decoded::tcp) return;
  // The segment Wireshark dissected, not another one the bytes also hold.
  if (s.src.port != pinfo->srcport || s.dst.port != pinfo->destport) return;
  s.frame = pinfo->num;
  s.time_ns = static_cast<int64_t>(pinfo->abs_ts.secs) * 1000000000 + pinfo->abs_ts.nsecs;

  g_state->current = pinfo->num;
  g_state->analyzer.feed(s);
  g_state->current = 0;
}

}  // namespace iscsi_doctor::plugin
