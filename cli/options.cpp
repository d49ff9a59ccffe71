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
  // 0x-prefixed hex or decimal, digits only (strtoull alone would take a leading 0 as octal, and
  // signs and spaces)
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const std::string digits(hex ? text.substr(2) : text);
  const char* allowed = hex ? "0123456789abcdefABCDEF" : "0123456789";
  if (digits.empty() || digits.find_first_not_of(allowed) != std::string::npos) return std::nullopt;
  errno = 0;
  const unsigned long long v = std::strtoull(digits.c_str(), nullptr, hex ? 16 : 10);
  if (errno || v > 0xffffffffull) return std::nullopt;
  return uint32_t(v);
}

}  // namespace iscsi_doctor::cli
