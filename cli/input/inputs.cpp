// SPDX-License-Identifier: GPL-2.0-or-later
// The captures the command line names (inputs.hpp).
#include "input/inputs.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "input/capture_reader.hpp"

namespace iscsi_doctor::cli {

namespace fs = std::filesystem;

std::vector<Input> expand_inputs(const std::vector<std::string>& args) {
  std::vector<Input> out;
  bool stdin_named = false;
  for (const std::string& arg : args) {
    std::error_code ec;
    if (arg == "-") {  // standard input can be read once
      out.push_back({arg, stdin_named ? "-: standard input named twice (it can be read once)" : ""});
      stdin_named = true;
      continue;
    }
    if (!fs::is_directory(arg, ec)) {
      out.push_back({arg, {}});
      continue;
    }
    std::vector<std::string> found;
    std::string walk_error;
    fs::recursive_directory_iterator it(arg, fs::directory_options::skip_permission_denied, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::error_code fec;
      if (!it->is_regular_file(fec)) continue;
      if (probe_file(it->path().string()).is_capture) found.push_back(it->path().string());
    }
    if (ec) walk_error = fmt::format("{}: {}", arg, ec.message());
    std::sort(found.begin(), found.end());
    for (auto& f : found)
      out.push_back({std::move(f), {}});
    if (found.empty())
      out.push_back({arg, walk_error.empty() ? fmt::format("{}: no capture files found in the directory", arg)
                                             : walk_error});
  }
  return out;
}

}  // namespace iscsi_doctor::cli
