// SPDX-License-Identifier: GPL-2.0-or-later
// Batch runs. With one job, captures are read in the calling thread and commands go straight to the
// output. With several, worker threads read captures ahead and stream each one's commands and
// findings into anonymous spool files; the main thread copies them to the output in argument
// order, so the output is the same whatever the number of jobs. Findings always go through a spool:
// in JSON they form their own array, after `commands`.
#include "batch.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "iscsi_doctor/summary.hpp"

namespace iscsi_doctor::cli {
namespace {

namespace fs = std::filesystem;

constexpr size_t kNoticesEchoed = 10;  // per capture on stderr; the report has them all
constexpr size_t kReadAhead = 4;       // captures finished ahead of the output, per job

// ---- Replay spool: the overall summary is fed in argument order, whatever the jobs ---------------
// With several jobs, each worker records its capture's commands and findings in a spool; the main
// thread replays them into the overall Summary in argument order, so that its order-dependent parts
// (example frames, ties) do not depend on thread timing.

template <typename T>
void put(FILE* f, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::fwrite(&v, sizeof v, 1, f);
}
void put(FILE* f, const std::string& s) {
  put(f, uint32_t(s.size()));
  std::fwrite(s.data(), 1, s.size(), f);
}
template <typename T>
bool get(FILE* f, T& v) {
  return std::fread(&v, sizeof v, 1, f) == 1;
}
bool get(FILE* f, std::string& s) {
  uint32_t n = 0;
  if (!get(f, n)) return false;
  s.resize(n);
  return std::fread(s.data(), 1, n, f) == n;
}

void record(FILE* f, const CommandResult& c) {
  put(f, 'C');
  put(f, c.session), put(f, c.connection), put(f, c.itt), put(f, c.cmdsn), put(f, c.iscsi_opcode);
  put(f, c.op), put(f, c.kind), put(f, c.lba), put(f, c.bytes), put(f, c.first_frame), put(f, c.status_frame);
  put(f, c.first_ns), put(f, c.status_ns), put(f, c.latency_ms), put(f, c.round_trips);
  put(f, c.ideal_round_trips), put(f, c.scsi_status), put(f, c.iscsi_response), put(f, c.sense_key);
  put(f, c.asc), put(f, c.ascq), put(f, uint32_t(c.findings.size()));
  for (auto k : c.findings)
    put(f, k);
  put(f, c.breakdown), put(f, c.completed), put(f, c.data_incomplete);
}

void record(FILE* f, const Finding& x) {
  put(f, 'F');
  put(f, x.kind), put(f, x.side), put(f, x.session), put(f, x.connection), put(f, x.frame);
  put(f, uint32_t(x.related.size()));
  for (const auto& [name, frame] : x.related)
    put(f, name), put(f, frame);
  put(f, x.lost_ms), put(f, x.itt), put(f, x.command_first_frame), put(f, x.detail);
}

void replay(FILE* f, Sink& sink) {
  std::fflush(f);
  std::rewind(f);
  char tag;
  while (get(f, tag)) {
    bool ok = true;
    if (tag == 'C') {
      CommandResult c;
      uint32_t n = 0;
      ok = get(f, c.session) && get(f, c.connection) && get(f, c.itt) && get(f, c.cmdsn) &&
           get(f, c.iscsi_opcode) && get(f, c.op) && get(f, c.kind) && get(f, c.lba) && get(f, c.bytes) &&
           get(f, c.first_frame) && get(f, c.status_frame) && get(f, c.first_ns) && get(f, c.status_ns) &&
           get(f, c.latency_ms) && get(f, c.round_trips) && get(f, c.ideal_round_trips) &&
           get(f, c.scsi_status) && get(f, c.iscsi_response) && get(f, c.sense_key) && get(f, c.asc) &&
           get(f, c.ascq) && get(f, n);
      for (uint32_t i = 0; ok && i < n; ++i)
        ok = get(f, c.findings.emplace_back());
      ok = ok && get(f, c.breakdown) && get(f, c.completed) && get(f, c.data_incomplete);
      if (ok) sink.on_command(c);
    } else {
      Finding x;
      uint32_t n = 0;
      ok = get(f, x.kind) && get(f, x.side) && get(f, x.session) && get(f, x.connection) && get(f, x.frame) &&
           get(f, n);
      for (uint32_t i = 0; ok && i < n; ++i) {
        auto& [name, frame] = x.related.emplace_back();
        ok = get(f, name) && get(f, frame);
      }
      ok = ok && get(f, x.lost_ms) && get(f, x.itt) && get(f, x.command_first_frame) && get(f, x.detail);
      if (ok) sink.on_finding(x);
    }
    if (!ok) throw std::runtime_error("temporary file read back short");
  }
}

// ---- stderr: notices and the progress line share it ------------------------------------------

class Console {
public:
  Console(bool quiet, uint64_t total_bytes, size_t files)
      : quiet_(quiet),
        progress_(!quiet && ::isatty(STDERR_FILENO)),
        total_bytes_(total_bytes),
        files_(files),
        positions_(files),
        packets_(files) {}

  void message(const std::string& line) {
    std::lock_guard lock(mu_);
    clear_progress();
    std::fputs(line.c_str(), stderr);
    std::fputc('\n', stderr);
  }
  bool quiet() const { return quiet_; }

  // Bytes and packets read so far from capture `index`.
  void progress(size_t index, uint64_t packets, uint64_t bytes, bool finished = false) {
    if (!progress_) return;
    positions_[index].store(bytes, std::memory_order_relaxed);
    packets_[index].store(packets, std::memory_order_relaxed);
    if (finished) done_.fetch_add(1, std::memory_order_relaxed);
    const auto now = std::chrono::steady_clock::now();
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock || now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    uint64_t b = 0, p = 0;
    for (size_t i = 0; i < files_; ++i) {
      b += positions_[i].load(std::memory_order_relaxed);
      p += packets_[i].load(std::memory_order_relaxed);
    }
    const double pct = total_bytes_ ? 100.0 * double(std::min(b, total_bytes_)) / double(total_bytes_) : 0;
    std::string line = fmt::format("\r\033[K{:5.1f}%  {} packets", pct, p);
    if (files_ > 1) line += fmt::format("  {}/{} files", done_.load(std::memory_order_relaxed), files_);
    std::fputs(line.c_str(), stderr);
    shown_ = true;
  }

  void finish() {
    std::lock_guard lock(mu_);
    clear_progress();
  }

private:
  void clear_progress() {
    if (shown_) std::fputs("\r\033[K", stderr);
    shown_ = false;
  }
  bool quiet_, progress_;
  uint64_t total_bytes_;
  size_t files_;
  std::vector<std::atomic<uint64_t>> positions_, packets_;
  std::atomic<size_t> done_{0};
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_{};
  bool shown_ = false;
};

// ---- One capture: reader -> analyzer -> summaries and streamed output ---------------------------

// Where a capture's results go besides its own summary: the overall summary directly (one job) or
// a replay spool (several jobs), and the report's streams.
struct Outlets {
  Summary* overall = nullptr;
  FILE* replay = nullptr;
  ElementStream* commands = nullptr;
  ElementStream* findings = nullptr;
};

class CaptureSink final : public Sink {
public:
  CaptureSink(CaptureResult& r, const Outlets& out, Report& report, Console& console)
      : r_(r), out_(out), report_(report), console_(console) {}

  void on_command(const CommandResult& c) override {
    r_.summary->on_command(c);
    if (out_.overall) out_.overall->on_command(c);
    if (out_.replay) record(out_.replay, c);
    if (out_.commands) report_.command(*out_.commands, c, r_.index);
  }
  void on_finding(const Finding& f) override {
    r_.summary->on_finding(f);
    if (out_.overall) out_.overall->on_finding(f);
    if (out_.replay) record(out_.replay, f);
    if (out_.findings) report_.finding(*out_.findings, f, r_.index);
  }
  void on_notice(const Notice& n) override {
    r_.summary->on_notice(n);
    if (console_.quiet() && n.level != Notice::Level::error) return;
    if (echoed_++ < kNoticesEchoed) {
      std::string where = n.frame ? fmt::format("frame {}: ", n.frame) : std::string();
      console_.message(
          fmt::format("iscsi-doctor: {}: {}{}: {}", r_.path, where, notice_level_name(n.level), n.message));
    }
  }
  void on_connection(const ConnectionInfo& c) override {
    r_.summary->on_connection(c);
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
  Report& report_;
  Console& console_;
  size_t echoed_ = 0;
};

class Bridge final : public ReaderEvents {
public:
  Bridge(Analyzer& a, Sink& s, Console& c, size_t index) : a_(a), s_(s), c_(c), index_(index) {}
  void on_segment(const Segment& seg) override { a_.feed(seg); }
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
  Console& c_;
  size_t index_;
};

struct Shared {
  const BatchOptions& opt;
  Report& report;
  Console& console;
};

CaptureResult analyze(Shared& sh, const Input& in, size_t index, const Outlets& outlets) {
  CaptureResult r;
  r.index = index;
  r.path = in.path;
  if (!in.error.empty()) {
    r.error = in.error;
    return r;
  }
  try {
    CaptureReader reader(in.path, sh.opt.decoder);
    r.probe = reader.probe();
    r.link_type = reader.link_type_name();
    r.link_description = reader.link_type_description();
    r.decoder = reader.decoder_name();
    r.summary = std::make_unique<Summary>(sh.opt.worst);
    CaptureSink sink(r, outlets, sh.report, sh.console);
    Analyzer analyzer(sh.opt.engine, sink);
    Bridge bridge(analyzer, sink, sh.console, index);
    r.stats = reader.read_all(bridge);
    analyzer.finish();
    r.connections = analyzer.connections();
    r.unlisted = analyzer.unlisted_connections();
    r.sessions = analyzer.sessions();
    if (r.stats.packets == 0 && r.stats.damaged) {
      // Not one packet could be read: the file is a capture in name only.
      r.error = fmt::format("{}: no packet could be read", in.path);
      if (!r.summary->notices().empty()) r.error += ": " + r.summary->notices().front().message;
      r.summary.reset();
      return r;
    }
    if (sink.notices_not_echoed())
      sh.console.message(
          fmt::format("iscsi-doctor: {}: {} more notices in the report", in.path, sink.notices_not_echoed()));
    r.usable = true;
  } catch (const CaptureError& e) {
    r.error = e.what();
    r.summary.reset();
  }
  sh.console.progress(index, r.stats.packets, r.probe.size, true);
  return r;
}

FILE* spool(std::vector<FILE*>& owned) {
  FILE* f = std::tmpfile();
  if (!f) throw std::runtime_error(fmt::format("cannot create a temporary file: {}", std::strerror(errno)));
  owned.push_back(f);
  return f;
}

void join_chunk(FILE* chunk, const ElementStream& from, ElementStream& to, std::string_view sep) {
  if (from.empty) return;
  if (!to.empty && !sep.empty()) std::fwrite(sep.data(), 1, sep.size(), to.out);
  copy_file(chunk, to.out);
  to.empty = false;
}

GateResult evaluate_gate(const BatchOptions& opt, const Summary* all) {
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

}  // namespace

std::vector<Input> expand_inputs(const std::vector<std::string>& args) {
  std::vector<Input> out;
  for (const std::string& arg : args) {
    std::error_code ec;
    if (!fs::is_directory(arg, ec)) {
      out.push_back({arg, {}});
      continue;
    }
    std::vector<std::string> found;
    std::string walk_error;
    fs::recursive_directory_iterator it(arg, fs::directory_options::skip_permission_denied, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::error_code fec;
      if (!it->is_regular_file(fec)) continue;
      if (probe_file(it->path().string()).is_capture) found.push_back(it->path().string());
    }
    if (ec) walk_error = fmt::format("{}: {}", arg, ec.message());
    std::sort(found.begin(), found.end());
    for (auto& f : found)
      out.push_back({std::move(f), {}});
    if (found.empty())
      out.push_back({arg, walk_error.empty() ? fmt::format("{}: no capture files found in the directory", arg)
                                             : walk_error});
  }
  return out;
}

int run_batch(const BatchOptions& opt) {
  const std::vector<Input> inputs = expand_inputs(opt.inputs);
  uint64_t total_bytes = 0;
  for (const Input& in : inputs) {
    std::error_code ec;
    if (in.error.empty()) total_bytes += fs::file_size(in.path, ec) * !ec;
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

  ReportOptions ro;
  ro.worst = opt.worst;
  ro.several = inputs.size() > 1;
  for (const Input& in : inputs)
    ro.paths.push_back(in.path);
  std::unique_ptr<Report> report = opt.format == Format::json  ? make_json_report(ro)
                                   : opt.format == Format::csv ? make_csv_report(ro)
                                                               : make_text_report(ro);
  std::unique_ptr<Summary> overall_owned;
  if (inputs.size() > 1) overall_owned = std::make_unique<Summary>(opt.worst);
  Shared sh{opt, *report, console};

  std::vector<FILE*> spools;  // closed at the end, whatever happens
  int code = kExitClean;
  size_t usable = 0;
  uint64_t packets = 0;
  std::unique_ptr<Summary> single;  // the one input's summary, when there is one input
  try {
    ElementStream commands_out{out, true};
    ElementStream findings_all{report->streams_findings() ? spool(spools) : nullptr, true};
    report->begin(out);

    auto consume = [&](CaptureResult& r) {
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
        o.commands = report->streams_commands() ? &commands_out : nullptr;
        o.findings = findings_all.out ? &findings_all : nullptr;
        CaptureResult r = analyze(sh, inputs[i], i, o);
        consume(r);
      }
    } else {
      struct Slot {
        CaptureResult result;
        FILE *commands = nullptr, *findings = nullptr, *replay = nullptr;
        ElementStream cs, fs;
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
            if (report->streams_commands()) s.cs = {s.commands = std::tmpfile(), true};
            if (report->streams_findings()) s.fs = {s.findings = std::tmpfile(), true};
            if (overall_owned) s.replay = std::tmpfile();
            if ((report->streams_commands() && !s.commands) || (report->streams_findings() && !s.findings) ||
                (overall_owned && !s.replay))
              throw std::runtime_error(
                  fmt::format("cannot create a temporary file: {}", std::strerror(errno)));
            Outlets o;
            o.replay = s.replay;
            o.commands = s.commands ? &s.cs : nullptr;
            o.findings = s.findings ? &s.fs : nullptr;
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
        if (s.commands) join_chunk(s.commands, s.cs, commands_out, report->separator());
        if (s.findings) join_chunk(s.findings, s.fs, findings_all, report->separator());
        if (s.replay) replay(s.replay, *overall_owned);
        for (FILE** f : {&s.commands, &s.findings, &s.replay})
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
        for (FILE** f : {&s.commands, &s.findings, &s.replay})
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
    report->end(out, all, findings_all.out);

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
