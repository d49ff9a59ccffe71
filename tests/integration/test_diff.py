# SPDX-License-Identifier: GPL-2.0-or-later
"""`iscsi-doctor diff BEFORE AFTER`. The pairs are lab twins that differ in one configured setting
(captures/MANIFEST.json: Nagle on the scripted target, or TCP_NODELAY): the findings the
configuration puts in one and not the other must show as gone or new, and the gain BEFORE's report
predicts for removing them must match the gain AFTER measures (within 10%, at each vantage)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
MANIFEST = {c["file"]: c for c in json.loads((ROOT / "captures" / "MANIFEST.json").read_text())["captures"]}


def fixture(name):
    return "fixtures/%s.pcap.gz" % name


def diff(*args, code=(0,), stdin=None):
    r = subprocess.run([BIN, "diff", "--format", "json", *args], input=stdin, capture_output=True, timeout=300)
    r.stdout, r.stderr = r.stdout.decode(), r.stderr.decode()
    assert r.returncode in code, r.stderr
    return json.loads(r.stdout) if r.stdout else None, r


def configured_findings(file):
    """'kind (side)' of the findings the configuration makes the commands show."""
    return {"%s (%s)" % kv for e in MANIFEST[file]["expect"] for kv in e.get("findings", {}).items()}


@pytest.mark.parametrize("vantage", ["initiator", "target"])
def test_nagle_fixture_against_its_nodelay_twin(vantage):
    before, after = fixture("scripted-nagle-read-1k--" + vantage), fixture("scripted-nodelay-read-1k--" + vantage)
    assert MANIFEST[before]["made"]["nagle"]["target"] and not MANIFEST[after]["made"]["nagle"]["target"]
    want_gone = configured_findings(before) - configured_findings(after)
    assert want_gone == {"nagle_hold (target)", "delayed_ack (initiator)"}
    d, _ = diff(str(ROOT / "captures" / before), str(ROOT / "captures" / after))
    gone = {f["finding"] for f in d["findings"] if f["status"] == "gone"}
    assert want_gone <= gone
    excluded = {k for e in MANIFEST[after]["expect"] for k in e.get("absent", [])}
    assert not [f for f in d["findings"] if f["status"] == "new" and f["finding"].split()[0] in excluded]
    p = d["prediction"]
    assert p["predicted_gain_ms"] > 0
    assert abs(p["measured_gain_ms"] - p["predicted_gain_ms"]) <= 0.10 * p["predicted_gain_ms"], p
    assert d["regressions"] == [] and not d["gate"]["tripped"]


def test_the_other_way_is_a_regression():
    before, after = fixture("scripted-nodelay-read-1k--initiator"), fixture("scripted-nagle-read-1k--initiator")
    d, r = diff("--fail-on-regression", str(ROOT / "captures" / before), str(ROOT / "captures" / after), code=(1,))
    assert d["gate"] == {"requested": True, "tripped": True}
    text = "\n".join(d["regressions"])
    for finding in configured_findings(after) - configured_findings(before):
        assert finding + ": new" in text
    assert "read 1 KiB: median" in text  # 1 round trip -> 2 round trips and a delayed ACK
    # Without the gate the same comparison exits 0.
    diff(str(ROOT / "captures" / before), str(ROOT / "captures" / after), code=(0,))


def test_json_reports_compare_as_their_captures(tmp_path):
    files = [ROOT / "captures" / fixture("scripted-nagle-read-1k--initiator"),
             ROOT / "captures" / fixture("scripted-nodelay-read-1k--initiator")]
    reports = []
    for i, f in enumerate(files):
        out = tmp_path / ("r%d.json" % i)
        subprocess.run([BIN, "-q", "--format", "json", "-o", str(out), str(f)], check=True, timeout=300)
        reports.append(str(out))
    from_captures, _ = diff(*map(str, files))
    from_reports, _ = diff(*reports)
    for d in (from_captures, from_reports):
        del d["before"], d["after"]
    assert from_reports == from_captures


def test_after_from_a_pipe():
    before, after = [ROOT / "captures" / fixture(n) for n in ("scripted-nagle-read-1k--initiator",
                                                               "scripted-nodelay-read-1k--initiator")]
    from_files, _ = diff(str(before), str(after))
    piped, _ = diff(str(before), "-", stdin=after.read_bytes())
    assert piped["after"] == "-"
    for d in (from_files, piped):
        del d["before"], d["after"]
    assert piped == from_files


def test_same_capture_has_no_regression():
    f = str(ROOT / "captures" / fixture("stock-qd8-read--initiator"))
    d, _ = diff("--fail-on-regression", f, f)
    assert d["regressions"] == [] and {x["status"] for x in d["findings"]} <= {"both"}


def test_unusable_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a report"}')
    _, r = diff(str(bad), str(ROOT / "captures" / fixture("stock-read--initiator")), code=(2,))
    assert "not an iscsi-doctor JSON report" in r.stderr
    _, r = diff(str(tmp_path / "missing.pcap"), str(bad), code=(2,))
    assert "missing.pcap" in r.stderr
