// SPDX-License-Identifier: GPL-2.0-or-later
// The HTML report's charts, inline SVG from its aggregates (reports/html_aggregates.hpp): latency
// histogram and CDF per command class, time breakdown bars, queue depth and throughput over time,
// LBA gaps and the LBA scatter.
#pragma once

#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "drawing/svg.hpp"
#include "iscsi_doctor/summary.hpp"
#include "reports/html_aggregates.hpp"

namespace iscsi_doctor::cli::html {

using Out = std::string;

template <typename... Args>
void put(Out& o, fmt::format_string<Args...> f, Args&&... args) {
  fmt::format_to(std::back_inserter(o), f, std::forward<Args>(args)...);
}

// Latency histogram (bars) and CDF (line) on a log axis, with 1-3 round trips marked.
void latency_chart(Out& o, const std::string& id, char kind, uint32_t bytes, const ClassAgg& k,
                   const ClassStats* st, double rtt_ms);
void breakdown_chart(Out& o, const std::string& id,
                     const std::vector<std::pair<std::pair<char, uint32_t>, const ClassAgg*>>& rows);
// rate_mbs: the path's rate each way as the connections' ACKs showed it (docs/rules.md "The link"),
// read (to the initiator) then write, MB/s; 0: none measured.
void timeline_chart(Out& o, const std::string& id, const svg::TimeBins& tb, const double (&rate_mbs)[2]);
void gap_chart(Out& o, const std::string& id, const Aggregates& a);
void scatter_chart(Out& o, const std::string& id, const Aggregates& a, int64_t duration_ns);

}  // namespace iscsi_doctor::cli::html
