// SPDX-License-Identifier: GPL-2.0-or-later
// `iscsi-doctor diff BEFORE AFTER`: two captures or two JSON reports compared (diff.cpp).
#pragma once

namespace iscsi_doctor::cli {

int diff_main(int argc, char** argv);  // argv[0] is "diff"

}  // namespace iscsi_doctor::cli
