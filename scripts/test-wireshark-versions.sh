#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Builds and tests both Wireshark plugins against other Wireshark versions than the host's, each in
# a Debian root that ships it: 4.0 bookworm, 4.4 trixie, 4.6 sid. Per version named in
# ISCSI_DOCTOR_WS_VERSIONS (default "4.4 4.6"): make the root once (debootstrap, then the build
# and test packages; kept in ISCSI_DOCTOR_ROOTS, default /var/cache/iscsi-doctor/roots, and reused),
# copy the source tree in, build the CLI and the C plugin against that version's headers, run
# tests/dissector and tests/lua there, tshark as nobody (Wireshark 4.4+ skips Lua scripts as root),
# and check that cmake --install puts the plugin where that tshark loads it.
#
# A root that cannot be made fails the run: name fewer versions to leave one out. A root is not
# updated once made; delete it to make it anew. ISCSI_DOCTOR_DEBIAN_MIRROR: the mirror debootstrap
# uses (default: debootstrap's own). Extra arguments go to pytest (e.g. -k nagle).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD

versions=${ISCSI_DOCTOR_WS_VERSIONS:-"4.4 4.6"}
roots=${ISCSI_DOCTOR_ROOTS:-/var/cache/iscsi-doctor/roots}
mirror=${ISCSI_DOCTOR_DEBIAN_MIRROR:-}

# What each root needs: the build (scripts/install-deps.sh, less the lab and fuzzing), tshark and
# the GUI (tests/dissector/test_gui.py; "wireshark" is the Qt GUI in every suite), and setpriv
# (util-linux) to run them as nobody.
packages=(
  tshark libwireshark-dev libglib2.0-dev
  cmake g++ ninja-build pkg-config
  libpcap-dev libtins-dev zlib1g-dev nlohmann-json3-dev libcli11-dev libfmt-dev libiscsi-dev
  liblzma-dev libzstd-dev liblz4-dev libbz2-dev
  python3 python3-pytest util-linux ca-certificates
  wireshark xvfb xauth xdotool imagemagick
)

die() {
  echo "test-wireshark-versions: $*" >&2
  exit 1
}

suite_of() {
  case $1 in
    4.0) echo bookworm ;;
    4.4) echo trixie ;;
    4.6) echo sid ;;
    *) return 1 ;;
  esac
}

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mount)"
for v in $versions; do suite_of "$v" >/dev/null || die "no Debian suite known for Wireshark $v (4.0, 4.4, 4.6)"; done

if ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

# One run at a time per roots folder (CI and a developer may share the machine).
mkdir -p "$roots"
exec 9>"$roots/.lock"
flock 9

# Runs a command in the root, with /proc and an empty /tmp mounted, in a mount namespace of its
# own so that nothing stays mounted after it, whatever happens.
in_root() {
  local dir=$1
  shift
  unshare --mount --propagation private -- sh -c '
    dir=$1; shift
    mount -t proc proc "$dir/proc"
    mount -t tmpfs tmpfs "$dir/tmp"
    mount --bind /dev/null "$dir/dev/null" 2>/dev/null || true
    exec chroot "$dir" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive "$@"' sh "$dir" "$@"
}

# Makes or updates the root for one Wireshark version; prints nothing but progress on stderr.
make_root() {
  local v=$1 suite dir stamp want
  suite=$(suite_of "$v")
  dir=$roots/$suite
  stamp=$dir/.iscsi-doctor-root
  want="$suite ${packages[*]}"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  mkdir -p "$roots"
  if [ ! -x "$dir/usr/bin/apt-get" ]; then
    echo "== $v: debootstrap $suite into $dir" >&2
    rm -rf --one-file-system "$dir.new"
    debootstrap --variant=minbase "$suite" "$dir.new" ${mirror:+"$mirror"} >"$roots/$suite.debootstrap.log" 2>&1 ||
      die "debootstrap $suite failed (see $roots/$suite.debootstrap.log)"
    mv "$dir.new" "$dir"
  fi
  echo "== $v: installing the build and test packages in $dir" >&2
  # Valid-Until unchecked: on a snapshot mirror, sid's Release file is past it.
  in_root "$dir" apt-get -o Acquire::Check-Valid-Until=false -qq update >&2 ||
    die "apt-get update in $dir failed"
  in_root "$dir" apt-get install -y -qq --no-install-recommends "${packages[@]}" >"$roots/$suite.apt.log" 2>&1 ||
    die "apt-get install in $dir failed (see $roots/$suite.apt.log)"
  in_root "$dir" apt-get clean
  echo "$want" >"$stamp"
}

# The source tree as git sees it (tracked and untracked, not ignored: no build folders), or the
# whole folder when this is not a git checkout. A file the same as in the previous copy keeps that
# copy's time, so it is not rebuilt; a changed or new one gets this copy's time. (Keeping the
# checkout's own times would not do: the root's build folder may hold objects of another branch
# newer than a changed file's time, and ninja would keep them.)
copy_source() {
  local to=$1 new=$1.new
  rm -rf --one-file-system "$new"
  mkdir -p "$new"
  if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$src" ls-files -co --exclude-standard -z | tar -C "$src" --null -T - -cf - | tar -C "$new" -xf -
  else
    tar -C "$src" --exclude='./build' --exclude='./build-*' -cf - . | tar -C "$new" -xf -
  fi
  python3 - "$to" "$new" <<'EOF'
import filecmp, os, sys, time
old, new = sys.argv[1:]
now = time.time()
for d, _, files in os.walk(new):
    for f in files:
        p = os.path.join(d, f)
        if os.path.islink(p):
            continue
        q = os.path.join(old, os.path.relpath(p, new))
        if os.path.isfile(q) and filecmp.cmp(p, q, shallow=False):
            st = os.stat(q)
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        else:
            os.utime(p, (now, now))
EOF
  rm -rf --one-file-system "$to"
  mv "$new" "$to"
  chmod -R a+rX "$to"  # tshark runs as nobody
}

# One version: make its root, build there, run the tests; its summary line goes to $suite.summary.
# The versions run side by side (their tests are mostly one process at a time; two cores serve two),
# each with its own log, printed whole when it ends; each its own X display numbers (wsgui.py).
run_version() {
  local v=$1 base=$2 suite dir t0 t1 t2 t3 have rc
  shift 2  # the rest: pytest's arguments
  suite=$(suite_of "$v")
  dir=$roots/$suite
  t0=$(date +%s)
  make_root "$v"
  t1=$(date +%s)

  have=$(chroot "$dir" dpkg-query -W -f='${Version}' libwireshark-dev)
  case $have in
    "$v".*) ;;
    *) die "$suite now ships Wireshark $have, not $v: update suite_of in $0" ;;
  esac
  echo "== $v: Wireshark $have, $(chroot "$dir" g++ --version | head -1)" >&2

  copy_source "$dir/src"
  # The engine, the CLI and the plugin (the unit tests do not depend on Wireshark), warnings as
  # errors on this compiler. The build folder stays in the root: later runs rebuild what changed.
  in_root "$dir" sh -c 'cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DISCSI_DOCTOR_TESTS=OFF -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null &&
      cmake --build /build -j2' >"$roots/$suite.build.log" 2>&1 &&
    [ -f "$dir/build/dissector/plugins/$v/epan/iscsi_doctor.so" ] || {
    tail -50 "$roots/$suite.build.log" >&2
    echo "== $v: build failed, or no build/dissector/plugins/$v/epan/iscsi_doctor.so" >&2
    echo "Wireshark $v ($suite, $have): build FAILED (log: $roots/$suite.build.log)" >"$roots/$suite.summary"
    return 1
  }
  t2=$(date +%s)

  rc=0
  # The capture lab's first set and the wiki captures per version; the noisy and link sets run in
  # the host's suite (scripts/test.sh), which keeps this run within CI's time.
  in_root "$dir" ISCSI_DOCTOR_CAPTURE_SETS=lab ISCSI_DOCTOR=/build/cli/iscsi-doctor ISCSI_DOCTOR_ROOT=/src ISCSI_DOCTOR_BUILD=/build \
    ISCSI_DOCTOR_PLUGIN_DIR=/build/dissector/plugins TSHARK=/usr/bin/tshark ISCSI_DOCTOR_DISPLAY_BASE="$base" \
    PYTHONDONTWRITEBYTECODE=1 \
    sh -c 'cd /src && python3 -m pytest -q -rs -p no:cacheprovider tests/dissector tests/lua/test_lua_plugin.py \
      --deselect tests/lua/test_lua_plugin.py::test_core_under_lua_version "$@"' sh "$@" || rc=$?
  # cmake --install into this Wireshark's own system folder, where tshark as root finds it; then
  # out again, so the cached root stays as it was.
  if [ $rc -eq 0 ]; then
    in_root "$dir" sh -c 'epan=$(pkg-config --variable=plugindir wireshark)/epan
      cmake --install /build --component wireshark-plugin >/dev/null &&
        tshark -G plugins 2>/dev/null | grep -E "^iscsi_doctor\.so[[:space:]].*[[:space:]]$epan/iscsi_doctor\.so\$"
      rc=$?
      rm -f "$epan/iscsi_doctor.so"
      exit $rc' || { rc=$?; echo "== $v: cmake --install: tshark does not load the installed plugin" >&2; }
  fi
  t3=$(date +%s)
  echo "Wireshark $v ($suite, $have): root $((t1 - t0)) s, build $((t2 - t1)) s, tests $((t3 - t2)) s: $([ $rc -eq 0 ] && echo passed || echo "FAILED ($rc)")" >"$roots/$suite.summary"
  return $rc
}

status=0
summary=()
pids=()
base=200
for v in $versions; do
  suite=$(suite_of "$v")
  rm -f "$roots/$suite.summary"
  run_version "$v" "$base" "$@" >"$roots/$suite.test.log" 2>&1 &
  pids+=($!)
  base=$((base + 100))
done
i=0
for v in $versions; do
  suite=$(suite_of "$v")
  wait "${pids[$i]}" || status=1
  i=$((i + 1))
  echo "== $v: (log: $roots/$suite.test.log)" >&2
  cat "$roots/$suite.test.log" >&2
  summary+=("$(cat "$roots/$suite.summary" 2>/dev/null || echo "Wireshark $v ($suite): FAILED before its summary (log: $roots/$suite.test.log)")")
done

echo "== test-wireshark-versions:" >&2
printf '   %s\n' "${summary[@]}" >&2
exit $status
