// SPDX-License-Identifier: GPL-2.0-or-later
// --junit FILE: the run as JUnit XML (the Ant/Jenkins schema that CI systems display): a test case
// per gate check, and per capture one per finding kind and side, whose failure text is the fix
// and the evidence frames. Written beside the report of any format; exit codes are unchanged.
#include "reports/report_junit.hpp"
#include "reports/root_causes.hpp"

#include <cstdio>
#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "reports/formatting.hpp"
#include "drawing/svg.hpp"

namespace iscsi_doctor::cli {
namespace {

using svg::esc;  // XML text and attribute values, as the HTML report and the ladders write them

struct Case {
  Case(std::string c, std::string n) : classname(std::move(c)), name(std::move(n)) {}
  std::string classname, name;
  enum class Outcome { pass, failure, error } outcome = Outcome::pass;
  std::string type, message, text;  // of the failure or error
  std::string out;                  // system-out of a passing case
};

void write_suite(std::string& o, std::string_view name, const std::vector<Case>& cases) {
  size_t failures = 0, errors = 0;
  for (const Case& c : cases) {
    failures += c.outcome == Case::Outcome::failure;
    errors += c.outcome == Case::Outcome::error;
  }
  o += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\">\n",
                   esc(name), cases.size(), failures, errors);
  for (const Case& c : cases) {
    o += fmt::format("    <testcase classname=\"{}\" name=\"{}\"", esc(c.classname), esc(c.name));
    if (c.outcome == Case::Outcome::pass && c.out.empty()) {
      o += "/>\n";
      continue;
    }
    o += ">\n";
    if (c.outcome != Case::Outcome::pass)
      o += fmt::format("      <{} type=\"{}\" message=\"{}\">{}</{}>\n",
                       c.outcome == Case::Outcome::failure ? "failure" : "error", esc(c.type), esc(c.message),
                       esc(c.text), c.outcome == Case::Outcome::failure ? "failure" : "error");
    if (!c.out.empty()) o += fmt::format("      <system-out>{}</system-out>\n", esc(c.out));
    o += "    </testcase>\n";
  }
  o += "  </testsuite>\n";
}

// A finding kind on one side, in words: what it cost, the fix, the evidence.
std::string advice_text(const Advice& a) {
  std::string t = fmt::format("fix: {}\nevidence frames: {}", a.fix, frames_text(a.example_frames));
  if (!a.detail.empty()) t += "\ndetail: " + a.detail;
  if (!a.note.empty()) t += "\nnote: " + a.note;
  if (!a.inferred.empty()) t += "\ninferred (not in the capture): " + join(a.inferred, ", ");
  return t;
}

}  // namespace

JunitCapture junit_capture(const CaptureResult& r) {
  JunitCapture c;
  c.path = r.path;
  c.usable = r.usable;
  c.error = r.error;
  if (r.summary) {
    c.commands = r.summary->commands();
    c.advice = r.summary->advice();
    if (r.root_causes) {  // no disk advice for a device's mechanical work (#27)
      const auto roots = r.root_causes->ranked(vantage_of(r).floor_ms());
      for (Advice& a : c.advice)
        a.fix = device_fix(a.kind, a.fix, roots);
    }
  }
  return c;
}

bool write_junit(const std::string& file, const std::vector<JunitCapture>& captures, const GateResult& gate,
                 const Summary* all, std::string& error) {
  std::string o = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  std::vector<std::pair<std::string, std::vector<Case>>> suites;

  if (gate.requested) {
    std::vector<Case> cases;
    const auto counts = all ? all->finding_counts() : std::array<uint64_t, finding_kind_count>{};
    auto unevaluable = [&](Case& c) {
      c.outcome = Case::Outcome::error;
      c.type = "unevaluable";
      c.message = "the gate cannot be evaluated: no SCSI command found in the input";
    };
    for (const std::string& kind : gate.fail_on) {
      Case c{"iscsi-doctor.gate", "--fail-on " + kind};
      const auto k = finding_from_name(kind);
      if (gate.unevaluable) {
        unevaluable(c);
      } else if (k && counts[size_t(*k)]) {
        c.outcome = Case::Outcome::failure;
        c.type = "fail-on";
        c.message = fmt::format("{}: {} found", kind, counts[size_t(*k)]);
        c.text = "the findings of this kind are in the capture test cases";
      }
      cases.push_back(std::move(c));
    }
    if (gate.max_excess_round_trips) {
      Case c{"iscsi-doctor.gate", fmt::format("--max-excess-round-trips {}", *gate.max_excess_round_trips)};
      if (gate.unevaluable) {
        unevaluable(c);
      } else if (all && all->excess_round_trips() > *gate.max_excess_round_trips) {
        c.outcome = Case::Outcome::failure;
        c.type = "max-excess-round-trips";
        c.message = fmt::format("{} excess round trips > {}", all->excess_round_trips(),
                                *gate.max_excess_round_trips);
      } else if (all) {
        c.out = fmt::format("{} excess round trips", all->excess_round_trips());
      }
      cases.push_back(std::move(c));
    }
    suites.emplace_back("gate", std::move(cases));
  }

  for (const JunitCapture& cap : captures) {
    std::vector<Case> cases;
    const std::string classname = "iscsi-doctor.findings";
    if (!cap.usable) {
      Case c{classname, "capture readable"};
      c.outcome = Case::Outcome::error;
      c.type = "unusable";
      c.message = cap.error;
      cases.push_back(std::move(c));
      suites.emplace_back(cap.path, std::move(cases));
      continue;
    }
    for (size_t k = 0; k < finding_kind_count; ++k)
      for (Side side : {Side::initiator, Side::target, Side::network}) {
        // The path's own kind has the network side only; the peers' kinds have theirs.
        if ((side == Side::network) != (FindingKind(k) == FindingKind::link_limited)) continue;
        Case c{classname, fmt::format("{} ({})", finding_name(FindingKind(k)), side_name(side))};
        for (const Advice& a : cap.advice) {
          if (size_t(a.kind) != k || a.side != side) continue;
          const std::string what =
              a.commands ? fmt::format("{}: {} commands, {} time lost ({} touched)", finding_name(a.kind),
                                       a.commands, ms_text(a.exclusive_ms), ms_text(a.lost_ms))
                         : fmt::format("{}: {} touched (connection level)", finding_name(a.kind),
                                       ms_text(a.lost_ms));
          // With --fail-on, the kinds it names fail their case; without, every kind but serialized
          // and link_limited (the workload's queue depth, the link's rate: neither peer's code can
          // change them) and the questions the capture leaves open, think_or_hold (the target's
          // time or a hold) and think_or_network (the target's time or the round trip).
          bool gated = gate.fail_on.empty() && a.kind != FindingKind::serialized &&
                       a.kind != FindingKind::link_limited && a.kind != FindingKind::think_or_hold &&
                       !finding_kind(a.kind).side_unsure;
          for (const std::string& g : gate.fail_on)
            gated = gated || g == finding_name(a.kind);
          if (gated) {
            c.outcome = Case::Outcome::failure;
            c.type = std::string(finding_name(a.kind));
            c.message = what;
            c.text = advice_text(a);
          } else {
            c.out = what + (gate.fail_on.empty() ? "" : " (not named by --fail-on)") + "\n" + advice_text(a);
          }
        }
        cases.push_back(std::move(c));
      }
    suites.emplace_back(cap.path, std::move(cases));
  }

  size_t tests = 0, failures = 0, errors = 0;
  for (const auto& [name, cases] : suites)
    for (const Case& c : cases) {
      ++tests;
      failures += c.outcome == Case::Outcome::failure;
      errors += c.outcome == Case::Outcome::error;
    }
  o += fmt::format("<testsuites name=\"iscsi-doctor\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n", tests,
                   failures, errors);
  for (const auto& [name, cases] : suites)
    write_suite(o, name, cases);
  o += "</testsuites>\n";

  std::ofstream f(file, std::ios::binary | std::ios::trunc);
  if (f) f << o;
  if (!f) {
    error = fmt::format("{}: cannot write the JUnit report", file);
    return false;
  }
  return true;
}

}  // namespace iscsi_doctor::cli
