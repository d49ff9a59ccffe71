// SPDX-License-Identifier: GPL-2.0-or-later
// The JSON records both JSON formats write (docs/json-schema.md): a command, a finding, a
// capture, the gate; formatted by hand where they are written per command (the hot path).
#include "iscsi_doctor/scsi.hpp"
#include "reports/json_records.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include <fmt/compile.h>
#include <fmt/format.h>

namespace iscsi_doctor::cli::json {
namespace {

// Milliseconds, rounded to the nanosecond (write_ms); not finite: null.
void append_ms(OutBuf& out, double ms) {
  if (std::isfinite(ms))
    write_ms(out, ms);
  else
    out += "null";
}

template <typename T>
void append_opt(OutBuf& out, const std::optional<T>& v) {
  if (v)
    out.number(uint64_t(*v));
  else
    out += "null";
}

void append_frame(OutBuf& out, uint64_t frame) {
  if (frame)
    out.number(frame);
  else
    out += "null";
}

void append_bool(OutBuf& out, bool v) { out += v ? std::string_view("true") : std::string_view("false"); }

// A name that needs no escape (a finding kind, a side, a status), in quotes.
void append_name(OutBuf& out, std::string_view name) {
  out += '"';
  out += name;
  out += '"';
}

// One buffer per thread: several captures may be written at once.
OutBuf& buf() {
  thread_local OutBuf b;
  b.clear();
  return b;
}

// {"name":frame,...} in name order; a name given more than once maps to the list of its frames.
void append_related(OutBuf& o, const Finding& f) {
  thread_local std::vector<size_t> order;
  order.resize(f.related.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return f.related[a].first < f.related[b].first; });
  o += '{';
  for (size_t i = 0; i < order.size();) {
    const std::string& name = f.related[order[i]].first;
    size_t end = i + 1;
    while (end < order.size() && f.related[order[end]].first == name)
      ++end;
    if (i) o += ',';
    write_json_string(o, name);
    o += ':';
    if (end - i > 1) o += '[';
    for (size_t k = i; k < end; ++k) {
      if (k > i) o += ',';
      o.number(f.related[order[k]].second);
    }
    if (end - i > 1) o += ']';
    i = end;
  }
  o += '}';
}

// An element of the array (line == null), or a JSON Lines record: `line` (its first members,
// "type":... ready written) after the brace, a newline after the object.
void open_element(OutBuf& o, ElementStream& s, const std::string* line) {
  if (line) {  // no separator, but the stream is no longer empty (-j joins only non-empty chunks)
    o += '{';
    o += *line;
    s.empty = false;
    return;
  }
  o += s.empty ? "\n{" : ",\n{";
  s.empty = false;
}

}  // namespace

void write_command(ElementStream& s, const CommandResult& c, size_t capture, double initiator_latency_ms,
                   const std::string* line) {
  OutBuf& o = buf();
  open_element(o, s, line);
  o += "\"capture\":";
  o.number(capture);
  o += ",\"session\":";
  o.number(c.session);
  o += ",\"connection\":";
  o.number(c.connection);
  o += ",\"itt\":\"";
  o.hex08(c.itt);
  o += "\",\"cmdsn\":";
  o.number(c.cmdsn);
  o += ",\"lun\":";
  o.number(c.lun);
  o += ",\"op\":";
  write_json_string(o, c.op);
  o += ",\"iscsi_opcode\":";
  o.number(c.iscsi_opcode);
  o += ",\"kind\":";
  append_name(o, command_kind_name(c.kind));
  o += ",\"lba\":";
  append_opt(o, c.lba);
  o += ",\"bytes\":";
  o.number(c.bytes);
  o += ",\"first_frame\":";
  append_frame(o, c.first_frame);
  o += ",\"status_frame\":";
  append_frame(o, c.status_frame);
  o += ",\"time_ns\":";
  o.number(c.first_ns);
  o += ",\"latency_ms\":";
  if (c.completed)
    append_ms(o, c.latency_ms);
  else
    o += "null";
  o += ",\"initiator_latency_ms\":";
  if (initiator_latency_ms >= 0)
    append_ms(o, initiator_latency_ms);
  else
    o += "null";
  // A command never answered took no round trips that can be counted: null, as its latency.
  o += ",\"round_trips\":";
  if (c.completed)
    o.number(c.round_trips);
  else
    o += "null";
  o += ",\"ideal_round_trips\":";
  o.number(c.ideal_round_trips);
  o += ",\"findings\":[";
  for (size_t i = 0; i < c.findings.size(); ++i) {
    if (i) o += ',';
    append_name(o, finding_name(c.findings[i]));
  }
  o += "],\"breakdown_ms\":{";
  for (size_t i = 0; i < std::size(kBreakdownParts); ++i) {
    o += i ? ",\"" : "\"";
    o += kBreakdownParts[i].name;
    o += "\":";
    append_ms(o, c.breakdown.*kBreakdownParts[i].field);
  }
  o += "},\"status\":";
  if (c.scsi_status)
    append_name(o, scsi_status_name(*c.scsi_status));
  else
    o += "null";
  o += ",\"response\":";
  append_opt(o, c.iscsi_response);
  o += ",\"sense\":";
  if (c.sense_key) {
    o += "{\"key\":";
    o.number(*c.sense_key);
    o += ",\"key_name\":";
    append_name(o, scsi::sense_key_name(*c.sense_key));
    o += ",\"asc\":";
    append_opt(o, c.asc);
    o += ",\"ascq\":";
    append_opt(o, c.ascq);
    o += ",\"asc_name\":";  // T10's name of the pair, null when not in the table
    const std::string_view name = c.asc && c.ascq ? asc_name(*c.asc, *c.ascq) : std::string_view();
    if (name.empty())
      o += "null";
    else
      write_json_string(o, name);
    o += '}';
  } else {
    o += "null";
  }
  o += ",\"completed\":";
  append_bool(o, c.completed);
  o += ",\"data_incomplete\":";
  append_bool(o, c.data_incomplete);
  o += '}';
  if (line) o += '\n';
  std::fwrite(o.data(), 1, o.size(), s.out);
}

void write_finding(ElementStream& s, const Finding& f, double time_lost_ms, size_t capture,
                   const std::string* line) {
  OutBuf& o = buf();
  open_element(o, s, line);
  o += "\"capture\":";
  o.number(capture);
  o += ",\"kind\":";
  append_name(o, finding_name(f.kind));
  o += ",\"side\":";
  append_name(o, side_name(f.side));
  o += ",\"session\":";
  o.number(f.session);
  o += ",\"connection\":";
  o.number(f.connection);
  o += ",\"frame\":";
  append_frame(o, f.frame);
  o += ",\"related\":";
  append_related(o, f);
  // time_lost_ms: its share of time lost (each millisecond once); touched_ms: its own, overlapping
  // time; lost_ms: touched_ms's old name, kept one release (docs/json-schema.md).
  o += ",\"time_lost_ms\":";
  append_ms(o, time_lost_ms);
  o += ",\"touched_ms\":";
  append_ms(o, f.lost_ms);
  o += ",\"lost_ms\":";
  append_ms(o, f.lost_ms);
  o += ",\"itt\":";
  if (f.itt) {
    o += '"';
    o.hex08(*f.itt);
    o += '"';
  } else {
    o += "null";
  }
  o += ",\"command_first_frame\":";
  append_frame(o, f.command_first_frame);
  o += ",\"detail\":";
  write_json_string(o, f.detail);
  o += ",\"inferred\":[";
  for (size_t i = 0; i < f.inferred.size(); ++i) {
    if (i) o += ',';
    write_json_string(o, f.inferred[i]);
  }
  o += "]}";
  if (line) o += '\n';
  std::fwrite(o.data(), 1, o.size(), s.out);
}

nlohmann::json gate_json(const GateResult& g) {
  nlohmann::json gate;
  gate["requested"] = g.requested;
  gate["tripped"] = g.tripped;
  gate["unevaluable"] = g.unevaluable;
  gate["fail_on"] = g.fail_on;
  gate["max_excess_round_trips"] =
      g.max_excess_round_trips ? nlohmann::json(*g.max_excess_round_trips) : nlohmann::json(nullptr);
  gate["reasons"] = g.reasons;
  return gate;
}

// A capture as the reports describe it (its summary included): captures[] of --format json, the
// "capture" record of --format jsonl.
nlohmann::json capture_json(const CaptureResult& r, const std::string& filter) {
  nlohmann::json c;
  c["index"] = r.index;
  c["path"] = r.path;
  c["usable"] = r.usable;
  c["error"] = r.usable ? nlohmann::json(nullptr) : nlohmann::json(r.error);
  c["format"] = r.probe.is_capture ? nlohmann::json(format_name(r.probe)) : nlohmann::json(nullptr);
  c["gzip"] = r.probe.compression == Compression::gzip;
  c["compression"] = r.probe.compression == Compression::none
                         ? nlohmann::json(nullptr)
                         : nlohmann::json(compression_name(r.probe.compression));
  c["stream"] = r.probe.stream;
  c["filter"] = r.filtered ? nlohmann::json{{"given", filter},
                                            {"commands_seen", r.commands_seen},
                                            {"commands_kept", r.commands_kept}}
                           : nlohmann::json(nullptr);
  c["size_bytes"] = r.probe.size;
  c["link_type"] = r.link_type.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.link_type);
  c["decoder"] = r.decoder.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.decoder);
  c["reader"] = r.probe.reader == CaptureLibrary::none ? nlohmann::json(nullptr)
                                                       : nlohmann::json(reader_name(r.probe.reader));
  c["packets"] = r.stats.packets;
  c["tcp_segments"] = r.stats.tcp_segments;
  c["damaged"] = r.stats.damaged;
  c["first_time_ns"] = r.stats.packets ? nlohmann::json(r.stats.first_ns) : nlohmann::json(nullptr);
  c["duration_s"] = r.stats.packets ? (r.stats.last_ns - r.stats.first_ns) / 1e9 : 0.0;
  const ConnectionTotals& u = r.unlisted;
  c["connections_unlisted"] = totals_json(u);
  const Evictions& e = r.evicted;
  c["connections_evicted"] = {{"connections", e.connections}, {"ended", e.ended},         {"idle", e.idle},
                              {"busy", e.busy},               {"commands_open", e.commands_open}};
  if (r.summary) {
    c["commands"] = r.summary->commands();
    c["summary"] = summary_json(*r.summary);
    // The vantage (#27): where these latencies were measured, and the initiator's view estimated
    // from them (plus the round trip between the capture point and the initiator).
    const VantageFacts v = vantage_of(r);
    c["summary"]["vantage"] = vantage_json(v);
    const double off = v.initiator_offset_ms();
    auto est = [off](const nlohmann::json& ms) { return off < 0 ? nlohmann::json(nullptr) : nlohmann::json(round_us(ms.get<double>() + off)); };
    for (auto& cl : c["summary"]["classes"]) {
      cl["initiator_median_ms"] = est(cl["median_ms"]);
      cl["initiator_p90_ms"] = est(cl["p90_ms"]);
    }
    for (auto& l : c["summary"]["luns"]) {
      l["initiator_p50_ms"] = est(l["p50_ms"]);
      l["initiator_p99_ms"] = est(l["p99_ms"]);
    }
    for (auto& a : c["summary"]["advice"])  // as in the run's summary: whose frames these are
      a["example_capture"] = r.index;
  } else {
    c["commands"] = 0;
    c["summary"] = nullptr;
  }
  return c;
}

}  // namespace iscsi_doctor::cli::json
