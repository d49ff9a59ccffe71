#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The Lua plugin's cost in Wireshark: `tshark -2 -r CAPTURE` with and without
lua/iscsi_doctor.lua, as nobody (Wireshark 4.4+ skips Lua scripts as root), on this machine's
Wireshark and in each Debian root given (scripts/test-wireshark-versions.sh keeps them in
/var/cache/iscsi-doctor/roots). Prints the ratio to plain tshark per Wireshark.

    bench/lua-plugin.py [--capture F] [--runs 7] [--root DIR ...] [--instructions] [--count N]
                        [--plugin FILE ...] [--skip-system]

Times are the best of --runs runs, plain and plugin interleaved (CPU time of the process tree;
on a shared machine read them to about 10%). --instructions counts instructions with callgrind
instead, which no other load changes (valgrind must be installed where tshark runs; about 50x
slower; --count N reads only the first N packets, for a quicker count). --plugin measures another copy of the plugin
(repeated: several copies, e.g. an older one and this one, in the same interleaved runs);
--skip-system measures only the roots. Run as root (chroot). The default capture is the benchmark's 106 MB one
(bench/make-capture.py, cached by bench/run.sh in bench/cache/bench-100m.pcap)."""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "lua" / "iscsi_doctor.lua"
WORK = f"tmp/iscsi-doctor-lua-bench-{os.getpid()}"  # inside each root, readable by nobody; one per run


def as_nobody(root):
    """The prefix that runs a command as nobody, in `root` unless it is "/"."""
    if root == "/":
        return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "env", "HOME=/tmp"]
    return ["chroot", "--userspec=nobody:nogroup", root, "env", "HOME=/tmp"]


def command(root, capture, script, instructions, count=None):
    tshark = ["tshark", "-2", "-r", capture, "-X", f"lua_script:{script}"] + (["-c", str(count)] if count else [])
    if not instructions:
        return as_nobody(root) + tshark
    tshark = ["valgrind", "--tool=callgrind", f"--callgrind-out-file=/{WORK}/callgrind.out"] + tshark
    if root == "/":
        return as_nobody(root) + tshark
    # valgrind reads /proc: mounted in a mount namespace of its own, so nothing stays mounted
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount -t proc proc "$0/proc" && exec "$@"', root] + as_nobody(root) + tshark


def measure(root, capture, script, instructions, count=None):
    cmd = command(root, capture, script, instructions, count)
    if instructions:
        out = Path(root) / WORK / "callgrind.out"
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        m = re.search(r"^summary: (\d+)", out.read_text(), re.M)
        out.unlink()
        return int(m.group(1))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capture", default=str(ROOT / "bench" / "cache" / "bench-100m.pcap"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--root", action="append", default=[], help="a Debian root with tshark (repeatable)")
    ap.add_argument("--instructions", action="store_true")
    ap.add_argument("--count", type=int, help="read only the first N packets")
    ap.add_argument("--plugin", action="append", default=[], help="the plugin to measure (repeatable)")
    ap.add_argument("--skip-system", action="store_true", help="only the roots, not this machine's tshark")
    a = ap.parse_args()
    if not Path(a.capture).is_file():
        sys.exit(f"{a.capture}: no such capture (bench/run.sh makes it)")
    plugins = [Path(p) for p in (a.plugin or [str(PLUGIN)])]
    for root in ([] if a.skip_system else ["/"]) + a.root:
        work = Path(root) / WORK
        work.mkdir(parents=True, exist_ok=True)
        work.chmod(0o777)
        runs = [("plain", "/dev/null")]
        for i, plugin in enumerate(plugins):  # each copy under a name of its own
            name = f"{i}-{plugin.name}"
            shutil.copy(plugin, work / name)
            (work / name).chmod(0o644)
            runs.append((str(plugin), f"/{WORK}/{name}"))
        shutil.copy(a.capture, work / Path(a.capture).name)
        (work / Path(a.capture).name).chmod(0o644)
        capture = f"/{WORK}/{Path(a.capture).name}"
        version = subprocess.run(as_nobody(root) + ["tshark", "--version"],
                                 capture_output=True, text=True).stdout.split("\n")[0]
        best = {}
        for _ in range(1 if a.instructions else a.runs):
            for name, s in runs:
                v = measure(root, capture, s, a.instructions, a.count)
                best[name] = v if name not in best else min(best[name], v)
        unit = "instructions" if a.instructions else "s CPU"
        for name, _ in runs[1:]:
            print(f"{version} ({root}): plain {best['plain']:.3g} {unit}, with the Lua plugin {name} "
                  f"{best[name]:.3g}: {best[name] / best['plain']:.2f}x")
        shutil.rmtree(work, True)


if __name__ == "__main__":
    main()
