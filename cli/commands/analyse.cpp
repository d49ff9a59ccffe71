// SPDX-License-Identifier: GPL-2.0-or-later
// The pipeline (analyse.hpp). With one job, captures are read in the calling thread and a report's
// direct stream goes straight to the output. With several, worker threads read captures ahead and
// stream each one's output into anonymous spool files; the main thread copies them to the output
// in argument order, so the output is the same whatever the number of jobs. Deferred streams (the
// JSON findings, the HTML sections) always go through a spool that the report copies at its end.
#include "commands/analyse.hpp"
#include "input/read_ahead.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <span>
#include <thread>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reports/formatting.hpp"
#include "reports/interval.hpp"
#include "iscsi_doctor/summary.hpp"
#include "reports/report_junit.hpp"
#include "reports/root_causes.hpp"
#include "commands/console.hpp"
#include "commands/spool.hpp"

namespace iscsi_doctor::cli {
namespace {

namespace fs = std::filesystem;

constexpr size_t kNoticesEchoed = 10;              // per capture on stderr; the report has them all
constexpr size_t kReadAhead = 4;                   // captures finished ahead of the output, per job
constexpr size_t kOutputBuffer = size_t(1) << 20;  // stdio buffer of the report and its spools

// ---- One capture: read -> analyse -> summaries and the report's part ------------------------------

// Where a capture's results go besides its own summary: the overall summary directly (one job) or
// a replay spool (several jobs), and the report's streams for this capture.
struct Outlets {
  Summary* overall = nullptr;
  FILE* replay = nullptr;
  CaptureStreams streams;
};

class CaptureSink final : public Sink {
public:
  CaptureSink(CaptureResult& r, const Outlets& out, Console& console) : r_(r), out_(out), console_(console) {}
  void set_part(CaptureReport* part) { part_ = part; }
  // Off: notices are kept for the report only (a ladder tells those of its command: #27).
  void set_echo(bool echo) { echo_ = echo; }
  void set_intervals(IntervalCounter* i) { intervals_ = i; }

  void on_command(const CommandResult& c) override {
    if (intervals_) intervals_->command(c);
    if (r_.root_causes) r_.root_causes->add(c);
    r_.summary->on_command(c);
    if (out_.overall) out_.overall->on_command(c);
    if (out_.replay) record(out_.replay, c);
    if (part_) part_->command(c);
  }
  void on_finding(const Finding& f) override {
    if (intervals_) intervals_->finding(f);
    if (r_.root_causes) r_.root_causes->side(f.kind, f.side);
    r_.summary->on_finding(f);
    if (out_.overall) out_.overall->on_finding(f);
    if (out_.replay) record(out_.replay, f);
    if (part_) part_->finding(f);
  }
  void on_notice(const Notice& n) override {
    if (r_.summary) r_.summary->on_notice(n);
    if (!echo_ || (console_.quiet() && n.level != Notice::Level::error)) return;
    if (echoed_++ < kNoticesEchoed) {
      std::string where = n.frame ? fmt::format("frame {}: ", n.frame) : std::string();
      console_.message(
          fmt::format("iscsi-doctor: {}: {}{}: {}", r_.path, where, notice_level_name(n.level), n.message));
    }
  }
  void on_connection(const ConnectionInfo& c) override {
    r_.summary->on_connection(c);
    if (part_) part_->connection(c);
    if (c.frames && !c.pdus)  // else such a connection would vanish without a word
      on_notice({Notice::Level::warning, 0, c.id,
                 fmt::format("connection {} ({} -> {}): {} frames on an iSCSI port carried no iSCSI PDU "
                             "(not iSCSI, or its framing was never found)",
                             c.id, c.initiator.str(), c.target.str(), c.frames)});
  }

  size_t notices_not_echoed() const { return echoed_ > kNoticesEchoed ? echoed_ - kNoticesEchoed : 0; }

private:
  CaptureResult& r_;
  Outlets out_;
  Console& console_;
  CaptureReport* part_ = nullptr;
  IntervalCounter* intervals_ = nullptr;
  size_t echoed_ = 0;
  bool echo_ = true;
};

class Bridge final : public ReaderEvents {
public:
  Bridge(Analyzer& a, Sink& s, CaptureReport* part, Console& c, size_t index, FilterSink* filter)
      : a_(a), s_(s), part_(part), c_(c), index_(index), filter_(filter) {}
  void set_intervals(IntervalCounter* i) { intervals_ = i; }
  void on_start(int64_t t) override {
    if (filter_) filter_->set_start(t);
    if (intervals_) intervals_->start(t);
  }
  void on_segment(const Segment& seg) override {
    if (!started_) {
      started_ = true;
      if (part_) part_->first_segment(seg.time_ns);
    }
    a_.feed(seg);
    if (part_ && part_->wants_connections()) part_->connections_now(a_.connections());
  }
  void on_notice(Notice::Level level, uint64_t frame, std::string message) override {
    Notice n;
    n.level = level;
    n.frame = frame;
    n.message = std::move(message);
    s_.on_notice(n);
  }
  void on_progress(uint64_t packets, uint64_t bytes) override { c_.progress(index_, packets, bytes); }

private:
  Analyzer& a_;
  Sink& s_;
  CaptureReport* part_;
  Console& c_;
  size_t index_;
  FilterSink* filter_;
  IntervalCounter* intervals_ = nullptr;
  bool started_ = false;
};

struct Shared {
  Shared(const PipelineOptions& o, Report& r, Console& c) : opt(o), report(r), console(c) {}
  const PipelineOptions& opt;
  Report& report;
  Console& console;
  FILE* out = nullptr;  // --interval's lines and records go here as they come (one job)
  bool read_ahead = false;  // reading and decoding on a thread of their own (ReadAhead)
  bool file_ahead = false;  // a pcap file's bytes read on a thread of their own (read_file_ahead)
  // Temporary copies of piped captures (reports that read them twice), removed at the end.
  std::mutex temporaries_mu;
  std::vector<std::string> temporaries;
  ~Shared() {
    for (const std::string& t : temporaries)
      ::unlink(t.c_str());
  }
};

// One --interval line (text) or JSON Lines record, written and flushed at once.
void write_interval(const Shared& sh, const CaptureResult& r, size_t index, const IntervalStats& s) {
  const double from = double(s.start_ns - s.origin_ns) / 1e9, to = double(s.end_ns - s.origin_ns) / 1e9;
  if (sh.opt.format == Format::jsonl) {
    nlohmann::json j;
    j["type"] = "interval";
    j["capture"] = index;
    j["path"] = r.path;
    j["start_ns"] = s.start_ns;
    j["end_ns"] = s.end_ns;
    j["start_s"] = from;
    j["seconds"] = s.seconds;
    j["commands"] = s.commands;
    j["completed"] = s.completed;
    j["iops"] = s.iops();
    j["mb_per_s"] = s.mb_per_s();
    j["latency_ms"] = {{"p50", s.p50_ms}, {"p90", s.p90_ms}, {"p99", s.p99_ms}, {"max", s.max_ms}};
    j["excess_round_trips"] = s.excess_round_trips;
    nlohmann::json f = nlohmann::json::object();
    for (size_t k = 0; k < s.findings.size(); ++k)
      if (s.findings[k]) f[std::string(finding_name(FindingKind(k)))] = s.findings[k];
    j["findings"] = f;
    const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::fputs(line.c_str(), sh.out);
    std::fputc('\n', sh.out);
  } else {
    std::string found;
    for (size_t k = 0; k < s.findings.size(); ++k)
      if (s.findings[k])
        found +=
            fmt::format("{}{} {}", found.empty() ? "" : ", ", finding_name(FindingKind(k)), s.findings[k]);
    std::fputs(
        fmt::format(
            "interval +{:.1f}..+{:.1f} s: {} commands, {:.1f} IOPS, {:.2f} MB/s, latency p50 {} p99 {} "
            "max {}, {} excess round trips{}{}\n",
            from, to, s.commands, s.iops(), s.mb_per_s(), ms_text(s.p50_ms), ms_text(s.p99_ms),
            ms_text(s.max_ms), s.excess_round_trips, found.empty() ? "" : "; new findings: ", found)
            .c_str(),
        sh.out);
  }
  std::fflush(sh.out);
}

// Reads and analyses one capture into its summary, the overall summary (or its replay spool) and
// the report's part, which has the last word (analysed) whether the capture was usable or not.
CaptureResult analyze(Shared& sh, const Input& in, size_t index, const Outlets& outlets) {
  CaptureResult r;
  r.index = index;
  r.path = in.path;
  CaptureSink sink(r, outlets, sh.console);
  sink.set_echo(sh.opt.format != Format::ladder);
  const std::unique_ptr<CaptureReport> part = sh.report.capture_report(index, outlets.streams, sink);
  sink.set_part(part.get());
  r.read_path = in.path;
  if (!in.error.empty()) {
    r.error = in.error;
  } else {
    try {
      if (sh.report.reads_twice() && !in.live && is_stream(in.path)) {
        r.read_path = copy_stream_to_temporary(in.path);
        std::lock_guard lock(sh.temporaries_mu);
        sh.temporaries.push_back(r.read_path);
      }
      const auto opened = in.live ? std::make_unique<CaptureReader>(sh.opt.live, sh.opt.decoder)
                                  : std::make_unique<CaptureReader>(r.read_path, sh.opt.decoder);
      CaptureReader& reader = *opened;
      if (in.live && !sh.console.quiet())
        sh.console.message(fmt::format("iscsi-doctor: capturing on {} (filter '{}'); Ctrl-C{}{} ends it",
                                       sh.opt.live.iface, live_filter(sh.opt.live),
                                       sh.opt.live.duration_s > 0 ? ", --duration" : "",
                                       sh.opt.live.count ? ", --count" : ""));
      r.probe = reader.probe();
      r.link_type = reader.link_type_name();
      r.link_description = reader.link_type_description();
      r.decoder = reader.decoder_name();
      r.summary = std::make_unique<Summary>(sh.opt.worst, true, sh.opt.worst_order);
      if (!sh.opt.junit.empty()) r.root_causes = std::make_shared<RootCauses>();
      FilterSink filtered(sh.opt.filter, sink);
      r.filtered = sh.opt.filter.active();
      Analyzer analyzer(sh.opt.engine, r.filtered ? static_cast<Sink&>(filtered) : sink);
      filtered.set_analyzer(&analyzer);
      Bridge bridge(analyzer, sink, part.get(), sh.console, index, r.filtered ? &filtered : nullptr);
      std::unique_ptr<IntervalCounter> intervals;
      if (sh.opt.interval_s > 0) {
        intervals = std::make_unique<IntervalCounter>(
            sh.opt.interval_s, [&sh, &r, index](const IntervalStats& s) { write_interval(sh, r, index, s); });
        sink.set_intervals(intervals.get());
        bridge.set_intervals(intervals.get());
      }
      if (!in.live && sh.opt.live.count) {  // -c N on a file: its first N packets, as tshark -c
        reader.limit_packets(sh.opt.live.count);
        sink.on_notice({Notice::Level::info, 0, 0,
                        fmt::format("-c {}: the analysis covers the first {} packets at most", sh.opt.live.count,
                                    sh.opt.live.count)});
      }
      // (Not a stream: Ctrl-C ends one by interrupting the read, in the thread the signal reaches.)
      if (sh.file_ahead && !in.live) reader.read_file_ahead();
      if (sh.read_ahead && !in.live && !is_stream(r.read_path)) {
        ReadAhead ahead(bridge);
        r.stats = ahead.read_all(reader);
      } else {
        r.stats = reader.read_all(bridge);
      }
      // A stream's size is what was read; a file libpcap gave over to wiretap says so now, and a
      // file wiretap read now knows all its link types.
      r.probe = reader.probe();
      if (r.read_path != in.path) r.probe.stream = true;
      r.link_type = reader.link_type_name();
      r.link_description = reader.link_type_description();
      r.decoder = reader.decoder_name();
      // (a live capture's second pass reads the file -w wrote)
      if (in.live && !sh.opt.live.write_path.empty()) r.read_path = sh.opt.live.write_path;
      analyzer.finish();
      if (intervals) intervals->finish();
      sink.set_intervals(nullptr);
      r.commands_seen = filtered.seen();
      r.commands_kept = filtered.kept();
      r.connections = analyzer.connections();
      r.unlisted = analyzer.unlisted_connections();
      r.evicted = analyzer.evictions();
      r.sessions = analyzer.sessions();
      if (const std::string words = missing_data_words(r); !words.empty())
        sink.on_notice({Notice::Level::warning, 0, 0, words});
      if (r.stats.packets == 0 && r.stats.damaged) {
        // Not one packet could be read: the file is a capture in name only.
        r.error = fmt::format("{}: no packet could be read", in.path);
        if (!r.summary->notices().empty()) r.error += ": " + r.summary->notices().front().message;
        r.summary.reset();
      } else {
        if (sink.notices_not_echoed())
          sh.console.message(fmt::format("iscsi-doctor: {}: {} more notices in the report", in.path,
                                         sink.notices_not_echoed()));
        r.usable = true;
      }
    } catch (const CaptureError& e) {
      r.error = e.what();
      r.summary.reset();
    }
    sh.console.progress(index, r.stats.packets, r.probe.size, true);
  }
  if (part) part->analysed(r);
  return r;
}

FILE* spool(std::vector<FILE*>& owned) {
  FILE* f = std::tmpfile();
  if (!f) throw std::runtime_error(fmt::format("cannot create a temporary file: {}", std::strerror(errno)));
  std::setvbuf(f, nullptr, _IOFBF, kOutputBuffer);
  owned.push_back(f);
  return f;
}

void join_chunk(FILE* chunk, const ElementStream& from, ElementStream& to, std::string_view sep) {
  if (from.empty) return;
  if (!to.empty && !sep.empty()) std::fwrite(sep.data(), 1, sep.size(), to.out);
  copy_file(chunk, to.out);
  to.empty = false;
}

// The CI gate, once, over the summary of every usable capture.
GateResult evaluate_gate(const PipelineOptions& opt, const Summary* all) {
  GateResult g;
  g.requested = !opt.fail_on.empty() || opt.max_excess_round_trips.has_value();
  for (auto k : opt.fail_on)
    g.fail_on.emplace_back(finding_name(k));
  g.max_excess_round_trips = opt.max_excess_round_trips;
  if (!g.requested) return g;
  if (!all || all->commands() == 0) {
    g.unevaluable = true;
    return g;
  }
  const auto counts = all->finding_counts();
  for (auto k : opt.fail_on)
    if (counts[size_t(k)])
      g.reasons.push_back(fmt::format("{}: {} found (--fail-on)", finding_name(k), counts[size_t(k)]));
  if (opt.max_excess_round_trips && all->excess_round_trips() > *opt.max_excess_round_trips)
    g.reasons.push_back(fmt::format("{} excess round trips > {} (--max-excess-round-trips)",
                                    all->excess_round_trips(), *opt.max_excess_round_trips));
  g.tripped = !g.reasons.empty();
  return g;
}

std::unique_ptr<Report> make_report(Format format, const ReportOptions& ro) {
  switch (format) {
    case Format::json:
      return make_json_report(ro);
    case Format::jsonl:
      return make_jsonl_report(ro);
    case Format::csv:
      return make_csv_report(ro);
    case Format::html:
      return make_html_report(ro);
    case Format::ladder:
      return make_ladder_report(ro);
    case Format::verdict:
      return make_verdict_report(ro);
    default:
      return make_text_report(ro);
  }
}

}  // namespace

int run_pipeline(const PipelineOptions& opt) {
  std::vector<Input> inputs;
  if (opt.live.iface.empty())
    inputs = expand_inputs(opt.inputs);
  else
    inputs.push_back(Input{"live:" + opt.live.iface, "", true});
  if (std::any_of(inputs.begin(), inputs.end(),
                  [](const Input& in) { return in.error.empty() && (in.live || is_stream(in.path)); }))
    end_streams_on_signal();
  uint64_t total_bytes = 0;
  for (const Input& in : inputs) {
    std::error_code ec;
    if (in.error.empty() && !in.live) total_bytes += fs::file_size(in.path, ec) * !ec;
  }
  Console console(opt.quiet, total_bytes, inputs.size());

  FILE* out = stdout;
  if (!opt.output.empty()) {
    out = std::fopen(opt.output.c_str(), "w");
    if (!out) {
      console.message(fmt::format("iscsi-doctor: {}: cannot write: {}", opt.output, std::strerror(errno)));
      return kExitUnusable;
    }
  }
  // Reports run to tens of MB: write them in large blocks, not stdio's 4 KiB (a terminal keeps
  // its line buffering).
  if (!::isatty(::fileno(out))) std::setvbuf(out, nullptr, _IOFBF, kOutputBuffer);

  ReportOptions ro;
  ro.worst = opt.worst;
  ro.several = inputs.size() > 1;
  for (const Input& in : inputs)
    ro.paths.push_back(in.path);
  ro.decoder = opt.decoder;
  ro.engine = opt.engine;
  ro.ladder = opt.ladder;
  ro.quiet = opt.quiet;
  ro.verbose = opt.verbose;
  ro.findings_csv = opt.findings_csv;
  ro.filter = opt.filter.words();
  ro.one_thread = opt.threads == 1;
  const std::unique_ptr<Report> report = make_report(opt.format, ro);
  std::unique_ptr<Summary> overall_owned;
  if (inputs.size() > 1) overall_owned = std::make_unique<Summary>(opt.worst, false, opt.worst_order);
  Shared sh(opt, *report, console);
  sh.out = out;
  // A core of its own for reading, with one job (several share the cores already), unless
  // --threads 1. The JSON report formats on a thread of its own: reading takes a third core (on
  // two, the three threads' hand-overs cost more than they gain: 0.41 s against 0.34 s median wall
  // on the small-block capture).
  const unsigned cores_wanted = opt.format == Format::json ? 3 : 2;
  sh.read_ahead = opt.threads > 1 || (opt.threads == 0 && std::min(opt.jobs, inputs.size()) <= 1 &&
                                      std::thread::hardware_concurrency() >= cores_wanted);
  // The kernel's copy of the file's bytes (an eighth of a small-block run) on a thread of its own,
  // whatever reads the records: it waits in read(), so it takes no core beyond the copy itself.
  sh.file_ahead = opt.threads != 1 && std::min(opt.jobs, inputs.size()) <= 1;

  std::vector<FILE*> spools;  // closed at the end, whatever happens
  int code = kExitClean;
  size_t usable = 0;
  uint64_t packets = 0;
  std::unique_ptr<Summary> single;  // the one input's summary, when there is one input
  std::vector<JunitCapture> junit;  // --junit: what it needs of each capture, in argument order
  try {
    ElementStream direct_out{out, true};
    ElementStream deferred_all{report->writes_deferred() ? spool(spools) : nullptr, true};
    report->begin(out);

    auto consume = [&](CaptureResult& r) {
      if (!opt.junit.empty()) junit.push_back(junit_capture(r));
      if (!r.usable) {
        console.message(fmt::format("iscsi-doctor: error: {}", r.error));
        code = kExitUnusable;
      } else {
        ++usable;
      }
      packets += r.stats.packets;
      report->capture_done(out, r);
      if (inputs.size() == 1) single = std::move(r.summary);
    };

    const size_t jobs = std::max<size_t>(1, std::min(opt.jobs, inputs.size()));
    if (jobs == 1) {
      for (size_t i = 0; i < inputs.size(); ++i) {
        Outlets o;
        o.overall = overall_owned.get();
        o.streams.direct = report->writes_direct() ? &direct_out : nullptr;
        o.streams.deferred = deferred_all.out ? &deferred_all : nullptr;
        CaptureResult r = analyze(sh, inputs[i], i, o);
        consume(r);
      }
    } else {
      struct Slot {
        CaptureResult result;
        FILE *direct = nullptr, *deferred = nullptr, *replay = nullptr;
        ElementStream ds, fs;
        bool done = false;
      };
      std::vector<Slot> slots(inputs.size());
      std::mutex mu;
      std::condition_variable cv;
      size_t next = 0, head = 0;
      std::exception_ptr failure;
      auto worker = [&] {
        for (;;) {
          size_t i;
          {
            std::unique_lock lock(mu);
            cv.wait(lock,
                    [&] { return next >= inputs.size() || next < head + kReadAhead * jobs || failure; });
            if (next >= inputs.size() || failure) return;
            i = next++;
          }
          Slot& s = slots[i];
          try {
            if (report->writes_direct()) s.ds = {s.direct = std::tmpfile(), true};
            if (report->writes_deferred()) s.fs = {s.deferred = std::tmpfile(), true};
            if (overall_owned) s.replay = std::tmpfile();
            if ((report->writes_direct() && !s.direct) || (report->writes_deferred() && !s.deferred) ||
                (overall_owned && !s.replay))
              throw std::runtime_error(
                  fmt::format("cannot create a temporary file: {}", std::strerror(errno)));
            Outlets o;
            o.replay = s.replay;
            o.streams.direct = s.direct ? &s.ds : nullptr;
            o.streams.deferred = s.deferred ? &s.fs : nullptr;
            s.result = analyze(sh, inputs[i], i, o);
          } catch (...) {
            std::lock_guard lock(mu);
            failure = std::current_exception();
          }
          std::lock_guard lock(mu);
          s.done = true;
          cv.notify_all();
        }
      };
      std::vector<std::thread> threads;
      for (size_t t = 0; t < jobs; ++t)
        threads.emplace_back(worker);
      for (size_t i = 0; i < inputs.size(); ++i) {
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return slots[i].done || failure; });
          if (failure) break;
        }
        Slot& s = slots[i];
        if (s.direct) join_chunk(s.direct, s.ds, direct_out, report->separator());
        if (s.deferred) join_chunk(s.deferred, s.fs, deferred_all, report->separator());
        if (s.replay) replay(s.replay, *overall_owned);
        for (FILE** f : {&s.direct, &s.deferred, &s.replay})
          if (*f) std::fclose(std::exchange(*f, nullptr));
        consume(s.result);
        s.result = CaptureResult{};
        std::lock_guard lock(mu);
        head = i + 1;
        cv.notify_all();
      }
      {
        std::lock_guard lock(mu);
        head = inputs.size();
        cv.notify_all();
      }
      for (auto& t : threads)
        t.join();
      for (Slot& s : slots)  // spools of captures never consumed (after a failure)
        for (FILE** f : {&s.direct, &s.deferred, &s.replay})
          if (*f) std::fclose(std::exchange(*f, nullptr));
      if (failure) std::rethrow_exception(failure);
    }

    Overall all;
    all.summary = overall_owned ? overall_owned.get() : single.get();
    all.captures = inputs.size();
    all.usable = usable;
    all.packets = packets;
    all.gate = evaluate_gate(opt, all.summary);
    console.finish();
    report->end(out, all, deferred_all.out);
    if (const std::string why = report->failure(); !why.empty()) {
      console.message(fmt::format("iscsi-doctor: error: {}", why));
      code = kExitUnusable;
    }
    if (std::string why; !opt.junit.empty() && !write_junit(opt.junit, junit, all.gate, all.summary, why)) {
      console.message(fmt::format("iscsi-doctor: error: {}", why));
      code = kExitUnusable;
    }

    if (all.gate.unevaluable) {
      console.message(
          "iscsi-doctor: error: the gate cannot be evaluated: no SCSI command found in the "
          "input (iSCSI on another port? see --port)");
      code = kExitUnusable;
    } else if (all.gate.tripped) {
      if (!opt.quiet)
        for (const auto& reason : all.gate.reasons)
          console.message("iscsi-doctor: gate tripped: " + reason);
      if (code == kExitClean) code = kExitGate;
    }
  } catch (const std::exception& e) {
    console.finish();
    console.message(fmt::format("iscsi-doctor: error: {}", e.what()));
    code = kExitUnusable;
  }
  for (FILE* f : spools)
    std::fclose(f);
  if (std::fflush(out) != 0 || std::ferror(out)) {
    console.message(fmt::format("iscsi-doctor: {}: write error", opt.output.empty() ? "output" : opt.output));
    code = kExitUnusable;
  }
  if (out != stdout) std::fclose(out);
  return code;
}

}  // namespace iscsi_doctor::cli
