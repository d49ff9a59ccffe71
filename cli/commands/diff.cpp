// SPDX-License-Identifier: GPL-2.0-or-later
// `iscsi-doctor diff BEFORE AFTER`: two captures (or two JSON reports of iscsi-doctor) compared by
// command class and by logical unit, findings that went or came, the gain BEFORE's report predicted
// against the gain AFTER shows, and a gate on regressions for a target's CI against a baseline.
#include "commands/diff.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "input/capture_reader.hpp"
#include "reports/formatting.hpp"
#include "options.hpp"
#include "commands/analyse.hpp"

namespace iscsi_doctor::cli {
namespace {

using nlohmann::json;

// The summary of a capture or of a report: a JSON report is read as it is; a capture is analysed
// into one first (the pipeline's JSON, into a temporary file). The per-command arrays are skipped
// while parsing: a summary is all a comparison needs, and a large capture's arrays are hundreds of MB.
std::optional<json> summary_of(const std::string& path, const PipelineOptions& base, std::string& error) {
  auto skip_arrays = [](int depth, json::parse_event_t event, json& parsed) {
    return !(depth == 1 && event == json::parse_event_t::key &&
             (parsed == "commands" || parsed == "findings" || parsed == "sessions" || parsed == "notices"));
  };
  auto read = [&](const std::string& file) -> std::optional<json> {
    std::ifstream in(file, std::ios::binary);
    json doc = json::parse(in, skip_arrays, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("summary") || !doc["summary"].is_object()) {
      error = fmt::format("{}: not an iscsi-doctor JSON report", path);
      return std::nullopt;
    }
    return doc["summary"];
  };
  if (!is_stream(path)) {  // a stream is a capture: looking at it would take its first byte
    std::ifstream in(path, std::ios::binary);
    char first = 0;
    while (in.get(first) && std::isspace(static_cast<unsigned char>(first))) {
    }
    if (in && first == '{') return read(path);
  }
  const char* dir = std::getenv("TMPDIR");
  std::string tmp = fmt::format("{}/iscsi-doctor-diff-XXXXXX", dir && *dir ? dir : "/tmp");
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    error = fmt::format("cannot make a temporary file: {}", std::strerror(errno));
    return std::nullopt;
  }
  ::close(fd);
  PipelineOptions opt = base;
  opt.inputs = {path};
  opt.format = Format::json;
  opt.output = tmp;
  const int code = run_pipeline(opt);
  std::optional<json> s;
  if (code == kExitUnusable)
    error = fmt::format("{}: not analysed (see above)", path);
  else
    s = read(tmp);
  ::unlink(tmp.c_str());
  return s;
}

double num(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

std::string class_key(const json& c) {
  return fmt::format("{} {}", c.value("kind", "?"), size_text(c.value("bytes", uint64_t(0))));
}

std::string lun_key(const json& l) {
  return l["lun"].is_null() ? l.value("target", "?") + " LUN ?"
                            : fmt::format("{} LUN {}", l.value("target", "?"), l["lun"].get<uint64_t>());
}

// Rows of BEFORE and AFTER by key, in BEFORE's order then AFTER's new ones. Classes of one kind and
// size but another ideal (connections that negotiated differently) are merged by command count.
std::vector<std::pair<std::string, std::pair<json, json>>> paired(const json& a, const json& b,
                                                                  std::string (*key)(const json&)) {
  std::vector<std::pair<std::string, std::pair<json, json>>> out;
  std::map<std::string, size_t> at;
  auto add = [&](const json& rows, bool after) {
    if (!rows.is_array()) return;
    for (const json& r : rows) {
      const std::string k = key(r);
      auto [it, fresh] = at.emplace(k, out.size());
      if (fresh) out.push_back({k, {json(), json()}});
      json& slot = after ? out[it->second].second.second : out[it->second].second.first;
      if (slot.is_null() || num(r, "commands") > num(slot, "commands")) slot = r;
    }
  };
  add(a, false);
  add(b, true);
  return out;
}

std::string signed_ms(double v) { return v < 0 ? "-" + ms_text(-v) : ms_text(v); }

std::string change(double before, double after) {
  if (before <= 0) return after > 0 ? "new" : "-";
  const double pct = 100.0 * (after - before) / before;
  return fmt::format("{:+.0f}%", pct);
}

}  // namespace

namespace {

struct DiffArgs {
  std::string before, after, output, format = "text";
  PortOptions port_options;
  MemoryOptions memory_options;
  bool gate = false;
  double tolerance = 10, min_commands = 5;
};

int run_diff(const DiffArgs& args) {
  const std::string &before = args.before, &after = args.after, &output = args.output, &format = args.format;
  const PortOptions& port_options = args.port_options;
  const MemoryOptions& memory_options = args.memory_options;
  const bool gate = args.gate;
  const double tolerance = args.tolerance, min_commands = args.min_commands;
  PipelineOptions base;
  base.quiet = true;
  port_options.apply(base.engine);
  memory_options.apply(base.engine, 1);

  std::string error;
  std::optional<json> a = summary_of(before, base, error);
  if (!a) {
    std::fprintf(stderr, "iscsi-doctor diff: %s\n", error.c_str());
    return kExitUnusable;
  }
  std::optional<json> b = summary_of(after, base, error);
  if (!b) {
    std::fprintf(stderr, "iscsi-doctor diff: %s\n", error.c_str());
    return kExitUnusable;
  }

  // Like with like (#27): captures taken at different points measure different spans of the same
  // exchange (near the target, the network's round trip is not in them). Both are then compared as
  // the initiator saw them: each latency plus the round trip from its capture point to the initiator.
  auto point = [](const json& s) {
    return s.contains("vantage") && s["vantage"].is_object() ? s["vantage"].value("capture_point", "unknown")
                                                             : std::string("unknown");
  };
  const std::string pa = point(*a), pb = point(*b);
  json vantage{{"before", pa}, {"after", pb}, {"compared", "as captured"}, {"why", nullptr}};
  double after_slack_ms = 0;  // AFTER's estimates may be this much too long (below)
  if (pa != pb) {
    auto offset = [](const json& s, const std::string& p) -> std::optional<double> {
      if (p == "initiator") return 0.0;
      const json& v = s["vantage"]["to_initiator_ms"];
      return v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
    };
    // A round trip known only from the initiator's answers is at most that (a delayed ACK may be
    // in it): AFTER's estimates may be that much too long, so a regression must hold without it.
    auto at_most = [](const json& s, const std::string& p) {
      return p != "initiator" && s["vantage"].value("to_initiator_at_most", false);
    };
    const auto oa = offset(*a, pa), ob = offset(*b, pb);
    const bool ma = at_most(*a, pa), mb = at_most(*b, pb);
    if (oa && ob && mb) after_slack_ms = *ob;
    if (oa && ob) {
      for (auto [s, off] : {std::pair{&*a, *oa}, std::pair{&*b, *ob}}) {
        for (json& c : (*s)["classes"])
          for (const char* k : {"median_ms", "p90_ms", "max_ms"})
            if (c.contains(k) && c[k].is_number()) c[k] = c[k].get<double>() + off;
        for (json& l : (*s)["luns"])
          for (const char* k : {"p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"})
            if (l.contains(k) && l[k].is_number()) l[k] = l[k].get<double>() + off;
        (*s)["latency_total_ms"] = num(*s, "latency_total_ms") + num(*s, "completed") * off;
      }
      vantage["compared"] = "initiator estimates";
      vantage["why"] = fmt::format(
          "BEFORE was captured at the {}, AFTER at the {}: each latency is compared as the initiator saw it, the "
          "capture point's plus the round trip from there to the initiator ({}{} before, {}{} after){}",
          pa, pb, ma ? "at most " : "", ms_text(*oa), mb ? "at most " : "", ms_text(*ob),
          ma || mb ? "; \"at most\": known only from the initiator's answers, which may hold its own time (a "
                     "delayed ACK), so a latency counts as a regression only if it is one without AFTER's"
                   : "");
    } else {
      vantage["compared"] = "not comparable";
      vantage["why"] = fmt::format(
          "BEFORE was captured at the {}, AFTER at the {}, and the round trip to the initiator was not measured "
          "on both: latencies are not compared for regressions",
          pa, pb);
    }
  }
  const bool latencies_comparable = vantage["compared"] != "not comparable";

  std::vector<std::string> regressions;  // one line each
  const double tol = tolerance / 100.0;
  auto worse = [&](double x, double y) {
    y -= after_slack_ms;
    return latencies_comparable && y > x * (1 + tol) && y - x > 0.5;
  };
  auto enough = [&](const json& x, const json& y) {
    return !x.is_null() && !y.is_null() && num(x, "commands") >= min_commands &&
           num(y, "commands") >= min_commands;
  };

  json out;
  out["before"] = before;
  out["after"] = after;
  out["vantage"] = vantage;
  out["commands"] = {{"before", num(*a, "commands")}, {"after", num(*b, "commands")}};
  const double ca = num(*a, "completed"), cb = num(*b, "completed");
  const double ea = ca ? num(*a, "excess_round_trips") / ca : 0,
               eb = cb ? num(*b, "excess_round_trips") / cb : 0;
  out["excess_round_trips_per_command"] = {{"before", ea}, {"after", eb}};
  if (ca >= min_commands && cb >= min_commands && eb > ea + 0.05)
    regressions.push_back(fmt::format("excess round trips per command {:.2f} -> {:.2f}", ea, eb));

  json classes = json::array();
  for (const auto& [k, rows] : paired((*a)["classes"], (*b)["classes"], class_key)) {
    const auto& [x, y] = rows;
    json row{{"class", k}, {"before", x}, {"after", y}};
    if (enough(x, y)) {
      if (worse(num(x, "median_ms"), num(y, "median_ms")))
        regressions.push_back(fmt::format("{}: median {} -> {}", k, ms_text(num(x, "median_ms")),
                                          ms_text(num(y, "median_ms"))));
      else if (worse(num(x, "p90_ms"), num(y, "p90_ms")))
        regressions.push_back(
            fmt::format("{}: p90 {} -> {}", k, ms_text(num(x, "p90_ms")), ms_text(num(y, "p90_ms"))));
    }
    classes.push_back(std::move(row));
  }
  out["classes"] = classes;

  json luns = json::array();
  for (const auto& [k, rows] : paired((*a)["luns"], (*b)["luns"], lun_key)) {
    const auto& [x, y] = rows;
    if (enough(x, y)) {
      if (worse(num(x, "p50_ms"), num(y, "p50_ms")))
        regressions.push_back(
            fmt::format("{}: p50 {} -> {}", k, ms_text(num(x, "p50_ms")), ms_text(num(y, "p50_ms"))));
      else if (worse(num(x, "p99_ms"), num(y, "p99_ms")))
        regressions.push_back(
            fmt::format("{}: p99 {} -> {}", k, ms_text(num(x, "p99_ms")), ms_text(num(y, "p99_ms"))));
    }
    luns.push_back({{"lun", k}, {"before", x}, {"after", y}});
  }
  out["luns"] = luns;

  // Findings by kind and side: gone, new, or in both. What BEFORE's report predicted: the latency
  // of its completed commands less the time the gone kinds cost them alone (exclusive_ms, counted
  // once), per command, against AFTER's latency per command.
  auto advice_key = [](const json& v) { return v.value("kind", "?") + " (" + v.value("side", "?") + ")"; };
  json findings = json::array();
  double gone_ms = 0;
  std::vector<std::string> gone_kinds;
  for (const auto& [k, rows] : paired((*a)["advice"], (*b)["advice"], advice_key)) {
    const auto& [x, y] = rows;
    const std::string status = x.is_null() ? "new" : y.is_null() ? "gone" : "both";
    if (status == "gone") {
      gone_ms += num(x, "exclusive_ms");
      gone_kinds.push_back(k);
    }
    // A kind that came on a tenth of AFTER's commands or more (and --min-commands): systematic, not
    // a few commands that crossed a threshold; connection-level kinds (serialized) are told only.
    if (status == "new" && num(y, "commands") >= std::max(min_commands, 0.1 * cb) && num(y, "commands") > 0)
      regressions.push_back(
          fmt::format("{}: new ({} commands, {} time lost)", k, num(y, "commands"), ms_text(num(y, "exclusive_ms"))));
    findings.push_back({{"finding", k}, {"status", status}, {"before", x}, {"after", y}});
  }
  out["findings"] = findings;
  const double la = num(*a, "latency_total_ms"), lb = num(*b, "latency_total_ms");
  json prediction;
  if (ca > 0 && cb > 0 && !gone_kinds.empty()) {
    const double predicted = (la - gone_ms) / ca, measured = lb / cb;
    prediction = {
        {"findings_gone", gone_kinds},
        {"latency_per_command_before_ms", la / ca},
        {"predicted_after_ms", predicted},
        {"measured_after_ms", measured},
        {"predicted_gain_ms", la / ca - predicted},
        {"measured_gain_ms", la / ca - measured},
        {"error_percent", la / ca - predicted > 0
                              ? 100.0 * ((la / ca - measured) - (la / ca - predicted)) / (la / ca - predicted)
                              : 0.0}};
  }
  out["prediction"] = prediction;
  out["regressions"] = regressions;
  out["gate"] = {{"requested", gate}, {"tripped", gate && !regressions.empty()}};

  std::string o;
  if (format == "json") {
    o = out.dump(1) + "\n";
  } else {
    o += fmt::format("BEFORE {}\nAFTER  {}\n", before, after);
    o += vantage["why"].is_null()
             ? fmt::format("both captured at the same point ({}): latencies compared as captured\n\n", pa)
             : vantage["why"].get<std::string>() + "\n\n";
    o +=
        fmt::format("commands {} -> {}, excess round trips per command {:.2f} -> {:.2f}\n\n", ca, cb, ea, eb);
    o += fmt::format("{:<24} {:>17} {:>21} {:>21} {:>9} {:>7}\n", "command class", "commands", "median",
                     "p90", "RT median", "median");
    for (const json& r : classes) {
      const json &x = r["before"], &y = r["after"];
      o +=
          fmt::format("{:<24} {:>17} {:>21} {:>21} {:>9} {:>7}\n", r["class"].get<std::string>(),
                      fmt::format("{} -> {}", num(x, "commands"), num(y, "commands")),
                      fmt::format("{} -> {}", ms_text(x.is_null() ? -1 : num(x, "median_ms")),
                                  ms_text(y.is_null() ? -1 : num(y, "median_ms"))),
                      fmt::format("{} -> {}", ms_text(x.is_null() ? -1 : num(x, "p90_ms")),
                                  ms_text(y.is_null() ? -1 : num(y, "p90_ms"))),
                      fmt::format("{:g} -> {:g}", num(x, "median_round_trips"), num(y, "median_round_trips")),
                      change(num(x, "median_ms"), num(y, "median_ms")));
    }
    o += fmt::format("\n{:<32} {:>17} {:>21} {:>21}\n", "logical unit", "commands", "p50", "p99");
    for (const json& r : luns) {
      const json &x = r["before"], &y = r["after"];
      o += fmt::format("{:<32} {:>17} {:>21} {:>21}\n", r["lun"].get<std::string>(),
                       fmt::format("{} -> {}", num(x, "commands"), num(y, "commands")),
                       fmt::format("{} -> {}", ms_text(x.is_null() ? -1 : num(x, "p50_ms")),
                                   ms_text(y.is_null() ? -1 : num(y, "p50_ms"))),
                       fmt::format("{} -> {}", ms_text(x.is_null() ? -1 : num(x, "p99_ms")),
                                   ms_text(y.is_null() ? -1 : num(y, "p99_ms"))));
    }
    o += "\nfindings (time lost, each millisecond once)\n";
    if (findings.empty()) o += "  none on either side\n";
    for (const json& f : findings) {
      const json &x = f["before"], &y = f["after"];
      // A connection-level finding (serialized) owns no command's time: its own figure is told.
      auto lost = [&](const json& v) {
        return v.is_null()               ? std::string("-")
               : num(v, "commands") == 0 ? ms_text(num(v, "lost_ms")) + " touched (connection level)"
                                         : ms_text(num(v, "exclusive_ms"));
      };
      o += fmt::format("  {:<28} {:<5} {} -> {}\n", f["finding"].get<std::string>(),
                       f["status"].get<std::string>(), lost(x), lost(y));
    }
    if (!prediction.is_null())
      o += fmt::format(
          "\npredicted by BEFORE's report, without {}: {} per command (from {}); measured in AFTER: {} "
          "(gain {} predicted, {} measured, {:+.0f}%)\n",
          join(gone_kinds, ", "), ms_text(prediction["predicted_after_ms"].get<double>()),
          ms_text(prediction["latency_per_command_before_ms"].get<double>()),
          ms_text(prediction["measured_after_ms"].get<double>()),
          signed_ms(prediction["predicted_gain_ms"].get<double>()),
          signed_ms(prediction["measured_gain_ms"].get<double>()), prediction["error_percent"].get<double>());
    o += regressions.empty() ? "\nregressions: none\n" : "\nregressions:\n";
    for (const std::string& r : regressions)
      o += "  " + r + "\n";
  }
  FILE* f = output.empty() ? stdout : std::fopen(output.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "iscsi-doctor diff: %s: cannot write: %s\n", output.c_str(), std::strerror(errno));
    return kExitUnusable;
  }
  std::fputs(o.c_str(), f);
  if (f != stdout) std::fclose(f);
  return gate && !regressions.empty() ? kExitGate : kExitClean;
}


}  // namespace

std::function<int()> add_diff_command(CLI::App& parent) {
  CLI::App& app = *parent.add_subcommand(
      "diff", "two captures (or two JSON reports of iscsi-doctor) compared, BEFORE -> AFTER (iscsi-doctor diff --help)");
  auto a = std::make_shared<DiffArgs>();
  app.add_option("BEFORE", a->before, "capture or JSON report (--format json) of the baseline")->required();
  app.add_option("AFTER", a->after, "capture or JSON report of the change")->required();
  app.add_option("--format", a->format, "text (default) or json")->check(CLI::IsMember({"text", "json"}));
  app.add_option("-o,--output", a->output, "write the comparison to FILE instead of standard output");
  app.add_flag(
      "--fail-on-regression", a->gate,
      "exit 1 when AFTER is worse: a command class's or LUN's median or p90/p99 latency up by more "
      "than --tolerance percent (and 0.5 ms), more excess round trips per command, or a finding kind "
      "on a side that BEFORE did not have, on a tenth of AFTER's commands or more");
  app.add_option("--tolerance", a->tolerance,
                 "percent a latency may grow before it is a regression (default 10)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option(
         "--min-commands", a->min_commands,
         "classes and LUNs with fewer commands on either side are shown but never a regression (default 5)")
      ->check(CLI::Range(0.0, 1e12));
  a->port_options.add_to(app);
  a->memory_options.add_to(app);
  return [a] { return run_diff(*a); };
}

}  // namespace iscsi_doctor::cli
