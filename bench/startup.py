#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A whole run on a small capture, start to exit, many times interleaved: what starting costs
(loading the binary's shared libraries, set-up) against the bare libpcap loop on the same file.
/usr/bin/time's 10 ms steps cannot show it; this times each run with a monotonic clock.

    bench/startup.py [-n RUNS] CAPTURE NAME=BINARY [NAME=BINARY ...] [--loop PCAP_LOOP]

Each round runs every binary once (`--format json -q -o /dev/null CAPTURE`, then `--version`)
and the loop once; prints min and median milliseconds per command, and the load average.
"""
import argparse
import os
import statistics
import subprocess
import time


def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return (time.perf_counter() - t) * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--runs", type=int, default=50)
    ap.add_argument("--loop", help="the bare libpcap loop (bench/pcap_loop.c, built by bench/run.sh)")
    ap.add_argument("capture")
    ap.add_argument("binaries", nargs="+", metavar="NAME=BINARY")
    a = ap.parse_args()
    cmds = {}
    for nb in a.binaries:
        name, binary = nb.split("=", 1)
        cmds[f"{name} json"] = [binary, "--format", "json", "-q", "-o", os.devnull, a.capture]
        cmds[f"{name} --version"] = [binary, "--version"]
    if a.loop:
        cmds["libpcap loop"] = [a.loop, a.capture]
    times = {k: [] for k in cmds}
    for c in cmds.values():  # warm the page cache and the libraries
        timed(c)
    for _ in range(a.runs):
        for k, c in cmds.items():
            times[k].append(timed(c))
    print(f"{a.runs} interleaved runs of each, {os.path.basename(a.capture)}, "
          f"{os.path.getsize(a.capture):,} bytes; load average after: {os.getloadavg()[0]:.2f}")
    for k, v in times.items():
        print(f"  {k:28} min {min(v):6.2f} ms   median {statistics.median(v):6.2f} ms")


if __name__ == "__main__":
    main()
