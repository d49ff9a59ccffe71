// SPDX-License-Identifier: GPL-2.0-or-later
// iscsi-doctor: explains, per SCSI command in an iSCSI capture, why it was slow.
// This file only builds the command line (docs/cli.md): the plain command's options
// (commands/report_command.*) on the top level and the subcommands ladder, diff and probe, each
// with its own options (commands/*.cpp); CLI11 parses it and the chosen one runs.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "commands/diff.hpp"
#include "commands/ladder.hpp"
#include "commands/probe.hpp"
#include "commands/report_command.hpp"
#include "input/wiretap_reader.hpp"
#include "options.hpp"

using namespace iscsi_doctor;
using namespace iscsi_doctor::cli;

namespace {

constexpr std::string_view kSubcommands[] = {"ladder", "diff", "probe"};

bool is_subcommand(std::string_view a) {
  return std::find(std::begin(kSubcommands), std::end(kSubcommands), a) != std::end(kSubcommands);
}

// `iscsi-doctor -q ladder ...`: options given before a subcommand's name go after it, where the
// subcommand reads them. Only when all of them begin with '-' (a flag, or --name=value: a value in
// its own word could be a capture named like a subcommand) and no file has that name.
void subcommand_first(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (is_subcommand(a)) {
      std::error_code ec;
      if (i == 1 || std::filesystem::exists(argv[i], ec)) return;
      std::rotate(argv + 1, argv + i, argv + i + 1);
      return;
    }
    if (a.empty() || a[0] != '-' || a == "-" || a == "--") return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  subcommand_first(argc, argv);
  CLI::App app{
      "iscsi-doctor: explains, per SCSI command in an iSCSI capture, why it was slow\n"
      "(Nagle holds, delayed ACKs, R2T round trips, window stalls, loss, slow targets).",
      "iscsi-doctor"};
  app.footer(
      "One command's exchange as a ladder diagram (SVG): iscsi-doctor ladder --itt 0x... CAPTURE -o out.svg\n"
      "(iscsi-doctor ladder --help). Before/after: iscsi-doctor diff BEFORE AFTER (iscsi-doctor diff "
      "--help).\n"
      "A target checked live: iscsi-doctor probe iscsi://HOST/IQN/LUN [REPORT OPTIONS] (iscsi-doctor probe "
      "--help).\n"
      "Documentation: man iscsi-doctor, docs/cli.md.");
  app.get_formatter()->column_width(34);


  ReportCommand report;
  report.add_to(app);
  const std::function<int()> subcommands[] = {add_ladder_command(app), add_diff_command(app),
                                             add_probe_command(app, report)};
  app.set_version_flag("--version", std::string("iscsi-doctor ") + ISCSI_DOCTOR_VERSION +
                                        (wiretap_built() ? " (libwiretap " + wiretap_version() + ")" : ""));


  if (const auto code = parse_command_line(app, argc, argv)) return *code;
  for (size_t i = 0; i < std::size(kSubcommands); ++i) {
    if (!app.got_subcommand(std::string(kSubcommands[i]))) continue;
    if (const std::string capture = report.named_capture(); !capture.empty()) {
      const std::string sub(kSubcommands[i]);
      if (std::string_view(argv[1]) == sub)  // `iscsi-doctor probe URL a.pcap`: probe reads its own capture
        std::fprintf(stderr, "iscsi-doctor %s: unexpected argument '%s'\n", sub.c_str(), capture.c_str());
      else  // `iscsi-doctor a.pcap diff ...`: a capture named like a subcommand?
        std::fprintf(stderr, "iscsi-doctor: '%s' is a subcommand: give it first, or name a capture called so as ./%s\n",
                     sub.c_str(), sub.c_str());
      return kExitUnusable;
    }
    return subcommands[i]();
  }
  return report.run();
}
