#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Hostile input: time and peak RSS of `iscsi-doctor --format json` (Release build) on the large
# generated cases of tests/corpus/make_corpus.py --big (made once into $BENCH_CACHE/hostile), and
# the notices each produces. Prints a Markdown table for the README ("Hostile input"). The storms:
# 10^5 connections begun 30 us apart (33,333 a second, 3 s of capture time), each a login and one
# READ, closed with FIN both ways, half-closed (the initiator's FIN only) or never closed.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${BENCH_CACHE:-$PWD/bench/cache}/hostile
build=${BENCH_BUILD:-/tmp/build-bench}
cases=(open-commands-1m.pcap sequential-connections-100k.pcap concurrent-connections-100k.pcap
       storm-closed-100k.pcap storm-half-closed-100k.pcap storm-open-100k.pcap huge-claims.pcap random-payload-500m.pcap random-bytes-500m.pcap random-bytes-500m-joined.pcap
       resend-storm.pcap)
mkdir -p "$cache"
for c in "${cases[@]}"; do
  [ -s "$cache/$c" ] || python3 tests/corpus/make_corpus.py --big "$cache" "$c" >/dev/null
done
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DISCSI_DOCTOR_TESTS=OFF >/dev/null
cmake --build "$build" --target iscsi-doctor >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| input | size | seconds | peak RSS | commands reported | notices |"
echo "|---|---:|---:|---:|---:|---|"
for c in "${cases[@]}"; do
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$build/cli/iscsi-doctor" --format json -q -o "$tmp/r.json" "$cache/$c" || true
  read -r secs rss <"$tmp/time"
  python3 - "$c" "$(stat -c %s "$cache/$c")" "$secs" "$rss" "$tmp/r.json" <<'PY'
import json, re, sys
name, size, secs, rss, path = sys.argv[1:]
r = json.load(open(path))
notes = {}
for n in r["notices"]:
    key = re.sub(r"\d+", "N", n["message"])[:90]
    notes.setdefault(key, n["message"][:110])
said = "; ".join(sorted(notes.values())[:4]) + (f" (+{len(notes) - 4} more kinds)" if len(notes) > 4 else "")
print(f"| {name} | {int(size) / 1e6:.0f} MB | {float(secs):.2f} | {int(rss) / 1024:.1f} MiB | {len(r['commands'])} | {said or '-'} |")
PY
done
