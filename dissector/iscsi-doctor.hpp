// SPDX-License-Identifier: GPL-2.0-or-later
// What the parts of the iscsi_doctor post-dissector share: the ids Wireshark gives its protocol,
// fields and expert items (registered in packet-iscsi-doctor.cpp), its preferences, and the
// engine's results by frame, built on the first sequential pass (state.cpp).
//
// The parts: extract.cpp reads a frame's TCP segment from its bytes into the engine;
// state.cpp runs the engine and keeps what it reports by frame; tree.cpp shows a frame's results
// (protocol tree, expert info, Info column); stats_tree.cpp is Statistics > iSCSI Doctor;
// packet-iscsi-doctor.cpp registers it all and is the dissector called per frame.
#pragma once
// Wireshark's headers declare their C linkage themselves.
#include <epan/expert.h>
#include <epan/packet.h>
#include <epan/prefs.h>
#include <epan/proto.h>
#include <epan/range.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "iscsi_doctor/analyzer.hpp"
#include "iscsi_doctor/finding_kinds.hpp"

namespace iscsi_doctor::plugin {

// ---------------------------------------------------------------------------------------------
// Registered ids

inline int proto_iscsi_doctor = -1;
inline int tap_iscsi_doctor = -1;
inline dissector_handle_t iscsi_doctor_handle;

// A boolean preference is a gboolean in Wireshark 4.0 and a bool in 4.4 and 4.6: take the
// type prefs_register_bool_preference() wants.
template <typename F>
struct bool_pref_arg;
template <typename R, typename... A>
struct bool_pref_arg<R (*)(A...)> {
  using type = std::remove_pointer_t<std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>>;
};
using pref_bool = bool_pref_arg<decltype(&prefs_register_bool_preference)>::type;

inline pref_bool pref_info_column = TRUE;
// The CLI's analysis options (docs/cli.md), applied when a capture is (re)loaded.
inline range_t* pref_ports = nullptr;
inline pref_bool pref_detect_ports = TRUE;
inline guint pref_delayed_ack_ms = 10, pref_idle_timeout_s = 60, pref_max_connections = 65536,
      pref_max_open_commands = 65536, pref_max_reorder_bytes = 4u << 20;

inline int hf_command = -1, hf_session = -1, hf_connection = -1, hf_itt = -1, hf_op = -1, hf_round_trips = -1,
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
inline std::array<int, bd_count> hf_bd{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};

inline int hf_finding_tree = -1, hf_finding = -1, hf_side = -1, hf_touched_ms = -1, hf_lost_ms = -1, hf_fix = -1, hf_detail = -1,
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
inline std::array<int, rel_count> hf_related{-1, -1, -1, -1, -1, -1};

inline int hf_status_frame = -1, hf_evidence_frame = -1, hf_related_frame = -1;
inline int hf_reported = -1, hf_reported_frame = -1, hf_reported_finding = -1, hf_reported_status_frame = -1,
    hf_reported_round_trips = -1, hf_command_at_end = -1;
inline int hf_notice = -1;
// The command's connection: what the capture showed of it, and what was inferred (results.hpp).
inline int hf_conn = -1, hf_conn_rtt_ms = -1, hf_conn_vantage = -1, hf_conn_joined = -1, hf_conn_mss = -1,
    hf_conn_window_scale = -1, hf_conn_keys = -1, hf_conn_offload = -1, hf_conn_rtt_source = -1,
    hf_conn_nagle = -1;

inline int ett_iscsi_doctor = -1, ett_command = -1, ett_breakdown = -1, ett_finding = -1, ett_reported = -1,
    ett_conn = -1;

inline std::array<expert_field, finding_kind_count> ei_finding{};
inline expert_field ei_notice_info = EI_INIT, ei_notice_warning = EI_INIT, ei_notice_error = EI_INIT;


// ---------------------------------------------------------------------------------------------
// State built on the first pass (state.cpp)

struct FindingRec {
  Finding f;
  uint64_t decided_frame = 0;  // frame being fed when the engine reported it; 0 = at finish()
  std::string fix;
};

struct NoticeRec {
  Notice::Level level;
  std::string message;
};

}  // namespace iscsi_doctor::plugin

// What is known about one frame; also the tap data handed to the statistics tree.
struct iscsi_doctor_frame {
  std::vector<uint32_t> commands;           // completed here (status frame)
  std::vector<uint32_t> reported_commands;  // completion decided here, status frame earlier
  std::vector<uint32_t> tapped_commands;    // counted in the statistics at this frame
  std::vector<uint32_t> findings;           // evidence here
  std::vector<uint32_t> reported;           // decided here, evidence elsewhere
  std::vector<uint32_t> tapped;             // counted in the statistics at this frame
  std::vector<iscsi_doctor::plugin::NoticeRec> notices;
};

namespace iscsi_doctor::plugin {

struct State final : Sink {
  State();

  Analyzer analyzer;
  std::vector<CommandResult> commands;
  std::vector<uint64_t> command_decided;  // per command: frame being fed, 0 = at finish()
  std::vector<FindingRec> findings;
  std::unordered_map<uint64_t, iscsi_doctor_frame> frames;
  std::unordered_map<uint32_t, ConnectionInfo> connections;  // final facts, by connection id
  uint64_t current = 0;                                      // frame being fed; 0 during finish()
  bool finished = false;
  bool decided_later = false;  // something is shown on an earlier frame than the one deciding it

  void on_command(const CommandResult& c) override;
  void on_finding(const Finding& f) override;
  void on_connection(const ConnectionInfo& c) override;
  void on_notice(const Notice& n) override;
  void finish();
};

inline std::unique_ptr<State> g_state;
inline constexpr const char* log_domain = "iscsi_doctor";

// state.cpp: the capture's life (register_init_routine, _cleanup_routine, _postseq_cleanup_routine).
void init_routine();
void cleanup_routine();
void postseq_routine();

// extract.cpp: the protocols it checks a frame for (at handoff), and one frame into the engine.
void find_protocols();
void feed_frame(packet_info* pinfo, tvbuff_t* tvb);

// tree.cpp: a frame's results in the protocol tree, its expert info and the Info column.
inline const char* kind_name(FindingKind k) { return finding_name(k).data(); }
void add_info_column(packet_info* pinfo, const iscsi_doctor_frame& fr);
void add_tree(proto_tree* tree, tvbuff_t* tvb, packet_info* pinfo, const iscsi_doctor_frame& fr);

// stats_tree.cpp: Statistics > iSCSI Doctor, tshark -z iscsi_doctor,tree.
void register_stats_tree();

}  // namespace iscsi_doctor::plugin
