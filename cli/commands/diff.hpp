// SPDX-License-Identifier: GPL-2.0-or-later
// `iscsi-doctor diff BEFORE AFTER`: two captures or two JSON reports compared (diff.cpp).
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace iscsi_doctor::cli {

// Adds the subcommand `diff` and its options to `app`; the function returned runs it once the
// command line is parsed with it chosen, and returns the exit code.
std::function<int()> add_diff_command(CLI::App& app);

}  // namespace iscsi_doctor::cli
