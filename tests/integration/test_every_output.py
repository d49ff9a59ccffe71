# SPDX-License-Identifier: GPL-2.0-or-later
"""Every output of the CLI on every capture we have: the text, JSON and CSV reports, the HTML report
and a ladder diagram, on the fixtures, the Wireshark wiki captures, the bad-input corpus and the
fuzz regressions. Under scripts/test-sanitize.sh (ASan+UBSan build) this is what proves that no
capture makes any output path read out of bounds, overflow or leak; in the normal build, that none
crashes or hangs. Exit codes: 0 (no gate), 2 (an input unusable); never a signal."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor"))
SANITIZER = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer")


def captures():
    out = []
    for pattern in ("captures/fixtures/*.pcap*", "captures/wireshark-wiki/*.pcap*", "tests/corpus/*.pcap*",
                    "tests/fuzz/regressions/captures/*", "tests/fuzz/regressions/fuzz_capture/*"):
        out += sorted(ROOT.glob(pattern))
    return out


def run(args, timeout=300):
    r = subprocess.run([str(BIN)] + args, capture_output=True, text=True, errors="replace", timeout=timeout)
    assert r.returncode >= 0, f"{args}: killed by signal {-r.returncode}\n{r.stderr[-3000:]}"
    for s in SANITIZER:
        assert s not in r.stderr, f"{args}: sanitizer report\n{r.stderr[-6000:]}"
    return r


@pytest.mark.parametrize("path", captures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_output(path, tmp_path):
    js = tmp_path / "r.json"
    r = run(["--format", "json", "-o", str(js), str(path)])
    assert r.returncode in (0, 2), r.stderr[-2000:]
    usable = r.returncode == 0
    for fmt in ("text", "csv"):
        out = run(["--format", fmt, "-o", str(tmp_path / ("r." + fmt)), str(path)])
        assert out.returncode == r.returncode, out.stderr[-2000:]
    html = tmp_path / "r.html"
    out = run(["--html", str(html), "-q", str(path)])
    assert out.returncode == r.returncode, out.stderr[-2000:]
    if not usable:
        return
    assert html.stat().st_size > 0
    report = json.loads(js.read_text())
    cmds = report["commands"]
    if not cmds:
        return
    # a ladder of the slowest command and of the first one (different code paths: long, short)
    picks = {cmds[0]["itt"]: cmds[0]["first_frame"]}
    done = [c for c in cmds if c["completed"]]
    if done:
        worst = max(done, key=lambda c: c["latency_ms"] or 0)
        picks[worst["itt"]] = worst["first_frame"]
    for itt, frame in picks.items():
        svg = tmp_path / "l.svg"
        out = run(["ladder", "--itt", itt, "--frame", str(frame), "-q", "-o", str(svg), str(path)])
        assert out.returncode == 0, out.stderr[-2000:]
        assert svg.read_text().lstrip().startswith(("<svg", "<?xml")), svg.read_text()[:200]
