# SPDX-License-Identifier: GPL-2.0-or-later
"""Task management requests are reported as notices (docs/json-schema.md "notices[]"): each ABORT
TASK, reset, ... with the task it names and the target's answer, checked against what tshark's
iSCSI dissector reads of the same PDUs."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
FIX = ROOT / "captures" / "fixtures"
RESPONSES = {0: "function complete", 1: "task does not exist", 2: "LUN does not exist", 5: "function not supported",
             255: "function rejected"}


def tshark_tmf(path):
    out = subprocess.run(["tshark", "-r", str(path), "-Y", "iscsi.opcode == 0x02 || iscsi.opcode == 0x22",
                          "-T", "fields", "-e", "frame.number", "-e", "iscsi.opcode", "-e",
                          "iscsi.taskmanfun.function", "-e", "iscsi.taskmanfun.referencedtasktag", "-e",
                          "iscsi.taskmanfun.response", "-e", "iscsi.initiatortasktag"],
                         capture_output=True, text=True, check=True).stdout
    reqs, resps = [], {}
    for line in out.splitlines():
        frame, op, fn, ref, resp, itt = (line.split("\t") + [""] * 6)[:6]
        if int(op, 16) == 0x02:
            reqs.append((int(frame), int(fn, 16), int(ref, 16), int(itt, 16)))
        else:
            resps[int(itt, 16)] = (int(frame), int(resp, 16))
    return reqs, resps


@pytest.mark.parametrize("name", ["test-cu--initiator", "test-cu--target"])
def test_abort_task_reported(name):
    path = FIX / f"{name}.pcap.gz"
    reqs, resps = tshark_tmf(path)
    assert reqs, "the fixture holds an ABORT TASK (iscsi-test-cu's abort test)"
    doc = json.loads(subprocess.run([BIN, "-q", "--format", "json", str(path)], capture_output=True, text=True,
                                    check=True).stdout)
    mine = [n for n in doc["notices"] if n["message"].startswith("task management: ")]
    assert len(mine) == len(reqs)
    for (frame, fn, ref, itt), n in zip(reqs, mine):
        assert n["frame"] == frame and n["level"] == "warning"
        assert fn == 1 and f"ABORT TASK of ITT 0x{ref:08x}" in n["message"]
        rframe, resp = resps[itt]
        assert f"answered '{RESPONSES[resp]}' (frame {rframe}," in n["message"]
