// SPDX-License-Identifier: GPL-2.0-or-later
// The plain command's options (`iscsi-doctor [OPTIONS] CAPTURE...`, docs/cli.md), on the top level
// of the command line, and their checks before the pipeline runs. `probe` reports through them too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands/analyse.hpp"
#include "options.hpp"

namespace iscsi_doctor::cli {

struct ReportCommand {
  PipelineOptions opt;
  PortOptions port_options;
  MemoryOptions memory_options;

  void add_to(CLI::App& app);  // its options, on `app`
  // After parsing: checks what CLI11 cannot, completes `opt` and runs the pipeline. Returns the
  // exit code.
  int run();
  // Whether --port was given (probe adds the portal's own port when not).
  bool port_given() const { return port_opt_ && port_opt_->count() > 0; }
  // The first capture named (CAPTURE or -r), or "".
  std::string named_capture() const {
    return !read_opt_.empty() ? read_opt_.front() : !opt.inputs.empty() ? opt.inputs.front() : std::string();
  }

 private:
  std::vector<std::string> fail_on_, read_opt_, itts_;
  std::vector<uint64_t> luns_;
  double delayed_ack_ms_ = opt.engine.delayed_ack_min_ms;
  uint64_t max_excess_ = 0;
  bool list_interfaces_ = false;
  double min_latency_ = 0;
  std::string from_text_, to_text_, html_;
  CLI::Option *min_latency_opt_ = nullptr, *fail_on_opt_ = nullptr, *excess_opt_ = nullptr,
              *port_opt_ = nullptr;
};

}  // namespace iscsi_doctor::cli
