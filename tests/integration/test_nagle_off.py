# SPDX-License-Identifier: GPL-2.0-or-later
"""A side whose stream shows Nagle off has no `nagle_hold` after that (docs/rules.md "Holds").

Nagle, in either form, never lets a partial send leave while an earlier partial segment is
unacknowledged; a send longer than the MSS is not held, and TSO cuts it into full segments and a
short tail. So when a side sends a second short segment (new data, no FIN) right after its previous
short one in the byte stream (so sent alone, not a longer send's tail) before any ACK covering that
one has passed the capture point, and sooner after it than half the
connection's smallest round trip, nothing held the second one: Nagle is off on that side, and a
later wait that ends one round trip after an ACK is the timing's coincidence, not a hold.

The proof is taken from tshark alone (`tcp.*` fields: sequence numbers, ACKs, lengths, tshark's
own retransmission flags and ACK round trips), on every capture of captures/MANIFEST.json, with
margins the engine's own test does not need: "short" is under 536 bytes (below any MSS), and the
gap under a quarter of the larger side's smallest ACK round trip (half of it, halved again). Only
iscsi-doctor's `nagle_hold` findings are compared: none may be on a segment of such a side after
its proof (tshark runs on the captures with such findings, and on `iscsi-tapel`). The wiki's `iscsi-tapel` (IET: a 48-byte header and its 56-byte data 0.3 ms apart at a
44 ms round trip, frames 42 and 43) must be among the captures with a proof, so the test can
fail.
"""
import functools
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BINARY = os.environ.get("ISCSI_DOCTOR", str(ROOT / "build" / "cli" / "iscsi-doctor"))
MANIFEST = ROOT / "captures" / "MANIFEST.json"
ENTRIES = json.loads(MANIFEST.read_text())["captures"] if MANIFEST.exists() else []
TAPEL = "wireshark-wiki/iscsi-tapel.pcap.gz"
SHORT = 536  # below the smallest MSS a host may send (RFC 9293 §3.7.1 default)
FIELDS = ["frame.number", "frame.time_epoch", "tcp.stream", "ip.src", "ipv6.src", "tcp.srcport", "tcp.seq",
          "tcp.ack", "tcp.len", "tcp.flags.fin", "tcp.flags.ack", "tcp.analysis.retransmission",
          "tcp.analysis.ack_rtt"]


def _ns(text):
    whole, _, frac = text.strip().partition(".")
    return int(whole) * 1_000_000_000 + int((frac + "000000000")[:9])


@functools.lru_cache(maxsize=None)
def frames(path):
    """tshark's TCP fields per frame (iSCSI not dissected: not needed, and slow)."""
    cmd = ["tshark", "-n", "-r", str(path), "--disable-protocol", "iscsi", "-Y", "tcp", "-T", "fields",
           "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = []
    for line in out.stdout.splitlines():
        v = dict(zip(FIELDS, line.split("\t")))
        if not v.get("tcp.stream") or not v.get("tcp.len"):
            continue
        rows.append({
            "frame": int(v["frame.number"]), "t": _ns(v["frame.time_epoch"]), "stream": int(v["tcp.stream"]),
            "src": (v.get("ip.src") or v.get("ipv6.src"), int(v["tcp.srcport"])),
            "seq": int(v["tcp.seq"]), "ack": int(v["tcp.ack"] or 0), "len": int(v["tcp.len"]),
            "fin": v["tcp.flags.fin"] in ("1", "True"), "has_ack": v["tcp.flags.ack"] in ("1", "True"),
            "resend": bool(v.get("tcp.analysis.retransmission")),
            "ack_rtt": _ns(v["tcp.analysis.ack_rtt"]) if v.get("tcp.analysis.ack_rtt") else None})
    return rows


def nagle_off_proofs(rows):
    """(stream, sender) -> the first frame proving the sender's Nagle off, by tshark's fields."""
    rtt = {}  # (stream, acking side) -> smallest ACK round trip tshark measured
    for r in rows:
        if r["ack_rtt"] is not None:
            k = (r["stream"], r["src"])
            rtt[k] = min(rtt.get(k, r["ack_rtt"]), r["ack_rtt"])
    sides = {}
    for k in rtt:
        sides.setdefault(k[0], []).append(rtt[k])
    acks = {}        # (stream, side) -> the highest ACK that side sent so far (relative seq)
    ends = {}        # stream -> its two endpoints as seen
    last_short = {}  # (stream, side) -> (end, time) of its latest short segment
    proofs = {}
    for r in rows:
        k = (r["stream"], r["src"])
        ends.setdefault(r["stream"], set()).add(r["src"])
        if r["has_ack"]:
            acks[k] = max(acks.get(k, 0), r["ack"])
        if r["len"] == 0 or r["resend"] or r["fin"] or r["len"] >= SHORT:
            continue
        peer_ack = max((acks.get((r["stream"], e), 0) for e in ends[r["stream"]] if e != r["src"]), default=0)
        prev = last_short.get(k)
        if prev and k not in proofs and prev[0] == r["seq"] and peer_ack < prev[0] and \
                len(sides.get(r["stream"], [])) == 2:
            if 4 * (r["t"] - prev[1]) < max(sides[r["stream"]]):
                proofs[k] = r["frame"]
        last_short[k] = (r["seq"] + r["len"], r["t"])
    return proofs


@functools.lru_cache(maxsize=None)
def doctor(path):
    out = subprocess.run([BINARY, "--format", "json", "-q", str(path)], capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.skipif(not ENTRIES, reason="no captures/MANIFEST.json")
def test_no_nagle_hold_after_the_stream_shows_nagle_off():
    assert Path(BINARY).exists(), f"iscsi-doctor not found at {BINARY} (set ISCSI_DOCTOR)"
    proven, wrong, looked = [], [], 0
    for e in ENTRIES:
        path = ROOT / "captures" / e["file"]
        held = [f["frame"] for f in doctor(path)["findings"] if f["kind"] == "nagle_hold"]
        if not held and e["file"] != TAPEL:  # nothing to compare (tshark is the slow part)
            continue
        looked += 1
        rows = frames(path)
        proofs = nagle_off_proofs(rows)
        if not proofs:
            continue
        proven.append(e["file"])
        by_frame = {r["frame"]: r for r in rows}
        for frame in held:
            r = by_frame.get(frame)
            proof = r and proofs.get((r["stream"], r["src"]))
            if proof and frame > proof:
                wrong.append(f"{e['file']}: nagle_hold at frame {frame} after Nagle shown off at {proof}")
    assert TAPEL in proven, proven
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.skipif(not ENTRIES, reason="no captures/MANIFEST.json")
def test_a_side_with_nagle_on_is_never_shown_off():
    """The lab's fixtures say how each side was configured (`made.nagle`): real kernels, with jitter,
    loss, offload and joined variants. A side with Nagle on can never send a short segment while an
    earlier short one is unacknowledged, so its `nagle_off_frame` is 0 on every connection; sides
    with Nagle off are shown off where their stream has back-to-back short segments (the QD > 1
    and split-PDU workloads), on at least one capture."""
    assert Path(BINARY).exists(), f"iscsi-doctor not found at {BINARY} (set ISCSI_DOCTOR)"
    on, wrong, shown, off = 0, [], 0, 0
    for e in ENTRIES:
        nagle = e["made"].get("nagle")
        if not nagle:
            continue
        for s in doctor(ROOT / "captures" / e["file"])["sessions"]:
            for c in s["connections"]:
                for side in ("initiator", "target"):
                    frame = c["nagle_off_frame"][side]
                    if nagle[side]:
                        on += 1
                        if frame:
                            wrong.append(f"{e['file']}: {side} has Nagle on, shown off at frame {frame}")
                    else:
                        off += 1
                        shown += frame > 0
    print(f"sides with Nagle on: {on}, shown off: {len(wrong)}; with Nagle off: {off}, shown off: {shown}")
    assert on > 0 and shown > 0, (on, shown)
    assert not wrong, "\n".join(wrong)
