#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Proof that a change preserved behaviour: runs two builds of iscsi-doctor on every bundled capture
# (fixtures, wiki, corpus, fuzz regressions) in the JSON, text and CSV formats and says which differ.
# Usage: scripts/same-output.sh OLD_BINARY NEW_BINARY [extra options for NEW, e.g. --threads 2]
set -uo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2; shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
n=0 bad=0
for f in captures/fixtures/*.pcap* captures/wireshark-wiki/*.pcap* tests/corpus/*.pcap* \
         tests/fuzz/regressions/captures/* tests/fuzz/regressions/fuzz_capture/*; do
  [ -f "$f" ] || continue
  for fmt in json text csv; do
    "$old" --format "$fmt" "$f" >"$out/a" 2>"$out/ae"; ra=$?
    "$new" "$@" --format "$fmt" "$f" >"$out/b" 2>"$out/be"; rb=$?
    if [ $ra != $rb ] || ! cmp -s "$out/a" "$out/b" || ! cmp -s "$out/ae" "$out/be"; then
      echo "differs: $f ($fmt; exit $ra -> $rb)"; bad=$((bad + 1))
    fi
  done
  n=$((n + 1))
done
echo "$n captures, 3 formats each: $bad outputs differ"
[ $bad = 0 ]
