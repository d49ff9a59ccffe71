# SPDX-License-Identifier: GPL-2.0-or-later
"""Run the capture lab live for one short scenario (real scripted target + real libiscsi initiator,
real TCP stacks in network namespaces, 4 ms one way) and check tshark sees the iSCSI commands."""

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
    # nothing left behind
    assert set(_netns()) <= before, "the lab left network namespaces behind"


def _netns():
    out = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]
