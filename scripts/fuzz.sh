#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# A short libFuzzer run of every fuzz target (tests/fuzz/), FUZZ_SECONDS each (default 20),
# started from the committed inputs of tests/fuzz/regressions/<target>/ (seeds from real captures,
# written by tests/fuzz/make_seeds.py, and earlier crashes); fuzz_capture also from the fixtures
# and the bad-input corpus. New coverage goes to a temporary folder, never to the committed one.
# A crash (or leak, timeout, out-of-memory) input is copied into tests/fuzz/regressions/<target>/
# (the test suite replays that folder, so it fails until the bug is fixed) and the run fails.
# Builds with clang into $ASAN_BUILD_DIR (default build-asan, shared with scripts/test-sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${ASAN_BUILD_DIR:-build-asan}
seconds=${FUZZ_SECONDS:-20}
targets=(${FUZZ_TARGETS:-fuzz_framer fuzz_login_keys fuzz_cdb fuzz_analyzer fuzz_capture})
scripts/configure-sanitize.sh "$build"
cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]}"

work=$(mktemp -d /tmp/isd-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
# Seeds for whole-capture reading: the small fixtures, uncompressed, and the corpus.
mkdir -p "$work/seeds-capture"
for f in captures/fixtures/scripted-nagle-read-1k--initiator.pcap.gz captures/fixtures/stock-qd8-read--target.pcap.gz \
         captures/wireshark-wiki/scsi-osd-example-001.pcap.gz; do
  # head closes the pipe early: gzip's SIGPIPE is expected (pipefail would stop the script)
  gzip -dc "$f" | head -c 65536 >"$work/seeds-capture/$(basename "$f" .gz)" || [ $? -eq 141 ]
done
cp tests/corpus/*.pcap "$work/seeds-capture/" 2>/dev/null || true

failed=()
for t in "${targets[@]}"; do
  reg=$root/tests/fuzz/regressions/$t
  if ! ls "$reg"/seed-* >/dev/null 2>&1; then
    echo "fuzz: $t: no committed seeds in tests/fuzz/regressions/$t (python3 tests/fuzz/make_seeds.py)" >&2
    exit 1
  fi
  mkdir -p "$work/$t" "$work/$t-crash"
  seeds=("$work/$t" "$reg")
  max_len=4096
  if [ "$t" = fuzz_capture ]; then seeds+=("$work/seeds-capture"); max_len=70000; fi
  echo "fuzz: $t for ${seconds}s"
  if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
       "$build/tests/fuzz/$t" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
         -artifact_prefix="$work/$t-crash/" -print_final_stats=1 "${seeds[@]}" >"$work/$t.log" 2>&1; then
    tail -60 "$work/$t.log"
    kept=0
    for c in "$work/$t-crash"/*; do
      [ -f "$c" ] || continue
      cp "$c" "$reg/"
      kept=$((kept + 1))
      echo "fuzz: $t: kept $(basename "$c") in tests/fuzz/regressions/$t/ (commit it with the fix)"
    done
    [ "$kept" -gt 0 ] || echo "fuzz: $t: the fuzzer failed without a crash input (see the log above)"
    failed+=("$t")
  else
    grep -E "^stat::number_of_executed_units|^#[0-9]+ *DONE" "$work/$t.log" | tail -2 || true
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${seconds}s without a crash"
