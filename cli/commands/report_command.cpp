// SPDX-License-Identifier: GPL-2.0-or-later
// The plain command's options and checks (report_command.hpp).
#include "commands/report_command.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "input/capture_reader.hpp"

namespace iscsi_doctor::cli {

namespace {

std::string kind_list() {
  std::string s;
  for (size_t i = 0; i < finding_kind_count; ++i)
    s += fmt::format("{}{}", i ? ", " : "", finding_name(FindingKind(i)));
  return s;
}

}  // namespace

void ReportCommand::add_to(CLI::App& app) {

  app.add_option("CAPTURE", opt.inputs,
                 "pcap or pcapng files, compressed (gzip, xz, zstd, lz4, bzip2) or not, directories "
                 "(searched recursively), or - for standard input (a pipe: tcpdump -U -w - ... | "
                 "iscsi-doctor -)");
  app.add_option("-r,--read", read_opt_,
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
  app.add_flag("-D,--list-interfaces", list_interfaces_,
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
  app.add_option("--lun", luns_, "only commands to these LUNs (repeatable or comma-separated)")
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
  min_latency_opt_ =
      app.add_option("--min-latency", min_latency_, "only completed commands at least MS slow")
          ->check(CLI::Range(0.0, 1e12))
          ->group("Filters");
  app.add_option("--from", from_text_,
                 "only commands that began at or after T: seconds from the capture's first packet, or "
                 "YYYY-MM-DDTHH:MM:SS[.frac][Z] (UTC)")
      ->group("Filters");
  app.add_option("--to", to_text_, "only commands that began before T (as --from)")->group("Filters");
  app.add_option("--itt", itts_,
                 "only the commands with this Initiator Task Tag: 0x-prefixed hex as the reports print "
                 "it, or decimal (repeatable or comma-separated)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->group("Filters");
  app.add_option("--findings-csv", opt.findings_csv,
                 "with --format csv: also write one row per finding to FILE (kind, side, frames, time lost, "
                 "command, inferred facts, detail)");
  app.add_option("--html", html_,
                 "write a self-contained HTML report (ladder diagrams, latency plots) to FILE instead of "
                 "the text/JSON/CSV report")
      ->excludes(output_opt)
      ->excludes(format_opt);
  port_options.add_to(app);
  port_opt_ = app.get_option("--port");
  fail_on_opt_ =
      app.add_option("--fail-on", fail_on_,
                     "exit 1 if any finding of these kinds occurs (comma-separated: " + kind_list() + ")")
          ->delimiter(',')
          ->allow_extra_args(false);
  excess_opt_ =
      app.add_option("--max-excess-round-trips", max_excess_,
                     "exit 1 if the round trips taken beyond the ideal, summed over all commands, exceed N");
  app.add_option("--delayed-ack-ms", delayed_ack_ms_,
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
}

int ReportCommand::run() {
  if (list_interfaces_) {
    try {
      for (const std::string& line : capture_interfaces())
        std::printf("%s\n", line.c_str());
    } catch (const CaptureError& e) {
      std::fprintf(stderr, "iscsi-doctor: %s\n", e.what());
      return kExitUnusable;
    }
    return 0;
  }

  opt.inputs.insert(opt.inputs.begin(), read_opt_.begin(), read_opt_.end());
  if (!opt.live.iface.empty() && !opt.inputs.empty()) {
    std::fprintf(stderr, "iscsi-doctor: -i captures live: name no capture file with it\n");
    return kExitUnusable;
  }
  opt.filter.luns.insert(luns_.begin(), luns_.end());
  for (auto [text, bound] : {std::pair{&from_text_, &opt.filter.from}, std::pair{&to_text_, &opt.filter.to}}) {
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
  if (*min_latency_opt_) opt.filter.min_latency_ms = min_latency_;
  for (const std::string& t : itts_) {
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
  opt.engine.delayed_ack_min_ms = delayed_ack_ms_;
  if (*excess_opt_) opt.max_excess_round_trips = max_excess_;
  if (*fail_on_opt_) {
    for (const std::string& name : fail_on_) {
      const auto kind = finding_from_name(name);
      if (!kind) {
        std::fprintf(stderr, "iscsi-doctor: --fail-on: unknown finding kind '%s' (known: %s)\n", name.c_str(),
                     kind_list().c_str());
        return kExitUnusable;
      }
      opt.fail_on.push_back(*kind);
    }
  }
  if (opt.interval_s > 0 && ((opt.format != Format::text && opt.format != Format::jsonl) || !html_.empty())) {
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
  if (!html_.empty()) {  // --format and -o are refused with it (CLI11: excludes)
    opt.format = Format::html;
    opt.output = html_;
    if (!opt.live.iface.empty() && opt.live.write_path.empty()) {
      std::fprintf(stderr, "iscsi-doctor: --html reads the capture twice: with -i, keep it with -w FILE\n");
      return kExitUnusable;
    }
  }
  return run_pipeline(opt);
}

}  // namespace iscsi_doctor::cli
