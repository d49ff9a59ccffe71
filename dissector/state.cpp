// SPDX-License-Identifier: GPL-2.0-or-later
// The engine's run inside Wireshark: fed once, on the first sequential pass (frames not yet
// visited); what it reports is stored by frame and looked up on every later dissection of that
// frame, so one-pass tshark, two-pass tshark (-2) and the GUI's random access show the same items.
// A finding is shown on its evidence frame; when the engine decided it at a later frame (a
// delayed ACK is known to be late only when the segment it held is released), that later frame
// also carries a "decided here" link back to the evidence frame, which is how one-pass tshark,
// which has already printed the evidence frame, still reports it. Findings decided only at the
// end of the capture (Analyzer::finish, e.g. `serialized`) exist once the first pass is over: in
// the GUI and with tshark -2.
#include <epan/funnel.h>
#include <wsutil/wslog.h>

#include <string>

#include "iscsi-doctor.hpp"
#include "iscsi_doctor/summary.hpp"

namespace iscsi_doctor::plugin {

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

// The GUI's display filter ran during the first pass, when results decided by later frames (a
// delayed ACK on its late ACK, `serialized` at the end) were not yet known: apply it once more.
// Only the GUI has funnel operations; it is still reading the file, so it queues the refiltering
// (a rescan that keeps the dissectors' state) until the read is done. Works alike in 4.0 to 4.6.
void refilter() {
  const funnel_ops_t* ops = funnel_get_funnel_ops();
  if (!ops || !ops->get_filter || !ops->set_filter || !ops->apply_filter) return;
  const char* current = ops->get_filter(ops->ops_id);
  if (!current || !*current) return;  // no filter: every row is shown, its text made when drawn
  const std::string filter(current);
  ops->set_filter(ops->ops_id, filter.c_str());
  ops->apply_filter(ops->ops_id);
  ws_log(log_domain, LOG_LEVEL_INFO, "display filter applied again: %s", filter.c_str());
}

}  // namespace

State::State() : analyzer(options_from_prefs(), *this) {}

void State::on_command(const CommandResult& c) {
  if (!c.completed || c.status_frame == 0) return;  // open at the end: no completing frame
  auto idx = static_cast<uint32_t>(commands.size());
  commands.push_back(c);
  command_decided.push_back(current);
  frames[c.status_frame].commands.push_back(idx);
  if (current && current != c.status_frame) frames[current].reported_commands.push_back(idx);
  frames[current ? current : c.status_frame].tapped_commands.push_back(idx);
  if (current != c.status_frame) decided_later = true;
}

void State::on_finding(const Finding& f) {
  auto idx = static_cast<uint32_t>(findings.size());
  findings.push_back({f, current, fix_for(f.kind, f.side)});
  if (f.frame) frames[f.frame].findings.push_back(idx);
  if (current && current != f.frame) frames[current].reported.push_back(idx);
  uint64_t tap_frame = current ? current : f.frame;
  if (tap_frame) frames[tap_frame].tapped.push_back(idx);
  if (current != f.frame) decided_later = true;
}

void State::on_connection(const ConnectionInfo& c) { connections[c.id] = c; }

void State::on_notice(const Notice& n) {
  uint64_t frame = n.frame ? n.frame : current;
  if (frame) frames[frame].notices.push_back({n.level, n.message});
  if (n.frame && n.frame != current) decided_later = true;
}

void State::finish() {
  if (finished) return;
  finished = true;
  current = 0;
  analyzer.finish();
}

void init_routine() { g_state = std::make_unique<State>(); }
void cleanup_routine() { g_state.reset(); }
// After the first sequential pass (tshark -2, the GUI after reading a file): end of capture.
void postseq_routine() {
  if (!g_state || g_state->finished) return;
  g_state->finish();
  // At level info (--log-level info): how a GUI session shows it ran, which its tests check.
  ws_log(log_domain, LOG_LEVEL_INFO, "first pass done: %zu commands completed, %zu findings",
         g_state->commands.size(), g_state->findings.size());
  if (g_state->decided_later) refilter();
}

}  // namespace iscsi_doctor::plugin
