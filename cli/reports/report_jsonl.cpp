// SPDX-License-Identifier: GPL-2.0-or-later
// `--format jsonl`: JSON Lines, a record per line as the capture is read (docs/json-schema.md,
// "JSON Lines"); the records are json_records.cpp's.
#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "reports/initiator_estimate.hpp"
#include "reports/json_records.hpp"
#include "reports/json_sessions.hpp"
#include "reports/report.hpp"

namespace iscsi_doctor::cli {
namespace {

using namespace json;

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
    // As the command comes: its connection's round trip as measured so far (JSON and CSV wait for
    // the final one).
    write_command(*s_.direct, c, index_, initiator_latency_ms(c, c.initiator_offset_ms), &command_line_);
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
      OutBuf text;
      write_sessions(text, r, {&r.path});
      std::fwrite(text.data(), 1, text.size(), out);
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

std::unique_ptr<Report> make_jsonl_report(const ReportOptions& o) { return std::make_unique<JsonlReport>(o); }

}  // namespace iscsi_doctor::cli
