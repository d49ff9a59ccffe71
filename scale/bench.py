#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The archive job's benchmark: files/s and MB/s with 1 and 2 local Dask workers.

Two sets of captures, made once in CACHE (default bench/cache/fleet, or bench/cache/fleet-lab for
--set lab; ignored by git):
- small-block (the default): the small-block benchmark's captures (bench/make-small-block.py: lab
  captures of 1 KiB and 8 KiB queue-depth-1 reads and writes written one after another), FILES
  (default 8) of them of about PACKETS packets each. Small blocks are the job's hard case: a
  command per ~7 packets, so the JSON Lines to parse are largest for the bytes.
- lab: the large lab capture bench-4g.pcap (bench/make-capture.py, as root, ~2 minutes: mixed
  sizes 512 B .. 1 MiB, queue depths 1 .. 32, its 1.27 GB run four times; taken from $BENCH_CACHE,
  default bench/cache, as bench/run.sh does, and made there if missing), cut with editcap into
  FILES (default 8) files of equal packet counts, about 640 MB each, most starting mid-session.
  Mostly large blocks: a command per ~30 KB of capture.
Each configuration runs REPEAT times (the fastest is kept, the machine is shared), with the CPU
seconds it took (user + system, every process it started); the bare CLI over the same files with
-j N is timed too, as the floor.

usage: scale/bench.py [--set small-block|lab] [--files N] [--packets 150000] [--repeat 2]
                      [--cache DIR] [--workers 1,2]
"""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make(cache, files, packets):
    cache.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(files):
        f = cache / f"fleet-{packets}-{i}.pcap"
        if not f.exists():  # each a different length, so no two files are the same
            subprocess.run([sys.executable, str(ROOT / "bench" / "make-small-block.py"), str(f),
                            str(packets + 997 * i)], check=True, stdout=subprocess.DEVNULL)
        out.append(f)
    return out


def make_lab(cache, files):
    big = Path(os.environ.get("BENCH_CACHE", ROOT / "bench" / "cache")) / "bench-4g.pcap"
    if not big.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "make-capture.py"), str(big.parent)],
                       check=True, stdout=subprocess.DEVNULL)
    cache.mkdir(parents=True, exist_ok=True)
    packets = int(subprocess.run(["capinfos", "-M", "-c", "-T", "-r", str(big)], check=True, text=True,
                                 capture_output=True).stdout.split("\t")[1])
    out = []
    for i in range(files):
        f = cache / f"lab-{files}-{i}.pcap"
        if not f.exists():
            subprocess.run(["editcap", "-F", "pcap", "-r", str(big), f"{f}.tmp",
                            f"{i * packets // files + 1}-{(i + 1) * packets // files}"], check=True)
            os.rename(f"{f}.tmp", f)
        out.append(f)
    return out


def timed(cmd, env=None):
    """(wall seconds, CPU seconds of it and all it started, standard output)"""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"bench: {' '.join(map(str, cmd))} failed: {r.stderr[-2000:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, r.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--set", choices=("small-block", "lab"), default="small-block")
    p.add_argument("--files", type=int)
    p.add_argument("--packets", type=int, default=150_000)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--cache", type=Path)
    p.add_argument("--iscsi-doctor", default=os.environ.get("ISCSI_DOCTOR", str(ROOT / "build" / "cli" / "iscsi-doctor")))
    a = p.parse_args()
    cache = a.cache or ROOT / "bench" / "cache" / ("fleet" if a.set == "small-block" else "fleet-lab")
    if a.set == "lab":
        files = make_lab(cache, a.files or 8)
    else:
        files = make(cache, a.files or 8, a.packets)
    size = sum(f.stat().st_size for f in files)
    for f in files:  # warm page cache: every run reads from memory
        f.read_bytes()
    env = {**os.environ, "ISCSI_DOCTOR": a.iscsi_doctor}
    job = [sys.executable, str(ROOT / "scale" / "iscsi_doctor_fleet.py"), "run", "-q", "--overwrite"]
    print(f"{len(files)} files, {size / 1e6:.0f} MB, {os.cpu_count()} cores; best of {a.repeat}; "
          f"load average before: {os.getloadavg()[0]:.1f}")
    print()
    print("| run | workers | seconds | files/s | MB/s | commands/s | CPU s | of which: cluster start, analysis, summary (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    out = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    try:
        for n in (int(x) for x in a.workers.split(",")):
            best = None
            for _ in range(a.repeat):
                secs, cpu, text = timed([*job, "--workers", str(n), "-o", out / "o", *files], env)
                m = re.search(r"\), (\d+) commands .* \(cluster ([\d.]+) s, analysis ([\d.]+) s, summary ([\d.]+) s\)", text)
                if best is None or secs < best[0]:
                    best = (secs, cpu, int(m.group(1)), *map(float, m.groups()[1:]))
            secs, cpu, commands, up, analysis, summary = best
            print(f"| fleet job, end to end | {n} | {secs:.2f} | {len(files) / secs:.2f} | "
                  f"{size / 1e6 / secs:.0f} | {commands / secs:,.0f} | {cpu:.1f} | {up:.2f}, {analysis:.2f}, {summary:.2f} |")
            print(f"| fleet job, analysis alone | {n} | {analysis:.2f} | {len(files) / analysis:.2f} | "
                  f"{size / 1e6 / analysis:.0f} | {commands / analysis:,.0f} | | |")
            cli, cli_cpu, _ = min(timed([a.iscsi_doctor, "--format", "jsonl", "-q", "-j", str(n), "-o", os.devnull,
                                         *files]) for _ in range(a.repeat))
            print(f"| iscsi-doctor --format jsonl -j {n}, the CLI alone | {n} | {cli:.2f} | {len(files) / cli:.2f} | "
                  f"{size / 1e6 / cli:.0f} | {commands / cli:,.0f} | {cli_cpu:.1f} | |")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"\nload average after: {os.getloadavg()[0]:.1f} (other work on the machine slows every row)")


if __name__ == "__main__":
    main()
