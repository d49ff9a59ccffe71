// SPDX-License-Identifier: GPL-2.0-or-later
// `iscsi-doctor --html FILE`: one self-contained HTML file (inline SVG and CSS, no script, nothing
// fetched) with the text report's findings and fixes, ladder diagrams of each finding kind's worst
// commands, latency histograms/CDFs per command class against 1-3 measured round trips, breakdown
// bars, queue depth and throughput over time, and the LBA access pattern. Written as polyglot
// XHTML (every element closed, only XML's own entities), so tests can parse it with an XML parser
// as well as open it in a browser.
//
// A report of the pipeline (commands/analyse.hpp) like the others. Per capture, in the thread analysing
// it: while the engine reports, the commands and findings are aggregated into fixed bins (charts)
// and a few picked commands (ladders); once the capture is analysed, a second pass re-reads the
// file up to the picked commands and re-analyses their connections (collect_ladders), and the
// capture's section is written to the deferred stream. At the end the page opens with the summary
// of all captures and the gate, and the sections follow. Memory and output size do not grow with the number
// of packets. The page is written here; its aggregates (html_aggregates.cpp) and charts
// (drawing/charts.cpp) are apart.
#include "iscsi_doctor/scsi.hpp"
#include "reports/report.hpp"
#include "reports/root_causes.hpp"
#include "drawing/charts.hpp"
#include "reports/html_aggregates.hpp"
#include "reports/initiator_estimate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <queue>
#include <set>

#include <fmt/format.h>

#include "reports/formatting.hpp"
#include "iscsi_doctor/analyzer.hpp"
#include "iscsi_doctor/finding_kinds.hpp"
#include "iscsi_doctor/summary.hpp"
#include "commands/ladder.hpp"
#include "drawing/svg.hpp"

namespace iscsi_doctor::cli {
namespace {

using svg::esc;
using svg::num;
using namespace html;

// ---- Page ----------------------------------------------------------------------------------------

constexpr const char* kCss = R"(
body { font-family: system-ui, sans-serif; margin: 0; color: #222; background: #f6f7f9; }
header { background: #264653; color: #fff; padding: 14px 24px; }
header h1 { margin: 0; font-size: 22px; }
header p { margin: 4px 0 0; opacity: 0.85; }
main { padding: 8px 24px 40px; max-width: 1400px; }
section.capture, section.all { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px 18px 16px; margin: 16px 0; }
h2 { font-size: 18px; margin: 12px 0 4px; word-break: break-all; }
h3 { font-size: 16px; margin: 20px 0 6px; border-bottom: 1px solid #eee; padding-bottom: 3px; }
h4 { font-size: 14px; margin: 14px 0 4px; }
.facts { color: #444; margin: 2px 0 8px; }
table { border-collapse: collapse; font-size: 13px; margin: 4px 0; max-width: 100%; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 3px 8px; text-align: left; vertical-align: top; }
td.note, td.wrap { overflow-wrap: anywhere; }
table.connections { font-size: 12px; }
table.connections th, table.connections td { padding: 3px 5px; }
th { background: #f0f2f4; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
table:not(.connections) td.n { white-space: nowrap; }
.fix { color: #1d5e3a; }
p.small { font-size: 13px; margin: 2px 0 6px; }
summary { cursor: pointer; color: #264653; font-size: 13px; }
.kind { font-family: monospace; font-weight: bold; }
.charts { display: flex; flex-wrap: wrap; gap: 10px; }
.charts svg, figure svg { background: #fff; border: 1px solid #e4e4e4; border-radius: 4px; }
figure { margin: 8px 0 16px; overflow-x: auto; }
figcaption { font-size: 13px; color: #444; margin-bottom: 4px; }
.gate-ok { color: #1d5e3a; font-weight: bold; }
.gate-bad { color: #b00020; font-weight: bold; }
.note { color: #666; font-size: 13px; }
details pre { font-size: 12px; background: #f6f7f9; padding: 8px; overflow-x: auto; }
nav a { margin-right: 12px; }
)";

void advice_table(Out& o, const Summary& s, bool evidence, const std::string& anchor_prefix,
                  const std::set<size_t>& with_ladders, double floor_ms = 0,
                  const std::vector<RootCause>& roots = {}) {
  const auto advice = s.advice();
  if (advice.empty()) {
    put(o, "<p>{}</p>\n", s.commands() ? "No findings." : "No findings (no SCSI commands).");
    return;
  }
  put(o,
      "<p class=\"note\">Time lost: {} of the {} the completed commands took, each millisecond counted once, "
      "to the cause that held it. Touched: the findings' own time, which overlaps (a Nagle hold's includes "
      "the delayed ACK that ended it).</p>\n",
      ms_text(s.exclusive_total_ms()), ms_text(s.latency_total_ms()));
  o += "<table class=\"findings\"><tr><th>#</th><th>finding</th><th>side</th><th>commands</th><th>time "
       "lost</th><th>touched</th>"
       "<th>median latency now → after fix</th><th>fix</th>";
  if (evidence) o += "<th>e.g. frames</th>";
  o += "</tr>\n";
  size_t rank = 0;
  for (const Advice& a : advice) {
    const std::string name(finding_name(a.kind));
    // A device's mechanical work has no disk behind it: no disk advice for it (#27).
    const std::string fix = device_fix(a.kind, a.fix, roots);
    const std::string cell = with_ladders.count(size_t(a.kind))
                                 ? fmt::format("<a href=\"#{}-{}\">{}</a>", anchor_prefix, name, name)
                                 : name;
    put(o,
        "<tr data-kind=\"{}\"><td class=\"n\">{}</td><td class=\"kind\">{}</td><td>{}</td><td "
        "class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"fix\">{}</td>",
        name, ++rank, cell, side_name(a.side), count_text(a.commands),
        a.commands ? ms_text(a.exclusive_ms) : std::string("–"), ms_text(a.lost_ms),
        a.commands ? fmt::format("{} → {}", ms_text(a.median_latency_ms),
                                 ms_text(std::max(a.median_fixed_ms, std::min(floor_ms, a.median_latency_ms))))
                   : "– (" + std::string(finding_kind(a.kind).part ? "no command waited on it" : "connection level") +
                         (a.occurrences > 1 ? fmt::format(": in {} connections, {} touched in all; the first", a.occurrences, ms_text(a.lost_ms)) : std::string()) +
                         ": " + esc(a.detail) + ")",
        esc(fix) + (a.note.empty() ? std::string() : "<br/><i>note: " + esc(a.note) + "</i>") +
            (a.inferred.empty()
                 ? std::string()
                 : "<br/><i>inferred (not in the capture): " + esc(join(a.inferred, ", ")) + "</i>"));
    if (evidence) put(o, "<td>{}</td>", frames_text(a.example_frames));
    o += "</tr>\n";
  }
  o += "</table>\n";
}

// offset_ms >= 0: a column with the median as the initiator saw it, estimated (#27).
void classes_table(Out& o, const Summary& s, double offset_ms = -1) {
  const auto classes = s.classes();
  if (classes.empty()) return;
  o += "<table "
       "class=\"classes\"><tr><th>kind</th><th>size</th><th>commands</th><th>median</th><th>p90</th><th>max</"
       "th>";
  if (offset_ms >= 0) o += "<th>median, initiator (est.)</th>";
  o += "<th>round trips median (ideal)</th></tr>\n";
  for (const ClassStats& c : classes)
    put(o,
        "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td "
        "class=\"n\">{}</td>"
        "<td class=\"n\">{}</td>{}<td class=\"n\">{:g} ({})</td></tr>\n",
        command_kind_name(c.kind), size_text(c.bytes), count_text(c.commands), ms_text(c.median_ms),
        ms_text(c.p90_ms), ms_text(c.max_ms),
        offset_ms >= 0 ? fmt::format("<td class=\"n initiator-est\">{}</td>", ms_text(c.median_ms + offset_ms))
                       : std::string(),
        c.median_round_trips, c.ideal_round_trips);
  o += "</table>\n";
}

// Per target and LUN (Summary::luns), and per initiator when there are several: count, rates,
// latency percentiles, excess round trips.
void scope_table(Out& o, const std::vector<LunStats>& rows, std::string_view title, std::string_view cls,
                 std::string_view who, bool lun) {
  if (rows.empty()) return;
  put(o,
      "<h3>{}</h3>\n<table "
      "class=\"{}\"><tr><th>{}</th>{}<th>commands</th><th>IOPS</th><th>MB/s</th><th>p50</th>"
      "<th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>excess round trips</th><th>never "
      "answered</th></tr>\n",
      title, cls, who, lun ? "<th>LUN</th>" : "");
  for (const LunStats& l : rows)
    put(o,
        "<tr><td>{}</td>{}<td class=\"n\">{}</td><td class=\"n\">{:.1f}</td>"
        "<td class=\"n\">{:.2f}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
        esc(l.target),
        lun ? fmt::format("<td class=\"n\">{}</td>",
                          l.lun == ~uint64_t(0) ? std::string("–") : std::to_string(l.lun))
            : std::string(),
        count_text(l.commands), l.iops(), l.mb_per_s(), ms_text(l.p50_ms), ms_text(l.p90_ms),
        ms_text(l.p99_ms), ms_text(l.p999_ms), ms_text(l.max_ms), count_text(l.excess_round_trips),
        count_text(l.incomplete));
  o += "</table>\n";
}

void luns_table(Out& o, const Summary& s) {
  scope_table(o, s.luns(), "Logical units", "luns", "target", true);
  const auto initiators = s.initiators();
  if (initiators.size() > 1) scope_table(o, initiators, "Initiators", "initiators", "initiator", false);
  const auto targets = s.targets();
  if (targets.size() > 1) scope_table(o, targets, "Targets", "targets", "target", false);
  const auto sessions = session_rows(s);
  if (sessions.size() > 1) scope_table(o, sessions, "Sessions", "sessions", "session (target)", false);
}

// How the SCSI commands ended (Summary::statuses).
void statuses_table(Out& o, const Summary& s) {
  const auto statuses = s.statuses();
  if (statuses.empty()) return;
  o += "<h3>How the SCSI commands ended</h3>\n<table class=\"statuses\"><tr><th>commands</th><th>status</th>"
       "<th>sense key</th><th>ASC/ASCQ</th><th>iSCSI response</th><th>e.g.</th></tr>\n";
  for (const StatusStats& st : statuses)
    put(o,
        "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td>"
        "<td>ITT 0x{:08x} {}, frame {}</td></tr>\n",
        count_text(st.commands), status_words(st),
        st.sense_key >= 0 ? std::string(scsi::sense_key_name(uint8_t(st.sense_key))) : std::string("–"),
        st.sense_key >= 0 ? fmt::format("0x{:02x}/0x{:02x}", std::max(st.asc, 0), std::max(st.ascq, 0))
                          : std::string("–"),
        st.iscsi_response ? fmt::format("0x{:02x}", st.iscsi_response) : std::string("–"), st.example_itt,
        esc(st.example_op), st.example_frame);
  o += "</table>\n";
}

void connections_table(Out& o, const CaptureResult& r) {
  if (r.connections.empty()) {
    o += "<p>No iSCSI connection found (ports other than 3260? see --port).</p>\n";
    return;
  }
  o += "<table "
       "class=\"connections\"><tr><th>conn.</th><th>session</th><th>initiator</th><th>target</th><th>capture "
       "point</th>"
       "<th>RTT</th><th>to initiator</th><th>to target</th><th>MSS i/t</th><th>commands</th><th>max in "
       "flight</th>"
       "<th>negotiated keys</th></tr>\n";
  for (const ConnectionInfo& c : r.connections) {
    std::string names;
    for (const SessionInfo& s : r.sessions)
      if (s.id == c.session && (!s.initiator_name.empty() || !s.target_name.empty()))
        names = fmt::format(" ({} → {})", s.initiator_name.empty() ? "?" : s.initiator_name,
                            s.target_name.empty() ? "?" : s.target_name);
    std::string keys;
    for (const auto& [k, v] : c.keys)
      keys += fmt::format("{}{}={}", keys.empty() ? "" : " ", k, v);
    if (keys.empty()) keys = "login not captured";
    put(o,
        "<tr><td class=\"n\">{}</td><td class=\"wrap\">{}{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}/{}{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"note\">{}</td></tr>\n",
        c.id, c.session, esc(names), esc(c.initiator.str()), esc(c.target.str()), vantage_words(c.vantage),
        ms_text(c.rtt_ms), ms_text(c.rtt_initiator_ms), ms_text(c.rtt_target_ms), c.mss_initiator,
        c.mss_target, c.mss_inferred ? " (inferred)" : "", count_text(c.commands), c.max_outstanding,
        esc(keys));
  }
  o += "</table>\n";
}

// Command-weighted median of the connections' round trips: the RTT the charts measure against.
double typical_rtt(const std::vector<ConnectionInfo>& conns) {
  std::vector<std::pair<double, uint64_t>> v;
  uint64_t total = 0;
  for (const auto& c : conns)
    if (c.rtt_ms > 0) v.emplace_back(c.rtt_ms, c.commands + 1), total += c.commands + 1;
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  uint64_t acc = 0;
  for (const auto& [rtt, n] : v)
    if ((acc += n) * 2 >= total) return rtt;
  return v.back().first;
}

std::string text_report(const CaptureResult& r, const RootCauses& roots) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (!f) return {};
  ReportOptions ro;
  ro.paths = {r.path};
  make_text_report(ro, &roots)->capture_done(f, r);
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

// One capture's section of the page, once the capture is analysed: its second pass, then the
// facts, findings, ladders, charts and tables.
void capture_section(const CaptureResult& r, Aggregates& agg, const ReportOptions& ro, Out& o) {
  const std::string cid = fmt::format("c{}", r.index);
  put(o, "<section class=\"capture\" id=\"{}\" data-path=\"{}\">\n<h2>{}</h2>\n", cid, esc(r.path),
      esc(r.path));
  if (!r.usable) {
    put(o, "<p class=\"gate-bad\">unusable: {}</p>\n</section>\n", esc(r.error));
    return;
  }

  // Second pass: the picked commands' segments (each command drawn once, shown under each kind).
  std::map<std::pair<uint32_t, uint64_t>, LadderRequest> unique;
  for (auto& picks : agg.picks)
    for (Pick& p : picks) {
      for (const ConnectionInfo& ci : r.connections)
        if (ci.id == p.req.command.connection) p.req.conn = ci;
      auto [it, fresh] = unique.try_emplace({p.req.command.connection, p.req.command.first_frame}, p.req);
      if (!fresh)  // merge findings known to either pick
        for (const Finding& f : p.req.findings) {
          bool have = false;
          for (const Finding& g : it->second.findings)
            have |= g.kind == f.kind && g.frame == f.frame;
          if (!have) it->second.findings.push_back(f);
        }
    }
  std::vector<LadderRequest*> reqs;
  for (auto& [key, req] : unique)
    reqs.push_back(&req);
  try {
    collect_ladders(r.read_path, ro.decoder, ro.engine, reqs);
  } catch (const CaptureError&) {
  }

  const Summary& s = *r.summary;
  const double secs = r.stats.packets ? double(r.stats.last_ns - r.stats.first_ns) / 1e9 : 0;
  put(o,
      "<p class=\"facts\">{}{}, {}, {} bytes, {} packets over {:.1f} s · {} SCSI commands, {} completed, "
      "<b>{} excess round trips</b></p>\n",
      esc(std::string(format_name(r.probe))), compression_text(r.probe.compression), esc(r.link_description),
      count_text(r.probe.size), count_text(r.stats.packets), secs, count_text(s.commands()),
      count_text(s.completed()), count_text(s.excess_round_trips()));

  std::set<size_t> with_ladders;
  for (size_t k = 0; k < finding_kind_count; ++k)
    if (!agg.picks[k].empty()) with_ladders.insert(k);
  // Where these latencies were measured (#27), and the least a command takes as seen there.
  const VantageFacts vantage = vantage_of(r);
  if (!r.connections.empty()) put(o, "<p class=\"vantage\" data-capture-point=\"{}\">{}</p>\n", vantage.capture_point, esc(vantage_sentence(vantage)));
  o += "<h3>Findings, ranked by time lost</h3>\n";
  const std::vector<RootCause> roots = agg.roots.ranked(vantage.floor_ms());
  advice_table(o, s, true, cid, with_ladders, vantage.floor_ms(), roots);

  o += "<h3>Ladder diagrams of the worst commands</h3>\n";
  o += "<p class=\"note\">Per finding kind, the commands it cost most. Initiator left, target right, the "
       "capture point "
       "dashed between them where the measured round trips place it; time runs down. Hover an arrow for its "
       "TCP "
       "header.</p>\n";
  bool any_ladder = false;
  // Each command drawn once, under the first kind that picks it; its caption names every kind it
  // illustrates, and the later kinds link to it.
  std::vector<size_t> order;
  for (const Advice& a : s.advice())
    order.push_back(size_t(a.kind));
  if (std::none_of(order.begin(), order.end(), [&](size_t k) { return !agg.picks[k].empty(); }))
    order = {kSlowest};
  auto kind_name = [](size_t k) {
    return k == kSlowest ? std::string("slowest") : std::string(finding_name(FindingKind(k)));
  };
  std::map<std::pair<uint32_t, uint64_t>, std::vector<std::string>> illustrates, kinds_of;
  for (size_t k : order)
    for (size_t i = 0; i < agg.picks[k].size(); ++i) {
      const CommandResult& c = agg.picks[k][i].req.command;
      illustrates[{c.connection, c.first_frame}].push_back(fmt::format("{} #{}", kind_name(k), i + 1));
      kinds_of[{c.connection, c.first_frame}].push_back(kind_name(k));
    }
  std::map<std::pair<uint32_t, uint64_t>, std::string> drawn;  // the ladder's id
  auto draw = [&](size_t k, const std::string& title, const std::string& fix) {
    const auto& picks = agg.picks[k];
    if (picks.empty()) return;
    any_ladder = true;
    const std::string kname = kind_name(k);
    put(o, "<h4 id=\"{}-{}\">{}</h4>\n", cid, kname, esc(title));
    if (!fix.empty()) put(o, "<p class=\"fix small\">fix: {}</p>\n", esc(fix));
    size_t rank = 0;
    for (const Pick& p : picks) {
      const std::pair<uint32_t, uint64_t> key{p.req.command.connection, p.req.command.first_frame};
      const auto it = unique.find(key);
      if (it == unique.end()) continue;
      const std::string lid = fmt::format("{}-{}-{}", cid, kname, ++rank);
      if (rank == 2)  // the worst one open, the others folded: the page stays short
        put(o, "<details><summary>{} more</summary>\n", picks.size() - 1);
      const std::string by =
          fmt::format("#{} by {} ({}){}", rank, k == kSlowest ? "latency" : "time lost to it",
                      ms_text(p.score), p.req.command.completed ? "" : ", no status seen");
      if (auto d = drawn.find(key); d != drawn.end()) {
        put(o,
            "<p class=\"note also\" data-kind=\"{}\" data-itt=\"{}\">{} · ITT {} (frame {}): drawn above "
            "under "
            "<a href=\"#{}\">{}</a></p>\n",
            kname, hex32(p.req.command.itt), by, hex32(p.req.command.itt), p.req.command.first_frame,
            d->second, esc(illustrates[key].front()));
        continue;
      }
      drawn.emplace(key, lid);
      put(o,
          "<figure data-kind=\"{}\" data-kinds=\"{}\" data-itt=\"{}\"><figcaption>{} · connection {} · "
          "illustrates {} · <code>iscsi-doctor ladder --itt {} --frame {} {}</code>{}</figcaption>\n",
          kname, join(kinds_of[key], " "), hex32(p.req.command.itt), by, p.req.command.connection,
          esc(join(illustrates[key], ", ")), hex32(p.req.command.itt), p.req.command.first_frame,
          esc(r.path),
          it->second.findings_not_drawn
              ? fmt::format(" · the evidence of its first {} findings is drawn, of {} (the others in the findings)",
                            kLadderEvidenceFindings, kLadderEvidenceFindings + it->second.findings_not_drawn)
              : std::string());
      o += render_ladder(it->second, lid, false);
      o += "</figure>\n";
    }
    if (rank >= 2) o += "</details>\n";
  };
  for (const Advice& a : s.advice())  // in the order of the findings table
    draw(size_t(a.kind),
         fmt::format("{} — {} worst command{}", finding_name(a.kind), agg.picks[size_t(a.kind)].size(),
                     agg.picks[size_t(a.kind)].size() == 1 ? "" : "s"),
         device_fix(a.kind, a.fix, roots));
  if (!any_ladder) draw(kSlowest, "No finding: the slowest commands", "");
  if (!any_ladder) o += "<p>No commands to draw.</p>\n";
  if (s.finding_counts()[size_t(FindingKind::serialized)])
    o += "<p class=\"note\">serialized is a connection-level finding: see commands in flight over time "
         "below.</p>\n";

  // Latency per class against the measured round trip.
  const double rtt = typical_rtt(r.connections);
  const auto stats = s.classes();
  std::vector<std::pair<std::pair<char, uint32_t>, const ClassAgg*>> rows;
  for (const auto& [key, k] : agg.classes)
    rows.emplace_back(key, &k);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second->n > b.second->n; });
  if (!rows.empty()) {
    o += "<h3>Latency per operation and size</h3>\n";
    put(o,
        "<p class=\"note\">Histogram (bars) and cumulative distribution (line) of latency as captured; "
        "dashed lines at "
        "1, 2 and 3 round trips of the measured RTT ({}, median over connections weighted by "
        "commands).</p>\n",
        ms_text(rtt));
    o += "<div class=\"charts\">\n";
    for (size_t i = 0; i < rows.size() && i < kClassesDrawn; ++i) {
      if (rows[i].second->n < 2) continue;  // one command has no distribution to draw (#27)
      const ClassStats* st = nullptr;
      for (const auto& c : stats)
        if (c.kind == rows[i].first.first && c.bytes == rows[i].first.second) st = &c;
      latency_chart(o, fmt::format("{}-lat-{}", cid, i), rows[i].first.first, rows[i].first.second,
                    *rows[i].second, st, rtt);
    }
    o += "</div>\n";
    if (rows.size() > kClassesDrawn)
      put(o, "<p class=\"note\">{} more classes in the table below.</p>\n", rows.size() - kClassesDrawn);
    o += "<h3>Where the time went: mean breakdown per command class</h3>\n";
    std::vector<std::pair<std::pair<char, uint32_t>, const ClassAgg*>> top(
        rows.begin(), rows.begin() + long(std::min(rows.size(), kBreakdownRows)));
    breakdown_chart(o, cid + "-breakdown", top);
    classes_table(o, s, vantage.shows_estimate() ? vantage.initiator_offset_ms() : -1);
    luns_table(o, s);
    statuses_table(o, s);
    o += "<h3>Queue depth and throughput over time</h3>\n";
    double rate_mbs[2] = {0, 0};  // the fastest path each way among the capture's connections
    for (const ConnectionInfo& ci : r.connections) {
      rate_mbs[0] = std::max(rate_mbs[0], ci.rate_to_initiator_mbit_s / 8);
      rate_mbs[1] = std::max(rate_mbs[1], ci.rate_to_target_mbit_s / 8);
    }
    timeline_chart(o, cid + "-timeline", agg.time, rate_mbs);
  }
  if (agg.gap_pairs || !agg.scatter.empty()) {
    o += "<h3>Access pattern: sequential or scattered</h3>\n<div class=\"charts\">\n";
    gap_chart(o, cid + "-gaps", agg);
    scatter_chart(o, cid + "-lba", agg, r.stats.last_ns - agg.first_ns);
    o += "</div>\n<p class=\"note\">Gap = this command's LBA minus the end of the previous command's on the "
         "same "
         "connection, in the order the commands were issued.</p>\n";
  }

  // Worst commands, linked to their diagram when there is one.
  // Away from the initiator, each one's latency as the initiator saw it too (initiator_estimate.hpp).
  const auto& worst = s.worst();
  if (!worst.empty()) {
    const bool est = vantage.shows_estimate();
    std::map<uint32_t, double> offsets;
    for (const ConnectionInfo& k : r.connections)
      offsets[k.id] = initiator_offset_ms(k);
    o += "<h3>Worst commands (" + std::string(worst_order_words(s.worst_order())) +
         ")</h3>\n<table "
         "class=\"worst\"><tr><th>ITT</th>"
         "<th>op</th><th>LBA</th><th>bytes</th><th>frames</th><th>latency</th>" +
         std::string(est ? "<th>latency, initiator (est.)</th>" : "") +
         "<th>RT/ideal</th><th>findings</"
         "th></tr>\n";
    for (const CommandResult& c : worst) {
      const auto off = offsets.find(c.connection);
      const double ini = initiator_latency_ms(c, off == offsets.end() ? -1 : off->second);
      std::string kinds;
      for (auto k : c.findings)
        kinds += fmt::format("{}{}", kinds.empty() ? "" : ", ", finding_name(k));
      if (!c.completed) kinds = "(no status) " + kinds;
      put(o,
          "<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td "
          "class=\"n\">{}</td><td>{}-{}</td>"
          "<td class=\"n\">{}</td>{}<td class=\"n\">{}/{}</td><td>{}</td></tr>\n",
          hex32(c.itt), esc(c.op), c.lba ? std::to_string(*c.lba) : "-", count_text(c.bytes), c.first_frame,
          c.status_frame ? std::to_string(c.status_frame) : "", c.completed ? ms_text(c.latency_ms) : "-",
          est ? fmt::format("<td class=\"n initiator-est\">{}</td>", ini >= 0 ? ms_text(ini) : "-") : "",
          c.round_trips, c.ideal_round_trips, kinds);
    }
    o += "</table>\n";
  }
  o += "<h3>Connections</h3>\n";
  connections_table(o, r);
  const auto& notices = s.notices();
  if (!notices.empty()) {
    put(o, "<h3>Notices ({})</h3>\n<table class=\"notices\">", notices.size());
    for (size_t i = 0; i < notices.size() && i < 20; ++i)
      put(o, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", notice_level_name(notices[i].level),
          notices[i].frame ? fmt::format("frame {}", notices[i].frame) : std::string("-"),
          esc(notices[i].message));
    o += "</table>\n";
  }
  put(o, "<details><summary>The text report</summary><pre>{}</pre></details>\n</section>\n",
      esc(text_report(r, agg.roots)));
}

// The HTML report's part for one capture: the aggregates while it is read, its section once it
// is analysed (into the deferred stream: the page opens with the summary of all captures).
class HtmlCaptureReport final : public CaptureReport {
public:
  HtmlCaptureReport(ElementStream& section, size_t per_kind, const ReportOptions& ro, Sink& notices)
      : section_(section), ro_(ro), first_pass_(agg_, per_kind, notices) {}
  void first_segment(int64_t time_ns) override { first_pass_.first_time(time_ns); }
  void command(const CommandResult& c) override { first_pass_.command(c); }
  void finding(const Finding& f) override { first_pass_.finding(f); }
  void analysed(const CaptureResult& r) override {
    first_pass_.finish_lba();
    Out o;
    capture_section(r, agg_, ro_, o);
    std::fwrite(o.data(), 1, o.size(), section_.out);
    section_.empty = false;
  }

private:
  ElementStream& section_;
  const ReportOptions& ro_;
  Aggregates agg_;
  Aggregator first_pass_;
};

class HtmlReport final : public Report {
public:
  bool reads_twice() const override { return true; }
  explicit HtmlReport(const ReportOptions& o) : opt_(o) {}
  bool writes_deferred() const override { return true; }

  std::unique_ptr<CaptureReport> capture_report(size_t, CaptureStreams streams, Sink& notices) override {
    // Up to 3 ladders per finding kind, 1 with more than 4 captures: the page stays readable.
    const size_t per_kind = opt_.paths.size() <= 4 ? 3 : 1;
    return std::make_unique<HtmlCaptureReport>(*streams.deferred, per_kind, opt_, notices);
  }

  void end(FILE* out, const Overall& all, FILE* sections) override {
    const Summary none;
    const Summary& overall = all.summary ? *all.summary : none;
    Out h;
    put(h,
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head><meta "
        "charset=\"utf-8\"/>"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>"
        "<title>iscsi-doctor report</title><style>{}</style></head>\n<body>\n",
        kCss);
    put(h,
        "<header><h1>iscsi-doctor report</h1><p>{} capture{}, {} usable, {} packets, {} SCSI commands, {} "
        "completed, "
        "{} excess round trips · iscsi-doctor {}</p></header>\n<main>\n",
        all.captures, all.captures == 1 ? "" : "s", all.usable, count_text(all.packets),
        count_text(overall.commands()), count_text(overall.completed()),
        count_text(overall.excess_round_trips()), ISCSI_DOCTOR_VERSION);
    const GateResult& gate = all.gate;
    if (gate.requested)
      put(h, "<p class=\"{}\" id=\"gate\">{}</p>\n",
          gate.unevaluable || gate.tripped ? "gate-bad" : "gate-ok", esc(gate_words(gate)));
    if (opt_.several) {
      std::string nav;
      for (size_t i = 0; i < opt_.paths.size(); ++i)
        nav += fmt::format("<a href=\"#c{}\">{}</a> ", i, esc(opt_.paths[i]));
      put(h, "<nav>{}</nav>\n<section class=\"all\" id=\"all\"><h2>All {} captures</h2>\n", nav,
          all.captures);
      advice_table(h, overall, false, "all", {});
      classes_table(h, overall);
      h += "</section>\n";
    }
    std::fwrite(h.data(), 1, h.size(), out);
    if (sections) copy_file(sections, out);
    std::fputs("</main>\n</body>\n</html>\n", out);
  }

private:
  ReportOptions opt_;
};

}  // namespace

std::unique_ptr<Report> make_html_report(const ReportOptions& o) { return std::make_unique<HtmlReport>(o); }

}  // namespace iscsi_doctor::cli
