# SPDX-License-Identifier: GPL-2.0-or-later
"""The Wireshark plugin (dissector/) gives the CLI's verdicts: on every capture, the (frame, finding)
pairs and the round trips of each command (by status frame) that tshark shows with the plugin
equal the CLI's JSON report, in one pass and in two passes (-2).

One-pass tshark prints a frame before later frames are read, so a finding decided after its
evidence frame (a late ACK is known to be late when the segment it held is released) is shown on
the deciding frame as iscsi_doctor.reported.{frame,finding}; findings decided only at the end of
the capture (iscsi_doctor.decided_at_end in a two-pass run) cannot appear in one pass at all.
"""
import sys
from collections import Counter

import pytest

from conftest import MANIFEST, ROOT, capture_files, cli_report

sys.path.insert(0, str(ROOT / "tests" / "captures"))
import link_types  # noqa: E402

CAPTURES = capture_files()
FIELDS = ["frame.number", "iscsi_doctor.finding", "iscsi_doctor.reported.frame",
          "iscsi_doctor.reported.finding", "iscsi_doctor.decided_at_end",
          "iscsi_doctor.round_trips", "iscsi_doctor.reported.status_frame",
          "iscsi_doctor.reported.round_trips", "iscsi_doctor.command_decided_at_end"]


def tshark_fields(tshark, path, two_pass):
    args = ["-n", "-r", str(path), "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a",
            "-E", "aggregator=,"]
    if two_pass:
        args.append("-2")
    for f in FIELDS:
        args += ["-e", f]
    rows = []
    for line in tshark(*args).stdout.splitlines():
        cols = line.split("\t")
        cols += [""] * (len(FIELDS) - len(cols))
        rows.append({k: [v for v in c.split(",") if v != ""] for k, c in zip(FIELDS, cols)})
    return rows


def tshark_results(rows):
    """(frame, kind) of findings shown on their evidence frame, of findings reported on a later
    deciding frame, of findings decided at the end; (status frame, round trips) of commands shown
    on their status frame, of completions reported on a later frame; frame -> number of
    completions decided at the end."""
    findings, reported, at_end, commands = Counter(), Counter(), Counter(), Counter()
    reported_cmds, cmds_at_end = Counter(), Counter()
    for r in rows:
        frame = int(r["frame.number"][0])
        for kind in r["iscsi_doctor.finding"]:
            findings[(frame, kind)] += 1
        for kind in r["iscsi_doctor.decided_at_end"]:
            at_end[(frame, kind)] += 1
        for ev, kind in zip(r["iscsi_doctor.reported.frame"], r["iscsi_doctor.reported.finding"]):
            reported[(int(ev), kind)] += 1
        for rt in r["iscsi_doctor.round_trips"]:
            commands[(frame, int(rt))] += 1
        for st, rt in zip(r["iscsi_doctor.reported.status_frame"],
                          r["iscsi_doctor.reported.round_trips"]):
            reported_cmds[(int(st), int(rt))] += 1
        for v in r["iscsi_doctor.command_decided_at_end"]:
            if v in ("1", "True", "TRUE"):
                cmds_at_end[frame] += 1
    return findings, reported, at_end, commands, reported_cmds, cmds_at_end


def cli_results(path):
    report = cli_report(path)
    findings = Counter((f["frame"], f["kind"]) for f in report["findings"] if f.get("frame"))
    commands = Counter((c["status_frame"], c["round_trips"]) for c in report["commands"]
                       if c.get("completed") and c.get("status_frame"))
    return findings, commands


def diff(a, b):
    return {"only_tshark": sorted((a - b).elements())[:20],
            "only_cli": sorted((b - a).elements())[:20]}


_two_pass = {}


def two_pass(tshark, path):
    if path not in _two_pass:
        _two_pass[path] = tshark_results(tshark_fields(tshark, path, True))
    return _two_pass[path]


def test_every_capture_is_compared():
    """The comparisons below run on every manifest entry and every bundled capture file."""
    import json
    assert MANIFEST.exists(), MANIFEST
    entries = [ROOT / "captures" / e["file"] for e in json.loads(MANIFEST.read_text())["captures"]]
    assert [p for p in entries if not p.exists()] == []
    on_disk = [*(ROOT / "captures" / "fixtures").glob("*.pcap*"),
               *(ROOT / "captures" / "wireshark-wiki").glob("*.pcap*")]
    from conftest import CAPTURE_SETS
    left_out = {ROOT / "captures" / e["file"] for e in json.loads(MANIFEST.read_text())["captures"]
                if CAPTURE_SETS and e.get("set", "lab") not in CAPTURE_SETS}
    assert (set(entries) | set(on_disk)) - left_out == set(CAPTURES)
    assert len(CAPTURES) == len(set(CAPTURES))


@pytest.mark.skipif(not CAPTURES, reason="no captures")
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(ROOT / "captures")))
def test_two_pass_equals_cli(tshark, path):
    findings, _, _, commands, _, _ = two_pass(tshark, path)
    cli_findings, cli_commands = cli_results(path)
    assert findings == cli_findings, diff(findings, cli_findings)
    assert commands == cli_commands, diff(commands, cli_commands)


@pytest.mark.skipif(not CAPTURES, reason="no captures")
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(ROOT / "captures")))
def test_one_pass_equals_cli(tshark, path):
    findings, reported, _, commands, reported_cmds, _ = tshark_results(
        tshark_fields(tshark, path, False))
    _, _, at_end, _, _, cmds_at_end = two_pass(tshark, path)
    cli_findings, cli_commands = cli_results(path)
    # Shown on the evidence frame, or (decided later) reported on the deciding frame; nothing twice.
    seen = findings + reported
    assert not (findings & reported), "a finding both on its frame and reported later"
    assert seen == cli_findings - at_end, diff(seen, cli_findings - at_end)
    # Completions likewise; those decided at the end are missing, as many per frame as marked.
    seen_cmds = commands + reported_cmds
    assert not (seen_cmds - cli_commands), diff(seen_cmds, cli_commands)
    missing = Counter(frame for frame, _ in (cli_commands - seen_cmds).elements())
    assert missing == cmds_at_end, (missing, cmds_at_end)


@pytest.mark.parametrize("kind", sorted(link_types.TRANSFORMS))
def test_every_link_layer_the_cli_reads(tshark, kind):
    """The plugin decodes each frame's bytes itself (the CLI's decoder, by Wireshark's link type
    for the frame): a capture re-encapsulated in each link layer the CLI reads (Linux cooked v1/v2,
    raw IP, loopback, VLAN tags, IPv6, a trailer) gives the verdicts the CLI gives on the original."""
    name = "scsi-osd-example-001" if kind != "padded" else "iscsi-tapel"
    original = next(p for p in CAPTURES if p.name.split(".")[0] == name)
    with link_types.relinked(original, kind) as path:
        findings, _, _, commands, _, _ = tshark_results(tshark_fields(tshark, path, True))
    cli_findings, cli_commands = cli_results(original)
    assert sum(cli_commands.values()) > 10
    assert findings == cli_findings, diff(findings, cli_findings)
    assert commands == cli_commands, diff(commands, cli_commands)
