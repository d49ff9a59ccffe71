# SPDX-License-Identifier: GPL-2.0-or-later
"""Commands held for their initiator estimate (docs/json-schema.md, initiator_latency_ms) on a
connection longer than the hold (16,384 commands): the report then asks the analysis for its
connections so far and lets the held ones go with the round trip measured until then. The JSON
report does that work on its writer's thread, told by the analysis thread when to ask; the result
is byte for byte that of --threads 1, and near the initiator every completed command's estimate is
its latency (nothing to add there)."""
import gzip
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
FIXTURE = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"
COPIES = 500  # 48 READs each: 24,000 commands on one connection


def one_long_connection(out):
    """The fixture's segments without SYN, FIN or RST, written COPIES times one after another as
    one connection: each copy's sequence and acknowledgement numbers moved on by the bytes the
    copies before it sent each way, its times by the fixture's length."""
    raw = gzip.decompress(FIXTURE.read_bytes())
    assert raw[:4] == b"\xd4\xc3\xb2\xa1" and struct.unpack_from("<I", raw, 20)[0] == 1
    recs, off = [], 24
    while off + 16 <= len(raw):
        sec, usec, caplen, length = struct.unpack_from("<IIII", raw, off)
        frame = bytearray(raw[off + 16:off + 16 + caplen])
        off += 16 + caplen
        ihl = (frame[14] & 15) * 4
        tcp = 14 + ihl
        if frame[tcp + 13] & 0x07:
            continue
        recs.append((sec * 10**6 + usec, frame, length, tcp))
    client = recs[0][1][recs[0][3]:recs[0][3] + 2]
    lo, hi = {}, {}
    for _, f, _, t in recs:
        ip_len = struct.unpack_from(">H", f, 16)[0]
        data = ip_len - (f[14] & 15) * 4 - (f[t + 12] >> 4) * 4
        seq, d = struct.unpack_from(">I", f, t + 4)[0], f[t:t + 2] == client
        lo[d], hi[d] = min(lo.get(d, seq), seq), max(hi.get(d, seq + data), seq + data)
    span = {d: hi[d] - lo[d] for d in hi}
    t0, length_us = recs[0][0], recs[-1][0] - recs[0][0] + 2000
    chunks = [raw[:24]]
    for k in range(COPIES):
        for ts, f, wire, t in recs:
            g = bytearray(f)
            d = g[t:t + 2] == client
            struct.pack_into(">I", g, t + 4, (struct.unpack_from(">I", g, t + 4)[0] + k * span[d]) & 0xFFFFFFFF)
            if g[t + 13] & 0x10:
                struct.pack_into(">I", g, t + 8, (struct.unpack_from(">I", g, t + 8)[0] + k * span[not d]) & 0xFFFFFFFF)
            us = ts + k * length_us
            chunks.append(struct.pack("<IIII", us // 10**6, us % 10**6, len(g), wire) + bytes(g))
    out.write_bytes(b"".join(chunks))


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("held") / "one-long-connection.pcap"
    one_long_connection(path)
    return path


def run(path, *args):
    r = subprocess.run([BIN, *args, str(path)], capture_output=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr.decode(errors="replace")[-2000:]
    return r.returncode, r.stdout, r.stderr


def test_same_as_one_thread(capture):
    assert run(capture, "--format", "json") == run(capture, "--threads", "1", "--format", "json")


def test_estimate_near_the_initiator_is_the_latency(capture):
    doc = json.loads(run(capture, "--format", "json")[1])
    (conn,) = [c for s in doc["sessions"] for c in s["connections"]]
    assert conn["vantage"] == "initiator"
    done = [c for c in doc["commands"] if c["completed"]]
    assert len(doc["commands"]) > 16384 and len(done) > 16384
    assert all(c["initiator_latency_ms"] == c["latency_ms"] for c in done)
