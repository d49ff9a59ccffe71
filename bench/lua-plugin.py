#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The Lua plugin's cost in Wireshark: `tshark -2 -r CAPTURE` with and without
lua/iscsi_doctor.lua, as nobody (Wireshark 4.4+ skips Lua scripts as root), on this machine's
Wireshark and in each Debian root given (scripts/test-wireshark-versions.sh keeps them in
/var/cache/iscsi-doctor/roots). Prints the ratio to plain tshark per Wireshark.

    bench/lua-plugin.py [--capture F] [--runs 7] [--root DIR ...] [--instructions] [--count N]
                        [--plugin FILE ...] [--skip-system] [--core [--lua lua5.4]]

Times are the best of --runs runs, plain and plugin interleaved (CPU time of the process tree;
on a shared machine read them to about 10%). --instructions counts instructions with callgrind
instead, which no other load changes (valgrind must be installed where tshark runs; about 50x
slower; --count N reads only the first N packets, for a quicker count). --plugin measures another copy of the plugin
(repeated: several copies, e.g. an older one and this one, in the same interleaved runs);
--skip-system measures only the roots. --core measures the analysis core alone, outside
Wireshark: under --lua (lua5.4), fed the capture's first --count packets from memory as
tests/lua/run_core.lua reads them, the best of --runs times (os.clock) and the memory allocated a
packet (collectgarbage("count") over a run with the collector stopped; what the run keeps, its
commands and findings, is counted too). Run as root (chroot). The default capture is the benchmark's 106 MB one
(bench/make-capture.py, cached by bench/run.sh in bench/cache/bench-100m.pcap)."""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
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


# The core fed from memory (pcap, little- or big-endian): the decoding and the analysis, as in
# Wireshark but for Wireshark's own work. Prints "<best s> <bytes allocated a packet> <packets>".
CORE = r"""
local plugin, path, runs, count = arg[1], arg[2], tonumber(arg[3]), tonumber(arg[4])
local core = dofile(plugin)
local f = assert(io.open(path, "rb")); local data = f:read("*a"); f:close()
local function le32(s, p) local a, b, c, d = s:byte(p, p + 3) return ((d * 256 + c) * 256 + b) * 256 + a end
local function be32(s, p) local a, b, c, d = s:byte(p, p + 3) return ((a * 256 + b) * 256 + c) * 256 + d end
local r32 = le32
if be32(data, 1) == 0xa1b2c3d4 or be32(data, 1) == 0xa1b23c4d then r32 = be32 end
local nano = r32(data, 1) == 0xa1b23c4d
local linktype = r32(data, 21) % 65536
local pkts, times, extra = {}, {}, {}
local pos, base = 25, nil
while pos + 16 <= #data and (count == 0 or #pkts < count) do
  local sec, frac, incl, orig = r32(data, pos), r32(data, pos + 4), r32(data, pos + 8), r32(data, pos + 12)
  if pos + 15 + incl > #data then break end
  base = base or sec
  pkts[#pkts + 1] = data:sub(pos + 16, pos + 15 + incl)
  times[#times + 1] = (sec - base) * 1e9 + (nano and frac or frac * 1000)
  extra[#extra + 1] = orig > incl and orig - incl or 0
  pos = pos + 16 + incl
end
data = nil
local function run()
  local decode, an, seg = core.PacketDecoder.fast_decoder(linktype), core.Analyzer.new(), {}
  for i = 1, #pkts do
    local pkt = pkts[i]
    if decode and decode(pkt, #pkt, extra[i], seg) then
      seg.frame, seg.t = i, times[i]
      an:feed(seg)
    end
  end
  an:finish()
end
local best = math.huge
for _ = 1, runs do
  collectgarbage("collect")
  local t0 = os.clock()
  run()
  best = math.min(best, os.clock() - t0)
end
collectgarbage("collect")
collectgarbage("stop")
local k0 = collectgarbage("count")
run()
local kb = collectgarbage("count") - k0
print(string.format("%.3f %.0f %d", best, kb * 1024 / #pkts, #pkts))
"""


def core(a, plugins):
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as f:
        f.write(CORE)
        f.flush()
        for p in plugins:
            out = subprocess.run([a.lua, f.name, str(p), a.capture, str(a.runs), str(a.count or 0)],
                                 capture_output=True, text=True, check=True).stdout.split()
            best, per_packet, n = float(out[0]), int(out[1]), int(out[2])
            print(f"{a.lua}, the core of {p} on {n} packets: {best:.3f} s (best of {a.runs}, "
                  f"{best / n * 1e6:.1f} us a packet), {per_packet} bytes allocated a packet")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capture", default=str(ROOT / "bench" / "cache" / "bench-100m.pcap"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--root", action="append", default=[], help="a Debian root with tshark (repeatable)")
    ap.add_argument("--instructions", action="store_true")
    ap.add_argument("--count", type=int, help="read only the first N packets")
    ap.add_argument("--plugin", action="append", default=[], help="the plugin to measure (repeatable)")
    ap.add_argument("--skip-system", action="store_true", help="only the roots, not this machine's tshark")
    ap.add_argument("--core", action="store_true", help="the analysis core alone, under --lua, not tshark")
    ap.add_argument("--lua", default="lua5.4", help="the interpreter for --core")
    a = ap.parse_args()
    if not Path(a.capture).is_file():
        sys.exit(f"{a.capture}: no such capture (bench/run.sh makes it)")
    plugins = [Path(p) for p in (a.plugin or [str(PLUGIN)])]
    if a.core:
        core(a, plugins)
        return
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
