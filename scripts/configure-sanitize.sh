#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Configures the ASan+UBSan build shared by scripts/test-sanitize.sh and scripts/fuzz.sh: clang,
# -O1 with line tables only (quick to build, readable reports), every object instrumented for
# libFuzzer's coverage too, so the fuzz targets link the engine as built; no Wireshark plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
CC=clang CXX=clang++ cmake -S . -B "${1:?build dir}" -G Ninja -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_C_FLAGS="-O1 -gline-tables-only" \
  -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only -fsanitize=fuzzer-no-link" \
  -DISCSI_DOCTOR_SANITIZE=ON -DISCSI_DOCTOR_WIRESHARK_PLUGIN=OFF >/dev/null
