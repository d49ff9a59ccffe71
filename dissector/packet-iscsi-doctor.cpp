// SPDX-License-Identifier: GPL-2.0-or-later
// iscsi_doctor: a Wireshark post-dissector that runs the iscsi-doctor engine over the TCP segments
// Wireshark has already dissected, and shows its verdicts on the packets they concern.
//
// This file registers the protocol (fields, subtrees, expert items, preferences, the tap, the
// capture's life routines) and is the dissector Wireshark calls per frame; iscsi-doctor.hpp says
// where the other parts live.
#include <epan/tap.h>
#include <wsutil/wslog.h>

#include <string>

#include "iscsi-doctor.hpp"
#include "packet-iscsi-doctor.h"

using namespace iscsi_doctor;
using namespace iscsi_doctor::plugin;

namespace {

int dissect_iscsi_doctor(tvbuff_t* tvb, packet_info* pinfo, proto_tree* tree, void*) {
  if (!g_state) return 0;
  if (!PINFO_FD_VISITED(pinfo) && !g_state->finished) feed_frame(pinfo, tvb);

  auto it = g_state->frames.find(pinfo->num);
  if (it == g_state->frames.end()) return 0;
  const iscsi_doctor_frame& fr = it->second;
  if (fr.commands.empty() && fr.findings.empty() && fr.reported.empty() && fr.notices.empty() &&
      fr.tapped.empty() && fr.reported_commands.empty() && fr.tapped_commands.empty())
    return 0;

  if (!fr.tapped.empty() || !fr.tapped_commands.empty()) tap_queue_packet(tap_iscsi_doctor, pinfo, &fr);
  add_info_column(pinfo, fr);
  add_tree(tree, tvb, pinfo, fr);
  return tvb_captured_length(tvb);
}

}  // namespace


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
      {&hf_conn_nagle,
       {"Nagle", "iscsi_doctor.connection.nagle", FT_STRING, BASE_NONE, NULL, 0x0,
        "Nagle shown off: a short segment sent while the previous one was unacknowledged (frame); no Nagle holds after it",
        HFILL}},
      {&hf_conn_rtt_source,
       {"RTT from", "iscsi_doctor.connection.rtt_source", FT_STRING, BASE_NONE, NULL, 0x0,
        "Each side's round trip evidence: handshake, echoed timestamps, pure ACKs, Nagle releases, pure ACKs that may be delayed or ACKs on data only (the last two upper bounds)",
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
        "retransmission, target_think, serialized, link_limited, think_or_hold, "
        "think_or_network)",
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

  register_stats_tree();
  // Wireshark 4.0 does not log which plugins it loaded; this line shows ours did (--log-level info).
  ws_log(log_domain, LOG_LEVEL_INFO, "plugin %s registered", ISCSI_DOCTOR_VERSION);
}

extern "C" void proto_reg_handoff_iscsi_doctor(void) { find_protocols(); }
