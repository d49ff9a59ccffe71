#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Whole-capture fuzzing (tests/fuzz/fuzz_captures.py): structure-aware mutants of the fixtures
# through the CLI built with ASan+UBSan, for FUZZ_CAPTURE_SECONDS (default 180). A failing input
# is minimized into tests/fuzz/regressions/captures/ (the fuzz_capture_regressions test replays
# that folder, so it fails until the bug is fixed) and the run fails. Extra arguments go to
# fuzz_captures.py (--seed N to repeat a run, --plugins N with a normal build's plugin...).
# Builds into $ASAN_BUILD_DIR (default build-asan, shared with scripts/test-sanitize.sh and fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ASAN_BUILD_DIR:-build-asan}
scripts/configure-sanitize.sh "$build"
cmake --build "$build" -j "${JOBS:-2}" --target iscsi-doctor
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
exec python3 tests/fuzz/fuzz_captures.py --cli "$build/cli/iscsi-doctor" --seconds "${FUZZ_CAPTURE_SECONDS:-180}" "$@"
