// SPDX-License-Identifier: GPL-2.0-or-later
// `iscsi-doctor probe iscsi://HOST[:PORT]/IQN/LUN`: an active check of a target (probe.cpp).
#pragma once

#include <functional>

namespace iscsi_doctor::cli {

// report_main: the plain command's entry, run on the probe's own capture with the options the
// probe does not know itself (formats, gates, --junit...). Returns the exit code.
int probe_main(int argc, char** argv, const std::function<int(int, char**)>& report_main);

}  // namespace iscsi_doctor::cli
