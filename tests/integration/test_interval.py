# SPDX-License-Identifier: GPL-2.0-or-later
"""--interval S: a line (text) or record (--format jsonl) per S seconds of capture time with
commands, counted by when each command's status came; the packets' own times from tshark say
which interval each command falls in."""
import collections
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
FIXTURE = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"


def run(*args):
    r = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    return r.stdout


def tshark_reads_by_interval(path, seconds):
    """Interval index -> SCSI READ(10) commands whose SCSI Response frame falls in it (times from
    the capture's first packet, as tshark counts them)."""
    out = subprocess.run(["tshark", "-r", str(path), "-Y", "iscsi.opcode == 0x21 && iscsi.request_frame",
                          "-T", "fields", "-e", "frame.time_relative", "-e", "scsi.request_frame"],
                         capture_output=True, text=True, check=True).stdout
    reads = set(subprocess.run(["tshark", "-r", str(path), "-Y", "scsi_sbc.opcode == 0x28", "-T", "fields",
                                "-e", "frame.number"], capture_output=True, text=True, check=True).stdout.split())
    by = collections.Counter()
    for line in out.splitlines():
        t, req = line.split("\t")
        if req in reads:
            by[int(float(t) // seconds)] += 1
    return by


def test_jsonl_intervals_count_the_reads_tshark_places_there():
    recs = [json.loads(l) for l in run("--format", "jsonl", "--interval", "0.5", FIXTURE).splitlines()]
    intervals = [r for r in recs if r["type"] == "interval"]
    commands = [r for r in recs if r["type"] == "command"]
    assert len(intervals) >= 5
    assert sum(i["commands"] for i in intervals) == len(commands)
    ours = collections.Counter()
    for i in intervals:
        assert i["seconds"] > 0 and i["start_s"] == round(i["start_s"] / 0.5) * 0.5
        assert abs(i["iops"] - i["commands"] / i["seconds"]) < 1e-6
        assert i["latency_ms"]["p50"] <= i["latency_ms"]["p99"] <= i["latency_ms"]["max"]
        ours[round(i["start_s"] / 0.5)] = i["commands"]
    theirs = tshark_reads_by_interval(FIXTURE, 0.5)
    # every interval holds the reads tshark answers there, plus the few other commands (login, ...)
    for k, n in theirs.items():
        assert ours[k] >= n, (k, ours[k], n)
    assert sum(ours.values()) - sum(theirs.values()) <= 8
    found = collections.Counter()
    for i in intervals:
        found.update(i["findings"])
    assert found == collections.Counter(r["kind"] for r in recs if r["type"] == "finding")


def test_text_lines_come_before_the_report_and_usage():
    out = run("--interval", "1", FIXTURE)
    lines = out.splitlines()
    assert lines[0].startswith("interval +0.0..+1.0 s: ")
    assert "nagle_hold" in lines[0] and "IOPS" in lines[0]
    assert any(l.startswith("== ") for l in lines)
    for args in (["--format", "json"], ["--html", os.devnull], ["-j", "2"]):
        r = subprocess.run([BIN, "--interval", "1", *args, str(FIXTURE)], capture_output=True, text=True)
        assert r.returncode == 2 and "--interval" in r.stderr, (args, r.stderr)
