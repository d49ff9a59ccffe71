# SPDX-License-Identifier: GPL-2.0-or-later
"""Command filters (--lun, --op, --min-latency, --itt, --initiator, --target, --from/--to): a
filtered report holds exactly the matching commands, their findings and nothing else, and its
summary covers them. And --sort, the order of the worst commands listed.
Which commands match comes from Wireshark's dissector where it says (the LUN of each SCSI Command
PDU) and otherwise from the unfiltered report's own fields (a filter selects; it does not judge)."""
import collections
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
NAGLE = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"


def tapel():
    for d in (ROOT / "captures" / "wireshark-wiki", ROOT.parent / "shared" / "captures" / "wireshark-wiki"):
        for name in ("iscsi-tapel.pcap", "iscsi-tapel.pcap.gz"):
            if (d / name).exists():
                return d / name
    pytest.skip("iscsi-tapel capture not found")


def report(path, *args):
    r = subprocess.run([BIN, "--format", "json", *args, str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def key(c):
    return (c["connection"], c["itt"], c["first_frame"])


def finding_key(f):
    return (f["kind"], f["side"], f["frame"], f["itt"], f["command_first_frame"])


def check_subset(full, part, keep):
    """part holds exactly full's commands that keep() selects, their findings, and the summary of them."""
    want = [c for c in full["commands"] if keep(c)]
    assert part["commands"] == want
    kept = {key(c) for c in want}
    by_command = [f for f in full["findings"] if f["itt"] is not None and
                  (f["connection"], f["itt"], f["command_first_frame"]) in kept]
    mine = [f for f in part["findings"] if f["itt"] is not None]
    assert sorted(map(finding_key, mine)) == sorted(map(finding_key, by_command))
    assert part["summary"]["commands"] == len(want)
    c = part["captures"][0]["filter"]
    assert (c["commands_seen"], c["commands_kept"]) == (len(full["commands"]), len(want))


def tshark_luns(path):
    """(ITT, LUN) -> count of the SCSI Command PDUs whose LUN Wireshark reads (scsi.lun: the number
    of peripheral or flat space addressing); frames where the LUNs do not line up with the Command
    PDUs are left out, and so are their commands (returned as skipped ITTs)."""
    out = subprocess.run(["tshark", "-r", str(path), "-Y", "iscsi.opcode == 0x01", "-T", "fields",
                          "-E", "occurrence=a", "-e", "iscsi.opcode", "-e", "iscsi.initiatortasktag", "-e",
                          "scsi.lun"], capture_output=True, text=True, timeout=300, check=True).stdout
    luns, skipped = collections.Counter(), set()
    for line in out.splitlines():
        ops, itts, lun_fields = (line.split("\t") + ["", ""])[:3]
        cmds = [int(i, 16) for op, i in zip(ops.split(","), itts.split(",")) if op == "0x01"]
        lun_list = [x for x in lun_fields.split(",") if x]
        # Wireshark shows each command's LUN twice (iSCSI header and SCSI tree)
        per = len(lun_list) // len(cmds) if cmds and len(lun_list) % len(cmds) == 0 else 0
        chunks = [lun_list[i * per:(i + 1) * per] for i in range(len(cmds))] if per else []
        if not per or any(len(set(ch)) != 1 for ch in chunks):
            skipped.update(cmds)
            continue
        lun_list = [ch[0] for ch in chunks]
        for itt, lun in zip(cmds, lun_list):
            luns[(itt, int(lun, 16))] += 1
    return luns, skipped


def test_lun_as_wireshark_reads_it():
    path = tapel()
    wire, skipped = tshark_luns(path)
    assert sum(wire.values()) > 50
    assert len({lun for _, lun in wire}) > 1, "the tape library capture addresses several LUNs"
    full = report(path)
    for lun in sorted({lun for _, lun in wire}):
        part = report(path, "--lun", str(lun))
        got = collections.Counter((int(c["itt"], 16), c["lun"]) for c in part["commands"]
                                  if c["iscsi_opcode"] == 1 and int(c["itt"], 16) not in skipped)
        assert got == collections.Counter({k: n for k, n in wire.items() if k[1] == lun})
        check_subset(full, part, lambda c: c["lun"] == lun)


@pytest.mark.parametrize("args,keep", [
    (["--op", "read"], lambda c: c["kind"] == "read"),
    (["--op", "inquiry,Read(10)"], lambda c: c["op"] in ("INQUIRY", "READ(10)")),
    (["--min-latency", "60"], lambda c: c["completed"] and c["latency_ms"] >= 60),
    (["--op", "read", "--min-latency", "60"], lambda c: c["kind"] == "read" and c["completed"]
     and c["latency_ms"] >= 60),
], ids=["op-kind", "op-names", "min-latency", "both"])
def test_filters_select_as_the_fields_say(args, keep):
    full = report(NAGLE)
    part = report(NAGLE, *args)
    assert 0 < len(part["commands"]) < len(full["commands"])
    check_subset(full, part, keep)


def test_itt_and_endpoints():
    full = report(NAGLE)
    one = full["commands"][5]
    check_subset(full, report(NAGLE, "--itt", one["itt"]), lambda c: c["itt"] == one["itt"])
    # or in decimal, a leading zero not making it octal (docs/cli.md)
    assert report(NAGLE, "--itt", f"0{int(one['itt'], 16)}") == report(NAGLE, "--itt", one["itt"])
    conn = full["sessions"][0]["connections"][0]
    ini, tgt = conn["initiator"], conn["target"]  # "ADDR:PORT"
    for args in (["--initiator", ini], ["--initiator", ini.rsplit(":", 1)[0]], ["--target", tgt],
                 ["--target", tgt.rsplit(":", 1)[0]]):
        check_subset(full, report(NAGLE, *args), lambda c: True)
    nobody = report(NAGLE, "--initiator", "192.0.2.1")
    assert nobody["commands"] == [] and nobody["findings"] == []  # connection-level ones too


def test_time_window_relative_and_absolute():
    import datetime
    full = report(NAGLE)
    t0 = full["captures"][0]["first_time_ns"]
    part = report(NAGLE, "--from", "0.5", "--to", "2.8")
    check_subset(full, part, lambda c: t0 + 0.5e9 <= c["time_ns"] < t0 + 2.8e9)
    at = datetime.datetime.fromtimestamp((t0 + 1_250_000_000) // 1000 / 1e6, datetime.timezone.utc)
    text = at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"
    cut = (t0 + 1_250_000_000) // 1000 * 1000  # microseconds, as written
    check_subset(full, report(NAGLE, "--from", text), lambda c: c["time_ns"] >= cut)
    r = subprocess.run([BIN, "--to", "yesterday", str(NAGLE)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--from/--to" in r.stderr


def test_text_report_says_it_is_filtered():
    r = subprocess.run([BIN, "--op", "read", str(NAGLE)], capture_output=True, text=True, timeout=300)
    assert "filtered (--op read): 40 of the 48 commands reported" in r.stdout


def test_bad_itt_is_a_usage_error():
    for bad in ("0xnope", "0x", "-5", " 5", "+5", "0x+5", "0x100000000", "4294967296"):
        r = subprocess.run([BIN, "--itt", bad, str(NAGLE)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and "--itt: not a 32-bit number" in r.stderr, bad


def test_sort_latency_lists_the_slowest():
    path = tapel()
    full = report(path)
    done = sorted((c for c in full["commands"] if c["completed"]), key=lambda c: -c["latency_ms"])
    r = subprocess.run([BIN, "--sort", "latency", "--worst", "3", str(path)], capture_output=True, text=True,
                       timeout=300)
    lines = r.stdout[r.stdout.index("Worst 3 commands (by latency)"):].splitlines()[2:5]
    assert [line.split()[0] for line in lines] == [c["itt"] for c in done[:3]]
    default = subprocess.run([BIN, "--worst", "3", str(path)], capture_output=True, text=True, timeout=300)
    assert "Worst 3 commands (by excess round trips, then latency)" in default.stdout
