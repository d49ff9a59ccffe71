// SPDX-License-Identifier: GPL-2.0-or-later
// The text report's parts shared by its files: line layout, and the Connections section
// (text_connections.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reports/report.hpp"

namespace iscsi_doctor::cli::text {

constexpr size_t kLineWidth = 100;

// Words laid out in lines of at most kLineWidth columns, each line starting with `indent`.
void wrap(std::string& out, const std::vector<std::string>& words, std::string_view indent);
std::string plural(uint64_t n, std::string_view one, std::string_view many);  // "1 command", "2 commands"
// Connections: each session and its connections' facts (with verbose, all of them: -v).
void write_sessions(std::string& o, const CaptureResult& r, bool verbose);

}  // namespace iscsi_doctor::cli::text
