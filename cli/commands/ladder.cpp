// SPDX-License-Identifier: GPL-2.0-or-later
// Ladder diagrams: the second pass that gathers the drawn commands' segments, and the
// `iscsi-doctor ladder` subcommand (the drawing itself: drawing/ladder_draw.cpp).
#include "commands/ladder.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "iscsi_doctor/analyzer.hpp"
#include "options.hpp"
#include "commands/analyse.hpp"

namespace iscsi_doctor::cli {
namespace {

constexpr size_t kBefore = 2;  // segments of the connection shown before the command
constexpr size_t kAfter = 2;   // and after its status (the status' ACK, usually)
constexpr int64_t kAfterNs = 200'000'000;
constexpr size_t kHead = 16;  // a long transfer keeps its first and last segments and evidence
constexpr size_t kTail = 16;

// ---- Labels: the names of the PDUs the engine found in a segment ---------------------------------

std::string_view opcode_name(uint8_t op) {
  switch (op) {
    case 0x00:
      return "NOP-Out";
    case 0x01:
      return "SCSI Cmd";
    case 0x02:
      return "Task Mgmt";
    case 0x03:
      return "Login";
    case 0x04:
      return "Text";
    case 0x05:
      return "Data-Out";
    case 0x06:
      return "Logout";
    case 0x10:
      return "SNACK";
    case 0x20:
      return "NOP-In";
    case 0x21:
      return "SCSI Rsp";
    case 0x22:
      return "Task Mgmt Rsp";
    case 0x23:
      return "Login Rsp";
    case 0x24:
      return "Text Rsp";
    case 0x25:
      return "Data-In";
    case 0x26:
      return "Logout Rsp";
    case 0x31:
      return "R2T";
    case 0x32:
      return "Async";
    case 0x3f:
      return "Reject";
    default:
      return {};
  }
}

// A segment's label: the PDUs whose headers the engine found in it, or its TCP role.
std::string label_of(const LadderSeg& s, const std::vector<std::pair<uint8_t, uint8_t>>& pdus) {
  if (s.len == 0) {
    if (s.flags & tcp_flag::syn) return s.flags & tcp_flag::ack ? "SYN-ACK" : "SYN";
    if (s.flags & tcp_flag::fin) return "FIN";
    if (s.flags & tcp_flag::rst) return "RST";
    return "ACK";
  }
  if (s.retransmission) return "retransmission";
  std::string label;
  for (const auto& [op, flags] : pdus) {
    const std::string_view name = opcode_name(op);
    if (!label.empty()) label += " + ";
    label += name.empty() ? fmt::format("opcode 0x{:02x}", op) : std::string(name);
    if (op == 0x25 && (flags & 0x01)) label += " (status)";
  }
  return label.empty() ? "data" : label;
}

// ---- Second pass ---------------------------------------------------------------------------------

// What the engine said of one kept segment while the second pass re-analysed its connection.
struct SegFacts {
  std::vector<std::pair<uint8_t, uint8_t>> pdus;  // opcode and flags of each PDU begun in it
  bool ours = false;                              // an event of the drawn command's critical path
  bool resent = false;                            // bytes the connection had already carried
  bool from_initiator = false;
  int half_trips = -1;
};

// One command's segments as the second pass gathers them: a little context before its first frame
// and after its status, its own segments (head and tail of a long transfer), and every evidence
// frame the engine named (`forced`: the command's first and status frames, each finding's frame
// and related frames) wherever it lies, with the count of segments left out before it. `facts`
// holds the engine's word on each segment still kept (dropped with the segment).
struct Collect {
  LadderRequest* r = nullptr;
  uint64_t first = 0, last = 0;  // frames of the command (last: UINT64_MAX while open)
  int64_t after_until = 0;
  std::set<uint64_t> forced;
  uint64_t first_forced = 0, last_forced = 0;  // the earliest and latest evidence frames (0: none)
  std::deque<LadderSeg> before, tail;
  std::vector<LadderSeg> kept;  // head and evidence frames
  std::unordered_map<uint64_t, SegFacts> facts;
  uint64_t inside = 0, pending_elided = 0;
  bool early_kept = false;  // an evidence frame before the context that precedes the command
  uint64_t before_elided = 0, after_elided = 0;
  size_t after = 0;
  bool after_done = false;  // the context after the status is complete
  bool done = false;
};

bool same_connection(const Segment& seg, const ConnectionInfo& k, bool& from_i) {
  if (seg.src.port == k.initiator.port && seg.dst.port == k.target.port && seg.src == k.initiator &&
      seg.dst == k.target)
    return from_i = true;
  if (seg.src.port == k.target.port && seg.dst.port == k.initiator.port && seg.src == k.target &&
      seg.dst == k.initiator)
    return !(from_i = false);
  return false;
}

// Feeds the drawn commands' connections, and only those, to an Analyzer of their own with the
// first pass's options: the labels, the command's segments and its half trips are the engine's
// (connections are analysed each on their own, so theirs are the first pass's facts).
class Collector final : public ReaderEvents, public Tracer, public Sink {
public:
  Collector(std::vector<Collect>& c, const Options& options) : c_(c), analyzer_(options, *this) {
    analyzer_.set_tracer(this);
  }
  void on_segment(const Segment& seg) override {
    bool any = false;
    for (Collect& c : c_) {
      bool from_i = false;
      if (!same_connection(seg, c.r->conn, from_i)) {
        if (!c.done && seg.frame > c.last && seg.time_ns > c.after_until) {
          c.after_done = true;
          c.done = seg.frame > c.last_forced;
        }
        continue;
      }
      if (c.done) continue;
      any = true;
      LadderSeg s;
      s.frame = seg.frame;
      s.time_ns = seg.time_ns;
      s.from_initiator = from_i;
      s.seq = seg.seq;
      s.ack = seg.ack;
      s.len = seg.payload_wire_len;
      s.flags = seg.flags;
      s.window = seg.window;
      add(c, std::move(s));
    }
    if (!any) return;
    const SegmentStatus status = analyzer_.feed(seg);
    if (status == SegmentStatus::retransmission)
      for (Collect& c : c_)
        if (auto it = c.facts.find(seg.frame); it != c.facts.end()) it->second.resent = true;
  }
  void on_notice(Notice::Level, uint64_t, std::string) override {}
  using Sink::on_notice;  // the engine's notices: none drawn either
  // Every diagram complete: the rest of the file is not needed.
  bool finished() const override {
    return std::all_of(c_.begin(), c_.end(), [](const Collect& c) { return c.done; });
  }
  void on_pdu(const PduTrace& t) override {
    for (Collect& c : c_) {
      if (!t.last_frame) {  // its header: the label
        if (auto it = c.facts.find(t.first_frame); it != c.facts.end())
          it->second.pdus.emplace_back(t.opcode, t.flags);
        continue;
      }
      // The drawn command's PDUs (not a NOP echoing its tag): each segment that carried them.
      const CommandResult& cmd = c.r->command;
      if (t.itt != cmd.itt || t.opcode == 0x00 || t.opcode == 0x20 || t.first_frame < cmd.first_frame ||
          (cmd.status_frame && t.last_frame > cmd.status_frame))
        continue;
      for (auto& [frame, f] : c.facts)
        if (frame >= t.first_frame && frame <= t.last_frame && f.from_initiator == t.from_initiator)
          f.ours = true;
    }
  }
  void on_path(const PathTrace& t) override {
    for (Collect& c : c_)
      if (t.command_first_frame == c.r->command.first_frame)
        if (auto it = c.facts.find(t.frame); it != c.facts.end()) {
          it->second.ours = true;
          it->second.half_trips = std::max(it->second.half_trips, t.half_trips);
        }
  }
  void finish() { analyzer_.finish(); }

private:
  static void keep(Collect& c, LadderSeg&& s) { c.kept.push_back(std::move(s)); }
  static void drop(Collect& c, uint64_t frame) { c.facts.erase(frame); }
  static void add(Collect& c, LadderSeg&& s) {
    c.facts.try_emplace(s.frame).first->second.from_initiator = s.from_initiator;
    if (s.frame < c.first) {
      c.before.push_back(std::move(s));
      if (c.before.size() <= kBefore) return;
      LadderSeg old = std::move(c.before.front());
      c.before.pop_front();
      if (c.forced.count(old.frame)) {
        old.elided_before = c.before_elided;
        c.before_elided = 0;
        c.early_kept = true;
        keep(c, std::move(old));
      } else {
        drop(c, old.frame);
        if (c.early_kept) ++c.before_elided;
      }
      return;
    }
    if (s.frame > c.last) {
      const uint64_t frame = s.frame;
      if (!c.after_done && c.after < kAfter && s.time_ns <= c.after_until) {
        keep(c, std::move(s));
        c.after_done = ++c.after >= kAfter;
      } else {  // past the context: only evidence frames, after those left out
        c.after_done = true;
        if (c.forced.count(frame)) {
          s.elided_before = c.after_elided;
          c.after_elided = 0;
          keep(c, std::move(s));
        } else {
          drop(c, frame);
          ++c.after_elided;
        }
      }
      c.done = c.after_done && frame >= c.last_forced;
      return;
    }
    if (c.inside++ < kHead) {
      keep(c, std::move(s));
      return;
    }
    c.tail.push_back(std::move(s));
    if (c.tail.size() <= kTail) return;
    LadderSeg old = std::move(c.tail.front());
    c.tail.pop_front();
    if (c.forced.count(old.frame)) {
      old.elided_before = c.pending_elided;
      c.pending_elided = 0;
      keep(c, std::move(old));
    } else {
      drop(c, old.frame);
      ++c.pending_elided;
    }
  }
  std::vector<Collect>& c_;
  Analyzer analyzer_;
};

}  // namespace

void collect_ladders(const std::string& path, DecoderChoice decoder, const Options& options,
                     std::vector<LadderRequest*> requests) {
  if (requests.empty()) return;
  std::vector<Collect> c(requests.size());
  uint64_t hi = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    LadderRequest& r = *requests[i];
    Collect& x = c[i];
    x.r = &r;
    x.first = r.command.first_frame;
    x.forced.insert(r.command.first_frame);
    x.forced.insert(r.command.status_frame);
    // The evidence of its first findings (kLadderEvidenceFindings).
    size_t shown = 0;
    r.findings_not_drawn = r.findings.size() > kLadderEvidenceFindings ? r.findings.size() - kLadderEvidenceFindings : 0;
    for (const Finding& f : r.findings) {
      if (shown++ == kLadderEvidenceFindings) break;
      x.forced.insert(f.frame);
      for (const auto& [name, frame] : f.related)
        x.forced.insert(frame);
    }
    x.forced.erase(0);  // no status frame
    x.first_forced = x.forced.empty() ? 0 : *x.forced.begin();
    x.last_forced = x.forced.empty() ? 0 : *x.forced.rbegin();
    // A command without status ends, for the drawing, after its last evidence frame.
    x.last = r.command.status_frame ? r.command.status_frame
                                    : std::max(x.last_forced, r.command.first_frame + 2000);
    x.after_until = r.command.status_frame ? r.command.status_ns + kAfterNs : 0;
    hi = std::max({hi, x.last, x.last_forced});
  }
  // The engine needs each connection from its start; after the last command, a few thousand frames
  // for the context segments after its status.
  CaptureReader reader(path, decoder);
  Collector col(c, options);
  reader.read_frames(col, {{1, hi > std::numeric_limits<uint64_t>::max() - 5000 ? hi : hi + 5000}});
  col.finish();
  for (Collect& x : c) {
    std::vector<LadderSeg>& out = x.r->segs;
    out.clear();
    if (!x.before.empty()) x.before.front().elided_before += x.before_elided;
    for (auto& s : x.before)
      out.push_back(std::move(s));
    if (!x.tail.empty())
      x.tail.front().elided_before += x.pending_elided;
    else
      x.r->elided_after = x.pending_elided;
    for (auto& s : x.kept)
      out.push_back(std::move(s));
    for (auto& s : x.tail)
      out.push_back(std::move(s));
    std::stable_sort(out.begin(), out.end(),
                     [](const LadderSeg& a, const LadderSeg& b) { return a.frame < b.frame; });
    for (LadderSeg& s : out) {
      const SegFacts& f = x.facts[s.frame];
      s.retransmission = s.len > 0 && f.resent;
      s.label = label_of(s, f.pdus);
      s.ours = f.ours;
      s.half_trips = f.half_trips;
    }
  }
}

// ---- `iscsi-doctor ladder`: a report of the pipeline ---------------------------------------------

namespace {

// The drawing of one command: the pipeline's first pass finds it (the command with the ITT: the
// first one, or the one spanning --frame) and its findings; once the capture is analysed, the
// second pass gathers its segments and it is drawn.
class LadderReport final : public Report {
public:
  bool reads_twice() const override { return true; }
  explicit LadderReport(const ReportOptions& ro) : ro_(ro), svg_(ro.paths.size()) {}
  std::unique_ptr<CaptureReport> capture_report(size_t index, CaptureStreams, Sink&) override {
    return std::make_unique<Part>(*this, index);
  }
  void capture_done(FILE* out, const CaptureResult& r) override {
    usable_ |= r.usable;
    if (drawn_ || svg_[r.index].empty()) return;
    std::fwrite(svg_[r.index].data(), 1, svg_[r.index].size(), out);
    drawn_ = true;
  }
  std::string failure() const override {
    if (drawn_ || !usable_) return {};  // an unusable input has been said already
    return fmt::format("no command with ITT 0x{:08x}{}", ro_.ladder.itt,
                       ro_.ladder.frame ? fmt::format(" at frame {}", ro_.ladder.frame) : "");
  }

private:
  class Part final : public CaptureReport {
  public:
    Part(LadderReport& owner, size_t index) : o_(owner), index_(index) {}
    void command(const CommandResult& c) override {
      const LadderSpec& want = o_.ro_.ladder;
      if (c.itt != want.itt) return;
      if (want.frame &&
          !(c.first_frame == want.frame || (c.first_frame <= want.frame && want.frame <= c.status_frame)))
        return;
      if (found_ && best_.first_frame <= c.first_frame) return;
      best_ = c;
      found_ = true;
    }
    void finding(const Finding& f) override {
      if (f.itt && *f.itt == o_.ro_.ladder.itt && findings_.size() < kMaxFindings) findings_.push_back(f);
    }
    void analysed(const CaptureResult& r) override {
      if (!r.usable || !found_) return;
      tell_notices(r);
      LadderRequest req;
      req.command = best_;
      for (const Finding& f : findings_)
        if (f.connection == best_.connection && f.command_first_frame == best_.first_frame)
          req.findings.push_back(f);
      if (const ConnectionInfo* ci = r.connection(best_.connection)) req.conn = *ci;
      try {
        collect_ladders(r.read_path, o_.ro_.decoder, o_.ro_.engine, {&req});
      } catch (const CaptureError&) {  // read once already: drawn from what was gathered
      }
      o_.svg_[index_] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" +
                        render_ladder(req, fmt::format("ladder-{:08x}", best_.itt), true);
    }

  private:
    // The notices that concern the drawn command (#27: not the whole capture's): its connection's
    // at its frames or about the connection as a whole, and errors about the file.
    void tell_notices(const CaptureResult& r) const {
      const uint64_t last = best_.status_frame ? best_.status_frame : UINT64_MAX;
      for (const Notice& n : r.summary->notices()) {
        const bool file = !n.connection && n.level == Notice::Level::error;
        const bool mine = n.connection == best_.connection &&
                          (!n.frame || (n.frame >= best_.first_frame && n.frame <= last));
        if (!(file || mine) || (o_.ro_.quiet && n.level != Notice::Level::error)) continue;
        std::fputs(fmt::format("iscsi-doctor: {}: {}{}: {}\n", r.path,
                               n.frame ? fmt::format("frame {}: ", n.frame) : std::string(),
                               notice_level_name(n.level), n.message)
                       .c_str(),
                   stderr);
      }
    }
    static constexpr size_t kMaxFindings = 100000;
    LadderReport& o_;
    size_t index_;
    bool found_ = false;
    CommandResult best_;
    std::vector<Finding> findings_;
  };

  ReportOptions ro_;
  std::vector<std::string> svg_;  // per capture (each written by the thread analysing it)
  bool drawn_ = false, usable_ = false;
};

}  // namespace

std::unique_ptr<Report> make_ladder_report(const ReportOptions& ro) {
  return std::make_unique<LadderReport>(ro);
}

std::function<int()> add_ladder_command(CLI::App& parent) {
  CLI::App& app = *parent.add_subcommand(
      "ladder", "one command's packet exchange as an SVG ladder diagram (iscsi-doctor ladder --help)");
  struct Args {
    std::string capture, itt_text, output;
    DecoderChoice decoder = DecoderChoice::fast;
    uint64_t frame = 0;
    PortOptions port_options;
    MemoryOptions memory_options;
    bool quiet = false;
    Options engine;
  };
  auto a = std::make_shared<Args>();
  app.add_option("CAPTURE", a->capture, "pcap or pcapng file, compressed (gzip, xz, zstd, lz4, bzip2) or not")
      ->required();
  app.add_option("--itt", a->itt_text,
                 "the command's Initiator Task Tag: 0x-prefixed hex as the reports print it, or decimal")
      ->required();
  app.add_option(
      "--frame", a->frame,
      "when the ITT repeats: the command whose frames span N (default: the first command with the ITT)");
  app.add_option("-o,--output", a->output, "write the SVG to FILE instead of standard output");
  a->port_options.add_to(app);
  a->memory_options.add_to(app);
  app.add_option("--delayed-ack-ms", a->engine.delayed_ack_min_ms,
                 "an ACK later than this beyond the RTT counts as delayed")
      ->check(CLI::PositiveNumber);
  add_choice(app, "--decoder", a->decoder, decoder_choices(), "packet decoder: fast (default) or libtins");
  app.add_flag("-q,--quiet", a->quiet, "no notices on standard error");
  return [a] {
    const auto itt = parse_itt(a->itt_text);
    if (!itt) {
      std::fprintf(stderr, "iscsi-doctor ladder: --itt: not a 32-bit number: '%s'\n", a->itt_text.c_str());
      return kExitUnusable;
    }
    a->port_options.apply(a->engine);
    a->memory_options.apply(a->engine, 1);
    PipelineOptions opt;
    opt.inputs = {a->capture};
    opt.engine = a->engine;
    opt.format = Format::ladder;
    opt.output = a->output;
    opt.quiet = a->quiet;
    opt.decoder = a->decoder;
    opt.ladder = {*itt, a->frame};
    return run_pipeline(opt);
  };
}

}  // namespace iscsi_doctor::cli
