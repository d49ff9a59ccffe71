// SPDX-License-Identifier: GPL-2.0-or-later
#include "options.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands/analyse.hpp"

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

void MemoryOptions::add_to(CLI::App& app) {
  app.add_option("--memory-budget", mib,
                 "MiB the run aims to stay within, the program's own included (default 64; 0: no budget): "
                 "ended connections are freed as soon as their results are final, and when it is short "
                 "connections are finished early (ended, then idle, then busy ones), counted and said")
      ->check(CLI::Range(0.0, 1e7));
}

void add_threads_option(CLI::App& app, size_t& threads) {
  app.add_option("--threads", threads,
                 "threads per capture: 1 runs each capture in one thread; 2 or more read and decode on one, "
                 "analyse on another and format JSON on a third (default: 2 with one job and two cores or "
                 "more, three for JSON); unless 1, a pcap file's bytes are read ahead on a thread of their "
                 "own; the output is identical")
      ->check(CLI::Range(size_t(1), size_t(1024)));
}

// Resident bytes now (0 if unknown).
static size_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long pages = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &pages, &resident);
  std::fclose(f);
  return n == 2 ? size_t(resident) * size_t(sysconf(_SC_PAGESIZE)) : 0;
}

void MemoryOptions::apply(Options& engine, size_t jobs) const {
  const size_t total = size_t(mib * double(1 << 20));
  if (!total) {
    engine.memory_budget = 0;
    return;
  }
  const size_t taken = resident_bytes() + kReserve;
  const size_t rest = total > taken ? total - taken : 0;
  engine.memory_budget = std::max(rest / std::max<size_t>(jobs, 1), std::min(total, kLeastShare));
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

std::vector<std::pair<std::string, DecoderChoice>> decoder_choices() {
  return {{"fast", DecoderChoice::fast}, {"libtins", DecoderChoice::libtins}};
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
