# SPDX-License-Identifier: GPL-2.0-or-later
"""--junit FILE: the run as JUnit XML for CI systems. Which cases fail comes from the fixtures'
configuration (captures/MANIFEST.json: the findings each must show, and those it must not), not
from the tool's own report; the exit code is the one the run has without --junit."""
import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
MANIFEST = {c["file"]: c for c in json.loads((ROOT / "captures" / "MANIFEST.json").read_text())["captures"]}
NAGLE = "fixtures/scripted-nagle-read-1k--initiator.pcap.gz"  # Nagle hold + delayed ACK per read
STOCK = "fixtures/stock-read--initiator.pcap.gz"              # TCP_NODELAY peers: no holds
KINDS = ["nagle_hold", "delayed_ack", "r2t_round_trip", "cwnd_limited", "rwnd_limited", "retransmission",
         "target_think", "serialized", "link_limited", "think_or_hold",
         "think_or_network"]
# The sides each kind's case is about: the path's own kind (the link) has the network side only.
SIDES = {k: ("network",) if k == "link_limited" else ("initiator", "target") for k in KINDS}


def junit(tmp_path, *args):
    out = tmp_path / "junit.xml"
    r = subprocess.run([BIN, "-q", "--junit", str(out), *args], capture_output=True, text=True, errors="replace",
                       timeout=300)
    plain = subprocess.run([BIN, "-q", *args], capture_output=True, text=True, errors="replace", timeout=300)
    assert r.returncode == plain.returncode, "--junit changed the exit code"
    validate(out)
    root = ET.parse(out).getroot()
    check_counts(root)
    return r, root


# The schema Jenkins' xunit plugin reads (junit-10.xsd), which GitLab, GitHub and Azure reporters
# also accept; scripts/install-deps.sh puts it here from pytest's source release.
XSD = Path(os.environ.get("ISCSI_DOCTOR_JUNIT_XSD", "/var/cache/iscsi-doctor/junit-10.xsd"))


def validate(path):
    assert XSD.is_file(), f"{XSD} missing: scripts/install-deps.sh fetches it"
    assert shutil.which("xmllint"), "xmllint missing (Debian libxml2-utils): scripts/install-deps.sh installs it"
    r = subprocess.run(["xmllint", "--noout", "--schema", str(XSD), str(path)], capture_output=True, text=True,
                       errors="replace", timeout=60)
    assert r.returncode == 0, f"{path} does not validate against {XSD.name}:\n{r.stderr[-2000:]}"


def test_schema_check_can_fail(tmp_path):
    """The validation rejects what the schema forbids (a testsuite without its counts)."""
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="x"><testcase name="y"/></testsuite></testsuites>')
    with pytest.raises(AssertionError, match="does not validate"):
        validate(bad)


def check_counts(root):
    """The counts the CI system shows are those of the cases."""
    assert root.tag == "testsuites"
    total = {"tests": 0, "failures": 0, "errors": 0}
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        n = {"tests": len(cases), "failures": sum(c.find("failure") is not None for c in cases),
             "errors": sum(c.find("error") is not None for c in cases)}
        assert {k: int(suite.get(k)) for k in n} == n, suite.get("name")
        for k in total:
            total[k] += n[k]
        for c in cases:
            assert c.get("classname") and c.get("name")
    assert {k: int(root.get(k)) for k in total} == total


def outcome(case):
    return "failure" if case.find("failure") is not None else "error" if case.find("error") is not None else "pass"


def cases_of(root, suite_name):
    suite = [s for s in root.findall("testsuite") if s.get("name") == suite_name]
    assert len(suite) == 1, [s.get("name") for s in root.findall("testsuite")]
    return {c.get("name"): c for c in suite[0].findall("testcase")}


def expected(file):
    """Finding kind -> side the configuration makes every command show, and kinds it excludes."""
    must, never = {}, set()
    for e in MANIFEST[file]["expect"]:
        must.update(e.get("findings", {}))
        never.update(e.get("absent", []))
    return must, never


def test_every_kind_and_side_is_a_case_and_the_configured_findings_fail(tmp_path):
    _, root = junit(tmp_path, str(ROOT / "captures" / NAGLE))
    cases = cases_of(root, str(ROOT / "captures" / NAGLE))
    assert set(cases) == {f"{k} ({s})" for k in KINDS for s in SIDES[k]}
    must, never = expected(NAGLE)
    assert must  # nagle_hold (target), delayed_ack (initiator)
    for kind, side in must.items():
        f = cases[f"{kind} ({side})"].find("failure")
        assert f is not None and f.get("type") == kind
        assert "fix: " in f.text and "evidence frames: " in f.text
    for kind in never:
        for side in SIDES[kind]:
            assert outcome(cases[f"{kind} ({side})"]) == "pass"
    # A workload's queue depth is not a defect of either peer: serialized is told, not failed.
    assert MANIFEST[NAGLE]["session"]["findings"] == ["serialized"]
    serialized = cases["serialized (initiator)"]
    assert outcome(serialized) == "pass" and "serialized" in serialized.find("system-out").text


def test_gate_checks_are_cases(tmp_path):
    r, root = junit(tmp_path, "--fail-on", "nagle_hold,rwnd_limited", "--max-excess-round-trips", "0",
                    str(ROOT / "captures" / NAGLE))
    assert r.returncode == 1
    gate = cases_of(root, "gate")
    assert set(gate) == {"--fail-on nagle_hold", "--fail-on rwnd_limited", "--max-excess-round-trips 0"}
    assert outcome(gate["--fail-on nagle_hold"]) == "failure"
    assert outcome(gate["--fail-on rwnd_limited"]) == "pass"  # configured: no window stalls
    assert outcome(gate["--max-excess-round-trips 0"]) == "failure"  # 2 round trips where 1 is ideal
    # With --fail-on, only the kinds it names fail their capture cases.
    cases = cases_of(root, str(ROOT / "captures" / NAGLE))
    assert outcome(cases["nagle_hold (target)"]) == "failure"
    assert outcome(cases["delayed_ack (initiator)"]) == "pass"
    assert "not named by --fail-on" in cases["delayed_ack (initiator)"].find("system-out").text


def test_clean_capture_passes_the_gate(tmp_path):
    must, never = expected(STOCK)
    assert not must and {"nagle_hold", "delayed_ack"} <= never
    r, root = junit(tmp_path, "--fail-on", "nagle_hold,delayed_ack", str(ROOT / "captures" / STOCK))
    assert r.returncode == 0
    assert {n: outcome(c) for n, c in cases_of(root, "gate").items()} == {
        "--fail-on nagle_hold": "pass", "--fail-on delayed_ack": "pass"}


def test_unusable_input_is_an_error_case_and_names_are_escaped(tmp_path):
    odd = tmp_path / "a&b<c>'d\".pcap.gz"
    shutil.copy(ROOT / "captures" / NAGLE, odd)
    r, root = junit(tmp_path, str(odd), str(tmp_path / "missing.pcap"))
    assert r.returncode == 2
    assert outcome(cases_of(root, str(odd))["nagle_hold (target)"]) == "failure"
    err = cases_of(root, str(tmp_path / "missing.pcap"))["capture readable"].find("error")
    assert err is not None and "cannot open" in err.get("message")


def test_unwritable_file_is_an_error(tmp_path):
    r = subprocess.run([BIN, "-q", "--junit", str(tmp_path / "no" / "such" / "dir.xml"), str(ROOT / "captures" / STOCK)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "cannot write the JUnit report" in r.stderr


def test_path_not_utf8_still_well_formed(tmp_path):
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xff\x01name.pcap.gz"))
    shutil.copy(ROOT / "captures" / STOCK, odd)
    _, root = junit(tmp_path, str(odd))  # ET.parse fails on an ill-formed file
    assert [s.get("name") for s in root.findall("testsuite")] == [str(tmp_path) + "/bad\ufffd?name.pcap.gz"]
