// SPDX-License-Identifier: GPL-2.0-or-later
// `iscsi-doctor probe iscsi://HOST[:PORT]/IQN/LUN`: an active check of a target (probe.cpp).
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace iscsi_doctor::cli {

struct ReportCommand;

// Adds the subcommand `probe` and its options to `app`. The plain command's options given with it
// (formats, gates, --junit...) fall through to `report`, which reports on the probe's own capture.
// The function returned runs it once the command line is parsed with it chosen, and returns the
// exit code.
std::function<int()> add_probe_command(CLI::App& app, ReportCommand& report);

}  // namespace iscsi_doctor::cli
