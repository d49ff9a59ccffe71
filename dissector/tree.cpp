// SPDX-License-Identifier: GPL-2.0-or-later
// A frame's results as Wireshark shows them: the protocol tree (the command completed here, the
// findings whose evidence it is, what it decided for earlier frames, the engine's notices), the
// expert info that groups findings by kind, and the verdict appended to the Info column.
#include <cstdio>
#include <string>

#include "iscsi-doctor.hpp"
#include "iscsi_doctor/summary.hpp"

namespace iscsi_doctor::plugin {

namespace {

// A field kept for filters whose fact another item of the tree already shows.
void hide(proto_item* it) {
  proto_item_set_generated(it);
  proto_item_set_hidden(it);
}

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
  hide(proto_tree_add_uint(ct, hf_related[rel_command], tvb, 0, 0, static_cast<guint32>(c.first_frame)));
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
  if (const std::string n = nagle_words(k); !n.empty()) gen(proto_tree_add_string(kt, hf_conn_nagle, tvb, 0, 0, n.c_str()));
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

void add_expert(packet_info* pinfo, proto_item* kind_item, const FindingRec& r) {
  const Finding& f = r.f;
  auto k = static_cast<size_t>(f.kind);
  if (k < finding_kind_count)
    // One message per kind and side, so the Expert Information dialog groups them.
    expert_add_info_format(pinfo, kind_item, &ei_finding[k], "%s (%s side); fix: %s", kind_name(f.kind),
                           side_name(f.side).data(), r.fix.c_str());
}

void add_expert(packet_info* pinfo, proto_item* notice_item, const NoticeRec& n) {
  expert_add_info_format(pinfo, notice_item, notice_ei(n.level), "iscsi-doctor: %s", n.message.c_str());
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
    hide(proto_tree_add_uint(ft, hf_related[rel_command], tvb, 0, 0,
                             static_cast<guint32>(f.command_first_frame)));
  }
  // Each related frame is shown once, by its role's own field (Released by: 12); the generic
  // related_frame, which lists every role, and a role's duplicate stay filterable, hidden.
  for (const auto& [name, frame] : f.related) {
    const bool command_again = name == related_names[rel_command] && frame == f.command_first_frame;
    int hf = hf_related_other;
    for (int i = 0; i < rel_count; ++i)
      if (name == related_names[i]) hf = hf_related[i];
    proto_item* any = proto_tree_add_uint_format_value(ft, hf_related_frame, tvb, 0, 0,
                                                       static_cast<guint32>(frame), "%u (%s)",
                                                       static_cast<unsigned>(frame), name.c_str());
    if (command_again) {  // the delayed command's first frame, shown above
      hide(any);
      continue;
    }
    if (hf == hf_related_other) {  // a role without a field: related_frame says it
      gen(any);
      hide(proto_tree_add_uint_format_value(ft, hf, tvb, 0, 0, static_cast<guint32>(frame), "%s: %u",
                                            name.c_str(), static_cast<unsigned>(frame)));
    } else {
      hide(any);
      gen(proto_tree_add_uint(ft, hf, tvb, 0, 0, static_cast<guint32>(frame)));
    }
  }
  if (r.decided_frame && r.decided_frame != f.frame)
    gen(proto_tree_add_uint(ft, hf_decided_in, tvb, 0, 0, static_cast<guint32>(r.decided_frame)));
  if (!r.decided_frame) gen(proto_tree_add_string(ft, hf_decided_at_end, tvb, 0, 0, kind_name(f.kind)));

  add_expert(pinfo, kind_item, r);
}

void add_reported_command(proto_tree* tree, tvbuff_t* tvb, const CommandResult& c, bool shown) {
  auto mark = shown ? hide : proto_item_set_generated;
  proto_item* ti = proto_tree_add_none_format(tree, hf_reported, tvb, 0, 0,
                                              "Decided here: completion of ITT 0x%08x on frame %u", c.itt,
                                              static_cast<unsigned>(c.status_frame));
  mark(ti);
  proto_tree* rt = proto_item_add_subtree(ti, ett_reported);
  mark(proto_tree_add_uint(rt, hf_reported_status_frame, tvb, 0, 0, static_cast<guint32>(c.status_frame)));
  mark(proto_tree_add_int(rt, hf_reported_round_trips, tvb, 0, 0, c.round_trips));
}

void add_reported(proto_tree* tree, tvbuff_t* tvb, const FindingRec& r, bool shown) {
  auto mark = shown ? hide : proto_item_set_generated;
  proto_item* ti = proto_tree_add_none_format(tree, hf_reported, tvb, 0, 0, "Decided here: %s on frame %u",
                                              kind_name(r.f.kind), static_cast<unsigned>(r.f.frame));
  mark(ti);
  proto_tree* rt = proto_item_add_subtree(ti, ett_reported);
  mark(proto_tree_add_uint(rt, hf_reported_frame, tvb, 0, 0, static_cast<guint32>(r.f.frame)));
  mark(proto_tree_add_string(rt, hf_reported_finding, tvb, 0, 0, kind_name(r.f.kind)));
}

}  // namespace

void add_info_column(packet_info* pinfo, const iscsi_doctor_frame& fr) {
  if (!pref_info_column) return;
  for (uint32_t i : fr.findings)
    col_append_fstr(pinfo->cinfo, COL_INFO, " [%s]", kind_name(g_state->findings[i].f.kind));
  for (uint32_t i : fr.commands) {
    const CommandResult& c = g_state->commands[i];
    if (c.round_trips > c.ideal_round_trips)
      col_append_fstr(pinfo->cinfo, COL_INFO, " [%d round trips, ideal %d]", c.round_trips,
                      c.ideal_round_trips);
  }
}

void add_tree(proto_tree* tree, tvbuff_t* tvb, packet_info* pinfo, const iscsi_doctor_frame& fr) {
  if (!tree) {
    // No tree (tshark's second pass without -V or a filter): every item would be dropped, but the
    // expert infos still count (Expert column, -z expert); the items' text is not worth building.
    for (uint32_t i : fr.findings) add_expert(pinfo, nullptr, g_state->findings[i]);
    for (const NoticeRec& n : fr.notices) add_expert(pinfo, nullptr, n);
    return;
  }
  proto_item* root = proto_tree_add_item(tree, proto_iscsi_doctor, tvb, 0, 0, ENC_NA);
  proto_item_set_generated(root);
  proto_tree* dt = proto_item_add_subtree(root, ett_iscsi_doctor);
  for (uint32_t i : fr.commands)
    add_command(dt, tvb, g_state->commands[i], g_state->command_decided[i]);
  for (uint32_t i : fr.findings)
    add_finding(dt, tvb, pinfo, g_state->findings[i]);
  // "Decided here" is how one-pass tshark, which has printed the evidence frame already, learns of
  // a result; once the first pass is over the result is on its own frame (with "Decided in
  // frame"), and the link stays only for filters.
  const bool shown = g_state->finished;
  for (uint32_t i : fr.reported)
    add_reported(dt, tvb, g_state->findings[i], shown);
  for (uint32_t i : fr.reported_commands)
    add_reported_command(dt, tvb, g_state->commands[i], shown);
  for (const NoticeRec& n : fr.notices) {
    proto_item* ni = proto_tree_add_string(dt, hf_notice, tvb, 0, 0, n.message.c_str());
    proto_item_set_generated(ni);
    add_expert(pinfo, ni, n);
  }
}

}  // namespace iscsi_doctor::plugin
