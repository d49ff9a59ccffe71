#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Regenerate every lab fixture and captures/MANIFEST.json from scratch (run as root).
#   usage: captures/lab/make-captures.sh [--only SCENARIO,SCENARIO...] [--no-readme | --readme-out PATH]
#   (--no-readme: captures/README.md's fixture table is left as it is; --readme-out: written to PATH instead)
# Builds the helpers into a temporary directory, runs every scenario of lab.py (fresh network
# namespaces, delay forwarder, real tgtd / scripted target, real libiscsi initiator, tcpdump at
# each vantage point), gzips the captures into captures/fixtures/, measures them with tshark
# and writes captures/MANIFEST.json.  Everything started is torn down on exit (trap).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
captures=$(cd "$here/.." && pwd)
only=()
readme=()
while [ $# -gt 0 ]; do
    case "$1" in
        --only) only=(--only "${2:?--only needs a list}"); shift 2 ;;
        --no-readme) readme=(--no-readme); shift ;;
        --readme-out) readme=(--readme-out "$(realpath -m "${2:?--readme-out needs a path}")"); shift 2 ;;
        *) echo "make-captures.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$(id -u)" != 0 ]; then echo "make-captures.sh: run as root" >&2; exit 2; fi
for tool in tgtd tgtadm qemu-io qemu-img iscsi-test-cu tcpdump tshark editcap ip cc python3; do
    command -v "$tool" >/dev/null || { echo "make-captures.sh: missing $tool (see captures/README.md)" >&2; exit 2; }
done
tmp=$(mktemp -d /tmp/isd-make-captures.XXXXXX)
lab_pid=
cleanup() {
    if [ -n "$lab_pid" ] && kill -0 "$lab_pid" 2>/dev/null; then kill -TERM "$lab_pid" 2>/dev/null || true; wait "$lab_pid" 2>/dev/null || true; fi
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^isd${lab_pid:-NONE}[0-9]{2}[itm]$" || true); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
start=$(date +%s)
"$here/build-helpers.sh" "$tmp/build"
python3 "$here/lab.py" all "$tmp/raw" --build "$tmp/build" "${only[@]}" &
lab_pid=$!
wait "$lab_pid"
lab_pid=
mkdir -p "$captures/fixtures"
if [ ${#only[@]} -eq 0 ]; then rm -f "$captures"/fixtures/*.pcap.gz; fi
for f in "$tmp"/raw/*.pcap; do
    gzip -9n -c "$f" > "$captures/fixtures/$(basename "$f").gz"
done
python3 "$here/manifest.py" --made "$tmp/raw/made.json" --captures "$captures" "${only[@]}" "${readme[@]}"
echo "make-captures.sh: done in $(( $(date +%s) - start )) s" >&2
