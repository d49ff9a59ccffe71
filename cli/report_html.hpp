// SPDX-License-Identifier: GPL-2.0-or-later
// `iscsi-doctor --html FILE`: one self-contained HTML file (inline SVG and CSS, no script, nothing
// fetched) with the text report's findings and fixes, ladder diagrams of each finding kind's worst
// commands, latency histograms/CDFs per command class against 1-3 measured round trips, breakdown
// bars, queue depth and throughput over time, and the LBA access pattern.
//
// Per capture: a first pass runs the normal analysis and aggregates into fixed bins (charts) and
// a few picked commands (ladders); a second pass re-reads the file only up to the last picked
// command, keeping just those commands' segments. Memory and output size do not grow with the
// number of packets.
#pragma once

#include <string>

#include "batch.hpp"

namespace iscsi_doctor::cli {

// Writes the report to `path`; returns the exit code as run_batch would (gates included).
int run_html_report(const BatchOptions& opt, const std::string& path);

}  // namespace iscsi_doctor::cli
