// SPDX-License-Identifier: GPL-2.0-or-later
// Replay spool: the overall summary is fed in argument order, whatever the jobs.
// With several jobs, each worker records its capture's commands and findings in a spool; the main
// thread replays them into the overall Summary in argument order, so that its order-dependent parts
// (example frames, ties) do not depend on thread timing.
#pragma once

#include <cstdio>

#include "iscsi_doctor/analyzer.hpp"

namespace iscsi_doctor::cli {

// A command or finding appended to the spool f.
void record(FILE* f, const CommandResult& c);
void record(FILE* f, const Finding& x);
// Every record of the spool f, in order, into the sink; throws std::runtime_error when it reads back short.
void replay(FILE* f, Sink& sink);

}  // namespace iscsi_doctor::cli
