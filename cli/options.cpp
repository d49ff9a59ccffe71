// SPDX-License-Identifier: GPL-2.0-or-later
#include "options.hpp"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "pipeline.hpp"

namespace iscsi_doctor::cli {

void PortOptions::add_to(CLI::App& app) {
  app.add_option("--port", ports, "iSCSI target port (repeatable or comma-separated; default 3260)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(CLI::Range(1, 65535));
  app.add_flag("--no-detect-ports", no_detect,
               "only follow the --port ports; do not detect iSCSI on other ports");
}

void PortOptions::apply(Options& engine) const {
  if (!ports.empty()) engine.ports = ports;
  engine.detect_ports = !no_detect;
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version come here too, with exit code 0
    return app.exit(e) == 0 ? 0 : kExitUnusable;
  }
  return std::nullopt;
}

std::optional<uint32_t> parse_itt(std::string_view text) {
  const std::string t(text);
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(t.c_str(), &end, 0);
  if (t.empty() || *end || errno || v > 0xffffffffull || t.front() == '-') return std::nullopt;
  return uint32_t(v);
}

}  // namespace iscsi_doctor::cli
