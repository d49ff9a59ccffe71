#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Makes the benchmark's captures with the capture lab (captures/lab/lab.py), as root.

Two live runs against real tgtd + qemu-img bench (libiscsi), initiator vantage, 0.5 ms one way:
one with both peers on TCP_NODELAY (stock), one with Nagle on at both sides (the shim). Each run is
a long list of qemu-img bench jobs of mixed sizes (512 B .. 1 MiB), queue depths (1 .. 32), reads
and writes. The two captures are concatenated (mergecap -a) into bench-1g.pcap; bench-100m.pcap
is its first ~100 MB (editcap), bench-4g.pcap is bench-1g four times, each copy shifted in time
(editcap -t) so the timestamps keep increasing. The lab itself gives ~1.1 GB in about 2 minutes;
4 GB of it would take long and add nothing the concatenation does not show.

usage: bench/make-capture.py CACHE_DIR        (files already there are kept)
"""
import atexit
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.join(HERE, "..", "captures", "lab")
sys.path.insert(0, LAB)
import lab  # noqa: E402

KIB, MIB = 1024, 1024 * 1024


class _BigBufferSubprocess:
    """lab.py's subprocess, but tcpdump gets a 256 MB buffer: at ~100 MB/s on a loaded machine
    the lab's 32 MB one drops packets (and the lab then refuses the run)."""
    def __getattr__(self, name):
        return getattr(subprocess, name)

    @staticmethod
    def Popen(cmd, *a, **kw):
        if "tcpdump" in cmd and "-B" in cmd:
            cmd = list(cmd)
            cmd[cmd.index("-B") + 1] = "262144"
        return subprocess.Popen(cmd, *a, **kw)


lab.subprocess = _BigBufferSubprocess()


def jobs(nagle):
    """(qemu-img bench args) list; counts chosen so each run carries ~550 MB in under a minute,
    reads and writes alternating. Nagle on makes small QD-1 commands wait for delayed ACKs
    (~40 ms): fewer of them."""
    small_qd1 = 100 if nagle else 1000
    j = []
    for args in (["-c", "130", "-d", "16", "-s", "1M"],      # several Data-In / R2T bursts
                 ["-c", "1000", "-d", "32", "-s", "64k"],
                 ["-c", "1000", "-d", "8", "-s", "32k"],
                 ["-c", "2000", "-d", "4", "-s", "8k"],
                 ["-c", "4000", "-d", "32", "-s", "4k"],
                 ["-c", str(small_qd1), "-d", "1", "-s", "4k"],
                 ["-c", str(small_qd1), "-d", "1", "-s", "512"],
                 ["-c", "1500", "-d", "2", "-s", "16k"]):
        j += [args, args + ["-w"]]
    return [("bench", a) for a in j]


for name, nagle in (("bench-nodelay", False), ("bench-nagle", True)):
    lab.scenario(name, doc="benchmark: mixed sizes and queue depths, Nagle %s" % ("on" if nagle else "off"),
                 target_nagle=nagle, initiator_nagle=nagle, delay_ms=0.5, vantages=("initiator",),
                 workload=jobs(nagle), workload_text="bench")


def sh(*cmd):
    subprocess.run(cmd, check=True)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    cache = os.path.abspath(sys.argv[1])
    atexit.register(lab._cleanup_all)  # namespaces, forwarder, target: gone also on failure
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lab._on_signal)
    os.makedirs(cache, exist_ok=True)
    f1g, f100m, f4g = (os.path.join(cache, "bench-%s.pcap" % s) for s in ("1g", "100m", "4g"))
    if not os.path.exists(f1g):
        build = os.path.join(cache, "lab-build")
        sh(os.path.join(LAB, "build-helpers.sh"), build)
        parts = []
        for name in ("bench-nodelay", "bench-nagle"):
            for _, path in lab.run_scenario(name, cache, build):
                parts.append(path)
        sh("mergecap", "-a", "-F", "pcap", "-w", f1g + ".tmp", *parts)
        os.rename(f1g + ".tmp", f1g)
        for p in parts:
            os.unlink(p)
    if not os.path.exists(f100m):
        # ~100 MB: as many leading packets as make 100 MB (average packet size from capinfos)
        out = subprocess.run(["capinfos", "-M", "-c", "-T", "-r", f1g], check=True, text=True,
                             stdout=subprocess.PIPE).stdout.split("\t")
        n = int(int(out[1]) * 100e6 / os.path.getsize(f1g))
        sh("editcap", "-F", "pcap", "-r", f1g, f100m + ".tmp", "1-%d" % n)
        os.rename(f100m + ".tmp", f100m)
    if not os.path.exists(f4g):
        out = subprocess.run(["capinfos", "-M", "-S", "-a", "-e", "-T", "-r", f1g], check=True, text=True,
                             stdout=subprocess.PIPE).stdout.strip().split("\t")
        span = float(out[2]) - float(out[1]) + 10
        copies = []
        for i in range(4):
            c = os.path.join(cache, "copy%d.pcap" % i)
            sh("editcap", "-F", "pcap", "-t", "%.6f" % (i * span), f1g, c)
            copies.append(c)
        sh("mergecap", "-a", "-F", "pcap", "-w", f4g + ".tmp", *copies)
        os.rename(f4g + ".tmp", f4g)
        for c in copies:
            os.unlink(c)
    for f in (f100m, f1g, f4g):
        print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
