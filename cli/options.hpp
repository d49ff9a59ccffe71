// SPDX-License-Identifier: GPL-2.0-or-later
// Command-line pieces the main command and its subcommands (ladder, diff) share.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <optional>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "input/capture_reader.hpp"
#include "iscsi_doctor/analyzer.hpp"

namespace iscsi_doctor::cli {

// --port and --no-detect-ports.
struct PortOptions {
  std::vector<uint16_t> ports;
  bool no_detect = false;
  void add_to(CLI::App& app);
  void apply(Options& engine) const;
};

// --memory-budget: the peak memory the run aims at. What the process holds when the analysis starts
// (code, libraries) and a reserve for the reports' tables are taken first; each capture analysed at
// once (jobs) gets an equal share of the rest as its engine's budget (Options::memory_budget).
struct MemoryOptions {
  double mib = 64;
  static constexpr size_t kReserve = size_t(14) << 20, kLeastShare = size_t(16) << 20;
  void add_to(CLI::App& app);
  void apply(Options& engine, size_t jobs) const;
};

// --threads (PipelineOptions::threads).
void add_threads_option(CLI::App& app, size_t& threads);

// Parses; nullopt to go on, else the exit code: 0 after --help or --version, kExitUnusable (with
// the message and the usage hint printed) on an error.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

// An option naming one of a fixed set (--format, --decoder, --sort): CLI11 checks the name (its
// message and --help list the names in this order) and sets `target` to that name's value.
// (CLI::CheckedTransformer would also take the values' numbers, and prints a uint8_t enum as a char.)
template <typename E>
CLI::Option* add_choice(CLI::App& app, const std::string& flags, E& target,
                        std::vector<std::pair<std::string, E>> choices, const std::string& help) {
  std::vector<std::string> names;
  for (const auto& c : choices)
    names.push_back(c.first);
  return app
      .add_option_function<std::string>(
          flags,
          [&target, choices](const std::string& name) {
            for (const auto& [n, v] : choices)
              if (n == name) target = v;
          },
          help)
      ->check(CLI::IsMember(names));
}
// --decoder's names: fast, libtins.
std::vector<std::pair<std::string, DecoderChoice>> decoder_choices();

// An Initiator Task Tag as the reports print it ("0x0000002a"; any base strtoull reads).
std::optional<uint32_t> parse_itt(std::string_view text);

}  // namespace iscsi_doctor::cli
