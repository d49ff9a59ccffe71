#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Compile the lab's two helper programs into BUILD_DIR (never into the source tree).
# usage: build-helpers.sh BUILD_DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build-helpers.sh BUILD_DIR}
mkdir -p "$out"
CC=${CC:-cc}
$CC -O2 -Wall -Wextra -o "$out/delayfwd" "$here/delayfwd.c"
$CC -O2 -Wall -Wextra -shared -fPIC -o "$out/nodelay_shim.so" "$here/nodelay_shim.c" -ldl
