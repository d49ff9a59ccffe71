# SPDX-License-Identifier: GPL-2.0-or-later
"""-j N analyses captures in parallel and must not change a byte of any output (docs/cli.md,
docs/json-schema.md): every format, the findings CSV, JUnit and HTML at -j 1 and -j 4 on several
captures, compared whole; and the records themselves checked against what the one-capture JSON
report says of each capture, so that an output emptied at every -j alike cannot pass either."""
import csv
import io
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
FIX = ROOT / "captures" / "fixtures"
# Four usable captures of different shapes and one that cannot be read (its error is reported in
# its place, whatever -j).
FILES = [FIX / "scripted-nagle-read-1k--initiator.pcap.gz", FIX / "test-cu--initiator.pcap.gz",
         FIX / "stock-loss-read--target.pcap.gz", ROOT / "tests" / "corpus" / "bad-magic.pcap",
         ROOT / "captures" / "wireshark-wiki" / "iscsi-scsi-data-cdrom.pcap.gz",
         # joined mid-session: findings that rest on inferred facts (the run's advice lists them)
         FIX / "scripted-nagle-read-8k-joined--initiator.pcap.gz", FIX / "initiator-nagle-write-8k-joined--target.pcap.gz"]
USABLE = [f for f in FILES if f.name != "bad-magic.pcap"]


def run(*args):
    r = subprocess.run([BIN, "-q", *map(str, args)], capture_output=True, timeout=300)
    assert r.returncode in (0, 1, 2), r.stderr.decode(errors="replace")
    return r


def outputs(jobs, tmp):
    """Every output of one run per format, as bytes, keyed by what it is."""
    tmp.mkdir()
    out = {}
    for fmt in ("text", "json", "jsonl", "csv", "verdict"):
        extra = ["--findings-csv", tmp / "findings.csv"] if fmt == "csv" else []
        r = run("-j", jobs, "--format", fmt, "--junit", tmp / f"{fmt}.xml", *extra, *FILES)
        out[fmt] = r.stdout
        out[fmt + " exit"] = r.returncode
        out[fmt + " junit"] = (tmp / f"{fmt}.xml").read_bytes()
        if extra:
            out["findings csv"] = (tmp / "findings.csv").read_bytes()
    run("-j", jobs, "--html", tmp / "r.html", *FILES)
    out["html"] = (tmp / "r.html").read_bytes()
    return out


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    return outputs(1, tmp_path_factory.mktemp("j1") / "o"), outputs(4, tmp_path_factory.mktemp("j4") / "o")


@pytest.fixture(scope="module")
def alone():
    """Each usable capture's own JSON report: what the run's records must hold."""
    return {str(f): json.loads(run("--format", "json", f).stdout) for f in USABLE}


@pytest.mark.parametrize("what", ["text", "json", "jsonl", "csv", "verdict", "findings csv", "html",
                                  "text junit", "json exit", "jsonl exit"])
def test_same_bytes_at_any_jobs(both, what):
    one, four = both
    assert one[what] == four[what], f"{what}: -j 4 differs from -j 1"


@pytest.mark.parametrize("jobs", [0, 1], ids=["j1", "j4"])
def test_jsonl_holds_every_command_and_finding(both, alone, jobs):
    recs = [json.loads(line) for line in both[jobs]["jsonl"].splitlines()]
    for i, f in enumerate(FILES):
        mine = [r for r in recs if r.get("capture") == i]
        if str(f) not in alone:
            assert [r["type"] for r in mine] == ["capture"] and mine[0]["usable"] is False
            continue
        doc = alone[str(f)]
        assert doc["commands"], f"{f.name}: the capture must have commands for this test to mean anything"
        # (initiator_latency_ms: a record's is null until its connection is reported; JSON waits)
        cmds = [{k: v for k, v in r.items()
                 if k not in ("type", "path", "capture_start_ns", "capture", "initiator_latency_ms")}
                for r in mine if r["type"] == "command"]
        assert cmds == [{k: v for k, v in c.items() if k not in ("capture", "initiator_latency_ms")}
                        for c in doc["commands"]], f.name
        finds = sorted(json.dumps({k: v for k, v in r.items()
                                   if k not in ("type", "path", "capture_start_ns", "capture", "lun")},
                                  sort_keys=True) for r in mine if r["type"] == "finding")
        assert finds == sorted(json.dumps({k: v for k, v in x.items() if k != "capture"}, sort_keys=True)
                               for x in doc["findings"]), f.name


@pytest.mark.parametrize("jobs", [0, 1], ids=["j1", "j4"])
def test_json_and_csv_hold_every_command(both, alone, jobs):
    doc = json.loads(both[jobs]["json"])
    rows = list(csv.DictReader(io.StringIO(both[jobs]["csv"].decode())))
    for i, f in enumerate(USABLE):
        idx = FILES.index(f)
        want = [c["itt"] + "@" + str(c["first_frame"]) for c in alone[str(f)]["commands"]]
        assert [c["itt"] + "@" + str(c["first_frame"]) for c in doc["commands"] if c["capture"] == idx] == want
        assert [r["itt"] + "@" + r["first_frame"] for r in rows if r["capture"] == str(idx)] == want
