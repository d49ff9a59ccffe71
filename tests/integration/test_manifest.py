# SPDX-License-Identifier: GPL-2.0-or-later
"""Every expectation in captures/MANIFEST.json holds for iscsi-doctor's JSON report.

The manifest states what each fixture must show from how it was made (peers, Nagle settings,
delay) and from tshark's timings — never from iscsi-doctor's own output — so these tests can fail
when the engine's rules drift from reality. Also: on every fixture, the SCSI commands and their
status frames agree with Wireshark's iSCSI dissector (the oracle for framing and pairing).
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BINARY = os.environ.get("ISCSI_DOCTOR", str(ROOT / "build" / "cli" / "iscsi-doctor"))
MANIFEST = ROOT / "captures" / "MANIFEST.json"


def manifest_entries():
    if not MANIFEST.exists():
        return []
    return json.loads(MANIFEST.read_text())["captures"]


def analyse(path):
    out = subprocess.run([BINARY, "--format", "json", str(path)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode in (0, 1), f"{path}: exit {out.returncode}: {out.stderr[-2000:]}"
    return json.loads(out.stdout)


_reports = {}


def report_for(entry):
    path = ROOT / "captures" / entry["file"]
    if path not in _reports:
        _reports[path] = analyse(path)
    return _reports[path]


def findings_by_command(report):
    """(connection, itt, first frame) -> set of (kind, side) from the report's findings list."""
    found = {}
    for f in report["findings"]:
        if f.get("itt") is None:
            continue
        key = (f["connection"], f["itt"], f["command_first_frame"])
        found.setdefault(key, set()).add((f["kind"], f["side"]))
    return found


def selected(report, select):
    for c in report["commands"]:
        if not c["completed"]:
            continue
        if "op" in select and c["kind"] != select["op"]:
            continue
        if "bytes" in select and c["bytes"] != select["bytes"]:
            continue
        yield c


ENTRIES = [e for e in manifest_entries() if e.get("expect")]

# Lab fixtures come in sets (the manifest's "set"; without one, "lab": the fixtures the engine was built
# on). The expectations and the accuracy floor are enforced for the sets named here; the others are
# judged and printed, their misses an expected failure, until the engine handles them: then add them.
#   noisy: late-start captures on a jittered wire at every vantage (issue 26)
#   link:  transfers bound by the link's rate, link_limited (issue 32; enforced)
#   nots:  no TCP timestamps, a target whose every ACK of a command is late (enforced)
ENFORCED_SETS = {"lab", "link", "noisy", "nots"}


def fixture_set(entry):
    return entry.get("set", "lab")


def judge(exp, c, by_command):
    """Problems of command c under expectation exp ([] when it holds). A command that tshark timed
    otherwise (the manifest's measured_otherwise, from the capture's timings at the initiator) is
    judged as that says; None when tshark's timing says nothing either way (not judged)."""
    otherwise = exp.get("measured_otherwise", {})
    if c["itt"] in otherwise:
        if otherwise[c["itt"]] is None:
            return None
        exp = dict(exp, **{k: v for k, v in otherwise[c["itt"]].items() if k != "why"})
    kinds = by_command.get((c["connection"], c["itt"], c["first_frame"]), set())
    problems = []
    if "round_trips" in exp and c["round_trips"] != exp["round_trips"]:
        problems.append(f"round_trips {c['round_trips']} != {exp['round_trips']}")
    if "ideal_round_trips" in exp and c["ideal_round_trips"] != exp["ideal_round_trips"]:
        problems.append(f"ideal {c['ideal_round_trips']} != {exp['ideal_round_trips']}")
    for kind, side in exp.get("findings", {}).items():
        if kind not in c["findings"]:
            problems.append(f"missing {kind}")
        elif (kind, side) not in kinds:
            problems.append(f"{kind} not on the {side} side ({sorted(kinds)})")
    for kind in exp.get("absent", []):
        if kind in c["findings"]:
            problems.append(f"unexpected {kind}")
    return problems


@pytest.mark.skipif(not ENTRIES, reason="no manifest expectations (captures/MANIFEST.json)")
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["file"])
def test_manifest_expectations(entry):
    report = report_for(entry)
    by_command = findings_by_command(report)
    failures, known = [], []
    for i, exp in enumerate(entry["expect"]):
        cmds = list(selected(report, exp["select"]))
        if not cmds:
            failures.append(f"expect[{i}] {exp['select']}: no such completed command")
            continue
        ok = judged = 0
        bad_examples = []
        for c in cmds:
            problems = judge(exp, c, by_command)
            if problems is None:
                continue
            judged += 1
            if problems:
                if len(bad_examples) < 3:
                    bad_examples.append(f"itt {c['itt']} frame {c['first_frame']}: {', '.join(problems)}")
            else:
                ok += 1
        fraction = ok / judged if judged else 1.0
        need = exp.get("min_fraction", 1.0)
        if exp.get("known_gap"):
            # A documented limit: it must still fail, so that fixing it shows here.
            if fraction >= need:
                failures.append(f"expect[{i}] {exp['select']}: known gap now holds, remove it: {exp['known_gap']}")
            else:
                known.append(f"expect[{i}] {exp['select']}: {exp['known_gap']}")
            continue
        if fraction < need:
            failures.append(f"expect[{i}] {exp['select']}: {ok}/{judged} = {fraction:.2f} < {need}; "
                            + "; ".join(bad_examples))
    session = entry.get("session", {})
    want_vantage = session.get("vantage")
    if want_vantage:
        vantages = {s["vantage"] for s in report["sessions"]}
        if vantages != {want_vantage}:
            failures.append(f"vantage {sorted(vantages)} != {want_vantage}")
    # Session-level findings (serialized: the workload's queue depth is in the configuration).
    kinds = {f["kind"] for f in report["findings"]}
    for kind in session.get("findings", []):
        if kind not in kinds:
            failures.append(f"session finding {kind} missing")
    for kind in session.get("absent", []):
        if kind in kinds:
            failures.append(f"unexpected session finding {kind}")
    if failures and fixture_set(entry) not in ENFORCED_SETS:
        pytest.xfail(f"set {fixture_set(entry)} not enforced yet: " + "\n".join(failures))
    assert not failures, "\n".join(failures)
    if known:
        pytest.xfail("; ".join(known))


# Per command over every lab fixture (known gaps aside): the share that gets the round trips and
# findings its configuration and tshark's timing say. The field-capture issue asks >= 99.9%; this is the
# floor reached so far (captures/README.md "Accuracy" lists what is still missed): raise it as they are fixed.
ACCURACY_NEEDED = float(os.environ.get("ISCSI_DOCTOR_ACCURACY", "0.999"))


@pytest.mark.skipif(not ENTRIES, reason="no manifest expectations (captures/MANIFEST.json)")
def test_accuracy_over_all_fixtures():
    """Per set: the share of judged commands that get what the manifest says; the floor holds for
    ENFORCED_SETS, the others are printed with their misses."""
    sets = {}
    for entry in ENTRIES:
        if not entry["made"].get("lab", True):
            continue
        tally = sets.setdefault(fixture_set(entry), {"ok": 0, "judged": 0, "unjudged": 0, "worst": {}})
        report = report_for(entry)
        by_command = findings_by_command(report)
        for exp in entry["expect"]:
            if exp.get("known_gap"):
                continue
            for c in selected(report, exp["select"]):
                problems = judge(exp, c, by_command)
                if problems is None:
                    tally["unjudged"] += 1
                    continue
                tally["judged"] += 1
                tally["ok"] += not problems
                if problems:
                    tally["worst"].setdefault(entry["file"], []).append(
                        f"itt {c['itt']} frames {c['first_frame']}-{c['status_frame']}: {', '.join(problems)}")
    short = []
    for name in sorted(sets, key=lambda n: (n not in ENFORCED_SETS, n)):
        t = sets[name]
        share = t["ok"] / t["judged"] if t["judged"] else 0.0
        enforced = name in ENFORCED_SETS
        print(f"accuracy {t['ok']}/{t['judged']} = {share:.4f} ({t['unjudged']} commands tshark's timing leaves open)"
              f" [set {name}{'' if enforced else ', not enforced'}]")
        if not enforced:
            for f, v in sorted(t["worst"].items()):
                print(f"  {f}: {len(v)} missed, e.g. {'; '.join(v[:3])}")
        if enforced:
            assert t["judged"], f"set {name}: no command judged"
            if share < ACCURACY_NEEDED:
                detail = "; ".join(f"{f} ({len(v)}: {v[0]})"
                                   for f, v in sorted(t["worst"].items(), key=lambda kv: -len(kv[1]))[:20])
                short.append(f"set {name}: {t['ok']}/{t['judged']} = {share:.4f} < {ACCURACY_NEEDED}: {detail}")
    assert any(n in sets for n in ENFORCED_SETS), "no enforced set in the manifest"
    assert not short, "\n".join(short)


def tshark_pairs(path):
    """(itt, command frame, response frame) for every SCSI command Wireshark pairs."""
    out = subprocess.run(
        ["tshark", "-2", "-r", str(path), "-Y", "iscsi.opcode == 0x01 && iscsi.response_frame",
         "-T", "fields", "-E", "occurrence=a", "-e", "frame.number", "-e", "iscsi.opcode",
         "-e", "iscsi.initiatortasktag", "-e", "iscsi.response_frame"],
        capture_output=True, text=True, timeout=600, check=True)
    pairs = set()
    for line in out.stdout.splitlines():
        frame, opcodes, itts, responses = (line.split("\t") + ["", "", ""])[:4]
        # Several PDUs may share a frame: pair the SCSI Command PDUs in order.
        ops, tags, resp = opcodes.split(","), itts.split(","), responses.split(",")
        r = iter(resp)
        for op, tag in zip(ops, tags):
            if op == "0x01":
                pairs.add((int(tag, 16), int(frame), int(next(r, "0") or 0)))
    return pairs


_gave_up = {}


def wireshark_gave_up(path):
    """Frames where Wireshark's dissection ended in an exception (short or malformed data)."""
    if path not in _gave_up:
        out = subprocess.run(["tshark", "-r", str(path), "-Y", "_ws.short || _ws.malformed",
                              "-T", "fields", "-e", "frame.number"],
                             capture_output=True, text=True, timeout=600, check=True)
        _gave_up[path] = {int(x) for x in out.stdout.split()}
    return _gave_up[path]


FIXTURES = [e for e in manifest_entries() if e["file"].startswith("fixtures/")]


@pytest.mark.skipif(not FIXTURES, reason="no fixtures in captures/MANIFEST.json")
@pytest.mark.parametrize("entry", FIXTURES, ids=lambda e: e["file"])
def test_commands_agree_with_wireshark(entry):
    path = ROOT / "captures" / entry["file"]
    theirs = tshark_pairs(path)
    report = report_for(entry)
    ours = {(int(c["itt"], 16), c["first_frame"], c["status_frame"])
            for c in report["commands"] if c["completed"] and c.get("iscsi_opcode", 1) == 1}
    # Wireshark names the frame where the command PDU completes; we name its first segment.
    theirs_by_key = {(itt, resp) for itt, _, resp in theirs}
    ours_by_key = {(itt, status) for itt, _, status in ours}
    assert theirs, "tshark paired no SCSI commands"
    missing = theirs_by_key - ours_by_key
    # Wireshark stops dissecting a segment at an exception (a Data-In longer than the CDB's
    # allocation length is "SCSI truncated"/malformed), so a SCSI Response later in that same
    # segment goes unpaired there. Accepted only where tshark itself flags the status frame so.
    extra = {(itt, status) for itt, status in ours_by_key - theirs_by_key
             if status not in wireshark_gave_up(path)}
    assert not missing and not extra, (
        f"{len(missing)} pairs only in tshark (e.g. {sorted(missing)[:5]}), "
        f"{len(extra)} only in iscsi-doctor (e.g. {sorted(extra)[:5]})")
    for itt, first, status in ours:
        if (itt, status) not in theirs_by_key:
            continue  # one of the accepted differences above
        match = [f for (t, f, r) in theirs if t == itt and r == status]
        assert match and first <= match[0], f"itt {itt:#x}: first frame {first} after tshark's {match}"
