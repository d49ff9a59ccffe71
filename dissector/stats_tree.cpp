// SPDX-License-Identifier: GPL-2.0-or-later
// The statistics tree: tshark -z iscsi_doctor,tree and Statistics > iSCSI Doctor in the GUI.
// It counts what the dissector queues on the tap (iscsi_doctor_frame): each command and finding
// once, at the frame that decided it.
#include <epan/stats_tree.h>
#include <epan/tap.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "iscsi-doctor.hpp"
#include "iscsi_doctor/summary.hpp"

namespace iscsi_doctor::plugin {

namespace {

// Two trees side by side, so that a node's Percent (its count over its parent's) compares like
// with like: one counts completed commands, the other findings.
const char* const st_root = "iSCSI Doctor";
const char* const st_findings = "iSCSI Doctor findings";
const char* const st_all = "All sessions";
int st_root_node = -1, st_findings_node = -1;
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
// Per tree and table: its rows so far (the names; the count is what the cap is on).
std::map<const stats_tree*, std::array<std::set<std::string>, st_tables.size()>> st_rows;

// Every node's Count counts something (commands, findings); a time or a round trip count is a
// value of an average node (Count: how many values; Average, Min, Max of them). Times go in as
// whole microseconds: an average node keeps floats as floats, printed with their noise.
int us(double ms) { return static_cast<int>(std::lround(ms * 1000.0)); }

void st_init(stats_tree* st) {
  st_rows[st] = {};
  st_root_node = stats_tree_create_node(st, st_root, 0, STAT_DT_INT, TRUE);
  for (const StTable& t : st_tables)  // first under the root, whatever sessions come
    stats_tree_create_node(st, t.name, st_root_node, STAT_DT_INT, TRUE);
  st_findings_node = stats_tree_create_node(st, st_findings, 0, STAT_DT_INT, TRUE);
}

void st_cleanup(stats_tree* st) { st_rows.erase(st); }

// A command's figures under a node that counts commands: its round trips, the ideal, the excess
// and its latency, as average nodes (Count x Average of "excess round trips" is their total).
void st_figures(stats_tree* st, int cmds, const CommandResult& c) {
  avg_stat_node_add_value_int(st, "round trips", cmds, FALSE, c.round_trips);
  avg_stat_node_add_value_int(st, "ideal round trips", cmds, FALSE, c.ideal_round_trips);
  avg_stat_node_add_value_int(st, "excess round trips", cmds, FALSE, c.round_trips - c.ideal_round_trips);
  avg_stat_node_add_value_int(st, "latency (us)", cmds, FALSE, us(c.latency_ms));
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

// A node under `parent` without counting anything there (its count comes from elsewhere).
int st_node(stats_tree* st, const char* name, int parent) {
  return stats_tree_manip_node_int(MN_INCREASE, st, name, parent, TRUE, 0);
}

// A command in its scope ("Session n", "All sessions") of both trees: its figures where the
// scope counts commands; under each kind that delayed it, where the scope counts findings,
// "commands delayed" counts the commands, with their round trips and the kind's time lost in
// each: its own part of the latency, so that over all kinds each millisecond is counted once
// (docs/cli.md "Time lost"; Count x Average is the kind's time lost, the CLI's summed
// time_lost_ms).
void st_command(stats_tree* st, const char* scope, const CommandResult& c) {
  st_figures(st, tick_stat_node(st, scope, st_root_node, TRUE), c);
  for (FindingKind k : c.findings)
    if (k != FindingKind::serialized) {  // connection level: no command's time is its own
      const int kn = st_node(st, kind_name(k), st_node(st, scope, st_findings_node));
      const int delayed = tick_stat_node(st, "commands delayed", kn, TRUE);
      avg_stat_node_add_value_int(st, "round trips", delayed, FALSE, c.round_trips);
      avg_stat_node_add_value_int(st, "ideal round trips", delayed, FALSE, c.ideal_round_trips);
      avg_stat_node_add_value_int(st, "time lost (us)", delayed, FALSE, us(exclusive_ms(k, c.breakdown)));
    }
}

// The fix up to its first explanation (" (", ":", ";"): a node name, so it must fit a GUI column;
// the whole text is in iscsi_doctor.fix and the expert info.
std::string short_fix(const std::string& fix) {
  size_t cut = std::min({fix.find(" ("), fix.find(':'), fix.find(';')});
  return cut == std::string::npos ? fix : fix.substr(0, cut);
}

// A finding in its scope of the findings tree, by kind: its side and fix, and the time it touched
// (the time it held its command, which overlaps other findings': not time lost).
void st_finding(stats_tree* st, const char* scope, const FindingRec& r) {
  const Finding& f = r.f;
  const int kn = tick_stat_node(st, kind_name(f.kind), tick_stat_node(st, scope, st_findings_node, TRUE), TRUE);
  std::string side = std::string("side: ") + side_name(f.side).data();
  tick_stat_node(st, side.c_str(), kn, FALSE);
  std::string fix = "fix: " + short_fix(r.fix);
  tick_stat_node(st, fix.c_str(), kn, FALSE);
  avg_stat_node_add_value_int(st, "touched per finding (us)", kn, FALSE, us(f.lost_ms));
}

tap_packet_status st_packet(stats_tree* st, packet_info*, epan_dissect_t*, const void* p, tap_flags_t) {
  if (!g_state || !p) return TAP_PACKET_DONT_REDRAW;
  const auto* fr = static_cast<const iscsi_doctor_frame*>(p);
  for (uint32_t i : fr->tapped_commands) {
    const CommandResult& c = g_state->commands[i];
    tick_stat_node(st, st_root, 0, FALSE);
    const std::string name = "Session " + std::to_string(c.session);
    st_command(st, name.c_str(), c);
    st_command(st, st_all, c);
    st_table_rows(st, c);
  }
  for (uint32_t i : fr->tapped) {
    const FindingRec& r = g_state->findings[i];
    tick_stat_node(st, st_findings, 0, FALSE);
    const std::string name = "Session " + std::to_string(r.f.session);
    st_finding(st, name.c_str(), r);
    st_finding(st, st_all, r);
  }
  return TAP_PACKET_REDRAW;
}

}  // namespace

void register_stats_tree() {
  stats_tree_register_plugin("iscsi_doctor", "iscsi_doctor", "iSCSI Doctor", 0, st_packet, st_init,
                             st_cleanup);
}

}  // namespace iscsi_doctor::plugin
