// SPDX-License-Identifier: GPL-2.0-or-later
// Field extraction: one frame's TCP segment, read from the fields Wireshark's own dissectors
// filled in (the post-dissector asks for them on the first pass), into the engine's Segment.
#include <epan/tvbuff.h>

#include <algorithm>
#include <span>

#include "iscsi-doctor.hpp"

namespace iscsi_doctor::plugin {

namespace {

// Wireshark fields the post-dissector reads (set_postdissector_wanted_hfids).
enum Wanted {
  w_tcp,
  w_srcport,
  w_dstport,
  w_seq_raw,
  w_ack_raw,
  w_flags,
  w_window,
  w_hdr_len,
  w_len,
  w_mss,
  w_wscale,
  w_ip_src,
  w_ip_dst,
  w_ipv6_src,
  w_ipv6_dst,
  w_icmp,
  w_icmpv6,
  w_count
};
constexpr std::array<const char*, w_count> wanted_names{"tcp",
                                                        "tcp.srcport",
                                                        "tcp.dstport",
                                                        "tcp.seq_raw",
                                                        "tcp.ack_raw",
                                                        "tcp.flags",
                                                        "tcp.window_size_value",
                                                        "tcp.hdr_len",
                                                        "tcp.len",
                                                        "tcp.options.mss_val",
                                                        "tcp.options.wscale.shift",
                                                        "ip.src",
                                                        "ip.dst",
                                                        "ipv6.src",
                                                        "ipv6.dst",
                                                        "icmp",
                                                        "icmpv6"};
std::array<int, w_count> hf_wanted{};

field_info* first_field(proto_tree* tree, Wanted w) {
  if (hf_wanted[w] <= 0) return nullptr;
  GPtrArray* a = proto_get_finfo_ptr_array(tree, hf_wanted[w]);
  if (!a || a->len == 0) return nullptr;
  return static_cast<field_info*>(g_ptr_array_index(a, 0));
}

unsigned field_count(proto_tree* tree, Wanted w) {
  if (hf_wanted[w] <= 0) return 0;
  GPtrArray* a = proto_get_finfo_ptr_array(tree, hf_wanted[w]);
  return a ? a->len : 0;
}

// field_info::value is an fvalue_t in Wireshark 4.0 and an fvalue_t* in 4.4 and 4.6.
template <typename V>
fvalue_t* fvalue_of(V& v) {
  if constexpr (std::is_pointer_v<V>)
    return v;
  else
    return &v;
}

bool uint_field(proto_tree* tree, Wanted w, uint32_t& out) {
  field_info* fi = first_field(tree, w);
  if (!fi) return false;
  out = fvalue_get_uinteger(fvalue_of(fi->value));
  return true;
}

// The innermost address field of the given kind that precedes the TCP header in its data source.
field_info* address_field(proto_tree* tree, Wanted w, const field_info* tcp) {
  if (hf_wanted[w] <= 0) return nullptr;
  GPtrArray* a = proto_get_finfo_ptr_array(tree, hf_wanted[w]);
  field_info* best = nullptr;
  for (guint i = 0; a && i < a->len; ++i) {
    auto* fi = static_cast<field_info*>(g_ptr_array_index(a, i));
    if (fi->ds_tvb != tcp->ds_tvb || fi->start > tcp->start) continue;
    if (!best || fi->start > best->start) best = fi;
  }
  return best;
}

bool read_address(const field_info* fi, Address& out) {
  if (!fi || !fi->ds_tvb) return false;
  if (fi->length == 4 && tvb_bytes_exist(fi->ds_tvb, fi->start, 4)) {
    out.v6 = false;
    tvb_memcpy(fi->ds_tvb, out.bytes.data(), fi->start, 4);
    return true;
  }
  if (fi->length == 16 && tvb_bytes_exist(fi->ds_tvb, fi->start, 16)) {
    out.v6 = true;
    tvb_memcpy(fi->ds_tvb, out.bytes.data(), fi->start, 16);
    return true;
  }
  return false;
}

}  // namespace

void want_fields(dissector_handle_t handle) {
  GArray* wanted = g_array_new(FALSE, FALSE, static_cast<guint>(sizeof(int)));
  for (int i = 0; i < w_count; ++i) {
    hf_wanted[i] = proto_registrar_get_id_byname(wanted_names[i]);
    if (hf_wanted[i] > 0) g_array_append_val(wanted, hf_wanted[i]);
  }
  set_postdissector_wanted_hfids(handle, wanted);
}

void feed_frame(packet_info* pinfo, proto_tree* tree) {
  if (!tree) return;
  if (field_count(tree, w_tcp) != 1) return;  // none, or TCP inside ICMP errors / tunnels twice
  if (field_count(tree, w_icmp) || field_count(tree, w_icmpv6)) return;
  field_info* tcp = first_field(tree, w_tcp);
  if (!tcp || !tcp->ds_tvb) return;

  Segment s;
  uint32_t v = 0;
  if (!uint_field(tree, w_srcport, v)) return;
  s.src.port = static_cast<uint16_t>(v);
  if (!uint_field(tree, w_dstport, v)) return;
  s.dst.port = static_cast<uint16_t>(v);
  if (!uint_field(tree, w_seq_raw, s.seq)) return;
  if (!uint_field(tree, w_flags, v)) return;
  s.flags = static_cast<uint8_t>(v & 0x3f);
  if (!uint_field(tree, w_ack_raw, s.ack)) s.ack = 0;
  if (uint_field(tree, w_window, v)) s.window = static_cast<uint16_t>(v);
  if (uint_field(tree, w_mss, v)) s.mss_option = static_cast<uint16_t>(v);
  if (uint_field(tree, w_wscale, v)) s.wscale_option = static_cast<int8_t>(v > 14 ? 14 : v);

  field_info* src4 = address_field(tree, w_ip_src, tcp);
  field_info* src6 = address_field(tree, w_ipv6_src, tcp);
  field_info* dst4 = address_field(tree, w_ip_dst, tcp);
  field_info* dst6 = address_field(tree, w_ipv6_dst, tcp);
  bool use6 = src6 && (!src4 || src6->start > src4->start);
  if (!read_address(use6 ? src6 : src4, s.src.addr)) return;
  if (!read_address(use6 ? dst6 : dst4, s.dst.addr)) return;

  uint32_t hdr_len = 0, payload_len = 0;
  if (!uint_field(tree, w_hdr_len, hdr_len)) return;
  if (!uint_field(tree, w_len, payload_len)) payload_len = 0;
  s.payload_wire_len = payload_len;
  if (hdr_len > 20 && hdr_len <= 60) {
    s.options_len = static_cast<uint8_t>(hdr_len - 20);
    // SACK blocks as on the wire (Wireshark's fields are relative to the stream's start).
    const gint off = tcp->start + 20;
    if (tvb_bytes_exist(tcp->ds_tvb, off, s.options_len)) {
      Segment opts;
      read_tcp_options(std::span<const uint8_t>(tvb_get_ptr(tcp->ds_tvb, off, s.options_len), s.options_len),
                       opts);
      s.sack_left = opts.sack_left;
      s.sack_right = opts.sack_right;
      s.has_timestamps = opts.has_timestamps;
      s.tsval = opts.tsval;
      s.tsecr = opts.tsecr;
    }
  }
  const guint8* payload = nullptr;
  uint32_t captured = 0;
  if (payload_len > 0) {
    gint off = tcp->start + static_cast<gint>(hdr_len);
    gint avail = tvb_captured_length_remaining(tcp->ds_tvb, off);
    if (avail > 0) {
      captured = std::min<uint32_t>(payload_len, static_cast<uint32_t>(avail));
      payload = tvb_get_ptr(tcp->ds_tvb, off, static_cast<gint>(captured));
    }
  }
  s.payload = std::span<const uint8_t>(payload, captured);
  s.frame = pinfo->num;
  s.time_ns = static_cast<int64_t>(pinfo->abs_ts.secs) * 1000000000 + pinfo->abs_ts.nsecs;

  g_state->current = pinfo->num;
  g_state->analyzer.feed(s);
  g_state->current = 0;
}

}  // namespace iscsi_doctor::plugin
