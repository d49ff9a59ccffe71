// SPDX-License-Identifier: GPL-2.0-or-later
// The four report formats (text, JSON, CSV, HTML) behind one interface, fed by the one pipeline
// (commands/analyse.cpp). Commands and findings are streamed as the engine reports them (a capture may hold
// millions), each capture's into its own streams; everything else (sessions, summaries, notices)
// is small and written when a capture, or the whole run, is done.
//
// Call order: begin; per capture, from the thread analysing it: capture_report, then that part's
// command/finding calls and its analysed(); per capture on the main thread, in argument order,
// once its streams are joined: capture_done; finally end.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "input/capture_reader.hpp"
#include "reports/formatting.hpp"
#include "reports/out_buf.hpp"
#include "iscsi_doctor/finding_kinds.hpp"
#include "iscsi_doctor/summary.hpp"

namespace iscsi_doctor::cli {

enum class Format : uint8_t { text, json, csv, html, ladder, verdict, jsonl };

// `iscsi-doctor ladder`: the command to draw.
struct LadderSpec {
  uint32_t itt = 0;
  uint64_t frame = 0;  // when the ITT repeats: the command whose frames span this one (0: the first)
};

class RootCauses;

// Where streamed elements (JSON array items, CSV rows) of one capture go.
struct ElementStream {
  FILE* out = nullptr;
  bool empty = true;  // nothing written yet: the next JSON item needs no leading comma
};

// Everything known about one input once it has been read.
struct CaptureResult {
  size_t index = 0;
  std::string path;
  std::string read_path;  // the file read: path, or a temporary copy of a piped capture
  // With a command filter: the commands the engine reported, and those the filter kept.
  bool filtered = false;
  uint64_t commands_seen = 0, commands_kept = 0;
  bool usable = false;
  std::string error;  // why the input could not be read at all (!usable)
  FileProbe probe;
  std::string link_type;         // libpcap's name ("EN10MB")
  std::string link_description;  // and description ("Ethernet")
  std::string_view decoder;
  ReadStats stats;
  std::vector<ConnectionInfo> connections;
  ConnectionTotals unlisted;  // finished past the engine's listing cap: counted only
  Evictions evicted;          // finished early by the memory budget
  std::vector<SessionInfo> sessions;
  std::unique_ptr<Summary> summary;  // null when !usable
  // Its root causes (root_causes.hpp), fed with its commands and findings; for the outputs that
  // tell a fix and are not fed commands themselves (JUnit).
  std::shared_ptr<RootCauses> root_causes;
  // The listed connection with this id, or null (connections are sorted by id).
  const ConnectionInfo* connection(uint32_t id) const;
};

struct GateResult {
  bool requested = false;  // --fail-on or --max-excess-round-trips given
  bool tripped = false;
  bool unevaluable = false;          // requested, but no iSCSI command in any input
  std::vector<std::string> fail_on;  // kind names
  std::optional<uint64_t> max_excess_round_trips;
  std::vector<std::string> reasons;  // one line per tripped condition
};

// The run as a whole, for the closing part of a report.
struct Overall {
  const Summary* summary = nullptr;  // every usable capture together
  size_t captures = 0, usable = 0;
  uint64_t packets = 0;
  GateResult gate;
};

// Where a capture's streamed output goes. `direct` is copied into the output when the capture's
// turn comes (argument order); `deferred` is gathered over all captures and handed to Report::end.
// Null when the report does not write that stream.
struct CaptureStreams {
  ElementStream* direct = nullptr;
  ElementStream* deferred = nullptr;
};

// A report's part for one capture, used only by the thread analysing that capture.
class CaptureReport {
public:
  virtual ~CaptureReport() = default;
  virtual void first_segment(int64_t /*time_ns*/) {}  // the capture's first TCP segment
  virtual void command(const CommandResult&) {}
  virtual void finding(const Finding&) {}
  // A connection's facts are final (the engine's Sink::on_connection).
  virtual void connection(const ConnectionInfo&) {}
  // While wants_connections() (asked between segments): the connections' facts so far
  // (Analyzer::connections()), for a part that holds commands until their connection's are final.
  bool wants_connections() const { return wants_connections_; }
  virtual void connections_now(const std::vector<ConnectionInfo>&) {}
  // Last call: the capture is read and analysed (r.usable), or could not be read at all.
  virtual void analysed(const CaptureResult& /*r*/) {}

protected:
  bool wants_connections_ = false;
};

class Report {
public:
  virtual ~Report() = default;
  virtual bool writes_direct() const { return false; }
  virtual bool writes_deferred() const { return false; }
  // Reads each capture a second time (ladders: collect_ladders on CaptureResult::read_path): a
  // piped capture is then copied to a temporary file first.
  virtual bool reads_twice() const { return false; }
  // Written between two streamed elements when chunks of different captures are joined.
  virtual std::string_view separator() const { return {}; }

  virtual void begin(FILE* /*out*/) {}
  // The part for capture `index` (null: the report needs nothing while captures are read). Its own
  // notices (caps it hits) go to `notices`, as the engine's do.
  virtual std::unique_ptr<CaptureReport> capture_report(size_t /*index*/, CaptureStreams, Sink& /*notices*/) {
    return nullptr;
  }
  // Main thread, in argument order, once the capture's direct stream is in `out`.
  virtual void capture_done(FILE* /*out*/, const CaptureResult&) {}
  // Main thread, last. `deferred` holds every capture's deferred stream, to be copied into the output.
  virtual void end(FILE* /*out*/, const Overall&, FILE* /*deferred*/) {}
  // After end: why the report could not be made from usable input (the ladder's command is not in
  // the capture), or empty. The run then exits as for unusable input.
  virtual std::string failure() const { return {}; }
};

struct ReportOptions {
  size_t worst = 10;
  bool several = false;                         // more than one input
  std::vector<std::string> paths;               // the inputs, by capture index
  DecoderChoice decoder = DecoderChoice::fast;  // the HTML report's second pass reads as the first
  Options engine;                               // and analyses as the first
  LadderSpec ladder;
  bool quiet = false;        // -q: no notices on standard error but errors
  bool verbose = false;      // -v: the text report's fuller per-connection detail
  std::string findings_csv;  // --format csv: also one row per finding into this file
  std::string filter;        // the command filter as given ("--lun 1 --op read"), or empty
  bool one_thread = false;   // --threads 1: no formatting thread either
};
// roots: a capture's root causes gathered elsewhere (the HTML page's text), for a report that is
// given no capture_report part.
std::unique_ptr<Report> make_text_report(const ReportOptions&, const RootCauses* roots = nullptr);
std::unique_ptr<Report> make_verdict_report(const ReportOptions&);  // report_text.cpp
std::unique_ptr<Report> make_json_report(const ReportOptions&);
std::unique_ptr<Report> make_jsonl_report(const ReportOptions&);
std::unique_ptr<Report> make_csv_report(const ReportOptions&);
std::unique_ptr<Report> make_html_report(const ReportOptions&);
std::unique_ptr<Report> make_ladder_report(const ReportOptions&);  // ladder.cpp

// ---- Shared by the formats (report_common.cpp) ------------------------------------------------
std::string_view command_kind_name(char kind);  // "read", "write", "other"
std::string scsi_status_name(uint8_t status);   // "GOOD", "CHECK_CONDITION", ..., "0x1c"
std::string_view notice_level_name(Notice::Level);
// The gate's verdict, as every report words it: "Gate: passed", "Gate: TRIPPED (reasons)", ...
std::string gate_words(const GateResult&);
// How a row of the status table ended: "GOOD", "never answered", ...; and its sense and response.
std::string status_words(const StatusStats&);
std::string sense_words(const StatusStats&);  // "UNIT_ATTENTION, ASC 0x29 ASCQ 0x00 (POWER ON, ...)", "" if none
// The T10 name of an ASC/ASCQ pair ("INVALID FIELD IN CDB"), "" when not in the table (the SCSI table, engine/src/scsi/table.def).
std::string_view asc_name(int asc, int ascq);
// "" or, when most of the iSCSI streams' bytes are missing from the capture, the headline that
// says so and what it means for the figures.
std::string missing_data_words(const CaptureResult&);
double round_ns(double ms);                   // milliseconds rounded to the nanosecond
// Milliseconds rounded to the microsecond: for the summary's medians, kept as floats (7 digits), whose
// last digits are noise (59.825001).
double round_us(double ms);
void write_json_string(OutBuf& out, std::string_view s);
// Finite milliseconds rounded to the nanosecond, as fmt writes that double (its shortest form):
// for 100 ns .. 10^9 ms the decimal itself with trailing zeros dropped (at most 15 digits, so no
// shorter decimal names the same double), written directly; fmt's float path was a tenth of a
// JSON run's time.
void write_ms(OutBuf& out, double ms);
void copy_file(FILE* from, FILE* to);  // from its start to its end

// Breakdown parts with their JSON names (without the _ms suffix), in report order.
struct BreakdownPart {
  std::string_view name;
  double Breakdown::*field;
};
extern const BreakdownPart kBreakdownParts[10];

nlohmann::json summary_json(const Summary&);  // commands, completed, advice, classes, ...
// The per-session rows labelled for people: "N (target)", N as the session list names it.
std::vector<LunStats> session_rows(const Summary&);
// Summed connection counts: connections, frames, pdus, commands, resyncs, digest_errors, bytes_missing.
nlohmann::json totals_json(const ConnectionTotals&);
// Ids of the connections the sessions list.
std::unordered_set<uint32_t> connections_in_sessions(const std::vector<SessionInfo>&);
nlohmann::json ms_or_null(double ms);  // negative (unknown) -> null

// Where a capture's latencies were measured (#27 "the vantage in every number"): the capture point
// its connections share ("mixed" when they differ), and the round trips that separate it from each
// side, weighted by the connections' commands (negative: not measured). A latency at the capture
// point plus to_initiator_ms estimates the latency the initiator saw.
// A round trip to the initiator worth saying (a column, "at most"): a tenth of a millisecond or more.
inline constexpr double kInitiatorRttShownMs = 0.1;
struct VantageFacts {
  std::string capture_point = "unknown";  // vantage_name, or "mixed"
  double rtt_ms = -1, to_initiator_ms = -1, to_target_ms = -1;
  bool rtt_at_most = false;  // a connection's target round trip may hold the target's own time
  bool to_initiator_at_most = false;  // and away from the initiator, its round trip the initiator's
  // The estimate's offset: 0 near the initiator, to_initiator_ms elsewhere, -1 unknown.
  double initiator_offset_ms() const { return to_initiator_ms < 0 ? -1 : to_initiator_ms; }
  // Worth a column of its own in the text.
  bool shows_estimate() const {
    return capture_point != "initiator" && to_initiator_ms >= kInitiatorRttShownMs;
  }
  // The least a command can take as the capture point sees it, for "after fix" (#27): the round
  // trip to the target and back from a known point near the target or mid-path; else the full one.
  double floor_ms() const {
    const double f = capture_point == "target" || capture_point == "midpath" ? to_target_ms : rtt_ms;
    return f < 0 ? 0 : f;
  }
};
VantageFacts vantage_of(const CaptureResult&);

// A row's IOPS and MB/s mean something over at least this many commands and a second (#27).
constexpr uint64_t kRateMinCommands = 10;
inline bool rate_meaningful(const LunStats& l) { return l.commands >= kRateMinCommands && l.seconds >= 1.0; }
std::string vantage_sentence(const VantageFacts&);  // one line for people
nlohmann::json vantage_json(const VantageFacts&);

// Each finding's share of time lost (#27: each millisecond counted once): its command's part of
// the latency that is the kind's own, split among the command's findings of that kind by their
// touched time. Findings are held, in the order they came, until their command is reported, so
// that summing findings[].time_lost_ms by kind gives the summary's (and the text's) figure.
class TimeLostShares {
public:
  using Emit = std::function<void(const Finding&, double time_lost_ms)>;
  explicit TimeLostShares(Emit emit) : emit_(std::move(emit)) {}
  void finding(const Finding& f) {
    if (!f.itt && pending_.empty()) return emit_(f, 0);  // connection level: no command's time
    pending_.push_back({f, 0, !f.itt});
    if (f.itt) waiting_[{f.connection, *f.itt, f.command_first_frame}].push_back(next_);
    ++next_;
    release(pending_.size() > kHeld ? pending_.size() - kHeld : 0);
  }
  void command(const CommandResult& c) {
    const auto it = waiting_.find({c.connection, c.itt, c.first_frame});
    if (it == waiting_.end()) return;
    std::vector<Pending*>& held = held_;  // kept: a command with findings is the common case
    held.clear();
    for (uint64_t i : it->second)
      if (i >= first_) held.push_back(&pending_[size_t(i - first_)]);  // else written past the bound
    waiting_.erase(it);
    for (FindingKind k : c.findings) {
      if (!c.completed) break;
      double touched = 0;
      size_t n = 0;
      for (Pending* p : held)
        if (p->f.kind == k) touched += p->f.lost_ms, ++n;
      const double own = exclusive_ms(k, c.breakdown);
      for (Pending* p : held)
        if (p->f.kind == k) p->time_lost_ms = touched > 0 ? own * p->f.lost_ms / touched : own / double(n);
    }
    for (Pending* p : held)
      p->ready = true;
    release(0);
  }
  void finish() {  // findings of no reported command cost no reported latency
    release(pending_.size());
    waiting_.clear();
  }

private:
  static constexpr size_t kHeld = 1 << 20;  // a bound: a never-answered command must not hold all
  struct Pending {
    Finding f;
    double time_lost_ms;
    bool ready;
  };
  // The ready ones at the front, and at least `force` of the first.
  void release(size_t force) {
    while (!pending_.empty() && (pending_.front().ready || force)) {
      emit_(pending_.front().f, pending_.front().time_lost_ms);
      pending_.pop_front();
      ++first_;
      if (force) --force;
    }
  }
  Emit emit_;
  std::deque<Pending> pending_;
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>, std::vector<uint64_t>> waiting_;
  uint64_t first_ = 0, next_ = 0;
  std::vector<Pending*> held_;
};

}  // namespace iscsi_doctor::cli
