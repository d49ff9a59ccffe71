# SPDX-License-Identifier: GPL-2.0-or-later
"""Run the capture lab live for one short scenario (real scripted target + real libiscsi initiator,
real TCP stacks in network namespaces, 4 ms one way), check tshark sees the iSCSI commands and iscsi-doctor finds the Nagle holds."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab import LIVE_SCENARIO, live_lab_available, run_live_scenario, tshark_pdus  # noqa: E402

OK, WHY = live_lab_available()


@pytest.mark.skipif(not OK, reason=WHY or "live lab unavailable")
def test_live_scenario(tmp_path):
    before = set(_netns())
    t0 = time.time()
    paths = run_live_scenario(LIVE_SCENARIO, tmp_path)
    assert time.time() - t0 < 60, "the live scenario must stay under 60 s"
    names = [p.name for p in paths]
    assert names[0] == LIVE_SCENARIO + "--initiator.pcap", names
    assert any(n.endswith("--target.pcap") for n in names)
    for p in paths:
        assert p.stat().st_size > 0
        pdus = tshark_pdus(p)
        assert pdus.get("0x01", 0) >= 100, (p, pdus)     # 100 READ 8 KiB + the open sequence
        assert pdus.get("0x03", 0) == 1 and pdus.get("0x23", 0) == 1, pdus
        assert pdus.get("0x21", 0) >= 100, pdus          # separate SCSI Responses (scripted target)
        if not p.name.endswith("--midpath.pcap"):
            # Mid-path timestamps come from a third namespace between two forwarders, which a
            # loaded 2-core machine delays unevenly; the committed midpath fixture is checked
            # by the manifest instead.
            check_verdicts(p)
    # nothing left behind
    assert set(_netns()) <= before, "the lab left network namespaces behind"


def check_verdicts(path):
    """iscsi-doctor on the traffic just made: the scripted target sends each 8 KiB read's Data-In
    and Response as two writes with Nagle on, so the Response is held by Nagle on the target side
    and the read takes 2 round trips (the manifest's expectation for this scenario)."""
    binary = os.environ.get("ISCSI_DOCTOR")
    if not binary:
        return
    out = subprocess.run([binary, "--format", "json", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode in (0, 1), out.stderr
    doc = json.loads(out.stdout)
    reads = [c for c in doc["commands"] if c["kind"] == "read" and c["bytes"] == 8192 and c["completed"]]
    assert len(reads) >= 100, (path, len(reads))
    held = {(f["itt"], f["command_first_frame"]) for f in doc["findings"]
            if f["kind"] == "nagle_hold" and f["side"] == "target"}
    good = [c for c in reads if c["round_trips"] == 2 and (c["itt"], c["first_frame"]) in held]
    assert len(good) >= 0.9 * len(reads), (path, len(good), len(reads))


def _netns():
    out = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]
