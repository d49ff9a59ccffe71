# SPDX-License-Identifier: GPL-2.0-or-later
"""--format jsonl (JSON Lines): the same analysis as --format json, one record per line: every
command, every finding (with its command's LUN), sessions, notices, each capture and the run; lines
of several captures (-j) never mixed."""
import collections
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
FIXTURES = ROOT / "captures" / "fixtures"
FILES = [FIXTURES / "scripted-nagle-read-1k--initiator.pcap.gz", FIXTURES / "stock-loss-read--target.pcap.gz",
         FIXTURES / "test-cu--initiator.pcap.gz"]
META = {"type", "path", "capture_start_ns"}


def run(fmt, *args):
    r = subprocess.run([BIN, "--format", fmt, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    return r.stdout


def records(*args):
    return [json.loads(line) for line in run("jsonl", *args).splitlines()]


def strip(r, *more):
    return {k: v for k, v in r.items() if k not in META and k not in more}


def canon(x):
    return json.dumps(x, sort_keys=True)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.split(".")[0])
def test_same_analysis_as_json(path):
    doc = json.loads(run("json", path))
    recs = records(path)
    by_type = collections.defaultdict(list)
    for r in recs:
        by_type[r["type"]].append(r)
        assert r["type"] == "run" or r["path"] == str(path)
    assert set(by_type) <= {"command", "finding", "session", "notice", "capture", "run"}
    # A record is written as its command comes, with its connection's round trip to the initiator as
    # measured until then; JSON waits for the final one (docs/json-schema.md). Checked against the
    # lab's configuration in test_initiator_estimate_as_the_commands_come.
    est = "initiator_latency_ms"
    assert [strip(r, est) for r in by_type["command"]] == [strip(c, est) for c in doc["commands"]]
    assert sorted(canon(strip(r, "lun")) for r in by_type["finding"]) == sorted(map(canon, doc["findings"]))
    lun = {(c["connection"], c["itt"], c["first_frame"]): c["lun"] for c in doc["commands"]}
    for f in by_type["finding"]:
        want = lun.get((f["connection"], f["itt"], f["command_first_frame"])) if f["itt"] else None
        assert f["lun"] == want
    # a command's findings follow it
    seen = set()
    for r in recs:
        if r["type"] == "command":
            seen.add((r["connection"], r["itt"], r["first_frame"]))
        elif r["type"] == "finding" and r["itt"]:
            assert (r["connection"], r["itt"], r["command_first_frame"]) in seen
    (cap,) = by_type["capture"]
    assert strip(cap, "capture") == {k: v for k, v in doc["captures"][0].items() if k != "path"}
    assert [strip(s, "capture") for s in by_type["session"]] == [
        {k: v for k, v in s.items() if k != "capture"} for s in doc["sessions"]]
    (end,) = by_type["run"]
    assert recs[-1] is end and end["summary"]["commands"] == doc["summary"]["commands"]
    assert end["gate"] == doc["summary"]["gate"]


def test_jobs_keep_each_capture_together():
    recs = records("-j", "2", *FILES)
    order = [r["capture"] for r in recs if r["type"] != "run"]
    assert order == sorted(order) and set(order) == {0, 1, 2}
    paths = {r["capture"]: r["path"] for r in recs if r["type"] == "capture"}
    assert paths == {i: str(f) for i, f in enumerate(FILES)}


def test_run_record_names_whose_examples():
    """The run's advice takes each kind's example frames from one capture and names it, as --format
    json does; every capture's own advice names itself."""
    doc = json.loads(run("json", *FILES))
    recs = records(*FILES)
    (end,) = [r for r in recs if r["type"] == "run"]
    assert end["summary"]["advice"] == doc["summary"]["advice"]
    for a in end["summary"]["advice"]:
        cap = doc["captures"][a["example_capture"]]["summary"]["advice"]
        assert a["example_frames"] == next(x["example_frames"] for x in cap if x["kind"] == a["kind"])
    for c in (r for r in recs if r["type"] == "capture" and r["summary"]):
        assert {a["example_capture"] for a in c["summary"]["advice"]} <= {c["capture"]}


def test_initiator_estimate_as_the_commands_come():
    """Near the target, a command record's initiator_latency_ms is its latency plus the lab's round
    trip (two one-way delays, captures/MANIFEST.json), from the first command of each connection
    with a measured round trip on (it was null: the round trip was taken from the connection's
    report, which comes after its commands)."""
    import math
    name = "fixtures/stock-read--target.pcap.gz"
    made = {c["file"]: c for c in json.loads((ROOT / "captures" / "MANIFEST.json").read_text())["captures"]}[name]["made"]
    assert made["vantage"] == "target"
    round_trip = 2 * made["one_way_delay_ms"]
    done = [r for r in records(ROOT / "captures" / name) if r["type"] == "command" and r["completed"]]
    assert done
    for r in done:
        extra = r["initiator_latency_ms"] - r["latency_ms"]
        assert math.isclose(extra, round_trip, rel_tol=0.1, abs_tol=0.3), (r["itt"], extra, round_trip)
