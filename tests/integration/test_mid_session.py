# SPDX-License-Identifier: GPL-2.0-or-later
"""Captures joined mid-session: every lab fixture made from a whole session is cut so that it
starts at the first segment of its 6th SCSI command (no SYN, no login: MSS, window scale and
keys must be inferred), and the manifest's per-command expectations (from how the fixture was
made, never from iscsi-doctor's output) are checked on the commands after the cut. The first
commands after a cut may lack evidence (their start, the ACK state): the bar is 98% of all
commands and 85% of each expectation with 10 commands or more. (A proxy until the capture lab
takes real mid-session captures: tcpdump started after login.)"""
import gzip
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BINARY = os.environ.get("ISCSI_DOCTOR", str(ROOT / "build" / "cli" / "iscsi-doctor"))
MANIFEST = ROOT / "captures" / "MANIFEST.json"
from test_manifest import ENFORCED_SETS  # noqa: E402 (the same directory)


def analyse(path):
    out = subprocess.run([BINARY, "--format", "json", str(path)], capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    return json.loads(out.stdout)


def cut(src, dst, first_frame):
    """dst: src from frame first_frame on (record headers kept as they are)."""
    d = gzip.open(src).read() if src.suffix == ".gz" else src.read_bytes()
    fmt = "<IIII" if d[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">IIII"
    out, off, n = [d[:24]], 24, 0
    while off + 16 <= len(d):
        incl = struct.unpack_from(fmt, d, off)[2]
        n += 1
        if n >= first_frame:
            out.append(d[off:off + 16 + incl])
        off += 16 + incl
    dst.write_bytes(b"".join(out))


def entries():
    if not MANIFEST.exists():
        return []
    # The sets the manifest test enforces (test_manifest.ENFORCED_SETS): a set the engine does not
    # pass yet whole is not held to it cut either.
    return [e for e in json.loads(MANIFEST.read_text())["captures"]
            if e.get("expect") and e["made"].get("lab") and not e["made"].get("starts_mid_session")
            and e.get("set", "lab") in ENFORCED_SETS]


def check(entry, tmp):
    full = analyse(ROOT / "captures" / entry["file"])
    scsi = sorted((c for c in full["commands"] if c["op"] != "?"), key=lambda c: c["first_frame"])
    if len(scsi) < 10:
        return []
    dst = tmp / Path(entry["file"]).name.replace(".gz", "")
    cut(ROOT / "captures" / entry["file"], dst, scsi[5]["first_frame"])
    rep = analyse(dst)
    assert not any(s["mss"]["inferred"] is False for s in rep["sessions"]), "no handshake, yet not inferred"
    found = {}
    for f in rep["findings"]:
        if f.get("itt") is not None:
            found.setdefault((f["connection"], f["itt"], f["command_first_frame"]), set()).add((f["kind"], f["side"]))
    results = []
    for i, exp in enumerate(entry["expect"]):
        if exp.get("known_gap"):
            continue
        sel = [c for c in rep["commands"] if c["completed"]
               and ("op" not in exp["select"] or c["kind"] == exp["select"]["op"])
               and ("bytes" not in exp["select"] or c["bytes"] == exp["select"]["bytes"])]
        ok = 0
        for c in sel:
            kinds = found.get((c["connection"], c["itt"], c["first_frame"]), set())
            good = all([
                "round_trips" not in exp or c["round_trips"] == exp["round_trips"],
                "ideal_round_trips" not in exp or c["ideal_round_trips"] == exp["ideal_round_trips"],
                all((k, s) in kinds for k, s in exp.get("findings", {}).items()),
                not any(k in c["findings"] for k in exp.get("absent", [])),
            ])
            ok += good
        results.append((f"{entry['file']} expect[{i}] {exp['select']}", ok, len(sel)))
    return results


@pytest.mark.skipif(not entries(), reason="no manifest")
def test_expectations_hold_on_mid_session_cuts(tmp_path):
    results = [r for e in entries() for r in check(e, tmp_path)]
    ok, total = sum(r[1] for r in results), sum(r[2] for r in results)
    weak = [f"{name}: {k}/{n}" for name, k, n in results if n >= 10 and k < 0.85 * n]
    assert total > 1000
    print(f"mid-session cuts: {ok}/{total} = {ok / total:.4f}")
    assert ok >= 0.98 * total and not weak, f"{ok}/{total}; " + "; ".join(weak)
