# SPDX-License-Identifier: GPL-2.0-or-later
"""Helpers for tests that need the capture lab: the manifest, and live captures made on demand.

    from lab import run_live_scenario, live_lab_available, load_manifest
    paths = run_live_scenario("scripted-nagle-read-8k", tmp_path)   # -> [Path(...--initiator.pcap), ...]

run_live_scenario() runs captures/lab/run-scenario.sh (real tgtd or the scripted target, a real
libiscsi initiator, real TCP stacks in network namespaces, tcpdump at each vantage point) and
returns the produced capture files (uncompressed pcap), initiator vantage first.  It needs root;
live_lab_available() says whether it can run here and, if not, why.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
CAPTURES = ROOT / "captures"
MANIFEST = CAPTURES / "MANIFEST.json"
RUN_SCENARIO = CAPTURES / "lab" / "run-scenario.sh"
# the scenario the live test runs: short (~100 x READ 8 KiB, ~10 s) and shows the study's Nagle case
LIVE_SCENARIO = "scripted-nagle-read-8k"
VANTAGE_ORDER = {"initiator": 0, "target": 1, "midpath": 2}


def load_manifest():
    with open(MANIFEST) as f:
        return json.load(f)


def live_lab_available():
    """(True, "") when the live lab can run here, else (False, reason)."""
    if os.geteuid() != 0:
        return False, "the live capture lab needs root (network namespaces, TAP devices, tcpdump)"
    for tool in ("ip", "tgtd", "tgtadm", "qemu-io", "tcpdump", "tshark", "cc", "python3"):
        if shutil.which(tool) is None:
            return False, "the live capture lab needs %s (see captures/README.md)" % tool
    if not os.path.exists("/dev/net/tun"):
        return False, "no /dev/net/tun: TAP devices unavailable"
    probe = "isdprobe%d" % os.getpid()
    r = subprocess.run(["ip", "netns", "add", probe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        return False, "network namespaces unavailable: " + r.stdout.strip()
    subprocess.run(["ip", "netns", "del", probe], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return True, ""


def run_live_scenario(name, outdir, timeout=120):
    """Run lab scenario NAME live, captures into OUTDIR; return the capture paths (initiator first)."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([str(RUN_SCENARIO), name, str(outdir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("run-scenario.sh %s failed (%d):\n%s\n%s" % (name, r.returncode, r.stdout, r.stderr[-4000:]))
    paths = [Path(p) for p in r.stdout.split() if p.endswith(".pcap")]
    paths.sort(key=lambda p: VANTAGE_ORDER.get(p.name.rsplit("--", 1)[-1].split(".")[0], 9))
    return paths


def tshark_pdus(path):
    """{opcode "0x.." -> count} of iSCSI PDUs as Wireshark's dissector sees them (default preferences)."""
    r = subprocess.run(["tshark", "-r", str(path), "-Y", "iscsi", "-T", "fields", "-e", "iscsi.opcode"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("tshark failed on %s: %s" % (path, r.stderr))
    counts = {}
    for line in r.stdout.split():
        for op in line.split(","):
            if op:
                k = "0x%02x" % int(op, 16)
                counts[k] = counts.get(k, 0) + 1
    return counts
