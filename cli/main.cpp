// SPDX-License-Identifier: GPL-2.0-or-later
// iscsi-doctor: explains, per SCSI command in an iSCSI capture, why it was slow.
// This file only turns the command line into PipelineOptions (docs/cli.md); commands/analyse.cpp does the rest.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "commands/diff.hpp"
#include "commands/ladder.hpp"
#include "options.hpp"
#include "commands/analyse.hpp"
#include "commands/probe.hpp"
#include "input/wiretap_reader.hpp"

using namespace iscsi_doctor;
using namespace iscsi_doctor::cli;

namespace {

std::string kind_list() {
  std::string s;
  for (size_t i = 0; i < finding_kind_count; ++i)
    s += fmt::format("{}{}", i ? ", " : "", finding_name(FindingKind(i)));
  return s;
}

}  // namespace

namespace {

int report_main(int argc, char** argv) {
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

  PipelineOptions opt;
  std::vector<std::string> fail_on;
  PortOptions port_options;
  MemoryOptions memory_options;
  double delayed_ack_ms = opt.engine.delayed_ack_min_ms;
  uint64_t max_excess = 0;

  app.add_option("CAPTURE", opt.inputs,
                 "pcap or pcapng files, compressed (gzip, xz, zstd, lz4, bzip2) or not, directories "
                 "(searched recursively), or - for standard input (a pipe: tcpdump -U -w - ... | "
                 "iscsi-doctor -)");
  std::vector<std::string> read_opt;
  app.add_option("-r,--read", read_opt,
                 "a capture to read, as tshark's -r (the same as naming it; repeatable)")
      ->allow_extra_args(false);
  auto* live_opt = app.add_option("-i,--interface", opt.live.iface,
                                  "capture live on this interface with libpcap (root or CAP_NET_RAW) until "
                                  "Ctrl-C, --duration or --count, then report")
                       ->group("Live capture");
  app.add_option("-f,--capture-filter", opt.live.filter,
                 "with -i: a BPF capture filter (as tcpdump's and tshark's -f), and-ed with iscsi-doctor's own "
                 "(tcp, or tcp on the --port ports)")
      ->needs(live_opt)
      ->group("Live capture");
  bool list_interfaces = false;
  app.add_flag("-D,--list-interfaces", list_interfaces,
               "list the interfaces -i can capture on, as tshark -D, and exit")
      ->group("Live capture");
  app.add_option("--duration", opt.live.duration_s, "with -i: stop after this many seconds")
      ->check(CLI::Range(0.001, 1e9))
      ->needs(live_opt)
      ->group("Live capture");
  app.add_option("-c,--count", opt.live.count,
                 "stop after this many packets: with -i, of the live capture; else of each file (as tshark -c)")
      ->check(CLI::PositiveNumber)
      ->group("Live capture");
  app.add_option("-w,--write", opt.live.write_path,
                 "with -i: also keep every packet captured in this pcap file")
      ->needs(live_opt)
      ->group("Live capture");
  app.add_option(
         "--interval", opt.interval_s,
         "also a line per S seconds of capture time (live: as they pass) as it ends: commands, IOPS, MB/s, "
         "latency p50/p99/max, excess round trips, new findings (text; a record in --format jsonl)")
      ->check(CLI::Range(0.001, 1e9));
  app.add_option("--buffer", opt.live.buffer_mib,
                 "with -i: the kernel's capture buffer in MiB (default 64; drops are reported)")
      ->check(CLI::Range(1, 4096))
      ->needs(live_opt)
      ->group("Live capture");
  auto* format_opt = add_choice(
      app, "--format", opt.format,
      {{"text", Format::text}, {"json", Format::json}, {"jsonl", Format::jsonl}, {"csv", Format::csv},
       {"verdict", Format::verdict}},
      "report format: text (default), json, jsonl (JSON Lines: a record per command and finding as they "
      "come, then per session, capture and run), csv, or verdict (one line per capture and the gate's, "
      "for "
      "CI logs)");
  auto* output_opt =
      app.add_option("-o,--output", opt.output, "write the report to FILE instead of standard output");
  app.add_option(
      "--junit", opt.junit,
      "also write the run as JUnit XML to FILE, for CI systems: a test case per gate check and, per "
      "capture, per finding kind and side (its failure text: the fix and evidence frames)");
  std::vector<uint64_t> luns;
  std::vector<std::string> itts;
  double min_latency = 0;
  app.add_option("--lun", luns, "only commands to these LUNs (repeatable or comma-separated)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->group("Filters");
  app.add_option("--initiator", opt.filter.initiators,
                 "only commands of connections from this initiator: ADDR or ADDR:PORT (repeatable)")
      ->allow_extra_args(false)
      ->group("Filters");
  app.add_option("--target", opt.filter.targets,
                 "only commands of connections to this target: ADDR or ADDR:PORT (repeatable)")
      ->allow_extra_args(false)
      ->group("Filters");
  app.add_option("--op", opt.filter.ops,
                 "only these commands: read, write, other, or a SCSI operation as the reports name it "
                 "(READ(10), INQUIRY; any case); repeatable or comma-separated")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->group("Filters");
  auto* min_latency_opt =
      app.add_option("--min-latency", min_latency, "only completed commands at least MS slow")
          ->check(CLI::Range(0.0, 1e12))
          ->group("Filters");
  std::string from_text, to_text;
  app.add_option("--from", from_text,
                 "only commands that began at or after T: seconds from the capture's first packet, or "
                 "YYYY-MM-DDTHH:MM:SS[.frac][Z] (UTC)")
      ->group("Filters");
  app.add_option("--to", to_text, "only commands that began before T (as --from)")->group("Filters");
  app.add_option("--itt", itts,
                 "only the commands with this Initiator Task Tag: 0x-prefixed hex as the reports print "
                 "it, or decimal (repeatable or comma-separated)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->group("Filters");
  app.add_option("--findings-csv", opt.findings_csv,
                 "with --format csv: also write one row per finding to FILE (kind, side, frames, time lost, "
                 "command, inferred facts, detail)");
  std::string html;
  app.add_option("--html", html,
                 "write a self-contained HTML report (ladder diagrams, latency plots) to FILE instead of "
                 "the text/JSON/CSV report")
      ->excludes(output_opt)
      ->excludes(format_opt);
  port_options.add_to(app);
  auto* fail_on_opt =
      app.add_option("--fail-on", fail_on,
                     "exit 1 if any finding of these kinds occurs (comma-separated: " + kind_list() + ")")
          ->delimiter(',')
          ->allow_extra_args(false);
  auto* excess_opt =
      app.add_option("--max-excess-round-trips", max_excess,
                     "exit 1 if the round trips taken beyond the ideal, summed over all commands, exceed N");
  app.add_option("--delayed-ack-ms", delayed_ack_ms,
                 "an ACK later than this beyond the RTT counts as delayed (default 10)")
      ->check(CLI::Range(0.001, 1e6).description("a number of milliseconds above 0"));
  // Caps (memory stays bounded whatever the capture holds); hitting one is reported as an error notice.
  memory_options.add_to(app);
  app.add_option("--max-connections", opt.engine.max_connections,
                 "connections open at once per capture (default 65536); closed ones are reported and freed")
      ->check(CLI::PositiveNumber);
  app.add_option(
         "--idle-timeout", opt.engine.idle_timeout_s,
         "at the connection cap, connections idle this many seconds are reported and freed (default 60)")
      ->check(CLI::Range(0.001, 1e9));
  app.add_option("--max-open-commands", opt.engine.max_open_commands,
                 "commands awaiting their status per connection (default 65536)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-reorder-bytes", opt.engine.max_out_of_order_bytes,
                 "out-of-order bytes held per direction before a hole is declared lost (default 4 MiB)")
      ->check(CLI::PositiveNumber);
  app.add_option("-j,--jobs", opt.jobs,
                 "captures analysed in parallel (default 1); output stays in argument order")
      ->check(CLI::Range(size_t(1), size_t(1024)));
  add_threads_option(app, opt.threads);
  app.add_option("--worst", opt.worst, "how many of the worst commands the text report lists (default 10)")
      ->check(CLI::Range(size_t(0), size_t(1000000)));
  add_choice(app, "--sort", opt.worst_order, {{"excess", WorstOrder::excess}, {"latency", WorstOrder::latency}},
             "order of the worst commands the reports list: excess (round trips beyond the ideal, then "
             "latency; default) or latency");
  app.add_flag("-q,--quiet", opt.quiet, "no progress and no notices on standard error, only errors");
  app.add_flag("-v,--verbose", opt.verbose,
               "text report: every fact kept of each connection (window scales, where each round trip and "
               "rate came from, digests, the initiator's latency offset) in its block under Connections");
  add_choice(app, "--decoder", opt.decoder, decoder_choices(),
             "packet decoder: fast (default) or libtins (slower; for cross-checking)");
  app.set_version_flag("--version", std::string("iscsi-doctor ") + ISCSI_DOCTOR_VERSION +
                                        (wiretap_available() ? " (libwiretap " + wiretap_version() + ")" : ""));

  if (const auto code = parse_command_line(app, argc, argv)) return *code;
  if (list_interfaces) {
    try {
      for (const std::string& line : capture_interfaces())
        std::printf("%s\n", line.c_str());
    } catch (const CaptureError& e) {
      std::fprintf(stderr, "iscsi-doctor: %s\n", e.what());
      return kExitUnusable;
    }
    return 0;
  }

  opt.inputs.insert(opt.inputs.begin(), read_opt.begin(), read_opt.end());
  if (!opt.live.iface.empty() && !opt.inputs.empty()) {
    std::fprintf(stderr, "iscsi-doctor: -i captures live: name no capture file with it\n");
    return kExitUnusable;
  }
  opt.filter.luns.insert(luns.begin(), luns.end());
  for (auto [text, bound] : {std::pair{&from_text, &opt.filter.from}, std::pair{&to_text, &opt.filter.to}}) {
    if (text->empty()) continue;
    CommandFilter::Bound b;
    if (!parse_time_bound(*text, b)) {
      std::fprintf(stderr,
                   "iscsi-doctor: --from/--to: '%s' is neither seconds from the capture's start nor "
                   "YYYY-MM-DDTHH:MM:SS[.frac][Z]\n",
                   text->c_str());
      return kExitUnusable;
    }
    *bound = b;
  }
  if (*min_latency_opt) opt.filter.min_latency_ms = min_latency;
  for (const std::string& t : itts) {
    const auto itt = parse_itt(t);
    if (!itt) {
      std::fprintf(stderr, "iscsi-doctor: --itt: not a 32-bit number: '%s'\n", t.c_str());
      return kExitUnusable;
    }
    opt.filter.itts.insert(*itt);
  }
  if (opt.inputs.empty() && opt.live.iface.empty()) {
    std::fprintf(stderr,
                 "iscsi-doctor: no capture given: name a file, a directory, - for standard input, or -i "
                 "IFACE\n"
                 "Run with --help for more information.\n");
    return kExitUnusable;
  }
  port_options.apply(opt.engine);
  memory_options.apply(opt.engine, std::min(opt.jobs, std::max<size_t>(opt.inputs.size(), 1)));
  opt.live.ports = opt.engine.ports;
  opt.live.detect_ports = opt.engine.detect_ports;
  opt.engine.delayed_ack_min_ms = delayed_ack_ms;
  if (*excess_opt) opt.max_excess_round_trips = max_excess;
  if (*fail_on_opt) {
    for (const std::string& name : fail_on) {
      const auto kind = finding_from_name(name);
      if (!kind) {
        std::fprintf(stderr, "iscsi-doctor: --fail-on: unknown finding kind '%s' (known: %s)\n", name.c_str(),
                     kind_list().c_str());
        return kExitUnusable;
      }
      opt.fail_on.push_back(*kind);
    }
  }
  if (opt.interval_s > 0 && ((opt.format != Format::text && opt.format != Format::jsonl) || !html.empty())) {
    std::fprintf(stderr, "iscsi-doctor: --interval goes with the text report or --format jsonl\n");
    return kExitUnusable;
  }
  if (opt.interval_s > 0 && opt.jobs > 1) {
    std::fprintf(stderr, "iscsi-doctor: --interval writes as captures are read: one at a time (no -j)\n");
    return kExitUnusable;
  }
  if (!opt.findings_csv.empty() && opt.format != Format::csv) {
    std::fprintf(stderr, "iscsi-doctor: --findings-csv goes with --format csv\n");
    return kExitUnusable;
  }
  if (!html.empty()) {  // --format and -o are refused with it (CLI11: excludes)
    opt.format = Format::html;
    opt.output = html;
    if (!opt.live.iface.empty() && opt.live.write_path.empty()) {
      std::fprintf(stderr, "iscsi-doctor: --html reads the capture twice: with -i, keep it with -w FILE\n");
      return kExitUnusable;
    }
  }
  return run_pipeline(opt);
}

}  // namespace

// `iscsi-doctor -q ladder ...`: options given before a subcommand's name go after it, where the
// subcommand reads them. Only when all of them begin with '-' (a flag, or --name=value: a value in
// its own word could be a capture named like a subcommand) and no file has that name.
static void subcommand_first(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (a == "ladder" || a == "diff" || a == "probe") {
      std::error_code ec;
      if (i == 1 || std::filesystem::exists(argv[i], ec)) return;
      std::rotate(argv + 1, argv + i, argv + i + 1);
      return;
    }
    if (a.empty() || a[0] != '-' || a == "-" || a == "--") return;
  }
}

int main(int argc, char** argv) {
  subcommand_first(argc, argv);
  // `iscsi-doctor ladder ...`: one command's diagram (ladder.cpp has its own options).
  if (argc > 1 && std::string_view(argv[1]) == "ladder") return ladder_main(argc - 1, argv + 1);
  // `iscsi-doctor diff BEFORE AFTER`: two captures or reports compared (diff.cpp).
  if (argc > 1 && std::string_view(argv[1]) == "diff") return diff_main(argc - 1, argv + 1);
  // `iscsi-doctor probe iscsi://...`: a target checked live, reported as a capture (probe.cpp).
  if (argc > 1 && std::string_view(argv[1]) == "probe") return probe_main(argc - 1, argv + 1, report_main);
  return report_main(argc, argv);
}
