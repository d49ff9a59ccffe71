// SPDX-License-Identifier: GPL-2.0-or-later
// The one pipeline every report goes through: inputs (files, and directories walked recursively
// for captures) -> read -> analyse (one Analyzer per capture, up to `jobs` captures at once) ->
// report (text, JSON, CSV, HTML or one command's ladder, in argument order whatever the jobs) ->
// the CI gate, evaluated once over the summary of all captures -> the exit code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "input/capture_reader.hpp"
#include "input/inputs.hpp"
#include "commands/filter.hpp"
#include "iscsi_doctor/analyzer.hpp"
#include "iscsi_doctor/summary.hpp"
#include "reports/report.hpp"

namespace iscsi_doctor::cli {

// Exit codes (docs/cli.md).
inline constexpr int kExitClean = 0;
inline constexpr int kExitGate = 1;
inline constexpr int kExitUnusable = 2;  // unusable input, or a usage error

struct PipelineOptions {
  std::vector<std::string> inputs;
  Options engine;
  Format format = Format::text;
  std::string output;  // empty: standard output (--html: the page's file)
  size_t jobs = 1;
  size_t worst = 10;
  WorstOrder worst_order = WorstOrder::excess;  // --sort
  bool quiet = false;
  bool verbose = false;  // -v: the text report's fuller per-connection detail
  DecoderChoice decoder = DecoderChoice::fast;
  std::vector<FindingKind> fail_on;
  std::optional<uint64_t> max_excess_round_trips;
  LadderSpec ladder;         // Format::ladder
  std::string findings_csv;  // Format::csv: the findings' CSV file, when asked for
  std::string junit;         // --junit: the JUnit XML file, when asked for
  CommandFilter filter;      // --lun, --op, ...: the commands the reports cover
  LiveCapture live;          // -i: a live capture instead of inputs (live.iface set)
  double interval_s = 0;     // --interval: a line (text) or record (jsonl) per this many seconds
  // --threads: 1 runs a capture in one thread; 2 or more read and decode it on a thread of their
  // own and format JSON on another; 0 (default): 2 with one job on a machine of two cores or more.
  size_t threads = 0;
};

// Runs the whole pipeline; messages go to stderr. Returns the exit code.
int run_pipeline(const PipelineOptions&);


}  // namespace iscsi_doctor::cli
