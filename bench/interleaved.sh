#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Best of N interleaved runs of the CLI's reports and the bare libpcap loop on one capture (the
# README's "best of 5 interleaved" rows): each round runs every tool once, so a machine's passing
# load falls on all of them alike. Wall and CPU seconds and peak RSS from /usr/bin/time.
#   bench/interleaved.sh CAPTURE [N]     (N = 5)
#   DOCTOR=path/to/iscsi-doctor LOOP=path/to/pcap_loop TSHARK=1 (also tshark -Y iscsi.time)
set -euo pipefail
f=$1 n=${2:-5}
doctor=${DOCTOR:-/tmp/build-bench/cli/iscsi-doctor}
loop=${LOOP:-/tmp/build-bench/pcap_loop}
declare -A cmds=(
  [loop]="$loop $f"
  [json]="$doctor --format json -q -o /dev/null $f"
  [json_threads1]="$doctor --format json --threads 1 -q -o /dev/null $f"
  [jsonl]="$doctor --format jsonl -q -o /dev/null $f"
  [text]="$doctor -q -o /dev/null $f"
)
[ -n "${TSHARK:-}" ] && cmds[tshark]="tshark -r $f -Y iscsi.time -T fields -e iscsi.time"
cat "$f" >/dev/null  # warm page cache
out=$(mktemp)
trap 'rm -f "$out" "$out.t"' EXIT
for _ in $(seq "$n"); do
  for k in "${!cmds[@]}"; do
    # shellcheck disable=SC2086  # the command line is split on purpose
    /usr/bin/time -f "$k %e %U %S %M" -o "$out.t" ${cmds[$k]} >/dev/null 2>&1
    cat "$out.t" >>"$out"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import collections, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, e, u, s, m = line.split()
    runs[k].append((float(e), float(u) + float(s), int(m)))
print("| tool | best wall s | median wall s | CPU s (best run) | peak RSS MiB |")
print("|---|---:|---:|---:|---:|")
for k, v in sorted(runs.items()):
    v.sort()
    print(f"| {k} | {v[0][0]:.2f} | {v[len(v) // 2][0]:.2f} | {v[0][1]:.2f} | {v[0][2] / 1024:.1f} |")
PY
