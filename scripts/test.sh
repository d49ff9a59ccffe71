#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Fresh machine to a full test run: installs dependencies, builds, runs every test (unit tests,
# the CLI against the capture manifest and against tshark, the live capture lab).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j2 "$@"
