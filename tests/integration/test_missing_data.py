# SPDX-License-Identifier: GPL-2.0-or-later
"""Answers whose data is missing from the capture: a status-bearing PDU (SCSI Response, or Data-In
with the S bit) whose header the capture holds completes its command, even when the rest of the PDU
was never captured (docs/rules.md "Commands"). The headers are counted from the raw bytes with
tshark (tcp.payload of the target's segments that begin with one), not from the tool."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
WIKI = ROOT / "captures" / "wireshark-wiki"


def status_headers(path):
    """(frame, ITT, SCSI status) of each target segment that starts with a status-bearing BHS."""
    out = subprocess.run(["tshark", "-r", str(path), "-Y", "tcp.srcport == 3260 && tcp.len >= 48", "-T",
                          "fields", "-e", "frame.number", "-e", "tcp.payload"],
                         capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        frame, payload = line.split("\t")
        b = bytes.fromhex(payload.replace(":", ""))
        opcode, flags = b[0] & 0x3f, b[1]
        if opcode == 0x21 or (opcode == 0x25 and flags & 0x01):
            found.append((int(frame), int.from_bytes(b[16:20], "big"), b[3]))
    return found


@pytest.mark.parametrize("name", ["iscsi-scsi-10TB-data-device.pcap.gz", "iscsi-scsi-data-cdrom.pcap.gz"])
def test_status_headers_complete_their_commands(name):
    path = WIKI / name
    headers = status_headers(path)
    assert len(headers) > 500
    r = subprocess.run([BIN, "-q", "--format", "json", str(path)], capture_output=True, text=True, check=True)
    doc = json.loads(r.stdout)
    done = {(c["status_frame"], int(c["itt"], 16)): c for c in doc["commands"] if c["completed"]}
    hit = [h for h in headers if (h[0], h[1]) in done]
    assert len(hit) >= 0.95 * len(headers), f"{len(hit)} of {len(headers)} status headers complete a command"
    names = {0x00: "GOOD", 0x02: "CHECK_CONDITION", 0x08: "BUSY"}
    for frame, itt, status in hit:
        assert done[(frame, itt)]["status"] == names.get(status, f"0x{status:02x}")


def test_headline_when_most_data_is_missing():
    path = WIKI / "iscsi-scsi-10TB-data-device.pcap.gz"
    text = subprocess.run([BIN, "-q", str(path)], capture_output=True, text=True, check=True).stdout
    assert "warning: most of the iSCSI data is missing from the capture" in text.split("\n\n")[0]
    # a capture with every byte does not say it
    whole = subprocess.run([BIN, "-q", str(WIKI / "iscsi-tapel.pcap.gz")], capture_output=True, text=True).stdout
    assert "most of the iSCSI data is missing" not in whole


def test_notices_of_one_kind_are_one_line():
    """The 10TB capture's notices of missing bytes differ only in their numbers: the text report
    gives each kind once, with how many more there are (the JSON keeps every one)."""
    path = WIKI / "iscsi-scsi-10TB-data-device.pcap.gz"
    text = subprocess.run([BIN, "-q", str(path)], capture_output=True, text=True, check=True).stdout
    doc = json.loads(subprocess.run([BIN, "-q", "--format", "json", str(path)], capture_output=True, text=True,
                                    check=True).stdout)
    section = text[text.index("\nNotices ("):]
    import re
    shape = re.compile(r"\d+ bytes missing from the target's stream \(")
    same = [n for n in doc["notices"] if shape.match(n["message"])]
    assert len(same) > 10
    assert section.count("2684 bytes missing from the target's stream") == 1
    assert f"... and {len(same) - 1} more like it (frames " in section
