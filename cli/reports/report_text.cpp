// SPDX-License-Identifier: GPL-2.0-or-later
// The default report, for people (#27: the verdict first): per capture where its latencies were
// measured, a headline (what is wrong, what it costs, who must change what), the root causes ranked
// by what their fix gains, then the tables (command classes, logical units, how commands ended, the
// worst commands, findings by kind), then each connection's facts and the notices; with several
// captures, a closing section for all of them.
#include <cctype>
#include <cmath>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "reports/formatting.hpp"
#include "iscsi_doctor/finding_kinds.hpp"
#include "reports/report.hpp"
#include "reports/root_causes.hpp"
#include "reports/text_connections.hpp"

namespace iscsi_doctor::cli {

namespace text {

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

std::string plural(uint64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", count_text(n), n == 1 ? one : many);
}

}  // namespace text

namespace {

using namespace text;

constexpr size_t kNoticesShown = 20;


// A connection-level verdict's sentence, saying what its figures total: the touched time is summed
// over every connection that has it, the engine's sentence is one connection's.
std::string connection_level_words(const Advice& a) {
  if (a.occurrences <= 1) return a.detail;
  return fmt::format("in {} connections, {} touched in all; the first: {}", count_text(a.occurrences),
                     ms_text(a.lost_ms), a.detail);
}

// Why a kind's row has no commands (#27): a connection's verdict (serialized), or findings that held
// no command's latency (a resent segment no command waited for).
std::string no_command_why(const Advice& a) {
  return finding_kind(a.kind).part ? "no command waited on it" : "connection level";
}

// floor_ms: no median after a fix below the round trip the capture point sees a command take.
// A sentence laid out in lines of at most kLineWidth columns: the first after `first`, the others
// after `indent`.
void wrap_words(std::string& out, std::string_view first, std::string_view text, std::string_view indent) {
  // Words, a unit kept with its number ("2.42 s" is not cut in two).
  std::vector<std::string> words;
  for (size_t i = 0; i < text.size();) {
    size_t j = text.find(' ', i);
    if (j == std::string_view::npos) j = text.size();
    const std::string_view w = text.substr(i, j - i);
    const std::string_view unit = w.substr(0, w.find_first_of(",;.)"));
    if (!words.empty() && (unit == "s" || unit == "ms") && !words.back().empty() &&
        std::isdigit(static_cast<unsigned char>(words.back().back())))
      words.back() += " " + std::string(w);
    else if (!w.empty())
      words.emplace_back(w);
    i = j + 1;
  }
  std::string line(first);
  bool empty = first.find_first_not_of(' ') == std::string_view::npos;
  for (const std::string& w : words) {
    if (!empty && line.size() + 1 + w.size() > kLineWidth) {
      out += line + "\n";
      line = std::string(indent);
      empty = true;
    }
    if (!empty) line += ' ';
    line += w;
    empty = false;
  }
  out += line + "\n";
}

void write_advice(std::string& o, const Summary& s, bool evidence, double floor_ms = 0,
                  const std::vector<RootCause>& roots = {}) {
  const auto advice = s.advice();
  if (advice.empty()) {
    o += s.commands() ? "No findings.\n" : "No findings (no SCSI commands).\n";
    return;
  }
  // Time lost: each millisecond of a command's latency counted once, to the cause that held it;
  // "touched" is the findings' own time, which overlaps (a hold's includes the delayed ACK that
  // ended it) and, for a connection-level verdict, is not command latency at all.
  o += fmt::format(
      "Findings by kind, ranked by time lost ({} of the {} the completed commands took; each millisecond "
      "counted once; touched: the findings' own time, which overlaps)\n",
      ms_text(s.exclusive_total_ms()), ms_text(s.latency_total_ms()));
  o += fmt::format("  {:>2}  {:<16} {:<9} {:>9} {:>10} {:>10}   {}\n", "#", "finding", "side", "commands",
                   "time lost", "touched", "median latency now -> after fix");
  size_t rank = 0;
  for (const Advice& a : advice) {
    const std::string medians = a.commands ? fmt::format("{} -> {}", ms_text(a.median_latency_ms),
                                                         ms_text(std::max(a.median_fixed_ms, std::min(floor_ms, a.median_latency_ms))))
                                           : "- (" + no_command_why(a) + ": " + connection_level_words(a) + ")";
    o += fmt::format("  {:>2}  {:<16} {:<9} {:>9} {:>10} {:>10}   {}\n", ++rank, finding_name(a.kind),
                     side_name(a.side), count_text(a.commands), a.commands ? ms_text(a.exclusive_ms) : "-",
                     ms_text(a.lost_ms), medians);
    if (!a.fix.empty()) wrap_words(o, "      fix:", device_fix(a.kind, a.fix, roots), "        ");
    if (!a.note.empty()) o += fmt::format("      note: {}\n", a.note);
    if (!a.inferred.empty()) {
      std::vector<std::string> words;
      for (const std::string& f : a.inferred)
        words.push_back(f == "mss"            ? "the MSS"
                        : f == "window_scale" ? "the window scale"
                                              : "the negotiated keys");
      o += fmt::format(
          "      inferred: {} (not in the capture: see each connection's facts); the verdict rests on "
          "{}\n",
          join(words, ", "), words.size() > 1 ? "them" : "it");
    }
    if (evidence && !a.example_frames.empty())
      o += fmt::format("      e.g. frames {}\n", frames_text(a.example_frames));
  }
}



// "Nagle hold", "delayed ACK", ...: the kind's label, or its name where it has none.
std::string kind_words(FindingKind k) {
  const FindingKindInfo& i = finding_kind(k);
  return i.label.empty() ? std::string(i.name) : std::string(i.label);
}

bool all_mechanical(const RootCause& r) { return r.mechanical && r.mechanical == r.commands; }

// What a root cause is, in a few words, with the factors that made it worse.
std::string cause_words(const RootCause& r, const std::vector<Advice>& advice) {
  auto side_of = [&](FindingKind k) {
    for (const Advice& a : advice)
      if (a.kind == k) return std::string(side_name(a.side));
    return std::string("?");
  };
  std::string w = fmt::format("{} ({})", finding_name(r.kind), side_name(r.side));
  std::vector<std::string> with;
  for (FindingKind f : r.factors)
    with.push_back(fmt::format("{} ({})", finding_name(f), side_of(f)));
  if (!with.empty()) w += " with " + join(with, ", ");
  return w;
}

// The headline: what is wrong, what it costs, who must change what.
void write_headline(std::string& o, const Summary& s, const std::vector<RootCause>& roots,
                    const std::vector<Advice>& advice) {
  const double total = s.exclusive_total_ms(), all = s.latency_total_ms();
  if (roots.empty()) {
    bool connection_level = false;
    for (const Advice& a : advice)
      connection_level = connection_level || !a.commands;
    o += !s.commands() ? "Verdict: no SCSI commands to judge.\n"
         : connection_level
             ? "Verdict: no command lost time to a finding; see the connection-level findings below.\n"
             : "Verdict: nothing to fix; no command lost time to a finding.\n";
    return;
  }
  o += fmt::format("Verdict: {} of the {} the {} took ({:.0f}%) went to {}:\n", ms_text(total), ms_text(all),
                   plural(s.completed(), "completed command", "completed commands"),
                   all > 0 ? 100.0 * total / all : 0.0, plural(roots.size(), "root cause", "root causes"));
  size_t rank = 0;
  for (const RootCause& r : roots) {
    if (++rank > 3) {
      o += fmt::format("  ... and {} more (below)\n", roots.size() - 3);
      break;
    }
    if (all_mechanical(r)) {
      wrap_words(o, fmt::format("  {}.", rank),
                 fmt::format("{}: {} over {}: the device's mechanical work ({}), expected of it; nothing to "
                             "change",
                             cause_words(r, advice), ms_text(r.time_lost_ms),
                             plural(r.commands, "command", "commands"), join(r.mechanical_ops, ", ")),
                 "     ");
      continue;
    }
    const RootFix& best = r.fixes.front();
    // No side is told to change where the capture cannot tell whether the time is that side's.
    const std::string side(side_name(best.side));
    const std::string who = finding_kind(r.kind).side_unsure
                                ? "whether the " + side + " should change the capture cannot tell"
                                : "the " + side + " should change";
    wrap_words(o, fmt::format("  {}.", rank),
               fmt::format("{}: {} over {}; {} (median {} -> {})", cause_words(r, advice),
                           ms_text(r.time_lost_ms), plural(r.commands, "command", "commands"), who,
                           ms_text(r.median_latency_ms), ms_text(best.median_after_ms)),
               "     ");
  }
}

// Root causes, ranked by what their best fix gains; each fix with the median latency after it.
void write_roots(std::string& o, const Summary& s, const std::vector<RootCause>& roots,
                 const std::vector<Advice>& advice) {
  if (roots.empty() && advice.empty()) return;
  o += "\nRoot causes, ranked by what fixing them gains (time lost: each millisecond counted once)\n";
  size_t rank = 0;
  for (const RootCause& r : roots) {
    wrap_words(o, fmt::format("  {}.", ++rank),
               fmt::format("{}: {} lost over {}, median latency {}", cause_words(r, advice),
                           ms_text(r.time_lost_ms), plural(r.commands, "command", "commands"),
                           ms_text(r.median_latency_ms)),
               "     ");
    for (size_t i = 0; i < r.factors.size(); ++i)
      o += fmt::format("     contributing: {} on {} of them\n", kind_words(r.factors[i]),
                       count_text(r.factor_commands[i]));
    const Advice* own = nullptr;
    for (const Advice& a : advice)
      if (a.kind == r.kind) own = &a;
    if (r.mechanical)
      wrap_words(o, "     ",
                 fmt::format("{} of these ({}) are the device's mechanical work ({}{}): a changer's robot, tape "
                             "motion, spin-up or a flush take this long by design; no disk is behind it",
                             all_mechanical(r) ? std::string("all") : count_text(r.mechanical),
                             ms_text(r.mechanical_ms), join(r.mechanical_ops, ", "),
                             r.tape_or_changer ? "; commands to a tape drive or medium changer" : ""),
                 "     ");
    if (all_mechanical(r)) {
      o += "     fix: none; expected of such a device\n";
      continue;
    }
    size_t n = 0;
    for (const RootFix& f : r.fixes) {
      const std::string others =
          r.mechanical && f.kind == FindingKind::target_think
              ? fmt::format("for the other {}: ", plural(r.commands - r.mechanical, "command", "commands"))
              : "";
      wrap_words(o, fmt::format("     fix {} ({}):", ++n, side_name(f.side)), others + fix_for(f.kind, f.side),
                 "       ");
      // The gain is the side's only if the time is: the capture cannot always tell.
      const std::string if_theirs =
          finding_kind(f.kind).side_unsure ? "if it is the " + std::string(side_name(f.side)) + "'s time, " : "";
      o += fmt::format("       {}gains {}; median {} -> {}\n", if_theirs, ms_text(f.gain_ms),
                       ms_text(r.median_latency_ms), ms_text(f.median_after_ms));
    }
    if (own && !own->example_frames.empty())
      o += fmt::format("     e.g. frames {}\n", frames_text(own->example_frames));
  }
  for (const Advice& a : advice)
    if (!a.commands) {
      wrap_words(o, fmt::format("  {}: {} ({}):", no_command_why(a), finding_name(a.kind), side_name(a.side)),
                 connection_level_words(a), "     ");
      wrap_words(o, "     fix:", a.fix, "       ");
    }
  (void)s;
}

void write_classes(std::string& o, const Summary& s, double initiator_offset_ms = -1) {
  const auto classes = s.classes();
  if (classes.empty()) return;
  o += "\nCommand classes\n";
  // Away from the initiator, the median it saw is estimated beside the one measured.
  const bool est = initiator_offset_ms > 0;
  o += fmt::format("  {:<6} {:>9} {:>9} {:>10} {:>10} {:>10}{}   {}\n", "kind", "size", "commands", "median",
                   "p90", "max", est ? fmt::format(" {:>17}", "initiator (est.)") : "",
                   "round trips median (ideal)");
  for (const ClassStats& c : classes)
    o += fmt::format("  {:<6} {:>9} {:>9} {:>10} {:>10} {:>10}{}   {:g} ({})\n", command_kind_name(c.kind),
                     size_text(c.bytes), count_text(c.commands), ms_text(c.median_ms), ms_text(c.p90_ms),
                     ms_text(c.max_ms),
                     est ? fmt::format(" {:>17}", ms_text(c.median_ms + initiator_offset_ms)) : "",
                     c.median_round_trips, c.ideal_round_trips);
}

void write_statuses(std::string& o, const Summary& s) {
  const auto statuses = s.statuses();
  if (statuses.empty()) return;
  o += "\nHow the SCSI commands ended\n";
  // The sense, with its T10 name, goes last: it is the longest.
  o += fmt::format("  {:>9}  {:<16} {:<48} {}\n", "commands", "status", "e.g.", "sense / response");
  for (const StatusStats& st : statuses)
    o += fmt::format("  {:>9}  {:<16} {:<48} {}\n", count_text(st.commands), status_words(st),
                     fmt::format("ITT 0x{:08x} {}, frame {}", st.example_itt, st.example_op, st.example_frame),
                     sense_words(st));
}

// Per target and LUN, and per initiator: what a storage engineer looks at first.
void write_scopes(std::string& o, const std::vector<LunStats>& rows, std::string_view title,
                  std::string_view who, bool lun) {
  if (rows.empty()) return;
  o += fmt::format("\n{} (SCSI commands completed in the capture)\n", title);
  o += fmt::format("  {:<28} {:>5} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}\n", who,
                   lun ? "LUN" : "", "commands", "IOPS", "MB/s", "p50", "p90", "p99", "p99.9", "max",
                   "excess");
  bool few = false;
  for (const LunStats& l : rows) {
    // A rate over a handful of commands or a blink of time says nothing of the unit's load.
    const bool rate = rate_meaningful(l);
    few = few || !rate;
    o += fmt::format(
        "  {:<28} {:>5} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}{}\n", l.target,
        !lun || l.lun == ~uint64_t(0) ? std::string(lun ? "-" : "") : std::to_string(l.lun),
        count_text(l.commands), rate ? fmt::format("{:.1f}", l.iops()) : "(few)",
        rate ? fmt::format("{:.2f}", l.mb_per_s()) : "(few)", ms_text(l.p50_ms), ms_text(l.p90_ms),
        ms_text(l.p99_ms), ms_text(l.p999_ms), ms_text(l.max_ms), count_text(l.excess_round_trips),
        l.incomplete ? fmt::format("  ({} never answered)", count_text(l.incomplete)) : "");
  }
  if (few)
    o += fmt::format("  (few: fewer than {} commands or less than a second between the first and the last: no "
                     "rate)\n",
                     kRateMinCommands);
}

void write_luns(std::string& o, const Summary& s) {
  const auto luns = s.luns();
  write_scopes(o, luns, "Logical units", "target", true);
  const auto initiators = s.initiators();
  if (initiators.size() > 1) write_scopes(o, initiators, "Initiators", "initiator", false);
  const auto targets = s.targets();
  if (targets.size() > 1) write_scopes(o, targets, "Targets", "target", false);
  const auto sessions = session_rows(s);
  if (sessions.size() > 1) write_scopes(o, sessions, "Sessions", "session (target)", false);
  if (!luns.empty())
    o += "  (excess: round trips beyond the ideal, summed; percentiles of latency, nearest rank)\n";
}

void write_worst(std::string& o, const Summary& s) {
  const auto& worst = s.worst();
  if (worst.empty()) return;
  o += fmt::format("\nWorst {} ({})\n", plural(worst.size(), "command", "commands"), worst_order_words(s.worst_order()));
  o += fmt::format("  {:<10}  {:<22} {:>4} {:>12} {:>9}  {:<17} {:>10} {:>8}  {}\n", "ITT", "op", "LUN",
                   "LBA", "bytes", "frames", "latency", "RT/ideal", "findings");
  for (const CommandResult& c : worst) {
    std::vector<std::string> kinds;
    for (auto k : c.findings)
      kinds.emplace_back(finding_name(k));
    if (!c.completed) kinds.insert(kinds.begin(), "(no status)");
    if (c.data_incomplete) kinds.insert(kinds.begin(), "(data missing)");
    const std::string frames = c.status_frame ? fmt::format("{}-{}", c.first_frame, c.status_frame)
                                              : fmt::format("{}-", c.first_frame);
    o += fmt::format("  {:<10}  {:<22} {:>4} {:>12} {:>9}  {:<17} {:>10} {:>8}  {}\n", hex32(c.itt), c.op,
                     c.lun, c.lba ? std::to_string(*c.lba) : "-", count_text(c.bytes), frames,
                     c.completed ? ms_text(c.latency_ms) : "-",
                     fmt::format("{}/{}", c.round_trips, c.ideal_round_trips), join(kinds, ", "));
  }
}

// Feeds a capture's root causes from its commands (on the thread analysing it).
class TextCaptureReport final : public CaptureReport {
public:
  explicit TextCaptureReport(RootCauses& r) : r_(r) {}
  void command(const CommandResult& c) override { r_.add(c); }
  void finding(const Finding& f) override { r_.side(f.kind, f.side); }

private:
  RootCauses& r_;
};

class TextReport final : public Report {
public:
  TextReport(const ReportOptions& o, const RootCauses* given) : opt_(o), given_(given) {}

  std::unique_ptr<CaptureReport> capture_report(size_t index, CaptureStreams, Sink&) override {
    std::lock_guard lock(mu_);
    auto& r = roots_[index];
    r = std::make_unique<RootCauses>();
    return std::make_unique<TextCaptureReport>(*r);
  }

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
    o += fmt::format("== {} ==\n{}{}, {}, {}, {} packets over {:.1f} s{}\n", where,
                     r.probe.format == FileFormat::live ? "live capture" : format_name(r.probe),
                     compression_text(r.probe.compression), r.link_description, file_size_text(r.probe.size),
                     count_text(r.stats.packets), secs,
                     r.probe.reader == CaptureLibrary::wiretap ? " (read through wiretap)" : "");
    const Summary& s = *r.summary;
    o += fmt::format("{}, {} completed, {}\n", plural(s.commands(), "SCSI command", "SCSI commands"),
                     count_text(s.completed()), plural(s.excess_round_trips(), "excess round trip", "excess round trips"));
    const VantageFacts vantage = vantage_of(r);
    if (!r.connections.empty()) o += vantage_sentence(vantage) + "\n";
    if (const std::string words = missing_data_words(r); !words.empty()) o += "warning: " + words + "\n";
    if (r.stats.damaged) o += "warning: the capture is damaged: the analysis stops where it does (see the notices)\n";
    if (r.filtered)
      o += fmt::format(
          "filtered ({}): {} of the {} commands reported; findings, tables and figures cover "
          "these only\n",
          opt_.filter, count_text(r.commands_kept), count_text(r.commands_seen));
    o += "\n";
    if (r.connections.empty() && r.sessions.empty()) o += "No iSCSI connection found (ports other than 3260? see --port).\n";
    // What the capture point sees a command take at least: the round trip to the target and back.
    const double floor_ms = vantage.floor_ms();
    std::vector<RootCause> roots;
    {
      std::lock_guard lock(mu_);
      if (auto it = roots_.find(r.index); it != roots_.end() && it->second) {
        roots = it->second->ranked(floor_ms);
        roots_.erase(it);
      } else if (given_) {
        roots = given_->ranked(floor_ms);
      }
    }
    const auto advice = s.advice();
    write_headline(o, s, roots, advice);
    write_roots(o, s, roots, advice);
    write_classes(o, s, vantage.shows_estimate() ? vantage.initiator_offset_ms() : -1);
    write_luns(o, s);
    write_statuses(o, s);
    write_worst(o, s);
    if (!advice.empty()) {
      o += "\n";
      write_advice(o, s, false, floor_ms, roots);
    }
    if (!r.connections.empty() || !r.sessions.empty()) {
      o += "\nConnections\n";
      write_sessions(o, r, opt_.verbose);
    }
    const auto& notices = s.notices();
    if (!notices.empty()) {
      // Notices that differ only in their numbers (the same kind of missing bytes at many frames)
      // are one line with a count and their first frames (all are in --format json).
      struct Group {
        const Notice* first;
        size_t count = 0;
        std::vector<uint64_t> frames;
      };
      std::vector<Group> groups;
      std::map<std::pair<int, std::string>, size_t> by_shape;
      for (const Notice& n : notices) {
        std::string shape;
        for (char ch : n.message) {
          const bool digit = ch >= '0' && ch <= '9';
          if (!digit)
            shape += ch;
          else if (shape.empty() || shape.back() != '#')
            shape += '#';
        }
        auto [it, fresh] = by_shape.try_emplace({int(n.level), shape}, groups.size());
        if (fresh) groups.push_back(Group{&n, 0, {}});
        Group& g = groups[it->second];
        ++g.count;
        if (n.frame && g.frames.size() < 5) g.frames.push_back(n.frame);
      }
      o += fmt::format("\nNotices ({})\n", notices.size());
      for (size_t i = 0; i < groups.size() && i < kNoticesShown; ++i) {
        const Notice& n = *groups[i].first;
        o += fmt::format("  {:<7}  {:<12} {}\n", notice_level_name(n.level),
                         n.frame ? fmt::format("frame {}", n.frame) : std::string("-"), n.message);
        const Group& g = groups[i];
        if (g.count > 1) {
          // the frames of the others (the first's is on the line above when it has one)
          const size_t skip = n.frame && !g.frames.empty() ? 1 : 0;
          const std::vector<uint64_t> others(g.frames.begin() + ptrdiff_t(skip), g.frames.end());
          o += fmt::format("  {:<7}  {:<12} ... and {} more like it{}\n", "", "", g.count - 1,
                           others.empty() ? std::string()
                                          : fmt::format(" (frames {}{})", frames_text(others),
                                                        g.count - skip > others.size() ? ", ..." : ""));
        }
      }
      if (groups.size() > kNoticesShown)
        o += fmt::format("  ... and {} more kinds (see --format json)\n", groups.size() - kNoticesShown);
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
          all.captures, all.usable, count_text(all.packets), count_text(s.commands()),
          count_text(s.completed()), count_text(s.excess_round_trips()));
      write_advice(o, s, false);
      write_classes(o, s);
      o += "\n";
    }
    if (all.gate.requested) o += gate_words(all.gate) + "\n";
    std::fputs(o.c_str(), out);
  }

private:
  ReportOptions opt_;
  const RootCauses* given_;
  std::mutex mu_;
  std::map<size_t, std::unique_ptr<RootCauses>> roots_;  // by capture, until its turn comes
};

// `--format verdict`: for CI logs, one line per capture (its commands, excess round trips and each
// finding kind with its side and time lost) and the gate's line.
class VerdictReport final : public Report {
public:
  void capture_done(FILE* out, const CaptureResult& r) override {
    if (!r.usable) {
      std::fputs(fmt::format("unusable: {}\n", r.error).c_str(), out);  // the error names the file
      return;
    }
    const Summary& s = *r.summary;
    std::vector<std::string> kinds;
    for (const Advice& a : s.advice())
      kinds.push_back(fmt::format("{} {} {}", finding_name(a.kind), side_name(a.side),
                                  a.commands ? ms_text(a.exclusive_ms) : ms_text(a.lost_ms) + " touched"));
    std::fputs(
        // A line CI logs parse: its wording stays as it was (no singulars).
        fmt::format("{}: {} commands, {} excess round trips; {}{}\n", r.path, count_text(s.commands()),
                    count_text(s.excess_round_trips()), kinds.empty() ? "no findings" : join(kinds, ", "),
                    r.stats.damaged ? "; DAMAGED capture: analysed up to the damage (see the notices)" : "")
            .c_str(),
        out);
  }
  void end(FILE* out, const Overall& all, FILE*) override {
    std::fputs((gate_words(all.gate) + "\n").c_str(), out);
  }
};

}  // namespace

std::unique_ptr<Report> make_text_report(const ReportOptions& o, const RootCauses* roots) {
  return std::make_unique<TextReport>(o, roots);
}
std::unique_ptr<Report> make_verdict_report(const ReportOptions&) {
  return std::make_unique<VerdictReport>();
}

}  // namespace iscsi_doctor::cli
