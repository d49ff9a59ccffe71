// SPDX-License-Identifier: GPL-2.0-or-later
// A capture's sessions with their connections (docs/json-schema.md "sessions"), written as text
// directly: a capture of many short connections has thousands, and building them as nlohmann
// objects first cost as much as a tenth of the analysis. The text is what nlohmann's dump would
// write for them (keys in sorted order, its number and string forms).
#pragma once

#include <string>

#include "reports/out_buf.hpp"
#include "reports/report.hpp"

namespace iscsi_doctor::cli {

struct SessionsStyle {
  // JSON Lines: each session a `"type":"session"` record with the capture's path, one per line.
  const std::string* jsonl_path = nullptr;
};

// Each session as one object, with its `capture` (r.index), appended to `out`; in JSON, which
// `out` holds the sessions of, a comma before each unless `out` is empty.
void write_sessions(OutBuf& out, const CaptureResult& r, const SessionsStyle& style);

// A string as nlohmann's dump writes it (error_handler_t::replace, no ASCII escapes).
void write_dumped_string(OutBuf& out, std::string_view s);
// A double as nlohmann's dump writes it (null when not finite).
void write_dumped_double(OutBuf& out, double v);

}  // namespace iscsi_doctor::cli
