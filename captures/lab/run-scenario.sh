#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Run ONE lab scenario live and write its captures (uncompressed .pcap) into OUTDIR.
#   usage: run-scenario.sh SCENARIO OUTDIR        (as root)
#          run-scenario.sh --list
#          run-scenario.sh --probe TARGET OUTDIR DOCTOR [PROBE OPTIONS...]
#            (iscsi-doctor probe against a lab target: lab.py probe; prints OUTDIR/probe-TARGET)
# Prints the produced capture paths, one per line, on stdout.  Everything the run starts
# (namespaces, delay forwarder, target, tcpdump) is removed on exit, also on failure/Ctrl-C.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = "--list" ]; then exec python3 "$here/lab.py" list; fi
probe=()
if [ "${1:-}" = "--probe" ]; then
    probe=(probe --doctor "${4:?usage: run-scenario.sh --probe TARGET OUTDIR DOCTOR [OPTIONS]}")
    shift
fi
scenario=${1:?usage: run-scenario.sh SCENARIO OUTDIR}
outdir=${2:?usage: run-scenario.sh SCENARIO OUTDIR}
build=$(mktemp -d /tmp/isd-lab-build.XXXXXX)
lab_pid=
cleanup() {
    if [ -n "$lab_pid" ] && kill -0 "$lab_pid" 2>/dev/null; then kill -TERM "$lab_pid" 2>/dev/null || true; wait "$lab_pid" 2>/dev/null || true; fi
    # lab.py tears down its own namespaces; this catches a lab.py killed with SIGKILL
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^isd${lab_pid:-NONE}[0-9]{2}[itm]$" || true); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$build"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
"$here/build-helpers.sh" "$build"
if [ ${#probe[@]} -gt 0 ]; then
    python3 "$here/lab.py" "${probe[@]}" --build "$build" "$scenario" "$outdir" -- "${@:4}" &
else
    python3 "$here/lab.py" run "$scenario" "$outdir" --build "$build" &
fi
lab_pid=$!
wait "$lab_pid"
