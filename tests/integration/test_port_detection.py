# SPDX-License-Identifier: GPL-2.0-or-later
"""iSCSI on a port other than 3260 (docs/cli.md, --no-detect-ports): a connection that starts with
a Login Request is followed wherever its target listens, unless detection is turned off; one joined
mid-session (no SYN, no login) is found from its PDUs' structure (docs/rules.md "Ports").

Each fixture whose capture holds the login (captures/MANIFEST.json: a lab capture that does not
start mid-session) is rewritten with the target's port 3260 changed to another port, TCP checksums
adjusted, frames and timestamps untouched. On the rewritten capture iscsi-doctor must report
exactly the commands it reports on the original, which are the commands Wireshark pairs on the
original; with --no-detect-ports it must report none; with --port NEW it must find them again.
A second test holds the detected connection to the same analysis as with its port given (TCP
handshake facts, verdicts): the handshake, seen before the Login Request, is kept until then.
"""
import functools
import gzip
import json
import os
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

import tshark_oracle as oracle

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BINARY = os.environ.get("ISCSI_DOCTOR", str(ROOT / "build" / "cli" / "iscsi-doctor"))
MANIFEST = ROOT / "captures" / "MANIFEST.json"
NEW_PORT = 13260

PCAP_MAGIC = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">", b"\xa1\xb2\x3c\x4d": ">"}


def _csum_replace(csum, old, new):
    """RFC 1624 (eqn. 3): the one's-complement checksum after a 16-bit word changed old -> new."""
    s = (~csum & 0xFFFF) + (~old & 0xFFFF) + new
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _l3_offset(linktype, pkt):
    """(offset of the IP header, ethertype) for the link types the fixtures use."""
    if linktype == 1:  # Ethernet, with any 802.1Q / 802.1ad tags
        off, etype = 14, struct.unpack(">H", pkt[12:14])[0]
        while etype in (0x8100, 0x88A8) and len(pkt) >= off + 4:
            etype = struct.unpack(">H", pkt[off + 2:off + 4])[0]
            off += 4
        return off, etype
    if linktype == 113:  # Linux cooked v1
        return 16, struct.unpack(">H", pkt[14:16])[0]
    if linktype == 276:  # Linux cooked v2
        return 20, struct.unpack(">H", pkt[0:2])[0]
    if linktype in (101, 228, 229):  # raw IP
        return 0, 0x0800 if pkt[0] >> 4 == 4 else 0x86DD
    raise ValueError(f"link type {linktype} not handled by this rewriter")


def rewrite_port(src, dst, old, new):
    """Copy the pcap (optionally gzip-compressed) at src to dst (uncompressed) with TCP port old
    changed to new in both directions. Returns (packets rewritten, every TCP port seen)."""
    data = src.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    endian = PCAP_MAGIC.get(data[:4])
    if endian is None:
        raise ValueError(f"{src}: not a pcap file (pcapng is not handled by this rewriter)")
    linktype = struct.unpack(endian + "I", data[20:24])[0] & 0x0FFFFFFF
    out = bytearray(data[:24])
    off, changed, ports = 24, 0, set()
    while off + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        pkt = bytearray(data[off + 16:off + 16 + incl])
        out += data[off:off + 16]
        l3, etype = _l3_offset(linktype, pkt)
        l4 = None
        if etype == 0x0800 and len(pkt) >= l3 + 20 and pkt[l3 + 9] == 6:
            frag = struct.unpack(">H", pkt[l3 + 6:l3 + 8])[0] & 0x1FFF
            if frag == 0:
                l4 = l3 + (pkt[l3] & 15) * 4
        elif etype == 0x86DD and len(pkt) >= l3 + 40 and pkt[l3 + 6] == 6:
            l4 = l3 + 40
        if l4 is not None and len(pkt) >= l4 + 4:
            touched = False
            for at in (l4, l4 + 2):
                port = struct.unpack(">H", pkt[at:at + 2])[0]
                ports.add(port)
                if port == old:
                    pkt[at:at + 2] = struct.pack(">H", new)
                    if len(pkt) >= l4 + 18:
                        csum = struct.unpack(">H", pkt[l4 + 16:l4 + 18])[0]
                        pkt[l4 + 16:l4 + 18] = struct.pack(">H", _csum_replace(csum, old, new))
                    touched = True
            changed += touched
        out += pkt
        off += 16 + incl
    Path(dst).write_bytes(bytes(out))
    return changed, ports


def run(*args):
    assert Path(BINARY).exists(), f"iscsi-doctor binary not found at {BINARY} (set ISCSI_DOCTOR)"
    p = subprocess.run([BINARY, "--format", "json", "-q", *map(str, args)], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode in (0, 1), f"exit {p.returncode}: {p.stderr[-2000:]}"
    return json.loads(p.stdout)


def _entries():
    if not MANIFEST.exists():
        return []
    out = []
    for e in json.loads(MANIFEST.read_text())["captures"]:
        m = e["made"]
        # the capture holds the login (test_fixtures.py checks tshark sees it)
        if m.get("lab") and not m.get("starts_mid_session"):
            out.append(e)
    return out


ENTRIES = _entries()


# What a command is, apart from the verdicts on it (see the second test).
IDENTITY = ("capture", "session", "connection", "itt", "cmdsn", "op", "iscsi_opcode", "kind", "lba", "bytes",
            "first_frame", "status_frame", "time_ns", "latency_ms", "status", "response", "sense", "completed",
            "data_incomplete")


def named(doc):
    """The report with connection and session numbers replaced by the connection's endpoints: the
    numbers follow the order connections were made in, which on a capture of several sessions is
    the order of their SYNs with the port given and of their Login Requests when the port is found
    from the login (the analysis is the same)."""
    ends = {c["connection"]: c["initiator"] + ">" + c["target"].rsplit(":", 1)[0]
            for s in doc["sessions"] for c in s["connections"]}
    sess = {s["session"]: ",".join(sorted(ends[c["connection"]] for c in s["connections"])) for s in doc["sessions"]}
    out = json.loads(json.dumps(doc))
    for key in ("commands", "findings"):
        for x in out[key]:
            x["connection"] = ends.get(x["connection"], x["connection"])
            x["session"] = sess.get(x["session"], x["session"])
        out[key].sort(key=lambda x: json.dumps(x, sort_keys=True))
    return out


def identities(doc):
    return sorted(tuple(json.dumps(c.get(k)) for k in IDENTITY) for c in named(doc)["commands"])


@functools.lru_cache(maxsize=None)
def _runs(file):
    """(original, detected, detection off, port given) reports, and the commands Wireshark sees."""
    original = ROOT / "captures" / file
    moved = Path(tempfile.mkdtemp(prefix="iscsi-doctor-port-")) / "moved.pcap"
    try:
        changed, ports = rewrite_port(original, moved, 3260, NEW_PORT)
        assert NEW_PORT not in ports, "the new port is already used in this capture"
        assert changed > 0 and 3260 in ports
        reports = (run(original), run(moved), run("--no-detect-ports", moved),
                   run("--no-detect-ports", "--port", NEW_PORT, moved))
    finally:
        moved.unlink(missing_ok=True)
        moved.parent.rmdir()
    # The SCSI commands Wireshark sees on the original (port 3260), by ITT and first segment; frame
    # numbers are those of the copy too. (Their status frames are compared with Wireshark's by
    # test_manifest.py and test_tshark_oracle.py.)
    theirs = {(t.itt, t.first_frame) for t in oracle.commands(original)}
    return reports, theirs


@pytest.mark.skipif(not ENTRIES, reason="no lab fixtures in captures/MANIFEST.json")
@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_iscsi_on_another_port_is_detected_from_the_login(entry):
    (base, found, off, given), theirs = _runs(entry["file"])
    assert theirs
    ours = {(int(c["itt"], 16), c["first_frame"]) for c in found["commands"] if c.get("iscsi_opcode", 1) == 1}
    assert ours == theirs, f"on port {NEW_PORT}, missing {sorted(theirs - ours)[:5]}, extra {sorted(ours - theirs)[:5]}"
    # The same commands as on the original: same frames, timings, CDB and status.
    assert identities(found) == identities(base)
    assert found["sessions"] and all(s["peers"]["target"].endswith(f":{NEW_PORT}") for s in found["sessions"])
    # Detection off: nothing on 3260, so nothing at all.
    assert off["commands"] == [] and off["sessions"] == []
    # Detection off and the port given: exactly the original's report.
    assert given["commands"] == base["commands"]
    assert given["findings"] == base["findings"]
    # Found from the login: the same analysis (connection numbers may follow the logins' order).
    assert named(found)["findings"] == named(base)["findings"]


def connection_facts(doc):
    return [{k: x[k] for k in ("saw_handshake", "mss", "rtt_ms", "rtt_initiator_ms", "rtt_target_ms", "vantage")}
            for s in doc["sessions"] for x in s["connections"]]


@pytest.mark.skipif(not ENTRIES, reason="no lab fixtures in captures/MANIFEST.json")
@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_detected_connection_is_analysed_as_with_its_port_given(entry):
    """Detection decides which connections are iSCSI; it must not change how they are analysed."""
    (base, found, off, given), _ = _runs(entry["file"])
    key = lambda f: json.dumps(f, sort_keys=True)  # noqa: E731
    assert sorted(connection_facts(found), key=key) == sorted(connection_facts(given), key=key)
    assert named(found)["commands"] == named(given)["commands"]
    assert named(found)["findings"] == named(given)["findings"]


def _mid_entries():
    if not MANIFEST.exists():
        return []
    out = []
    for e in json.loads(MANIFEST.read_text())["captures"]:
        m = e["made"]
        if m.get("lab") and m.get("starts_mid_session") and e["file"].endswith(".pcap.gz"):
            out.append(e)
    return out


MID = _mid_entries()


@pytest.mark.skipif(not MID, reason="no mid-session lab fixtures in captures/MANIFEST.json")
@pytest.mark.parametrize("entry", MID, ids=[e["file"] for e in MID])
def test_mid_session_on_another_port_is_found_from_its_pdus(entry, tmp_path):
    """No SYN, no login: the connection is found from PDUs that chain by their lengths and commands
    answered by their task tags, and analysed exactly as with its port given."""
    original = ROOT / "captures" / entry["file"]
    moved = tmp_path / "moved.pcap"
    try:
        changed, ports = rewrite_port(original, moved, 3260, NEW_PORT)
    except ValueError as e:  # pcapng
        pytest.skip(str(e))
    assert changed and NEW_PORT not in ports
    found, given = run(moved), run("--no-detect-ports", "--port", NEW_PORT, moved)
    theirs = {(t.itt, t.first_frame) for t in oracle.commands(original)}
    ours = {(int(c["itt"], 16), c["first_frame"]) for c in found["commands"]}
    assert theirs and len(ours & theirs) >= 0.9 * len(theirs), "the commands Wireshark sees on port 3260"
    assert found["commands"] == given["commands"]
    assert found["findings"] == given["findings"]
    assert run("--no-detect-ports", moved)["commands"] == []


def _tcp_pcap(path, segments):
    """A pcap of Ethernet/IPv4/TCP frames: segments are (from_a, seq, ack, payload)."""
    import random  # noqa: F401 (the caller seeds its own)
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    a, b = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    for i, (from_a, seq, ack, payload) in enumerate(segments):
        src, dst = (a, b) if from_a else (b, a)
        sport, dport = (40000, NEW_PORT) if from_a else (NEW_PORT, 40000)
        tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 5 << 4, 0x18, 65535, 0, 0) + payload
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), i & 0xFFFF, 0x4000, 64, 6, 0, src, dst)
        frame = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip + tcp
        out += struct.pack("<IIII", 1_000_000 + i // 1000, (i % 1000) * 1000, len(frame), len(frame)) + frame
    Path(path).write_bytes(bytes(out))


def test_other_traffic_on_another_port_is_not_taken_for_iscsi(tmp_path):
    """Random payload, some of it starting with a real SCSI Command header (copied from a lab
    capture) that nothing answers or chains to: no iSCSI is found on the unknown port."""
    import random
    rng = random.Random(7)
    path = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"
    headers = [bytes.fromhex(line) for line in subprocess.run(
        ["tshark", "-r", str(path), "-Y", "iscsi.opcode == 0x01", "-T", "fields", "-e", "tcp.payload"],
        capture_output=True, text=True, check=True).stdout.split()][:20]
    assert headers
    segs, seq = [], [1, 1]
    for i in range(4000):
        side = i % 2
        body = bytes(rng.getrandbits(8) for _ in range(rng.choice((48, 200, 1448))))
        if side == 0 and i % 10 == 0:
            body = headers[(i // 10) % len(headers)][:48] + body
        segs.append((side == 0, seq[side], seq[1 - side], body))
        seq[side] += len(body)
    moved = tmp_path / "random.pcap"
    _tcp_pcap(moved, segs)
    doc = run(moved)
    assert doc["commands"] == [] and doc["sessions"] == []
    # the same traffic on 3260 is iSCSI by its port: there the commands are seen (the test's bytes
    # are what they seem)
    assert run("--port", NEW_PORT, moved)["commands"]
