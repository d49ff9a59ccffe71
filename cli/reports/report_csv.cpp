// SPDX-License-Identifier: GPL-2.0-or-later
// `--format csv`: one row per command with the fields of the JSON `commands` items (RFC 4180
// quoting; findings joined by ';'; breakdown parts as breakdown_<part>_ms columns; empty cell for
// null). Rows are written as commands arrive (held until their connection's round trip to the
// initiator is final, for initiator_latency_ms: initiator_estimate.hpp).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "iscsi_doctor/scsi.hpp"
#include "reports/initiator_estimate.hpp"
#include "reports/report.hpp"

namespace iscsi_doctor::cli {
namespace {

void cell(OutBuf& o, std::string_view v) {
  if (v.find_first_of(",\"\r\n") == std::string_view::npos) {
    o += v;
    return;
  }
  o += '"';
  for (char c : v) {
    if (c == '"') o += '"';
    o += c;
  }
  o += '"';
}

template <typename T>
void opt_cell(OutBuf& o, const std::optional<T>& v) {
  if (v) o.number(uint64_t(*v));
}

void ms_cell(OutBuf& o, double ms) {
  if (std::isfinite(ms)) write_ms(o, ms);
}

void write_row(ElementStream& s, const CommandResult& c, size_t capture, std::string_view path,
               double initiator_latency_ms) {
  thread_local OutBuf o;
  o.clear();
  o.format(FMT_COMPILE("{},"), capture);
  cell(o, path);
  o.format(FMT_COMPILE(",{},{},0x{:08x},{},"), c.session, c.connection, c.itt,
                 c.cmdsn);
  cell(o, c.op);
  o.format(FMT_COMPILE(",{},{},"), c.iscsi_opcode, command_kind_name(c.kind));
  opt_cell(o, c.lba);
  o.format(FMT_COMPILE(",{},"), c.bytes);
  if (c.first_frame) o.format(FMT_COMPILE("{}"), c.first_frame);
  o += ',';
  if (c.status_frame) o.format(FMT_COMPILE("{}"), c.status_frame);
  o.format(FMT_COMPILE(",{},"), c.first_ns);
  if (c.completed) ms_cell(o, c.latency_ms);
  if (c.completed)  // never answered: no round trips to count (empty, as its latency)
    o.format(FMT_COMPILE(",{},{},"), c.round_trips, c.ideal_round_trips);
  else
    o.format(FMT_COMPILE(",,{},"), c.ideal_round_trips);
  for (size_t i = 0; i < c.findings.size(); ++i) {
    if (i) o += ';';
    o += finding_name(c.findings[i]);
  }
  for (const auto& p : kBreakdownParts) {
    o += ',';
    ms_cell(o, c.breakdown.*p.field);
  }
  o += ',';
  if (c.scsi_status) o += scsi_status_name(*c.scsi_status);
  o += ',';
  opt_cell(o, c.iscsi_response);
  o += ',';
  opt_cell(o, c.sense_key);
  o += ',';
  if (c.sense_key) o += scsi::sense_key_name(*c.sense_key);
  o += ',';
  if (c.sense_key) opt_cell(o, c.asc);
  o += ',';
  if (c.sense_key) opt_cell(o, c.ascq);
  o.format(FMT_COMPILE(",{},{},{},"), c.completed, c.data_incomplete, c.lun);
  if (initiator_latency_ms >= 0) ms_cell(o, initiator_latency_ms);
  o += '\n';
  std::fwrite(o.data(), 1, o.size(), s.out);
  s.empty = false;
}

// One row per finding (--findings-csv): the fields of the JSON `findings` items; related frames as
// name=frame joined by ';', inferred facts joined by ';'.
constexpr std::string_view kFindingsHeader =
    "capture,file,kind,side,session,connection,frame,related,lost_ms,itt,command_first_frame,inferred,"
    "detail,time_lost_ms,touched_ms\n";

// lost_ms is touched_ms's old name (kept one release; new columns go last, for readers by position).
void write_finding_row(ElementStream& s, const Finding& f, double time_lost_ms, size_t capture,
                       std::string_view path) {
  OutBuf o;
  o.format(FMT_COMPILE("{},"), capture);
  cell(o, path);
  o.format(FMT_COMPILE(",{},{},{},{},{},"), finding_name(f.kind), side_name(f.side),
                 f.session, f.connection, f.frame);
  std::string related;
  for (const auto& [name, frame] : f.related)
    related += fmt::format("{}{}={}", related.empty() ? "" : ";", name, frame);
  cell(o, related);
  o += ',';
  ms_cell(o, f.lost_ms);
  o += ',';
  if (f.itt) o.format(FMT_COMPILE("0x{:08x}"), *f.itt);
  o += ',';
  if (f.command_first_frame) o.format(FMT_COMPILE("{}"), f.command_first_frame);
  o += ',';
  cell(o, join(f.inferred, ";"));
  o += ',';
  cell(o, f.detail);
  o += ',';
  ms_cell(o, time_lost_ms);
  o += ',';
  ms_cell(o, f.lost_ms);
  o += '\n';
  std::fwrite(o.data(), 1, o.size(), s.out);
  s.empty = false;
}

// One row per command, into the direct stream; one per finding into the deferred one, if asked.
class CsvCaptureReport final : public EstimatingCaptureReport {
public:
  CsvCaptureReport(size_t index, std::string_view path, CaptureStreams s)
      : EstimatingCaptureReport(
            [this](const CommandResult& c, double est) { write_row(*s_.direct, c, index_, path_, est); }),
        index_(index),
        path_(path),
        s_(s),
        shares_([this](const Finding& f, double t) {
          if (s_.deferred) write_finding_row(*s_.deferred, f, t, index_, path_);
        }) {}
  void command(const CommandResult& c) override {
    hold(c);
    if (s_.deferred) shares_.command(c);
  }
  void finding(const Finding& f) override {
    if (s_.deferred) shares_.finding(f);
  }
  void analysed(const CaptureResult&) override {
    shares_.finish();
    release_held();
  }

private:
  size_t index_;
  std::string_view path_;
  CaptureStreams s_;
  TimeLostShares shares_;
};

class CsvReport final : public Report {
public:
  explicit CsvReport(const ReportOptions& o) : opt_(o) {}
  bool writes_direct() const override { return true; }
  bool writes_deferred() const override { return !opt_.findings_csv.empty(); }

  std::unique_ptr<CaptureReport> capture_report(size_t index, CaptureStreams streams, Sink&) override {
    return std::make_unique<CsvCaptureReport>(index, path_of(index), streams);
  }

  // The findings' rows, gathered over every capture in argument order, into their own file.
  void end(FILE*, const Overall&, FILE* deferred) override {
    if (opt_.findings_csv.empty()) return;
    FILE* f = std::fopen(opt_.findings_csv.c_str(), "w");
    if (!f) {
      failure_ = fmt::format("{}: cannot write: {}", opt_.findings_csv, std::strerror(errno));
      return;
    }
    std::fwrite(kFindingsHeader.data(), 1, kFindingsHeader.size(), f);
    if (deferred) copy_file(deferred, f);
    if (std::fclose(f) != 0) failure_ = fmt::format("{}: write error", opt_.findings_csv);
  }
  std::string failure() const override { return failure_; }

  void begin(FILE* out) override {
    std::string h =
        "capture,file,session,connection,itt,cmdsn,op,iscsi_opcode,kind,lba,bytes,first_frame,"
        "status_frame,time_ns,latency_ms,round_trips,ideal_round_trips,findings";
    for (const auto& p : kBreakdownParts)
      h += fmt::format(",breakdown_{}_ms", p.name);
    // New columns go last, for readers by position.
    h += ",status,response,sense_key,sense_key_name,sense_asc,sense_ascq,completed,data_incomplete,lun,"
         "initiator_latency_ms\n";
    std::fputs(h.c_str(), out);
  }

private:
  std::string_view path_of(size_t capture) const {
    return capture < opt_.paths.size() ? std::string_view(opt_.paths[capture]) : std::string_view();
  }
  ReportOptions opt_;
  std::string failure_;
};

}  // namespace

std::unique_ptr<Report> make_csv_report(const ReportOptions& o) { return std::make_unique<CsvReport>(o); }

}  // namespace iscsi_doctor::cli
