#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The benchmark (as root, Debian 12): makes the captures with the capture lab once (cached in
# $BENCH_CACHE, default bench/cache, ignored by git), builds iscsi-doctor (Release) and a bare
# libpcap loop, then times on each of the 100 MB, 1 GB and 4 GB captures, in one run:
#   floor        bench/pcap_loop F                      (reads every packet, nothing else)
#   iscsi-doctor iscsi-doctor --format json -q F         (reading, analysis and formatting on 3 threads)
#   one thread   iscsi-doctor --format json -q --threads 1 F
#   text         iscsi-doctor -q F                      (the text report: analysis, little output)
#   tshark       tshark -r F -Y iscsi.time -T fields -e iscsi.time
#   html         iscsi-doctor --html R F                (the HTML report: time and size)
# and prints Markdown tables: seconds, packets/s, MB/s, peak RSS (/usr/bin/time -v), ratios.
# Then -j: the four files of the 1 GB capture's worth, with -j 1 and -j $(nproc). Then the plugins
# in tshark -2 (bench/c-plugin.py, bench/lua-plugin.py) here and in each Wireshark root.
# "small" is the small-block capture (bench/make-small-block.py: 450k packets of 1 KiB and 8 KiB
# queue-depth-1 I/O), where the cost per packet shows rather than the cost per byte.
#   BENCH_SIZES="small 100m 1g 4g"   which captures
#   BENCH_TSHARK_MAX=1g        largest capture tshark is run on (its memory grows with the file)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=${BENCH_CACHE:-$root/bench/cache}
sizes=${BENCH_SIZES:-small 100m 1g 4g}
tshark_max=${BENCH_TSHARK_MAX:-1g}
build=${BENCH_BUILD:-/tmp/build-bench}

python3 bench/make-capture.py "$cache" >/dev/null
[ -f "$cache/bench-small.pcap" ] || python3 bench/make-small-block.py "$cache/bench-small.pcap" >/dev/null
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DISCSI_DOCTOR_TESTS=OFF >/dev/null
cmake --build "$build" --target iscsi-doctor >/dev/null
gcc -O2 -o "$build/pcap_loop" bench/pcap_loop.c -lpcap
doctor=$build/cli/iscsi-doctor

# run NAME OUT -- CMD...: times CMD (output to OUT), appends "name secs rss_kib" to $results
results=$(mktemp)
trap 'rm -f "$results" "$results".*' EXIT
run() {
  local name=$1 out=$2; shift 3
  /usr/bin/time -v -o "$results.time" "$@" >"$out" 2>/dev/null || { echo "bench: $name failed" >&2; exit 1; }
  local secs rss
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$results.time")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$results.time")
  echo "$name $secs $rss" >>"$results"
}

echo "machine: $(lscpu | awk -F': +' '/Model name/ {print $2}'), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GB RAM, $(uname -r)"
echo "tools: $(tshark --version | head -1), libpcap $(dpkg-query -W -f='${Version}' libpcap0.8 2>/dev/null)"
echo
for s in $sizes; do
  f=$cache/bench-$s.pcap
  cat "$f" >/dev/null  # warm page cache: every tool reads from memory
  read -r packets bytes _ < <("$build/pcap_loop" "$f")
  run "$s floor" /dev/null -- "$build/pcap_loop" "$f"
  run "$s doctor" "$results.json" -- "$doctor" --format json -q "$f"
  run "$s json1" /dev/null -- "$doctor" --format json -q --threads 1 "$f"
  run "$s text" /dev/null -- "$doctor" -q "$f"
  run "$s html" /dev/null -- "$doctor" -q --html "$results.html" "$f"
  echo "$s htmlsize $(stat -c %s "$results.html")" >>"$results"
  cmds=$(tail -c 200000 "$results.json" | grep -o '"commands": *[0-9]*, *"completed"' | tail -1 | grep -o '[0-9]*' | head -1)
  echo "$s packets $packets $(stat -c %s "$f") $cmds" >>"$results"
  if [ "$s" = small ] || [ "$(numfmt --from=auto "${s^^}")" -le "$(numfmt --from=auto "${tshark_max^^}")" ]; then
    run "$s tshark" "$results.tshark" -- tshark -r "$f" -Y iscsi.time -T fields -e iscsi.time
  fi
  rm -f "$results.json" "$results.tshark" "$results.html"
done

# -j: four copies of the 100 MB capture (symlinks) with one job and with one job per core
if [ -f "$cache/bench-100m.pcap" ]; then
  jdir=$(mktemp -d)
  for i in 1 2 3 4; do ln -s "$cache/bench-100m.pcap" "$jdir/c$i.pcap"; done
  run "jobs1 doctor" /dev/null -- "$doctor" --format json -q -j 1 "$jdir"
  run "jobsN doctor" /dev/null -- "$doctor" --format json -q -j "$(nproc)" "$jdir"
  rm -rf "$jdir"
fi

python3 - "$results" "$(nproc)" <<'PY'
import sys
rows, info, html = {}, {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[1] == "packets":
        info[f[0]] = (int(f[2]), int(f[3]), f[4])
    elif f[1] == "htmlsize":
        html[f[0]] = int(f[2])
    else:
        rows[(f[0], f[1])] = (float(f[2]), int(f[3]))
print("| capture | packets | tool | seconds | packets/s | MB/s | peak RSS MiB | vs floor | iscsi-doctor faster by |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
for size, (packets, nbytes, cmds) in info.items():
    floor = rows[(size, "floor")][0]
    doc = rows[(size, "doctor")][0]
    for tool, label in (("floor", "bare libpcap loop"), ("doctor", "iscsi-doctor --format json"),
                        ("json1", "iscsi-doctor --format json --threads 1"),
                        ("text", "iscsi-doctor (text)"), ("tshark", "tshark -Y iscsi.time")):
        if (size, tool) not in rows:
            continue
        secs, rss = rows[(size, tool)]
        t = max(secs, 0.01)
        print("| %s (%.0f MB, %s commands) | %d | %s | %.2f | %.2f M | %.0f | %.1f | %.2f | %s |" % (
            size, nbytes / 1e6, cmds, packets, label, secs, packets / t / 1e6, nbytes / t / 1e6, rss / 1024,
            floor / t, "%.0fx" % (secs / doc) if tool == "tshark" else ""))
if html:
    print()
    print("| capture | HTML report seconds | vs JSON run | report size | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|")
    for size, nbytes in html.items():
        secs, rss = rows[(size, "html")]
        print("| %s | %.2f | %.2fx | %.2f MB | %.1f |" % (
            size, secs, secs / max(rows[(size, "doctor")][0], 0.01), nbytes / 1e6, rss / 1024))
if ("jobs1", "doctor") in rows:
    s1, sn = rows[("jobs1", "doctor")][0], rows[("jobsN", "doctor")][0]
    print()
    print("-j: 4 x 100 MB: -j 1 %.2f s, -j %s %.2f s (%.2fx)" % (s1, sys.argv[2], sn, s1 / sn))
PY

# The plugins' cost in tshark -2, on this machine's Wireshark and in each Debian root that
# scripts/test-wireshark-versions.sh made and built there (BENCH_PLUGINS=0: not run). The shapes:
# small-block (a 119k-packet cut, which bench/c-plugin.py caches) and large I/O (the 100 MB capture).
if [ "${BENCH_PLUGINS:-1}" = 1 ]; then
  cmake --build "$build" --target iscsi_doctor_wireshark >/dev/null 2>&1 || echo "bench: no C plugin built here" >&2
  rootargs=()
  for r in "${ISCSI_DOCTOR_ROOTS:-/var/cache/iscsi-doctor/roots}"/{trixie,sid}; do
    if [ -x "$r/usr/bin/tshark" ] && [ -d "$r/build/dissector/plugins" ]; then rootargs+=(--root "$r"); fi
  done
  echo
  python3 bench/c-plugin.py --build "$build" "${rootargs[@]}"
  for f in bench/cache/small-block-119k.pcap "$cache/bench-100m.pcap"; do
    echo
    echo "Lua plugin, $(basename "$f"):"
    python3 bench/lua-plugin.py --capture "$f" --runs 5 "${rootargs[@]}"
  done
fi
