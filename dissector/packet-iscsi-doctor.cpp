// SPDX-License-Identifier: GPL-2.0-or-later
// iscsi_doctor: a Wireshark post-dissector that runs the iscsi-doctor engine over the TCP segments
// Wireshark has already dissected, and shows its verdicts on the packets they concern.
//
// The engine is fed once, on the first sequential pass (frames not yet visited); what it reports
// is stored by frame and looked up on every later dissection of that frame, so one-pass tshark,
// two-pass tshark (-2) and the GUI's random access show the same items. A finding is shown on its
// evidence frame; when the engine decided it at a later frame (a delayed ACK is known to be late
// only when the segment it held is released), that later frame also carries a "decided here"
// link back to the evidence frame, which is how one-pass tshark, which has already printed the
// evidence frame, still reports it. Findings decided only at the end of the capture (Analyzer::
// finish, e.g. `serialized`) exist once the first pass is over: in the GUI and with tshark -2.
// Wireshark's headers declare their C linkage themselves.
#include <epan/expert.h>
#include <epan/packet.h>
#include <epan/prefs.h>
#include <epan/proto.h>
#include <epan/range.h>
#include <epan/stats_tree.h>
#include <epan/tap.h>
#include <epan/tvbuff.h>
#include <wsutil/wslog.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "iscsi_doctor/analyzer.hpp"
#include "iscsi_doctor/finding_kinds.hpp"
#include "iscsi_doctor/summary.hpp"
#include "packet-iscsi-doctor.h"

namespace {

using namespace iscsi_doctor;

// ---------------------------------------------------------------------------------------------
// Registered ids

int proto_iscsi_doctor = -1;
int tap_iscsi_doctor = -1;
dissector_handle_t iscsi_doctor_handle;

// A boolean preference is a gboolean in Wireshark 4.0 and a bool in 4.4 and 4.6: take the
// type prefs_register_bool_preference() wants.
template <typename F>
struct bool_pref_arg;
template <typename R, typename... A>
struct bool_pref_arg<R (*)(A...)> {
  using type = std::remove_pointer_t<std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>>;
};
using pref_bool = bool_pref_arg<decltype(&prefs_register_bool_preference)>::type;

pref_bool pref_info_column = TRUE;
// The CLI's analysis options (docs/cli.md), applied when a capture is (re)loaded.
range_t* pref_ports = nullptr;
pref_bool pref_detect_ports = TRUE;
guint pref_delayed_ack_ms = 10, pref_idle_timeout_s = 60, pref_max_connections = 65536,
      pref_max_open_commands = 65536, pref_max_reorder_bytes = 4u << 20;

int hf_command = -1, hf_session = -1, hf_connection = -1, hf_itt = -1, hf_op = -1, hf_round_trips = -1,
    hf_ideal_round_trips = -1, hf_excess_round_trips = -1, hf_latency_ms = -1, hf_first_frame = -1,
    hf_lba = -1, hf_lun = -1, hf_bytes = -1, hf_scsi_status = -1, hf_command_findings = -1, hf_breakdown = -1;
enum BreakdownPart {
  bd_request,
  bd_think,
  bd_data,
  bd_nagle,
  bd_delayed_ack,
  bd_r2t,
  bd_window,
  bd_loss,
  bd_response,
  bd_link,
  bd_count
};
std::array<int, bd_count> hf_bd{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};

int hf_finding_tree = -1, hf_finding = -1, hf_side = -1, hf_touched_ms = -1, hf_lost_ms = -1, hf_fix = -1, hf_detail = -1,
    hf_finding_itt = -1, hf_command_frame = -1, hf_decided_in = -1, hf_decided_at_end = -1,
    hf_related_other = -1, hf_inferred = -1;
// Finding::related names the engine uses; anything else goes to iscsi_doctor.related.
enum RelatedName {
  rel_released_by,
  rel_acks,
  rel_released,
  rel_previous_small,
  rel_original,
  rel_command,
  rel_count
};
constexpr std::array<const char*, rel_count> related_names{"released_by",    "acks",     "released",
                                                           "previous_small", "original", "command"};
std::array<int, rel_count> hf_related{-1, -1, -1, -1, -1, -1};

int hf_status_frame = -1, hf_evidence_frame = -1, hf_related_frame = -1;
int hf_reported = -1, hf_reported_frame = -1, hf_reported_finding = -1, hf_reported_status_frame = -1,
    hf_reported_round_trips = -1, hf_command_at_end = -1;
int hf_notice = -1;
// The command's connection: what the capture showed of it, and what was inferred (results.hpp).
int hf_conn = -1, hf_conn_rtt_ms = -1, hf_conn_vantage = -1, hf_conn_joined = -1, hf_conn_mss = -1,
    hf_conn_window_scale = -1, hf_conn_keys = -1, hf_conn_offload = -1, hf_conn_rtt_source = -1;

int ett_iscsi_doctor = -1, ett_command = -1, ett_breakdown = -1, ett_finding = -1, ett_reported = -1,
    ett_conn = -1;

std::array<expert_field, finding_kind_count> ei_finding{};
expert_field ei_notice_info = EI_INIT, ei_notice_warning = EI_INIT, ei_notice_error = EI_INIT;

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

// ---------------------------------------------------------------------------------------------
// State built on the first pass

struct FindingRec {
  Finding f;
  uint64_t decided_frame = 0;  // frame being fed when the engine reported it; 0 = at finish()
  std::string fix;
};

struct NoticeRec {
  Notice::Level level;
  std::string message;
};

}  // namespace

// What is known about one frame; also the tap data handed to the statistics tree.
struct iscsi_doctor_frame {
  std::vector<uint32_t> commands;           // completed here (status frame)
  std::vector<uint32_t> reported_commands;  // completion decided here, status frame earlier
  std::vector<uint32_t> tapped_commands;    // counted in the statistics at this frame
  std::vector<uint32_t> findings;           // evidence here
  std::vector<uint32_t> reported;           // decided here, evidence elsewhere
  std::vector<uint32_t> tapped;             // counted in the statistics at this frame
  std::vector<NoticeRec> notices;
};

namespace {

Options options_from_prefs() {
  Options o;
  o.ports.clear();
  for (guint i = 0; pref_ports && i < pref_ports->nranges; ++i)
    for (guint32 p = pref_ports->ranges[i].low; p <= pref_ports->ranges[i].high && p <= 65535; ++p)
      o.ports.push_back(static_cast<uint16_t>(p));
  o.detect_ports = pref_detect_ports;
  o.delayed_ack_min_ms = pref_delayed_ack_ms ? pref_delayed_ack_ms : 10;
  o.idle_timeout_s = pref_idle_timeout_s ? pref_idle_timeout_s : 60;
  if (pref_max_connections) o.max_connections = pref_max_connections;
  if (pref_max_open_commands) o.max_open_commands = pref_max_open_commands;
  if (pref_max_reorder_bytes) o.max_out_of_order_bytes = pref_max_reorder_bytes;
  return o;
}

struct State final : Sink {
  State() : analyzer(options_from_prefs(), *this) {}

  Analyzer analyzer;
  std::vector<CommandResult> commands;
  std::vector<uint64_t> command_decided;  // per command: frame being fed, 0 = at finish()
  std::vector<FindingRec> findings;
  std::unordered_map<uint64_t, iscsi_doctor_frame> frames;
  std::unordered_map<uint32_t, ConnectionInfo> connections;  // final facts, by connection id
  uint64_t current = 0;                                      // frame being fed; 0 during finish()
  bool finished = false;

  void on_command(const CommandResult& c) override {
    if (!c.completed || c.status_frame == 0) return;  // open at the end: no completing frame
    auto idx = static_cast<uint32_t>(commands.size());
    commands.push_back(c);
    command_decided.push_back(current);
    frames[c.status_frame].commands.push_back(idx);
    if (current && current != c.status_frame) frames[current].reported_commands.push_back(idx);
    frames[current ? current : c.status_frame].tapped_commands.push_back(idx);
  }
  void on_finding(const Finding& f) override {
    auto idx = static_cast<uint32_t>(findings.size());
    findings.push_back({f, current, fix_for(f.kind, f.side)});
    if (f.frame) frames[f.frame].findings.push_back(idx);
    if (current && current != f.frame) frames[current].reported.push_back(idx);
    uint64_t tap_frame = current ? current : f.frame;
    if (tap_frame) frames[tap_frame].tapped.push_back(idx);
  }
  void on_connection(const ConnectionInfo& c) override { connections[c.id] = c; }
  void on_notice(const Notice& n) override {
    uint64_t frame = n.frame ? n.frame : current;
    if (frame) frames[frame].notices.push_back({n.level, n.message});
  }

  void finish() {
    if (finished) return;
    finished = true;
    current = 0;
    analyzer.finish();
  }
};

std::unique_ptr<State> g_state;
constexpr const char* log_domain = "iscsi_doctor";

void init_routine() { g_state = std::make_unique<State>(); }
void cleanup_routine() { g_state.reset(); }
// After the first sequential pass (tshark -2, the GUI after reading a file): end of capture.
void postseq_routine() {
  if (!g_state || g_state->finished) return;
  g_state->finish();
  // At level info (--log-level info): how a GUI session shows it ran, which its tests check.
  ws_log(log_domain, LOG_LEVEL_INFO, "first pass done: %zu commands completed, %zu findings",
         g_state->commands.size(), g_state->findings.size());
}

// ---------------------------------------------------------------------------------------------
// Reading the segment from Wireshark's fields

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

// ---------------------------------------------------------------------------------------------
// The protocol tree

const char* kind_name(FindingKind k) { return finding_name(k).data(); }

void add_command(proto_tree* tree, tvbuff_t* tvb, const CommandResult& c, uint64_t decided) {
  proto_item* ti = proto_tree_add_none_format(
      tree, hf_command, tvb, 0, 0, "Command ITT 0x%08x %s: %d round trip%s (ideal %d), %.3f ms", c.itt,
      c.op.c_str(), c.round_trips, c.round_trips == 1 ? "" : "s", c.ideal_round_trips, c.latency_ms);
  proto_item_set_generated(ti);
  proto_tree* ct = proto_item_add_subtree(ti, ett_command);
  auto gen = [](proto_item* it) { proto_item_set_generated(it); };
  gen(proto_tree_add_uint(ct, hf_itt, tvb, 0, 0, c.itt));
  gen(proto_tree_add_string(ct, hf_op, tvb, 0, 0, c.op.c_str()));
  gen(proto_tree_add_uint(ct, hf_session, tvb, 0, 0, c.session));
  gen(proto_tree_add_uint(ct, hf_connection, tvb, 0, 0, c.connection));
  gen(proto_tree_add_uint(ct, hf_first_frame, tvb, 0, 0, static_cast<guint32>(c.first_frame)));
  gen(proto_tree_add_uint(ct, hf_related[rel_command], tvb, 0, 0, static_cast<guint32>(c.first_frame)));
  gen(proto_tree_add_uint(ct, hf_status_frame, tvb, 0, 0, static_cast<guint32>(c.status_frame)));
  gen(proto_tree_add_int(ct, hf_round_trips, tvb, 0, 0, c.round_trips));
  gen(proto_tree_add_int(ct, hf_ideal_round_trips, tvb, 0, 0, c.ideal_round_trips));
  gen(proto_tree_add_int(ct, hf_excess_round_trips, tvb, 0, 0, c.round_trips - c.ideal_round_trips));
  gen(proto_tree_add_double(ct, hf_latency_ms, tvb, 0, 0, c.latency_ms));
  gen(proto_tree_add_uint64(ct, hf_lun, tvb, 0, 0, c.lun));
  if (c.lba) gen(proto_tree_add_uint64(ct, hf_lba, tvb, 0, 0, *c.lba));
  gen(proto_tree_add_uint(ct, hf_bytes, tvb, 0, 0, c.bytes));
  if (c.scsi_status) gen(proto_tree_add_uint(ct, hf_scsi_status, tvb, 0, 0, *c.scsi_status));
  for (FindingKind k : c.findings)
    gen(proto_tree_add_string(ct, hf_command_findings, tvb, 0, 0, kind_name(k)));
  if (decided && decided != c.status_frame)
    gen(proto_tree_add_uint(ct, hf_decided_in, tvb, 0, 0, static_cast<guint32>(decided)));
  if (!decided) gen(proto_tree_add_boolean(ct, hf_command_at_end, tvb, 0, 0, TRUE));

  const Breakdown& b = c.breakdown;
  const std::array<double, bd_count> parts{b.request_ms, b.think_ms,       b.data_ms,
                                           b.nagle_ms,   b.delayed_ack_ms, b.r2t_ms,
                                           b.window_ms,  b.loss_ms,        b.response_ms,
                                           b.link_ms};
  proto_item* bi = proto_tree_add_none_format(ct, hf_breakdown, tvb, 0, 0, "Latency breakdown");
  gen(bi);
  proto_tree* bt = proto_item_add_subtree(bi, ett_breakdown);
  for (int i = 0; i < bd_count; ++i)
    gen(proto_tree_add_double(bt, hf_bd[i], tvb, 0, 0, parts[i]));

  // The connection's facts are final once it is finished (second pass, or after its FIN).
  auto it = g_state->connections.find(c.connection);
  if (it == g_state->connections.end()) return;
  const ConnectionInfo& k = it->second;
  char rtt[32] = "unknown";  // no segment measured it
  if (k.rtt_ms >= 0) std::snprintf(rtt, sizeof rtt, "%.3f ms", k.rtt_ms);
  proto_item* ki = proto_tree_add_none_format(
      ct, hf_conn, tvb, 0, 0, "Connection %u: RTT %s, capture point %s%s", k.id, rtt,
      vantage_name(k.vantage).data(), k.mid_session_start ? ", joined mid-session" : "");
  gen(ki);
  proto_tree* kt = proto_item_add_subtree(ki, ett_conn);
  if (k.rtt_ms >= 0) gen(proto_tree_add_double(kt, hf_conn_rtt_ms, tvb, 0, 0, k.rtt_ms));
  gen(proto_tree_add_string(kt, hf_conn_vantage, tvb, 0, 0, vantage_name(k.vantage).data()));
  gen(proto_tree_add_boolean(kt, hf_conn_joined, tvb, 0, 0, k.mid_session_start));
  gen(proto_tree_add_string(kt, hf_conn_mss, tvb, 0, 0, mss_words(k).c_str()));
  gen(proto_tree_add_string(kt, hf_conn_window_scale, tvb, 0, 0, window_scale_words(k).c_str()));
  gen(proto_tree_add_string(kt, hf_conn_keys, tvb, 0, 0, keys_words(k).c_str()));
  gen(proto_tree_add_uint(kt, hf_conn_offload, tvb, 0, 0, static_cast<guint32>(k.offload_segments)));
  gen(proto_tree_add_string(kt, hf_conn_rtt_source, tvb, 0, 0, rtt_source_words(k).c_str()));
}

expert_field* notice_ei(Notice::Level l) {
  switch (l) {
    case Notice::Level::info:
      return &ei_notice_info;
    case Notice::Level::warning:
      return &ei_notice_warning;
    default:
      return &ei_notice_error;
  }
}

void add_finding(proto_tree* tree, tvbuff_t* tvb, packet_info* pinfo, const FindingRec& r) {
  const Finding& f = r.f;
  proto_item* ti =
      proto_tree_add_none_format(tree, hf_finding_tree, tvb, 0, 0, "Finding: %s (%s), %.3f ms touched",
                                 kind_name(f.kind), side_name(f.side).data(), f.lost_ms);
  proto_item_set_generated(ti);
  proto_tree* ft = proto_item_add_subtree(ti, ett_finding);
  auto gen = [](proto_item* it) { proto_item_set_generated(it); };
  proto_item* kind_item = proto_tree_add_string(ft, hf_finding, tvb, 0, 0, kind_name(f.kind));
  gen(kind_item);
  gen(proto_tree_add_string(ft, hf_side, tvb, 0, 0, side_name(f.side).data()));
  // touched_ms: the time the finding held its command, which overlaps others' (#27); lost_ms is its
  // old name, kept one release, hidden so that the tree shows the fact once.
  gen(proto_tree_add_double(ft, hf_touched_ms, tvb, 0, 0, f.lost_ms));
  proto_item* old_name = proto_tree_add_double(ft, hf_lost_ms, tvb, 0, 0, f.lost_ms);
  gen(old_name);
  proto_item_set_hidden(old_name);
  gen(proto_tree_add_string(ft, hf_fix, tvb, 0, 0, r.fix.c_str()));
  if (!f.detail.empty()) gen(proto_tree_add_string(ft, hf_detail, tvb, 0, 0, f.detail.c_str()));
  for (const std::string& fact : f.inferred)  // the verdict rests on it: not in the capture
    gen(proto_tree_add_string(ft, hf_inferred, tvb, 0, 0, fact.c_str()));
  gen(proto_tree_add_uint(ft, hf_session, tvb, 0, 0, f.session));
  gen(proto_tree_add_uint(ft, hf_connection, tvb, 0, 0, f.connection));
  gen(proto_tree_add_uint(ft, hf_evidence_frame, tvb, 0, 0, static_cast<guint32>(f.frame)));
  if (f.itt) gen(proto_tree_add_uint(ft, hf_finding_itt, tvb, 0, 0, *f.itt));
  if (f.command_first_frame) {
    gen(proto_tree_add_uint(ft, hf_command_frame, tvb, 0, 0, static_cast<guint32>(f.command_first_frame)));
    gen(proto_tree_add_uint(ft, hf_related[rel_command], tvb, 0, 0,
                            static_cast<guint32>(f.command_first_frame)));
  }
  for (const auto& [name, frame] : f.related) {
    gen(proto_tree_add_uint_format_value(ft, hf_related_frame, tvb, 0, 0, static_cast<guint32>(frame),
                                         "%u (%s)", static_cast<unsigned>(frame), name.c_str()));
    if (name == related_names[rel_command] && frame == f.command_first_frame) continue;  // shown above
    int hf = hf_related_other;
    for (int i = 0; i < rel_count; ++i)
      if (name == related_names[i]) hf = hf_related[i];
    if (hf == hf_related_other)
      gen(proto_tree_add_uint_format_value(ft, hf, tvb, 0, 0, static_cast<guint32>(frame), "%s: %u",
                                           name.c_str(), static_cast<unsigned>(frame)));
    else
      gen(proto_tree_add_uint(ft, hf, tvb, 0, 0, static_cast<guint32>(frame)));
  }
  if (r.decided_frame && r.decided_frame != f.frame)
    gen(proto_tree_add_uint(ft, hf_decided_in, tvb, 0, 0, static_cast<guint32>(r.decided_frame)));
  if (!r.decided_frame) gen(proto_tree_add_string(ft, hf_decided_at_end, tvb, 0, 0, kind_name(f.kind)));

  auto k = static_cast<size_t>(f.kind);
  if (k < finding_kind_count)
    // One message per kind and side, so the Expert Information dialog groups them.
    expert_add_info_format(pinfo, kind_item, &ei_finding[k], "%s (%s side); fix: %s", kind_name(f.kind),
                           side_name(f.side).data(), r.fix.c_str());
}

void add_reported_command(proto_tree* tree, tvbuff_t* tvb, const CommandResult& c) {
  proto_item* ti = proto_tree_add_none_format(tree, hf_reported, tvb, 0, 0,
                                              "Decided here: completion of ITT 0x%08x on frame %u", c.itt,
                                              static_cast<unsigned>(c.status_frame));
  proto_item_set_generated(ti);
  proto_tree* rt = proto_item_add_subtree(ti, ett_reported);
  proto_item_set_generated(
      proto_tree_add_uint(rt, hf_reported_status_frame, tvb, 0, 0, static_cast<guint32>(c.status_frame)));
  proto_item_set_generated(proto_tree_add_int(rt, hf_reported_round_trips, tvb, 0, 0, c.round_trips));
}

void add_reported(proto_tree* tree, tvbuff_t* tvb, const FindingRec& r) {
  proto_item* ti = proto_tree_add_none_format(tree, hf_reported, tvb, 0, 0, "Decided here: %s on frame %u",
                                              kind_name(r.f.kind), static_cast<unsigned>(r.f.frame));
  proto_item_set_generated(ti);
  proto_tree* rt = proto_item_add_subtree(ti, ett_reported);
  proto_item_set_generated(
      proto_tree_add_uint(rt, hf_reported_frame, tvb, 0, 0, static_cast<guint32>(r.f.frame)));
  proto_item_set_generated(proto_tree_add_string(rt, hf_reported_finding, tvb, 0, 0, kind_name(r.f.kind)));
}

int dissect_iscsi_doctor(tvbuff_t* tvb, packet_info* pinfo, proto_tree* tree, void*) {
  if (!g_state) return 0;
  if (!PINFO_FD_VISITED(pinfo) && !g_state->finished) feed_frame(pinfo, tree);

  auto it = g_state->frames.find(pinfo->num);
  if (it == g_state->frames.end()) return 0;
  const iscsi_doctor_frame& fr = it->second;
  if (fr.commands.empty() && fr.findings.empty() && fr.reported.empty() && fr.notices.empty() &&
      fr.tapped.empty() && fr.reported_commands.empty() && fr.tapped_commands.empty())
    return 0;

  if (!fr.tapped.empty() || !fr.tapped_commands.empty()) tap_queue_packet(tap_iscsi_doctor, pinfo, &fr);

  if (pref_info_column) {
    for (uint32_t i : fr.findings)
      col_append_fstr(pinfo->cinfo, COL_INFO, " [%s]", kind_name(g_state->findings[i].f.kind));
    for (uint32_t i : fr.commands) {
      const CommandResult& c = g_state->commands[i];
      if (c.round_trips > c.ideal_round_trips)
        col_append_fstr(pinfo->cinfo, COL_INFO, " [%d round trips, ideal %d]", c.round_trips,
                        c.ideal_round_trips);
    }
  }

  proto_item* root = proto_tree_add_item(tree, proto_iscsi_doctor, tvb, 0, 0, ENC_NA);
  proto_item_set_generated(root);
  proto_tree* dt = proto_item_add_subtree(root, ett_iscsi_doctor);
  for (uint32_t i : fr.commands)
    add_command(dt, tvb, g_state->commands[i], g_state->command_decided[i]);
  for (uint32_t i : fr.findings)
    add_finding(dt, tvb, pinfo, g_state->findings[i]);
  for (uint32_t i : fr.reported)
    add_reported(dt, tvb, g_state->findings[i]);
  for (uint32_t i : fr.reported_commands)
    add_reported_command(dt, tvb, g_state->commands[i]);
  for (const NoticeRec& n : fr.notices) {
    proto_item* ni = proto_tree_add_string(dt, hf_notice, tvb, 0, 0, n.message.c_str());
    proto_item_set_generated(ni);
    expert_add_info_format(pinfo, ni, notice_ei(n.level), "iscsi-doctor: %s", n.message.c_str());
  }
  return tvb_captured_length(tvb);
}

// ---------------------------------------------------------------------------------------------
// Statistics tree: tshark -z iscsi_doctor,tree and Statistics > iSCSI Doctor in the GUI

const char* const st_root = "iSCSI Doctor";
const char* const st_all = "All sessions";
int st_root_node = -1;
// The CLI's tables (summary.targets, .initiators, .luns; docs/json-schema.md): a node per table,
// a row under it per target, initiator, or target and LUN, and the row the rest share past
// Summary::kMaxLuns rows.
struct StTable {
  const char* name;
  const char* other;
};
constexpr std::array<StTable, 3> st_tables{{{"By target", "(other targets)"},
                                            {"By initiator", "(other initiators)"},
                                            {"By LUN", "(other targets and LUNs)"}}};
// Running totals per tree (stats_tree nodes count integers; time lost is kept here in ms).
std::map<const stats_tree*, std::map<std::string, double>> st_totals;
// Per tree and table: its rows so far (the names; the count is what the cap is on).
std::map<const stats_tree*, std::array<std::set<std::string>, st_tables.size()>> st_rows;

void st_init(stats_tree* st) {
  st_totals[st].clear();
  st_rows[st] = {};
  st_root_node = stats_tree_create_node(st, st_root, 0, STAT_DT_INT, TRUE);
  for (const StTable& t : st_tables)  // first under the root, whatever sessions come
    stats_tree_create_node(st, t.name, st_root_node, STAT_DT_INT, TRUE);
}

void st_cleanup(stats_tree* st) {
  st_totals.erase(st);
  st_rows.erase(st);
}

// A command's figures under a node that counts commands: its round trips against the ideal and
// its latency as averages, the round trips beyond the ideal as a sum.
void st_figures(stats_tree* st, int cmds, const CommandResult& c) {
  avg_stat_node_add_value_int(st, "round trips", cmds, FALSE, c.round_trips);
  avg_stat_node_add_value_int(st, "ideal round trips", cmds, FALSE, c.ideal_round_trips);
  // Sums sit under a node that counts nothing: Wireshark's Percent column (a node's count over its
  // parent's) is then left empty for them, where it would divide a sum by a count.
  const int sums = stats_tree_manip_node_int(MN_INCREASE, st, "sums", cmds, TRUE, 0);
  increase_stat_node(st, "excess round trips (total)", sums, FALSE, c.round_trips - c.ideal_round_trips);
  avg_stat_node_add_value_float(st, "latency (ms)", cmds, FALSE, static_cast<float>(c.latency_ms));
}

// A SCSI command in the CLI's tables, as Summary counts it (SCSI commands only, by their
// connection's target address and port, initiator address, and target and LUN), each row named
// in the text report's words. A table node and its rows count commands, so Percent is a row's
// share of the table.
void st_table_rows(stats_tree* st, const CommandResult& c) {
  if (c.iscsi_opcode != 0x01 || !c.connection) return;
  Endpoint initiator, target;
  if (auto it = g_state->connections.find(c.connection); it != g_state->connections.end()) {
    initiator = it->second.initiator;  // finished (its FIN, the second pass)
    target = it->second.target;
  } else if (!g_state->analyzer.endpoints(c.connection, initiator, target)) {
    return;
  }
  const std::array<std::string, st_tables.size()> keys{target.str(), initiator.addr.str(),
                                                       target.str() + " LUN " + std::to_string(c.lun)};
  for (size_t i = 0; i < st_tables.size(); ++i) {
    auto& rows = st_rows[st][i];
    const char* row = st_tables[i].other;
    if (rows.count(keys[i]) || rows.size() < Summary::kMaxLuns) row = rows.insert(keys[i]).first->c_str();
    const int table = tick_stat_node(st, st_tables[i].name, st_root_node, TRUE);
    st_figures(st, tick_stat_node(st, row, table, TRUE), c);
  }
}

void st_command(stats_tree* st, int parent, const std::string& scope, const CommandResult& c) {
  st_figures(st, tick_stat_node(st, "commands", parent, TRUE), c);
  for (FindingKind k : c.findings)
    if (k != FindingKind::serialized) {
      int kn = stats_tree_manip_node_int(MN_INCREASE, st, kind_name(k), parent, TRUE, 0);
      // Its own part of the latency: over all kinds each millisecond counted once (docs/cli.md
      // "Time lost"), where "time lost (ms, total)" sums the findings' overlapping lost_ms.
      double& own = st_totals[st][scope + "/" + kind_name(k) + "/own"];
      own += exclusive_ms(k, c.breakdown);
      const int lost = stats_tree_manip_node_int(MN_INCREASE, st, "time lost", kn, TRUE, 0);  // (see "sums")
      set_stat_node(st, "time lost (ms, own)", lost, FALSE, static_cast<gint>(std::lround(own)));
      int delayed = tick_stat_node(st, "commands delayed", kn, TRUE);
      // What this kind costs those commands: their round trips against the ideal.
      avg_stat_node_add_value_int(st, "round trips", delayed, FALSE, c.round_trips);
      avg_stat_node_add_value_int(st, "ideal round trips", delayed, FALSE, c.ideal_round_trips);
    }
}

// The fix up to its first explanation (" (", ":", ";"): a node name, so it must fit a GUI column;
// the whole text is in iscsi_doctor.fix and the expert info.
std::string short_fix(const std::string& fix) {
  size_t cut = std::min({fix.find(" ("), fix.find(':'), fix.find(';')});
  return cut == std::string::npos ? fix : fix.substr(0, cut);
}

void st_finding(stats_tree* st, int parent, const std::string& scope, const FindingRec& r) {
  const Finding& f = r.f;
  int kn = tick_stat_node(st, kind_name(f.kind), parent, TRUE);
  avg_stat_node_add_value_float(st, "time lost per finding (ms)", kn, FALSE, static_cast<float>(f.lost_ms));
  double& total = st_totals[st][scope + "/" + kind_name(f.kind)];
  total += f.lost_ms;
  const int lost = stats_tree_manip_node_int(MN_INCREASE, st, "time lost", kn, TRUE, 0);  // (see "sums")
  set_stat_node(st, "time lost (ms, total)", lost, FALSE, static_cast<gint>(std::lround(total)));
  std::string side = std::string("side: ") + side_name(f.side).data();
  tick_stat_node(st, side.c_str(), kn, FALSE);
  std::string fix = "fix: " + short_fix(r.fix);
  tick_stat_node(st, fix.c_str(), kn, FALSE);
}

tap_packet_status st_packet(stats_tree* st, packet_info*, epan_dissect_t*, const void* p, tap_flags_t) {
  if (!g_state || !p) return TAP_PACKET_DONT_REDRAW;
  const auto* fr = static_cast<const iscsi_doctor_frame*>(p);
  int all = stats_tree_manip_node_int(MN_INCREASE, st, st_all, st_root_node, TRUE, 0);
  for (uint32_t i : fr->tapped_commands) {
    const CommandResult& c = g_state->commands[i];
    std::string name = "Session " + std::to_string(c.session);
    int sn = stats_tree_manip_node_int(MN_INCREASE, st, name.c_str(), st_root_node, TRUE, 0);
    st_command(st, sn, name, c);
    st_command(st, all, st_all, c);
    st_table_rows(st, c);
  }
  for (uint32_t i : fr->tapped) {
    const FindingRec& r = g_state->findings[i];
    std::string name = "Session " + std::to_string(r.f.session);
    int sn = stats_tree_manip_node_int(MN_INCREASE, st, name.c_str(), st_root_node, TRUE, 0);
    st_finding(st, sn, name, r);
    st_finding(st, all, st_all, r);
  }
  return TAP_PACKET_REDRAW;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Registration

extern "C" void proto_register_iscsi_doctor(void) {
  static hf_register_info hf[] = {
      {&hf_command,
       {"Command", "iscsi_doctor.command", FT_NONE, BASE_NONE, NULL, 0x0,
        "A SCSI command completed in this frame", HFILL}},
      {&hf_session,
       {"Session", "iscsi_doctor.session", FT_UINT32, BASE_DEC, NULL, 0x0,
        "iscsi-doctor's session number (from 1)", HFILL}},
      {&hf_connection,
       {"Connection", "iscsi_doctor.connection", FT_UINT32, BASE_DEC, NULL, 0x0,
        "iscsi-doctor's connection number (from 1)", HFILL}},
      {&hf_itt,
       {"ITT", "iscsi_doctor.itt", FT_UINT32, BASE_HEX, NULL, 0x0,
        "Initiator Task Tag of the command completed here", HFILL}},
      {&hf_op,
       {"Operation", "iscsi_doctor.op", FT_STRING, BASE_NONE, NULL, 0x0,
        "SCSI operation (READ(10), WRITE(16), ...)", HFILL}},
      {&hf_round_trips,
       {"Round trips", "iscsi_doctor.round_trips", FT_INT32, BASE_DEC, NULL, 0x0,
        "Network round trips on the command's critical path", HFILL}},
      {&hf_ideal_round_trips,
       {"Ideal round trips", "iscsi_doctor.ideal_round_trips", FT_INT32, BASE_DEC, NULL, 0x0,
        "Round trips the protocol needs with the negotiated keys", HFILL}},
      {&hf_excess_round_trips,
       {"Excess round trips", "iscsi_doctor.excess_round_trips", FT_INT32, BASE_DEC, NULL, 0x0,
        "round_trips - ideal_round_trips", HFILL}},
      {&hf_latency_ms,
       {"Latency (ms)", "iscsi_doctor.latency_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0,
        "From the command's first frame to its status frame", HFILL}},
      {&hf_first_frame,
       {"Command's first frame", "iscsi_doctor.first_frame", FT_FRAMENUM, BASE_NONE,
        FRAMENUM_TYPE(FT_FRAMENUM_REQUEST), 0x0, "Frame carrying the first byte of the command PDU", HFILL}},
      {&hf_lba, {"LBA", "iscsi_doctor.lba", FT_UINT64, BASE_DEC, NULL, 0x0, NULL, HFILL}},
      {&hf_lun, {"LUN", "iscsi_doctor.lun", FT_UINT64, BASE_DEC, NULL, 0x0, "The logical unit", HFILL}},
      {&hf_bytes,
       {"Bytes", "iscsi_doctor.bytes", FT_UINT32, BASE_DEC, NULL, 0x0, "Expected data transfer length",
        HFILL}},
      {&hf_scsi_status,
       {"SCSI status", "iscsi_doctor.scsi_status", FT_UINT8, BASE_HEX, NULL, 0x0, NULL, HFILL}},
      {&hf_command_findings,
       {"Command finding", "iscsi_doctor.command_finding", FT_STRING, BASE_NONE, NULL, 0x0,
        "A finding kind that delayed this command", HFILL}},
      {&hf_breakdown,
       {"Breakdown", "iscsi_doctor.breakdown", FT_NONE, BASE_NONE, NULL, 0x0,
        "Where the command's latency went", HFILL}},
      {&hf_conn,
       {"Connection facts", "iscsi_doctor.connection.facts", FT_NONE, BASE_NONE, NULL, 0x0,
        "What the capture showed of the command's connection, and what was inferred", HFILL}},
      {&hf_conn_rtt_ms,
       {"RTT (ms)", "iscsi_doctor.connection.rtt_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0,
        "Full path round trip (capture point to initiator plus to target)", HFILL}},
      {&hf_conn_vantage,
       {"Capture point", "iscsi_doctor.connection.vantage", FT_STRING, BASE_NONE, NULL, 0x0,
        "Near the initiator, the target, midpath, or unknown", HFILL}},
      {&hf_conn_joined,
       {"Joined mid-session", "iscsi_doctor.connection.joined", FT_BOOLEAN, BASE_NONE, NULL, 0x0,
        "The capture has no SYN for this connection: MSS, window scale and keys are inferred", HFILL}},
      {&hf_conn_mss,
       {"MSS", "iscsi_doctor.connection.mss", FT_STRING, BASE_NONE, NULL, 0x0,
        "Each side's MSS, and its evidence when inferred", HFILL}},
      {&hf_conn_window_scale,
       {"Window scale", "iscsi_doctor.connection.window_scale", FT_STRING, BASE_NONE, NULL, 0x0,
        "From the handshake, or the least the data in flight proves", HFILL}},
      {&hf_conn_keys,
       {"Keys", "iscsi_doctor.connection.keys", FT_STRING, BASE_NONE, NULL, 0x0,
        "Operational keys in effect and where they came from (login, inferred, default)", HFILL}},
      {&hf_conn_offload,
       {"Offload segments", "iscsi_doctor.connection.offload_segments", FT_UINT32, BASE_DEC, NULL, 0x0,
        "Segments longer than the MSS: TSO/GRO at the capture point", HFILL}},
      {&hf_conn_rtt_source,
       {"RTT from", "iscsi_doctor.connection.rtt_source", FT_STRING, BASE_NONE, NULL, 0x0,
        "Each side's round trip evidence: handshake, echoed timestamps, pure ACKs, or ACKs on data only (an upper bound)",
        HFILL}},
      {&hf_bd[bd_request],
       {"Request (ms)", "iscsi_doctor.breakdown.request_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_bd[bd_think],
       {"Target think (ms)", "iscsi_doctor.breakdown.think_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL,
        HFILL}},
      {&hf_bd[bd_data],
       {"Data (ms)", "iscsi_doctor.breakdown.data_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_bd[bd_nagle],
       {"Nagle (ms)", "iscsi_doctor.breakdown.nagle_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_bd[bd_delayed_ack],
       {"Delayed ACK (ms)", "iscsi_doctor.breakdown.delayed_ack_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL,
        HFILL}},
      {&hf_bd[bd_r2t],
       {"R2T (ms)", "iscsi_doctor.breakdown.r2t_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_bd[bd_window],
       {"Window (ms)", "iscsi_doctor.breakdown.window_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_bd[bd_loss],
       {"Loss (ms)", "iscsi_doctor.breakdown.loss_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_bd[bd_response],
       {"Response (ms)", "iscsi_doctor.breakdown.response_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_bd[bd_link],
       {"Link (ms)", "iscsi_doctor.breakdown.link_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0, NULL, HFILL}},

      {&hf_finding_tree,
       {"Finding", "iscsi_doctor.finding_tree", FT_NONE, BASE_NONE, NULL, 0x0,
        "A finding whose evidence is this frame", HFILL}},
      {&hf_finding,
       {"Finding", "iscsi_doctor.finding", FT_STRING, BASE_NONE, NULL, 0x0,
        "Finding kind (nagle_hold, delayed_ack, r2t_round_trip, cwnd_limited, rwnd_limited, "
        "retransmission, target_think, serialized, link_limited, think_or_hold)",
        HFILL}},
      {&hf_side,
       {"Side", "iscsi_doctor.side", FT_STRING, BASE_NONE, NULL, 0x0, "Side at fault (initiator, target, or network: the path)",
        HFILL}},
      {&hf_touched_ms,
       {"Time touched (ms)", "iscsi_doctor.touched_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0,
        "Time the finding held its command (overlaps other findings': not time lost, which counts each "
        "millisecond once)",
        HFILL}},
      {&hf_lost_ms,
       {"Time touched (ms), old name", "iscsi_doctor.lost_ms", FT_DOUBLE, BASE_NONE, NULL, 0x0,
        "Deprecated alias of iscsi_doctor.touched_ms, kept one release", HFILL}},
      {&hf_fix, {"Fix", "iscsi_doctor.fix", FT_STRING, BASE_NONE, NULL, 0x0, "What to change", HFILL}},
      {&hf_detail, {"Detail", "iscsi_doctor.detail", FT_STRING, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_inferred,
       {"Inferred", "iscsi_doctor.inferred", FT_STRING, BASE_NONE, NULL, 0x0,
        "A fact this verdict rests on that the capture did not show: mss, window_scale, keys", HFILL}},
      {&hf_finding_itt,
       {"Delayed command ITT", "iscsi_doctor.finding_itt", FT_UINT32, BASE_HEX, NULL, 0x0, NULL, HFILL}},
      {&hf_command_frame,
       {"Delayed command's first frame", "iscsi_doctor.command_first_frame", FT_FRAMENUM, BASE_NONE,
        FRAMENUM_TYPE(FT_FRAMENUM_REQUEST), 0x0, NULL, HFILL}},
      {&hf_related[rel_released_by],
       {"Released by", "iscsi_doctor.released_by", FT_FRAMENUM, BASE_NONE, FRAMENUM_TYPE(FT_FRAMENUM_ACK),
        0x0, "The ACK that released this held segment", HFILL}},
      {&hf_related[rel_acks],
       {"Acknowledges", "iscsi_doctor.acks", FT_FRAMENUM, BASE_NONE, FRAMENUM_TYPE(FT_FRAMENUM_NONE), 0x0,
        "The data this late ACK acknowledges", HFILL}},
      {&hf_related[rel_released],
       {"Released", "iscsi_doctor.released", FT_FRAMENUM, BASE_NONE, FRAMENUM_TYPE(FT_FRAMENUM_NONE), 0x0,
        "The held segment this ACK released", HFILL}},
      {&hf_related[rel_previous_small],
       {"Previous small segment", "iscsi_doctor.previous_small", FT_FRAMENUM, BASE_NONE,
        FRAMENUM_TYPE(FT_FRAMENUM_NONE), 0x0, "The unacknowledged small segment Nagle waited on", HFILL}},
      {&hf_related[rel_original],
       {"Original", "iscsi_doctor.original", FT_FRAMENUM, BASE_NONE, FRAMENUM_TYPE(FT_FRAMENUM_RETRANS_PREV),
        0x0, "The original transmission", HFILL}},
      {&hf_related[rel_command],
       {"Command", "iscsi_doctor.command_frame", FT_FRAMENUM, BASE_NONE, FRAMENUM_TYPE(FT_FRAMENUM_REQUEST),
        0x0, "The command's first frame", HFILL}},
      {&hf_status_frame,
       {"Status frame", "iscsi_doctor.status_frame", FT_FRAMENUM, BASE_NONE,
        FRAMENUM_TYPE(FT_FRAMENUM_RESPONSE), 0x0, "The segment that completes the command's status", HFILL}},
      {&hf_evidence_frame,
       {"Evidence frame", "iscsi_doctor.evidence_frame", FT_FRAMENUM, BASE_NONE,
        FRAMENUM_TYPE(FT_FRAMENUM_NONE), 0x0,
        "The frame the finding is about (the held segment, the late ACK, ...)", HFILL}},
      {&hf_related_frame,
       {"Related frame", "iscsi_doctor.related_frame", FT_FRAMENUM, BASE_NONE,
        FRAMENUM_TYPE(FT_FRAMENUM_NONE), 0x0, "Every frame related to the finding, with its role", HFILL}},
      {&hf_related_other,
       {"Related frame", "iscsi_doctor.related", FT_FRAMENUM, BASE_NONE, FRAMENUM_TYPE(FT_FRAMENUM_NONE), 0x0,
        NULL, HFILL}},
      {&hf_decided_in,
       {"Decided in frame", "iscsi_doctor.decided_in", FT_FRAMENUM, BASE_NONE,
        FRAMENUM_TYPE(FT_FRAMENUM_NONE), 0x0, "The frame whose arrival completed the evidence", HFILL}},
      {&hf_decided_at_end,
       {"Decided at end of capture", "iscsi_doctor.decided_at_end", FT_STRING, BASE_NONE, NULL, 0x0,
        "Finding kind known only once the whole capture was read (so not "
        "shown by one-pass tshark)",
        HFILL}},
      {&hf_reported,
       {"Decided here", "iscsi_doctor.reported", FT_NONE, BASE_NONE, NULL, 0x0,
        "A finding on an earlier frame, decided by this frame", HFILL}},
      {&hf_reported_frame,
       {"Evidence frame", "iscsi_doctor.reported.frame", FT_FRAMENUM, BASE_NONE,
        FRAMENUM_TYPE(FT_FRAMENUM_NONE), 0x0, NULL, HFILL}},
      {&hf_reported_finding,
       {"Finding", "iscsi_doctor.reported.finding", FT_STRING, BASE_NONE, NULL, 0x0, NULL, HFILL}},
      {&hf_reported_status_frame,
       {"Status frame", "iscsi_doctor.reported.status_frame", FT_FRAMENUM, BASE_NONE,
        FRAMENUM_TYPE(FT_FRAMENUM_RESPONSE), 0x0, "A command completed there, decided by this frame", HFILL}},
      {&hf_reported_round_trips,
       {"Round trips", "iscsi_doctor.reported.round_trips", FT_INT32, BASE_DEC, NULL, 0x0, NULL, HFILL}},
      {&hf_command_at_end,
       {"Completion decided at end of capture", "iscsi_doctor.command_decided_at_end", FT_BOOLEAN, BASE_NONE,
        NULL, 0x0,
        "Known only once the whole capture was read (so not shown by "
        "one-pass tshark)",
        HFILL}},
      {&hf_notice,
       {"Notice", "iscsi_doctor.notice", FT_STRING, BASE_NONE, NULL, 0x0,
        "What the engine could not analyse, and why", HFILL}},
  };

  static gint* ett[] = {&ett_iscsi_doctor, &ett_command,  &ett_breakdown,
                        &ett_finding,      &ett_reported, &ett_conn};

  // One expert field per finding kind, from the engine's table (names and weights are contracts).
  static std::array<std::string, finding_kind_count> ei_names;
  static ei_register_info ei[finding_kind_count + 3] = {
      {&ei_notice_info,
       {"iscsi_doctor.expert.notice_info", PI_PROTOCOL, PI_NOTE, "iscsi-doctor notice", EXPFILL}},
      {&ei_notice_warning,
       {"iscsi_doctor.expert.notice_warning", PI_PROTOCOL, PI_WARN, "iscsi-doctor warning", EXPFILL}},
      {&ei_notice_error,
       {"iscsi_doctor.expert.notice_error", PI_MALFORMED, PI_ERROR, "iscsi-doctor error", EXPFILL}},
  };

  proto_iscsi_doctor = proto_register_protocol("iSCSI Doctor (why each SCSI command was slow)",
                                               "iSCSI Doctor", "iscsi_doctor");
  proto_register_field_array(proto_iscsi_doctor, hf, array_length(hf));
  proto_register_subtree_array(ett, array_length(ett));
  for (size_t k = 0; k < finding_kind_count; ++k) {
    const FindingKindInfo& info = kFindingKinds[k];
    ei_names[k] = "iscsi_doctor.expert." + std::string(info.name);
    ei[3 + k] = ei_register_info{
        &ei_finding[k],
        {ei_names[k].c_str(), PI_SEQUENCE, info.severity == Severity::warning ? PI_WARN : PI_NOTE,
         info.title.data(), EXPFILL}};
  }
  expert_module_t* em = expert_register_protocol(proto_iscsi_doctor);
  expert_register_field_array(em, ei, array_length(ei));

  module_t* prefs = prefs_register_protocol(proto_iscsi_doctor, NULL);
  prefs_register_bool_preference(prefs, "info_column", "Add findings to the Info column",
                                 "Append [finding] to the Info column of evidence frames", &pref_info_column);
  // The same analysis options as the iscsi-doctor command (names as its long options).
  range_convert_str(wmem_epan_scope(), &pref_ports, "3260", 65535);
  prefs_register_range_preference(prefs, "ports", "iSCSI target ports",
                                  "TCP ports of iSCSI targets (the CLI's --port)", &pref_ports, 65535);
  prefs_register_bool_preference(prefs, "detect_ports", "Detect iSCSI on other ports",
                                 "Follow connections on other ports that start with iSCSI (off: the CLI's "
                                 "--no-detect-ports)",
                                 &pref_detect_ports);
  prefs_register_uint_preference(
      prefs, "delayed_ack_ms", "Delayed-ACK threshold (ms)",
      "An ACK later than this beyond the round trip counts as delayed (--delayed-ack-ms)", 10,
      &pref_delayed_ack_ms);
  prefs_register_uint_preference(
      prefs, "idle_timeout", "Idle timeout (s)",
      "At the connection cap, connections idle this long are finished (--idle-timeout)", 10,
      &pref_idle_timeout_s);
  prefs_register_uint_preference(prefs, "max_connections", "Open connections cap",
                                 "Connections followed at once (--max-connections)", 10,
                                 &pref_max_connections);
  prefs_register_uint_preference(prefs, "max_open_commands", "Open commands cap",
                                 "Commands awaiting their status per connection (--max-open-commands)", 10,
                                 &pref_max_open_commands);
  prefs_register_uint_preference(prefs, "max_reorder_bytes", "Out-of-order bytes cap",
                                 "Out-of-order bytes held per direction (--max-reorder-bytes)", 10,
                                 &pref_max_reorder_bytes);

  iscsi_doctor_handle = create_dissector_handle(dissect_iscsi_doctor, proto_iscsi_doctor);
  register_postdissector(iscsi_doctor_handle);
  tap_iscsi_doctor = register_tap("iscsi_doctor");

  register_init_routine(init_routine);
  register_cleanup_routine(cleanup_routine);
  register_postseq_cleanup_routine(postseq_routine);

  stats_tree_register_plugin("iscsi_doctor", "iscsi_doctor", "iSCSI Doctor", 0, st_packet, st_init,
                             st_cleanup);
  // Wireshark 4.0 does not log which plugins it loaded; this line shows ours did (--log-level info).
  ws_log(log_domain, LOG_LEVEL_INFO, "plugin %s registered", ISCSI_DOCTOR_VERSION);
}

extern "C" void proto_reg_handoff_iscsi_doctor(void) {
  GArray* wanted = g_array_new(FALSE, FALSE, static_cast<guint>(sizeof(int)));
  for (int i = 0; i < w_count; ++i) {
    hf_wanted[i] = proto_registrar_get_id_byname(wanted_names[i]);
    if (hf_wanted[i] > 0) g_array_append_val(wanted, hf_wanted[i]);
  }
  set_postdissector_wanted_hfids(iscsi_doctor_handle, wanted);
}
