// SPDX-License-Identifier: GPL-2.0-or-later
// `--format json`: one JSON object (schema in docs/json-schema.md). The `commands` array is written
// while the captures are read, one command at a time; findings go to a spool file and are copied in
// after it; captures, sessions, summary and notices (small) close the object.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "reports/report.hpp"

namespace iscsi_doctor::cli {
namespace {

constexpr int kSchemaVersion = 1;
constexpr size_t kNoticesKeptPerCapture = 1000;

// Milliseconds rounded to the nanosecond, written as fmt writes that double (shortest form). For
// 100 ns .. 10^9 ms that is the decimal itself with trailing zeros dropped (at most 15 digits, so
// no shorter decimal names the same double); written directly, as fmt's float path was a tenth of a
// JSON run's time.
void append_ms(OutBuf& out, double ms) {
  if (!std::isfinite(ms)) {
    out += "null";
    return;
  }
  const double ns = std::round(ms * 1e6);
  if (std::fabs(ns) < 1e15 && (std::fabs(ns) >= 100 || (ns == 0 && !std::signbit(ns)))) {
    auto n = int64_t(ns);
    if (n < 0) {
      out += '-';
      n = -n;
    }
    fmt::format_to(fmt::appender(out.b), FMT_COMPILE("{}"), n / 1'000'000);
    if (int64_t frac = n % 1'000'000) {
      char d[7] = {'.'};
      for (int i = 6; i >= 1; --i, frac /= 10)
        d[i] = char('0' + frac % 10);
      int len = 7;
      while (d[len - 1] == '0')
        --len;
      out += std::string_view(d, size_t(len));
    }
    return;
  }
  fmt::format_to(fmt::appender(out.b), FMT_COMPILE("{}"), round_ns(ms));
}

template <typename T>
void append_opt(OutBuf& out, const std::optional<T>& v) {
  if (v)
    fmt::format_to(fmt::appender(out.b), FMT_COMPILE("{}"), uint64_t(*v));
  else
    out += "null";
}

void append_frame(OutBuf& out, uint64_t frame) {
  if (frame)
    fmt::format_to(fmt::appender(out.b), FMT_COMPILE("{}"), frame);
  else
    out += "null";
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
    for (size_t k = i; k < end; ++k)
      fmt::format_to(fmt::appender(o.b), FMT_COMPILE("{}{}"), k > i ? "," : "", f.related[order[k]].second);
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

void write_command(ElementStream& s, const CommandResult& c, size_t capture,
                   const std::string* line = nullptr) {
  OutBuf& o = buf();
  open_element(o, s, line);
  fmt::format_to(
      fmt::appender(o.b),
      FMT_COMPILE(
          "\"capture\":{},\"session\":{},\"connection\":{},\"itt\":\"0x{:08x}\",\"cmdsn\":{},\"lun\":{},"
          "\"op\":"),
      capture, c.session, c.connection, c.itt, c.cmdsn, c.lun);
  write_json_string(o, c.op);
  fmt::format_to(fmt::appender(o.b), FMT_COMPILE(",\"iscsi_opcode\":{},\"kind\":\"{}\",\"lba\":"),
                 c.iscsi_opcode, command_kind_name(c.kind));
  append_opt(o, c.lba);
  fmt::format_to(fmt::appender(o.b), FMT_COMPILE(",\"bytes\":{},\"first_frame\":"), c.bytes);
  append_frame(o, c.first_frame);
  o += ",\"status_frame\":";
  append_frame(o, c.status_frame);
  fmt::format_to(fmt::appender(o.b), FMT_COMPILE(",\"time_ns\":{},\"latency_ms\":"), c.first_ns);
  if (c.completed)
    append_ms(o, c.latency_ms);
  else
    o += "null";
  // A command never answered took no round trips that can be counted: null, as its latency.
  if (c.completed)
    fmt::format_to(fmt::appender(o.b), FMT_COMPILE(",\"round_trips\":{}"), c.round_trips);
  else
    o += ",\"round_trips\":null";
  fmt::format_to(fmt::appender(o.b), FMT_COMPILE(",\"ideal_round_trips\":{},\"findings\":["),
                 c.ideal_round_trips);
  for (size_t i = 0; i < c.findings.size(); ++i) {
    if (i) o += ',';
    fmt::format_to(fmt::appender(o.b), FMT_COMPILE("\"{}\""), finding_name(c.findings[i]));
  }
  o += "],\"breakdown_ms\":{";
  for (size_t i = 0; i < std::size(kBreakdownParts); ++i) {
    fmt::format_to(fmt::appender(o.b), FMT_COMPILE("{}\"{}\":"), i ? "," : "", kBreakdownParts[i].name);
    append_ms(o, c.breakdown.*kBreakdownParts[i].field);
  }
  o += "},\"status\":";
  if (c.scsi_status)
    fmt::format_to(fmt::appender(o.b), FMT_COMPILE("\"{}\""), scsi_status_name(*c.scsi_status));
  else
    o += "null";
  o += ",\"response\":";
  append_opt(o, c.iscsi_response);
  o += ",\"sense\":";
  if (c.sense_key) {
    fmt::format_to(fmt::appender(o.b), FMT_COMPILE("{{\"key\":{},\"key_name\":\"{}\",\"asc\":"), *c.sense_key,
                   sense_key_name(*c.sense_key));
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
  fmt::format_to(fmt::appender(o.b), FMT_COMPILE(",\"completed\":{},\"data_incomplete\":{}}}"), c.completed,
                 c.data_incomplete);
  if (line) o += '\n';
  std::fwrite(o.data(), 1, o.size(), s.out);
}

void write_finding(ElementStream& s, const Finding& f, double time_lost_ms, size_t capture,
                   const std::string* line = nullptr) {
  OutBuf& o = buf();
  open_element(o, s, line);
  fmt::format_to(
      fmt::appender(o.b),
      FMT_COMPILE("\"capture\":{},\"kind\":\"{}\",\"side\":\"{}\",\"session\":{},\"connection\":{},"
                  "\"frame\":"),
      capture, finding_name(f.kind), side_name(f.side), f.session, f.connection);
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
  if (f.itt)
    fmt::format_to(fmt::appender(o.b), FMT_COMPILE("\"0x{:08x}\""), *f.itt);
  else
    o += "null";
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

// Commands and findings written on a thread of their own: a small-block capture has a command
// every few packets, and formatting one costs about as much as analysing it. Handed over in
// batches, each stream written in order; the thread starts with the first full batch (a small
// capture never starts one) and at most kQueued batches wait, so memory stays bounded.
class ElementWriter {
public:
  ElementWriter(CaptureStreams s, size_t capture) : s_(s), capture_(capture) {}
  ElementWriter(const ElementWriter&) = delete;
  ElementWriter& operator=(const ElementWriter&) = delete;
  ~ElementWriter() { finish(); }

  void add(const CommandResult& c) {
    filling_.commands.add(c);
    if (filling_.size() >= kBatch) hand_over();
  }
  void add(const Finding& f, double time_lost_ms) {
    filling_.findings.add({f, time_lost_ms});
    if (filling_.size() >= kBatch) hand_over();
  }
  // Everything written (the streams are complete when this returns).
  void finish() {
    if (thread_.joinable()) {
      hand_over();
      {
        std::lock_guard lock(m_);
        closing_ = true;
      }
      cv_.notify_all();
      thread_.join();
    }
    write(filling_);
  }

private:
  static constexpr size_t kBatch = 1024, kQueued = 8;
  // Elements kept when a batch is emptied and assigned over when it is filled again: their
  // strings and lists keep their storage, so a full run allocates almost nothing per element
  // (and nothing is freed on the other thread).
  template <typename T>
  struct Slots {
    std::vector<T> v;
    size_t n = 0;
    void add(const T& x) {
      if (n < v.size())
        v[n] = x;
      else
        v.push_back(x);
      ++n;
    }
    const T* begin() const { return v.data(); }
    const T* end() const { return v.data() + n; }
  };
  struct Batch {
    Slots<CommandResult> commands;
    Slots<std::pair<Finding, double>> findings;  // with its time lost
    size_t size() const { return commands.n + findings.n; }
    void clear() { commands.n = findings.n = 0; }
  };

  void write(Batch& b) {
    for (const CommandResult& c : b.commands)
      write_command(*s_.direct, c, capture_);
    for (const auto& [f, time_lost] : b.findings)
      write_finding(*s_.deferred, f, time_lost, capture_);
    b.clear();
  }

  void hand_over() {
    if (!thread_.joinable() && !no_thread_) {
      try {
        thread_ = std::thread([this] { run(); });
      } catch (const std::system_error&) {  // no thread to be had: write here
        no_thread_ = true;
      }
    }
    if (no_thread_) {
      write(filling_);
      return;
    }
    Batch next;
    {
      std::unique_lock lock(m_);
      cv_.wait(lock, [&] { return queue_.size() < kQueued; });
      queue_.push_back(std::move(filling_));
      if (!spare_.empty()) {
        next = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    cv_.notify_all();
    filling_ = std::move(next);
  }

  void run() {
    for (;;) {
      Batch b;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return !queue_.empty() || closing_; });
        if (queue_.empty()) return;
        b = std::move(queue_.front());
        queue_.pop_front();
      }
      cv_.notify_all();
      write(b);
      std::lock_guard lock(m_);
      if (spare_.size() < kQueued) spare_.push_back(std::move(b));  // its memory reused
    }
  }

  CaptureStreams s_;
  size_t capture_;
  Batch filling_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  std::vector<Batch> spare_;
  bool closing_ = false, no_thread_ = false;
  std::thread thread_;
};

// Commands into the direct stream (the `commands` array), findings into the deferred one (the
// `findings` array, after it).
class JsonCaptureReport final : public CaptureReport {
public:
  JsonCaptureReport(size_t index, CaptureStreams s)
      : writer_(s, index), shares_([this](const Finding& f, double t) { writer_.add(f, t); }) {}
  void command(const CommandResult& c) override {
    writer_.add(c);
    shares_.command(c);
  }
  void finding(const Finding& f) override { shares_.finding(f); }
  void analysed(const CaptureResult&) override {
    shares_.finish();
    writer_.finish();
  }

private:
  ElementWriter writer_;
  TimeLostShares shares_;
};

// The run's summary names, per finding kind, example frames of one capture: the one that lost the
// most time to the kind (frame numbers are per capture), as `example_capture`. The summary over
// several captures mixes its examples' frames, so they are taken from the captures' own.
class AdviceExamples {
public:
  void add(const CaptureResult& r) {
    if (!r.summary) return;
    for (const Advice& a : r.summary->advice())
      examples_.push_back({r.index, a.kind, a.lost_ms, a.example_frames});
  }
  void apply(nlohmann::json& summary) const {
    if (!summary.is_object() || !summary.contains("advice")) return;
    for (auto& a : summary["advice"]) {
      const auto kind = finding_from_name(a["kind"].get<std::string>());
      const Example* best = nullptr;
      for (const Example& e : examples_)
        if (kind && e.kind == *kind && (!best || e.lost_ms > best->lost_ms)) best = &e;
      a["example_frames"] = best ? nlohmann::json(best->frames) : nlohmann::json::array();
      a["example_capture"] = best ? nlohmann::json(best->capture) : nlohmann::json(nullptr);
    }
  }

private:
  struct Example {
    size_t capture;
    FindingKind kind;
    double lost_ms;
    std::vector<uint64_t> frames;
  };
  std::vector<Example> examples_;
};

class JsonReport final : public Report {
public:
  explicit JsonReport(const ReportOptions& o) : opt_(o) {}
  bool writes_direct() const override { return true; }
  bool writes_deferred() const override { return true; }
  std::string_view separator() const override { return ","; }

  std::unique_ptr<CaptureReport> capture_report(size_t index, CaptureStreams streams, Sink&) override {
    return std::make_unique<JsonCaptureReport>(index, streams);
  }

  void begin(FILE* out) override {
    std::fputs(fmt::format("{{\"schema\":{},\"tool\":{{\"name\":\"iscsi-doctor\",\"version\":\"{}\"}},"
                           "\n\"commands\":[",
                           kSchemaVersion, ISCSI_DOCTOR_VERSION)
                   .c_str(),
               out);
  }

  void capture_done(FILE*, const CaptureResult& r) override {
    nlohmann::json c = capture_json(r, opt_.filter);
    captures_.push_back(std::move(c));
    examples_.add(r);
    if (r.summary) {
      for (auto& s : sessions_json(r, true))
        sessions_.push_back(std::move(s));
      size_t kept = 0;
      for (const Notice& n : r.summary->notices()) {
        if (kept++ == kNoticesKeptPerCapture) break;
        notices_.push_back(
            {{"capture", r.index},
             {"file", r.path},
             {"level", notice_level_name(n.level)},
             {"frame", n.frame ? nlohmann::json(n.frame) : nlohmann::json(nullptr)},
             {"connection", n.connection ? nlohmann::json(n.connection) : nlohmann::json(nullptr)},
             {"message", n.message}});
      }
    } else {
      notices_.push_back({{"capture", r.index},
                          {"file", r.path},
                          {"level", "error"},
                          {"frame", nullptr},
                          {"connection", nullptr},
                          {"message", r.error}});
    }
  }

  void end(FILE* out, const Overall& all, FILE* findings) override {
    std::fputs("\n],\n\"findings\":[", out);
    if (findings) copy_file(findings, out);
    std::fputs("\n],\n", out);

    // One capture: the run's summary is that capture's (computed once, in capture_done).
    nlohmann::json summary = !all.summary ? nlohmann::json::object()
                             : captures_.size() == 1 && captures_[0]["usable"] == true
                                 ? captures_[0]["summary"]
                                 : summary_json(*all.summary);
    summary["captures"] = all.captures;
    summary["usable_captures"] = all.usable;
    summary["packets"] = all.packets;
    examples_.apply(summary);
    summary["gate"] = gate_json(all.gate);

    // Written in pieces: the sessions of 4096 listed connections dump to megabytes (one copy, not two).
    const auto tail = [&](std::string_view key, const nlohmann::json& v, bool last) {
      std::fputs(fmt::format("\"{}\":", key).c_str(), out);
      const std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      std::fwrite(text.data(), 1, text.size(), out);
      std::fputs(last ? "\n" : ",\n", out);
    };
    tail("captures", captures_, false);
    tail("sessions", sessions_, false);
    tail("summary", summary, false);
    tail("notices", notices_, true);
    std::fputs("}\n", out);
  }

private:
  ReportOptions opt_;
  nlohmann::json captures_ = nlohmann::json::array();
  nlohmann::json sessions_ = nlohmann::json::array();
  nlohmann::json notices_ = nlohmann::json::array();
  AdviceExamples examples_;
};

// --format jsonl: one JSON object per line, written as the capture is read: a "command" record
// per command and after it a "finding" record per finding of it (held until then, so that it
// carries the command's LUN), per capture its "session", "notice" and "capture" records (the
// capture's summary), and a closing "run" record (the run's summary and gate). Each record carries
// its capture's index and path; memory stays flat (docs/json-schema.md, "JSON Lines").
class JsonlCaptureReport final : public CaptureReport {
public:
  JsonlCaptureReport(size_t index, CaptureStreams s, const std::string& path)
      : s_(s), index_(index), path_(json_text(path)) {
    set_prefixes(0);
  }
  void first_segment(int64_t t) override { set_prefixes(t); }
  void command(const CommandResult& c) override {
    write_command(*s_.direct, c, index_, &command_line_);
    const auto it = held_.find({c.connection, c.itt, c.first_frame});
    if (it == held_.end()) return;
    const std::string line = finding_line_ + fmt::format("\"lun\":{},", c.lun);
    std::map<FindingKind, std::pair<double, size_t>> touched;  // per kind: its findings' sum, count
    for (const Finding& f : it->second) {
      auto& [sum, n] = touched[f.kind];
      sum += f.lost_ms;
      ++n;
    }
    for (const Finding& f : it->second) {  // as TimeLostShares shares it (report.hpp)
      const bool counted = c.completed && std::find(c.findings.begin(), c.findings.end(), f.kind) != c.findings.end();
      const auto [sum, n] = touched[f.kind];
      const double own = counted ? exclusive_ms(f.kind, c.breakdown) : 0;
      write_finding(*s_.direct, f, sum > 0 ? own * f.lost_ms / sum : own / double(n), index_, &line);
    }
    held_.erase(it);
  }
  void finding(const Finding& f) override {
    if (!f.itt) {  // connection level
      write_finding(*s_.direct, f, 0, index_, &no_lun_line_);
      return;
    }
    held_[{f.connection, *f.itt, f.command_first_frame}].push_back(f);
  }
  void analysed(const CaptureResult&) override {
    for (const auto& [key, list] : held_)  // of no reported command (none, in practice)
      for (const Finding& f : list)
        write_finding(*s_.direct, f, 0, index_, &no_lun_line_);
    held_.clear();
  }

private:
  static std::string json_text(const std::string& v) {
    return nlohmann::json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  void set_prefixes(int64_t start) {
    const std::string common = fmt::format("\"path\":{},\"capture_start_ns\":{},", path_,
                                           start ? std::to_string(start) : std::string("null"));
    command_line_ = "\"type\":\"command\"," + common;
    finding_line_ = "\"type\":\"finding\"," + common;
    no_lun_line_ = finding_line_ + "\"lun\":null,";
  }
  CaptureStreams s_;
  size_t index_;
  std::string path_;  // as a JSON string
  std::string command_line_, finding_line_, no_lun_line_;
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, std::vector<Finding>> held_;
};

class JsonlReport final : public Report {
public:
  explicit JsonlReport(const ReportOptions& o) : opt_(o) {}
  bool writes_direct() const override { return true; }

  std::unique_ptr<CaptureReport> capture_report(size_t index, CaptureStreams streams, Sink&) override {
    return std::make_unique<JsonlCaptureReport>(index, streams, opt_.paths[index]);
  }

  void capture_done(FILE* out, const CaptureResult& r) override {
    auto line = [&](nlohmann::json j) {
      std::fputs(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(), out);
      std::fputc('\n', out);
    };
    auto record = [&](const char* type) {
      nlohmann::json j;
      j["type"] = type;
      j["capture"] = r.index;
      j["path"] = r.path;
      return j;
    };
    if (r.summary) {
      for (auto& session : sessions_json(r, false)) {
        nlohmann::json j = record("session");
        j.update(session);
        line(std::move(j));
      }
      for (const Notice& n : r.summary->notices()) {
        nlohmann::json j = record("notice");
        j["level"] = notice_level_name(n.level);
        j["frame"] = n.frame ? nlohmann::json(n.frame) : nlohmann::json(nullptr);
        j["connection"] = n.connection ? nlohmann::json(n.connection) : nlohmann::json(nullptr);
        j["message"] = n.message;
        line(std::move(j));
      }
    }
    nlohmann::json j = record("capture");
    j.update(capture_json(r, opt_.filter));
    line(std::move(j));
    examples_.add(r);
  }

  void end(FILE* out, const Overall& all, FILE*) override {
    nlohmann::json j;
    j["type"] = "run";
    j["schema"] = kSchemaVersion;
    j["tool"] = {{"name", "iscsi-doctor"}, {"version", ISCSI_DOCTOR_VERSION}};
    j["captures"] = all.captures;
    j["usable_captures"] = all.usable;
    j["packets"] = all.packets;
    j["summary"] = all.summary ? summary_json(*all.summary) : nlohmann::json(nullptr);
    examples_.apply(j["summary"]);
    j["gate"] = gate_json(all.gate);
    std::fputs(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(), out);
    std::fputc('\n', out);
  }

private:
  ReportOptions opt_;
  AdviceExamples examples_;
};

}  // namespace

std::unique_ptr<Report> make_json_report(const ReportOptions& o) { return std::make_unique<JsonReport>(o); }

std::unique_ptr<Report> make_jsonl_report(const ReportOptions& o) { return std::make_unique<JsonlReport>(o); }

}  // namespace iscsi_doctor::cli
