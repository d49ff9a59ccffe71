#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The test suite under ASan+UBSan (clang, ISCSI_DOCTOR_SANITIZE): unit tests, the bad-input
# corpus, the fuzz regression replays and the CLI integration tests. The live capture lab and the
# Wireshark plugin are left to scripts/test.sh (a sanitized plugin cannot load into tshark).
# Builds into $ASAN_BUILD_DIR (default build-asan), which scripts/fuzz.sh reuses.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ASAN_BUILD_DIR:-build-asan}
scripts/configure-sanitize.sh "$build"
targets=(iscsi-doctor unit_tests)
for t in fuzz_framer fuzz_login_keys fuzz_cdb fuzz_analyzer fuzz_capture; do targets+=("${t}_replay"); done
cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ISCSI_DOCTOR_SOAK_SECONDS=0  # RSS is no measure under ASan (its quarantine keeps freed memory)
# every test but the live lab (captures), the plugins (dissector, lua), the archive job (scale:
# Python around the CLI, whose runs the integration tests already cover) and the docs check (docs:
# it reads the plugins' fields through tshark, and its CLI runs are the integration tests' too)
ctest --test-dir "$build" --output-on-failure -j2 -E '^(captures|dissector|lua|scale|docs)' "$@"
