// SPDX-License-Identifier: GPL-2.0-or-later
// `--format json`: one JSON object (schema in docs/json-schema.md). The `commands` array is written
// while the captures are read, one command at a time; findings go to a spool file and are copied in
// after it; captures, sessions, summary and notices (small) close the object. The records
// themselves are json_records.cpp's; --format jsonl is report_jsonl.cpp.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "reports/initiator_estimate.hpp"
#include "reports/json_records.hpp"
#include "reports/json_sessions.hpp"
#include "reports/report.hpp"

namespace iscsi_doctor::cli {
namespace {

using namespace json;

constexpr size_t kNoticesKeptPerCapture = 1000;

// The report's work on each command and finding, on a thread of its own: a small-block capture has
// a command every few packets, and holding it for its initiator estimate (HeldCommands), sharing
// its findings' time lost (TimeLostShares) and formatting it cost about as much as analysing it.
// What the analysis says is handed over in batches, in order, and done there as it would be here;
// the thread starts with the first full batch (a small capture never starts one) and at most
// kQueued batches wait, so memory stays bounded.
class ElementWriter {
public:
  ElementWriter(CaptureStreams s, size_t capture, bool one_thread)
      : s_(s),
        capture_(capture),
        no_thread_(one_thread),
        held_([this](const CommandResult& c, double est) { write_command(*s_.direct, c, capture_, est); }),
        shares_([this](const Finding& f, double t) { write_finding(*s_.deferred, f, t, capture_); }) {}
  ElementWriter(const ElementWriter&) = delete;
  ElementWriter& operator=(const ElementWriter&) = delete;
  ~ElementWriter() { drain(); }

  void add(const CommandResult& c) {
    filling_.commands.add(c);
    added(Kind::command);
  }
  void add(const Finding& f) {
    filling_.findings.add(f);
    added(Kind::finding);
  }
  void add(const ConnectionInfo& k) {
    filling_.connections.add(k);
    added(Kind::connection);
  }
  // The connections' offsets so far (Held::offsets_of), when many commands are held.
  void add_now(const std::unordered_map<uint32_t, double>& offsets) {
    filling_.nows.add(offsets);
    added(Kind::now);
  }
  // The capture is analysed: what is still held or waiting for its share is written too, and
  // the streams are complete when this returns.
  void finish() {
    filling_.order.push_back(Kind::end);
    drain();
  }

private:
  // Everything handed over done, and the thread gone.
  void drain() {
    if (thread_.joinable()) {
      hand_over();
      {
        std::lock_guard lock(m_);
        closing_ = true;
      }
      cv_.notify_all();
      thread_.join();
    }
    apply(filling_);
  }

  static constexpr size_t kBatch = 1024, kQueued = 8;
  enum class Kind : uint8_t { command, finding, connection, now, end };
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
  };
  struct Batch {
    Slots<CommandResult> commands;
    Slots<Finding> findings;
    Slots<ConnectionInfo> connections;
    Slots<std::unordered_map<uint32_t, double>> nows;
    std::vector<Kind> order;  // what was said, in turn
    void clear() {
      commands.n = findings.n = connections.n = nows.n = 0;
      order.clear();
    }
  };

  void added(Kind k) {
    filling_.order.push_back(k);
    if (filling_.order.size() >= kBatch) hand_over();
  }

  // As JsonCaptureReport once did it here: a command is held, then its findings' shares are known;
  // at the end the shares go first, then the held commands.
  void apply(Batch& b) {
    size_t c = 0, f = 0, k = 0, w = 0;
    for (Kind kind : b.order)
      switch (kind) {
        case Kind::command:
          held_.command(b.commands.v[c]);
          shares_.command(b.commands.v[c++]);
          break;
        case Kind::finding:
          shares_.finding(b.findings.v[f++]);
          break;
        case Kind::connection:
          held_.connection(b.connections.v[k++]);
          break;
        case Kind::now:
          held_.release_all(b.nows.v[w++]);
          break;
        case Kind::end:
          shares_.finish();
          held_.finish();
          break;
      }
    b.clear();
  }

  void hand_over() {
    if (!thread_.joinable() && !no_thread_) {
      try {
        thread_ = std::thread([this] { run(); });
      } catch (const std::system_error&) {  // no thread to be had: done here
        no_thread_ = true;
      }
    }
    if (no_thread_) {
      apply(filling_);
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
      apply(b);
      std::lock_guard lock(m_);
      if (spare_.size() < kQueued) spare_.push_back(std::move(b));  // its memory reused
    }
  }

  CaptureStreams s_;
  size_t capture_;
  bool no_thread_;
  HeldCommands held_;
  TimeLostShares shares_;
  Batch filling_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  std::vector<Batch> spare_;
  bool closing_ = false;
  std::thread thread_;
};

// Commands into the direct stream (the `commands` array), findings into the deferred one (the
// `findings` array, after it). Whether the analysis must be asked for its connections so far (many
// commands held) is known here from the held commands' connections alone (Held<uint32_t>), as the
// writer's thread holds the commands themselves.
class JsonCaptureReport final : public CaptureReport {
public:
  JsonCaptureReport(size_t index, CaptureStreams s, bool one_thread)
      : writer_(s, index, one_thread), held_([](uint32_t, double) {}) {}
  void command(const CommandResult& c) override {
    held_.command(c.connection);
    wants_connections_ = held_.full();
    writer_.add(c);
  }
  void finding(const Finding& f) override { writer_.add(f); }
  void connection(const ConnectionInfo& k) override {
    held_.connection(k);
    writer_.add(k);
  }
  void connections_now(const std::vector<ConnectionInfo>& now) override {
    const auto offsets = HeldCommands::offsets_of(now);
    held_.release_all(offsets);
    wants_connections_ = false;
    writer_.add_now(offsets);
  }
  void analysed(const CaptureResult&) override { writer_.finish(); }

private:
  ElementWriter writer_;
  Held<uint32_t> held_;
};

class JsonReport final : public Report {
public:
  explicit JsonReport(const ReportOptions& o) : opt_(o) {}
  bool writes_direct() const override { return true; }
  bool writes_deferred() const override { return true; }
  std::string_view separator() const override { return ","; }

  std::unique_ptr<CaptureReport> capture_report(size_t index, CaptureStreams streams, Sink&) override {
    return std::make_unique<JsonCaptureReport>(index, streams, opt_.one_thread);
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
      write_sessions(sessions_, r, {});
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
    std::fputs("\"sessions\":[", out);
    std::fwrite(sessions_.data(), 1, sessions_.size(), out);
    std::fputs("],\n", out);
    tail("summary", summary, false);
    tail("notices", notices_, true);
    std::fputs("}\n", out);
  }

private:
  ReportOptions opt_;
  nlohmann::json captures_ = nlohmann::json::array();
  OutBuf sessions_;  // the sessions' objects, comma-separated (json_sessions.hpp)
  nlohmann::json notices_ = nlohmann::json::array();
  AdviceExamples examples_;
};

}  // namespace

std::unique_ptr<Report> make_json_report(const ReportOptions& o) { return std::make_unique<JsonReport>(o); }

}  // namespace iscsi_doctor::cli
