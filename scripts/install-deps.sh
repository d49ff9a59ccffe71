#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Installs every Debian package iscsi-doctor needs to build and test (README "Dependencies" says
# why each is there). Installs only what is missing; needs root (or sudo).
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config
  libpcap-dev libtins-dev zlib1g-dev nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev
  liblzma-dev libzstd-dev liblz4-dev libbz2-dev  # xz, zstd, lz4 and bzip2 captures (cli/input/decompress.cpp)
  libiscsi-dev  # probe: the initiator it logs in and runs its battery with
  libmimalloc-dev  # the CLI's malloc (cli/CMakeLists.txt; docs/performance.md "The allocator")
  # Wireshark plugin and the oracle for tests
  tshark libwireshark-dev libglib2.0-dev  # wireshark.pc requires glib-2.0, which libwireshark-dev does not pull in
  wireshark-qt xvfb xauth xdotool imagemagick  # GUI test and screenshots (tests/dissector)
  # the capture lab: real iSCSI peers and a capture tool
  tgt libiscsi-bin qemu-utils qemu-block-extra tcpdump iproute2
  # fuzzing and sanitizers
  clang libclang-rt-14-dev  # the sanitizer and libFuzzer runtimes (clang only recommends them)
  python3
  lua5.1 lua5.2 lua5.3 lua5.4  # the Lua plugin's core under every Lua Wireshark ships (tests/lua)
  chromium  # renders the HTML report in tests/report (headless)
  libxml2-utils  # xmllint: --junit output validated against the JUnit schema (tests/integration/test_junit.py)
  xz-utils zstd lz4 bzip2  # compress the captures tests/integration/test_compressed.py reads
  pandoc  # the man page iscsi-doctor(1), made from --help and docs/cli.md (cli/make_man.py)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# pytest drives the integration tests; Debian's package where the system python is used.
if ! python3 -m pytest --version >/dev/null 2>&1; then
  if python3 -m pip --version >/dev/null 2>&1; then
    python3 -m pip install -q pytest
  else
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-pytest >/dev/null
  fi
fi

# The JUnit XML schema CI systems accept (Jenkins xunit-plugin's junit-10.xsd, MIT licence), as
# pytest's source release carries it for its own tests: --junit output is validated against it.
xsd_dir=${ISCSI_DOCTOR_CACHE:-/var/cache/iscsi-doctor}
xsd_sha=a1a816f58d1bf95ebabf371994df0b9246dee66ea9572fbec4f9296f1b2c0ff6
if ! echo "$xsd_sha  $xsd_dir/junit-10.xsd" | sha256sum -c --status 2>/dev/null; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --no-binary :all: -d "$tmp" pytest==8.3.3
  $SUDO mkdir -p "$xsd_dir"
  tar -xzf "$tmp/pytest-8.3.3.tar.gz" -O pytest-8.3.3/testing/example_scripts/junit-10.xsd |
    $SUDO tee "$xsd_dir/junit-10.xsd.new" >/dev/null
  rm -rf "$tmp"
  echo "$xsd_sha  $xsd_dir/junit-10.xsd.new" | sha256sum -c --status ||
    { echo "install-deps: junit-10.xsd from pytest 8.3.3 is not the one expected" >&2; exit 1; }
  $SUDO mv "$xsd_dir/junit-10.xsd.new" "$xsd_dir/junit-10.xsd"
fi

# The archive job (scale/): Dask distributed, pyarrow and DuckDB from PyPI (Debian 12 has no
# pyarrow or DuckDB, and a 2022 Dask); about 25 s and 450 MB when missing, nothing when present.
if ! python3 - <<'PY' 2>/dev/null
import dask, distributed, pyarrow, duckdb, pandas
assert (dask.__version__, distributed.__version__, pyarrow.__version__, duckdb.__version__) == \
    ("2026.8.0", "2026.8.0", "26.0.1", "2.0.1")
PY
then
  python3 -m pip install -q 'dask[distributed,dataframe]==2026.8.0' 'pyarrow==26.0.1' 'duckdb==2.0.1'
fi
