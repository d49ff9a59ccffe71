// SPDX-License-Identifier: GPL-2.0-or-later
// The default report, for people: per capture the sessions (peers, vantage, RTT, MSS, negotiated
// keys), the findings ranked by time lost with their fix and evidence frames, the command classes,
// the worst commands and the notices; with several captures, a closing section for all of them.
#include <cmath>

#include <fmt/format.h>

#include "report.hpp"

namespace iscsi_doctor::cli {
namespace {

constexpr size_t kNoticesShown = 20;
constexpr size_t kLineWidth = 100;

std::string count(uint64_t n) {  // 1234567 -> "1,234,567"
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string ms(double v) {
  if (!std::isfinite(v) || v < 0) return "-";
  if (v >= 1000) return fmt::format("{:.2f} s", v / 1000);
  if (v >= 100) return fmt::format("{:.0f} ms", v);
  if (v >= 10) return fmt::format("{:.1f} ms", v);
  if (v >= 1) return fmt::format("{:.2f} ms", v);
  return fmt::format("{:.3f} ms", v);
}

std::string size(uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

std::string file_size(uint64_t b) {
  if (b >= 1'000'000'000) return fmt::format("{:.1f} GB", b / 1e9);
  if (b >= 1'000'000) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1'000) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", b);
}

std::string vantage_text(Vantage v) {
  switch (v) {
    case Vantage::initiator:
      return "captured near the initiator";
    case Vantage::target:
      return "captured near the target";
    case Vantage::midpath:
      return "captured mid-path";
    default:
      return "capture point unknown";
  }
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string frames_list(const std::vector<uint64_t>& frames) {
  std::vector<std::string> s;
  for (uint64_t f : frames)
    s.push_back(std::to_string(f));
  return join(s, ", ");
}

// Words laid out in lines of at most kLineWidth columns, each line starting with `indent`.
void wrap(std::string& out, const std::vector<std::string>& words, std::string_view indent) {
  std::string line(indent);
  bool first = true;
  for (const auto& w : words) {
    if (!first && line.size() + 2 + w.size() > kLineWidth) {
      out += line + "\n";
      line = std::string(indent);
      first = true;
    }
    if (!first) line += "  ";
    line += w;
    first = false;
  }
  if (!first) out += line + "\n";
}

void write_advice(std::string& o, const Summary& s, bool evidence) {
  const auto advice = s.advice();
  if (advice.empty()) {
    o += s.commands() ? "No findings.\n" : "No findings (no SCSI commands).\n";
    return;
  }
  o += "Findings, ranked by time lost\n";
  o += fmt::format("  {:>2}  {:<16} {:<9} {:>9} {:>10}   {}\n", "#", "finding", "side", "commands",
                   "time lost", "median latency now -> after fix");
  size_t rank = 0;
  for (const Advice& a : advice) {
    const std::string medians = a.commands
                                    ? fmt::format("{} -> {}", ms(a.median_latency_ms), ms(a.median_fixed_ms))
                                    : std::string("- (not tied to single commands)");
    o += fmt::format("  {:>2}  {:<16} {:<9} {:>9} {:>10}   {}\n", ++rank, finding_name(a.kind),
                     side_name(a.side), count(a.commands), ms(a.lost_ms), medians);
    if (!a.fix.empty()) o += fmt::format("      fix: {}\n", a.fix);
    if (evidence && !a.example_frames.empty())
      o += fmt::format("      e.g. frames {}\n", frames_list(a.example_frames));
  }
}

void write_classes(std::string& o, const Summary& s) {
  const auto classes = s.classes();
  if (classes.empty()) return;
  o += "\nCommand classes\n";
  o += fmt::format("  {:<6} {:>9} {:>9} {:>10} {:>10} {:>10}   {}\n", "kind", "size", "commands", "median",
                   "p90", "max", "round trips median (ideal)");
  for (const ClassStats& c : classes)
    o += fmt::format("  {:<6} {:>9} {:>9} {:>10} {:>10} {:>10}   {:g} ({})\n", command_kind_name(c.kind),
                     size(c.bytes), count(c.commands), ms(c.median_ms), ms(c.p90_ms), ms(c.max_ms),
                     c.median_round_trips, c.ideal_round_trips);
}

void write_worst(std::string& o, const Summary& s) {
  const auto& worst = s.worst();
  if (worst.empty()) return;
  o += fmt::format("\nWorst {} commands (by excess round trips, then latency)\n", worst.size());
  o += fmt::format("  {:<10}  {:<22} {:>12} {:>9}  {:<17} {:>10} {:>8}  {}\n", "ITT", "op", "LBA", "bytes",
                   "frames", "latency", "RT/ideal", "findings");
  for (const CommandResult& c : worst) {
    std::vector<std::string> kinds;
    for (auto k : c.findings)
      kinds.emplace_back(finding_name(k));
    if (!c.completed) kinds.insert(kinds.begin(), "(no status)");
    if (c.data_incomplete) kinds.insert(kinds.begin(), "(data missing)");
    const std::string frames = c.status_frame ? fmt::format("{}-{}", c.first_frame, c.status_frame)
                                              : fmt::format("{}-", c.first_frame);
    o += fmt::format("  {:<10}  {:<22} {:>12} {:>9}  {:<17} {:>10} {:>8}  {}\n", hex32(c.itt), c.op,
                     c.lba ? std::to_string(*c.lba) : "-", count(c.bytes), frames,
                     c.completed ? ms(c.latency_ms) : "-",
                     fmt::format("{}/{}", c.round_trips, c.ideal_round_trips), join(kinds, ", "));
  }
}

void write_sessions(std::string& o, const CaptureResult& r) {
  for (const SessionInfo& s : r.sessions) {
    std::string head = fmt::format("Session {}", s.id);
    if (!s.session_type.empty()) head += " " + s.session_type;
    if (!s.initiator_name.empty() || !s.target_name.empty())
      head += fmt::format("  {} -> {}", s.initiator_name.empty() ? "?" : s.initiator_name,
                          s.target_name.empty() ? "?" : s.target_name);
    if (!s.isid.empty()) head += fmt::format("  ISID {} TSIH {}", s.isid, s.tsih);
    o += head + "\n";
    for (uint32_t id : s.connections)
      if (const ConnectionInfo* cp = r.connection(id)) {
        const ConnectionInfo& c = *cp;
        o += fmt::format("  connection {}  initiator {} <-> target {}  ({})\n", c.id, c.initiator.str(),
                         c.target.str(), vantage_text(c.vantage));
        std::string mss = fmt::format("MSS initiator {}, target {}", c.mss_initiator, c.mss_target);
        if (c.mss_inferred)  // said with its evidence: a capture joined mid-session has no SYN
          mss += c.mss_source_initiator == c.mss_source_target
                     ? fmt::format(" (inferred: {})", c.mss_source_initiator)
                     : fmt::format(" (inferred: initiator {}, target {})", c.mss_source_initiator,
                                   c.mss_source_target);
        o += fmt::format("    RTT {} (capture point to initiator {}, to target {})   {}\n", ms(c.rtt_ms),
                         ms(c.rtt_initiator_ms), ms(c.rtt_target_ms), mss);
        std::vector<std::string> keys;
        for (const auto& [k, v] : c.keys)
          keys.push_back(k + "=" + v);
        if (keys.empty()) keys.emplace_back("no negotiated keys seen (login not captured)");
        if (c.wscale_inferred)
          keys.push_back(fmt::format("window scale not in the capture: at least {} (initiator), {} (target), "
                                     "from the data in flight",
                                     c.wscale_initiator, c.wscale_target));
        if (c.offload_segments)
          keys.push_back(fmt::format("{} segments longer than the MSS: TSO/GRO at the capture point",
                                     c.offload_segments));
        wrap(o, keys, "    ");
        std::vector<std::string> counts{fmt::format("{} frames", count(c.frames)),
                                        fmt::format("{} PDUs", count(c.pdus)),
                                        fmt::format("{} commands", count(c.commands)),
                                        fmt::format("at most {} in flight", c.max_outstanding)};
        if (c.mid_session_start) counts.emplace_back("joined mid-session");
        if (c.resyncs) counts.push_back(fmt::format("{} resyncs", count(c.resyncs)));
        if (c.digest_errors) counts.push_back(fmt::format("{} digest errors", count(c.digest_errors)));
        if (c.bytes_missing)
          counts.push_back(fmt::format("{} bytes missing from the capture", count(c.bytes_missing)));
        o += "    " + join(counts, ", ") + "\n";
      }
  }
  // Connections the engine put in no listed session.
  const std::unordered_set<uint32_t> listed = connections_in_sessions(r.sessions);
  for (const ConnectionInfo& c : r.connections) {
    if (!listed.count(c.id))
      o += fmt::format("Connection {}  initiator {} <-> target {}  ({}), {} commands\n", c.id,
                       c.initiator.str(), c.target.str(), vantage_text(c.vantage), count(c.commands));
  }
  if (const ConnectionTotals& u = r.unlisted; u.connections)
    o += fmt::format(
        "{} more connections, analysed but not listed one by one: {} frames, {} PDUs, {} commands\n",
        count(u.connections), count(u.frames), count(u.pdus), count(u.commands));
}

class TextReport final : public Report {
public:
  explicit TextReport(const ReportOptions& o) : opt_(o) {}

  void capture_done(FILE* out, const CaptureResult& r) override {
    std::string o;
    const std::string where =
        opt_.several ? fmt::format("[{}/{}] {}", r.index + 1, opt_.paths.size(), r.path) : r.path;
    if (!r.usable) {
      o += fmt::format("== {} ==\n  unusable: {}\n\n", where, r.error);
      std::fputs(o.c_str(), out);
      return;
    }
    const double secs = r.stats.packets ? (r.stats.last_ns - r.stats.first_ns) / 1e9 : 0;
    o += fmt::format("== {} ==\n{}{}, {}, {}, {} packets over {:.1f} s\n", where, format_name(r.probe.format),
                     r.probe.gzip ? " (gzip)" : "", r.link_description, file_size(r.probe.size),
                     count(r.stats.packets), secs);
    const Summary& s = *r.summary;
    o += fmt::format("{} SCSI commands, {} completed, {} excess round trips\n\n", count(s.commands()),
                     count(s.completed()), count(s.excess_round_trips()));
    if (r.connections.empty() && r.sessions.empty())
      o += "No iSCSI connection found (ports other than 3260? see --port).\n\n";
    else {
      write_sessions(o, r);
      o += "\n";
    }
    write_advice(o, s, true);
    write_classes(o, s);
    write_worst(o, s);
    const auto& notices = s.notices();
    if (!notices.empty()) {
      o += fmt::format("\nNotices ({})\n", notices.size());
      for (size_t i = 0; i < notices.size() && i < kNoticesShown; ++i) {
        const Notice& n = notices[i];
        o += fmt::format("  {:<7}  {:<12} {}\n", notice_level_name(n.level),
                         n.frame ? fmt::format("frame {}", n.frame) : std::string("-"), n.message);
      }
      if (notices.size() > kNoticesShown)
        o += fmt::format("  ... and {} more (see --format json)\n", notices.size() - kNoticesShown);
    }
    o += "\n";
    std::fputs(o.c_str(), out);
  }

  void end(FILE* out, const Overall& all, FILE*) override {
    std::string o;
    if (opt_.several && all.summary) {
      const Summary& s = *all.summary;
      o += fmt::format(
          "== All {} captures ==\n{} usable, {} packets, {} SCSI commands, {} completed, {} "
          "excess round trips\n\n",
          all.captures, all.usable, count(all.packets), count(s.commands()), count(s.completed()),
          count(s.excess_round_trips()));
      write_advice(o, s, false);
      write_classes(o, s);
      o += "\n";
    }
    if (all.gate.requested) {
      if (all.gate.unevaluable)
        o += "Gate: not evaluated, no SCSI command found\n";
      else if (all.gate.tripped)
        o += fmt::format("Gate: TRIPPED ({})\n", join(all.gate.reasons, "; "));
      else
        o += "Gate: passed\n";
    }
    std::fputs(o.c_str(), out);
  }

private:
  ReportOptions opt_;
};

}  // namespace

std::unique_ptr<Report> make_text_report(const ReportOptions& o) { return std::make_unique<TextReport>(o); }

}  // namespace iscsi_doctor::cli
