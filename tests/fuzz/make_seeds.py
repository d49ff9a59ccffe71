#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Writes the committed seed inputs of the fuzz targets (tests/fuzz/regressions/<target>/seed-*)
from the lab's fixtures and the Wireshark wiki captures: real PDU streams, login key text, CDBs,
sense data, segment timelines and capture files, each in the format its target reads (see the
comment at the top of each fuzz_*.cpp). The replay tests run them through the targets'
invariant checks; scripts/fuzz.sh starts each fuzzer from them. Crash inputs found by fuzzing
are kept next to them as crash-*/leak-*/timeout-* (never rewritten here). Deterministic.

  python3 tests/fuzz/make_seeds.py          # rewrite the seeds
  python3 tests/fuzz/make_seeds.py --check  # exit 1 if a committed seed differs from a fresh one
"""
import argparse
import bz2
import gzip
import lzma
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "corpus"))
import make_corpus as mc  # noqa: E402  (the pcap and iSCSI stream helpers)

MAX = 4096  # scripts/fuzz.sh's -max_len for every target but fuzz_capture
RNG = bytes([0x5e, 0xed, 0x00, 0x01, 0x23, 0x45, 0x67, 0x89])  # fuzz_framer's chunking seed


def fixture(name):
    folder = mc.WIKI if name.startswith(("scsi-osd", "iscsi-")) else mc.FIX
    return mc.read_pcap(name, folder)


def streams(name, nth=0, digests=False, data_digests=False):
    hdr, recs = fixture(name)
    ki, kt = mc.keys(recs, nth)
    return (recs, mc.Stream(recs, ki, digests, data_digests), mc.Stream(recs, kt, digests, data_digests))


def pdu_len(st, off):
    b = st.buf[off:off + 48]
    dsl = int.from_bytes(b[5:8], "big")
    hd = st.header_digest if off >= login_end(st) else 0
    dd = st.data_digest if off >= login_end(st) and dsl else 0
    return 48 + b[4] * 4 + hd + (dsl + 3) // 4 * 4 + dd


def login_end(st):
    """Stream offset of the first PDU after the login phase (Full Feature Phase)."""
    for off, op in st.pdus:
        if op not in (0x03, 0x23):
            return off
    return len(st.buf)


def whole_pdus(st, start, limit):
    """The PDUs from stream offset start, as many whole ones as fit in limit bytes."""
    end = start
    for off, op in st.pdus:
        if off < start:
            continue
        n = pdu_len(st, off)
        if off + n - start > limit:
            break
        end = off + n
    return bytes(st.buf[start:end])


def data_of(st, off):
    b = st.buf[off:off + 48]
    dsl = int.from_bytes(b[5:8], "big")
    at = off + 48 + b[4] * 4 + (st.header_digest if off >= login_end(st) else 0)
    return bytes(st.buf[at:at + dsl])


# ---- fuzz_framer: mode byte, 8 chunking bytes, then the byte stream ----

def framer_seeds():
    out = {}
    _, i2t, t2i = streams("scripted-nagle-read-1k--initiator.pcap.gz")
    body = MAX - 9
    out["seed-i2t-login-commands"] = bytes([0x00]) + RNG + whole_pdus(i2t, 0, body)
    out["seed-t2i-login-data-in"] = bytes([0x00]) + RNG + whole_pdus(t2i, 0, body)
    # Full Feature Phase with header digests known (mode: digests known + header digest)
    _, i2t, t2i = streams("stock-header-digest--initiator.pcap.gz", digests=True)
    out["seed-t2i-header-digest"] = bytes([0x03]) + RNG + whole_pdus(t2i, login_end(t2i), body)
    # header and data digests (the OSD capture's second connection): Data-Out with its R2T's data
    _, i2t, t2i = streams("scsi-osd-example-001.pcap.gz", 1, True, True)
    out["seed-i2t-header-data-digest"] = bytes([0x07]) + RNG + whole_pdus(i2t, login_end(i2t), body)
    # a stream joined in the middle of a 1 KiB Data-In (start unsynced: resync on a plausible BHS)
    _, i2t, t2i = streams("scripted-nagle-read-1k--initiator.pcap.gz")
    off = [o for o, p in t2i.pdus if p == 0x25][20]
    out["seed-t2i-mid-pdu-unsynced"] = bytes([0x08]) + RNG + bytes(t2i.buf[off + 500:off + 500 + body])
    # structured: 4 bytes per PDU (opcode pick, flags, data length factors, ITT), then XOR mutations
    desc = bytes([1, 0xc1, 0, 0x10, 5, 0x81, 16, 0x11, 2, 0x80, 4, 0x12, 6, 0x80, 0, 0x13])
    out["seed-structured-small-limit"] = bytes([0x30]) + RNG + desc + bytes([0, 5, 0x40, 0, 60, 0x01])
    return out


# ---- fuzz_login_keys: control byte, text, then 0xff + control byte + text, ... ----
# The control byte picks the opcode (c % 5: Login Request, Login Response, Text Request, Text
# Response, SCSI Command), the flags (c & 0xcf: T, C, CSG, NSG) and a status class ((c & 0x30) >> 4).
CTL_LOGIN_FINAL = 0x87        # Login Request, T=1 CSG=1 NSG=3
CTL_LOGIN_CONTINUED = 0x46    # Login Request, C=1
CTL_RESPONSE_FINAL = 0x83     # Login Response, T=1 CSG=0 NSG=3, status 0
CTL_RESPONSE_REJECTED = 0xa1  # Login Response, T=1 NSG=1, status class 2 (initiator error)
CTL_TEXT_REQUEST = 0x84       # Text Request, F
CTL_TEXT_RESPONSE = 0x80      # Text Response, F


def ctl(opcode_index, flags, status_class=0):
    c = flags | (status_class << 4)
    assert c % 5 == opcode_index and c & 0xcf == flags, hex(c)
    return c


def login_texts(name, nth=0, digests=False, data_digests=False):
    _, i2t, t2i = streams(name, nth, digests, data_digests)
    req = [data_of(i2t, o) for o, p in i2t.pdus if p in (0x03, 0x04)]
    rsp = [data_of(t2i, o) for o, p in t2i.pdus if p in (0x23, 0x24)]
    return req, rsp


def join(parts):
    """[(control, text)] -> fuzz_login_keys input."""
    out = bytearray()
    for k, (c, text) in enumerate(parts):
        assert b"\xff" not in text
        out += (b"\xff" if k else b"") + bytes([c]) + text
    return bytes(out)


def login_keys_seeds():
    for c, i, f, s in ((CTL_LOGIN_FINAL, 0, 0x87, 0), (CTL_LOGIN_CONTINUED, 0, 0x46, 0), (CTL_RESPONSE_FINAL, 1, 0x83, 0),
                       (CTL_RESPONSE_REJECTED, 1, 0x81, 2), (CTL_TEXT_REQUEST, 2, 0x84, 0),
                       (CTL_TEXT_RESPONSE, 3, 0x80, 0)):
        assert c == ctl(i, f, s)
    out = {}
    req, rsp = login_texts("scripted-nagle-read-1k--initiator.pcap.gz")
    out["seed-login-lab"] = join([(CTL_LOGIN_FINAL, req[0]), (CTL_RESPONSE_FINAL, rsp[0])])
    # the same request split in two with the C bit
    half = len(req[0]) // 2
    out["seed-login-continued"] = join([(CTL_LOGIN_CONTINUED, req[0][:half]), (CTL_LOGIN_FINAL, req[0][half:]),
                                        (CTL_RESPONSE_FINAL, rsp[0])])
    req, rsp = login_texts("scsi-osd-example-001.pcap.gz", 1, True, True)
    parts = []
    for q, r in zip(req, rsp):
        parts += [(CTL_LOGIN_FINAL, q), (CTL_RESPONSE_FINAL, r)]
    out["seed-login-digests-osd"] = join(parts)
    # discovery: SendTargets in Text PDUs after the login
    _, i2t, t2i = streams("scsi-osd-example-001.pcap.gz", 0)
    texts = [(CTL_TEXT_REQUEST if p == 0x04 else CTL_LOGIN_FINAL, data_of(i2t, o)) for o, p in i2t.pdus
             if p in (0x03, 0x04)]
    answers = [(CTL_TEXT_RESPONSE if p == 0x24 else CTL_RESPONSE_FINAL, data_of(t2i, o)) for o, p in t2i.pdus
               if p in (0x23, 0x24)]
    out["seed-discovery-sendtargets"] = join([x for pair in zip(texts, answers) for x in pair])
    req, rsp = login_texts("iscsi-tapel.pcap.gz")
    out["seed-login-status-class-2"] = join([(CTL_LOGIN_FINAL, req[0]), (CTL_RESPONSE_REJECTED, rsp[0])])
    return out


# ---- fuzz_cdb: bytes decoded as a CDB, sense data, iSCSI sense and a BHS at once ----

def first_cdb(name, opcode, digests=False, data_digests=False):
    for nth in range(4):  # the first connection that sends it
        try:
            _, i2t, _ = streams(name, nth, digests, data_digests)
        except ValueError:
            break
        for off, op in i2t.pdus:
            if op == 0x01 and i2t.buf[off + 32] == opcode:
                cdb = bytes(i2t.buf[off + 32:off + 48])
                ahs = i2t.buf[off + 48:off + 48 + i2t.buf[off + 4] * 4]
                if ahs and ahs[2] == 1:  # extended CDB AHS: the CDB's bytes after the 16th
                    cdb += bytes(ahs[4:4 + int.from_bytes(ahs[0:2], "big") - 1])
                return cdb
    raise ValueError("no CDB %02x in %s" % (opcode, name))


def cdb_seeds():
    out = {
        "seed-cdb-read10": first_cdb("stock-qd8-read--initiator.pcap.gz", 0x28),
        "seed-cdb-write16-10tb": first_cdb("iscsi-scsi-10TB-data-device.pcap.gz", 0x8a),
        "seed-cdb-read-capacity16": first_cdb("stock-qd8-read--initiator.pcap.gz", 0x9e),
        "seed-cdb-tape-load": first_cdb("iscsi-tapel.pcap.gz", 0x1b),
        "seed-cdb-changer-read-element-status": first_cdb("iscsi-tapel.pcap.gz", 0xb8),
        "seed-cdb-cdrom-read-toc": first_cdb("iscsi-scsi-data-cdrom.pcap.gz", 0x43),
        "seed-cdb-osd-variable-length": first_cdb("scsi-osd-example-001.pcap.gz", 0x7f, True, True),
    }
    # a SCSI Response with CHECK CONDITION: its data segment (iSCSI sense), and the whole PDU
    _, _, t2i = streams("stock-qd8-read--initiator.pcap.gz")
    off = next(o for o, p in t2i.pdus if p == 0x21 and t2i.buf[o + 3] == 0x02)  # byte 3: status
    out["seed-iscsi-sense-unit-attention"] = data_of(t2i, off)
    out["seed-bhs-scsi-response-check-condition"] = bytes(t2i.buf[off:off + pdu_len(t2i, off)])
    return out


# ---- fuzz_analyzer: 2 bytes, then per segment a 12-byte header and its payload ----

def pieces(p):
    """Payload lengths the header can say: below 256, or a multiple of 16 up to 4080."""
    if not p:
        yield p
    while p:
        n = len(p) if len(p) < 256 else min(len(p), 4080) // 16 * 16
        yield p[:n]
        p = p[n:]


def analyzer_input(name, limit=MAX, nth=0, skip_handshake=True, start=0):
    """The segments of one connection from record start, both directions, each acknowledging
    all the peer sent."""
    hdr, recs = fixture(name)
    ki, kt = mc.keys(recs, nth)
    recs = recs[start:]
    out = bytearray([0x00, 0x00])  # ports as given (3260); unstructured payloads
    last_t = None
    for sec, usec, wl, data in recs:
        t = mc.tcp_of(data)
        if not t or mc.flow(data) not in (ki, kt):
            continue
        flags = data[t[0] + 13]
        if flags & 0x07 and skip_handshake:  # SYN, FIN, RST: the target marks them differently
            continue
        d = 0 if mc.flow(data) == ki else 1
        payload = bytes(data[t[1]:t[2]])
        now = sec * 10**6 + usec
        step = 0 if last_t is None else min(255, (now - last_t) // 50)
        last_t = now
        window = struct.unpack_from(">H", data, t[0] + 14)[0] >> 8
        for k, p in enumerate(pieces(payload)):
            n, big = (len(p), 0) if len(p) < 256 else (len(p) // 16, 0x40)
            h = bytes([d | (flags & 0x38) | big, n, 0, 0, 0x80, 0, step if k == 0 else 0, window, 0, 0, 0, 1])
            if len(out) + 12 + len(p) > limit:
                return bytes(out)
            out += h + p
    return bytes(out)


def analyzer_seeds():
    out = {
        "seed-timeline-nagle-read-1k": analyzer_input("scripted-nagle-read-1k--initiator.pcap.gz"),
        "seed-timeline-nagle-write-1k": analyzer_input("initiator-nagle-write-1k--initiator.pcap.gz"),
        "seed-timeline-joined-mid-session": analyzer_input("scripted-nagle-read-1k--initiator.pcap.gz", start=60),
        "seed-timeline-header-digest": analyzer_input("stock-header-digest--target.pcap.gz"),
    }
    # structured (byte 1 bit 7: payloads from generated PDU streams): the same bytes are segment
    # headers and PDU picks, so this one was found by a hill-climbing search for an input that
    # reaches the hold and delayed-ACK rules (8 findings); kept as found
    out["seed-timeline-structured"] = bytes.fromhex(
        "00807deee7615ef35f30e49b2b3915cae75007203d12c07b5eeda7e1647796ff972bea8e672a827d5c930f2337cd3794c53b08"
        "006d6bccf0c087d625658aac2c9faa07d13c447e330573eecc5a75e56143d6c43bcae76c738a9b0a5f5fc933154a6d328404a8"
        "978b25262e6a7c35bcbee841f745c55d329f747f66e5277353b6bde1923af1014ce7c93429a9111146e1ab0d34efa1b7d03224"
        "1cc78c10b9ac8ba8d881fbc7c68604dae7e85d34c303006d70c05f3413")
    return out


# ---- fuzz_capture: whole capture files ----

def head(name, n):
    hdr, recs = fixture(name)
    return hdr, recs[:n]


def pcapng(recs, linktype=1):
    def block(kind, body):
        body += bytes(-len(body) % 4)
        return struct.pack("<II", kind, len(body) + 12) + body + struct.pack("<I", len(body) + 12)
    out = [block(0x0a0d0d0a, struct.pack("<IHHq", 0x1a2b3c4d, 1, 0, -1)),
           block(1, struct.pack("<HHI", linktype, 0, 262144) + struct.pack("<HHB3x", 9, 1, 6) + bytes(4))]
    for sec, usec, wl, data in recs:
        ts = sec * 10**6 + usec
        out.append(block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xffffffff, len(data), wl) + bytes(data)))
    return b"".join(out)


def relink(hdr, recs, linktype, fn):
    hdr = hdr[:20] + struct.pack("<I", linktype)
    return mc.pcap_bytes(hdr, [[s, u, w - 14 + len(fn(b"")), bytearray(fn(b"")) + d[14:]] for s, u, w, d in recs])


def capture_seeds():
    hdr, recs = head("scripted-nagle-read-1k--initiator.pcap.gz", 30)
    out = {"seed-nagle-read-head.pcap": mc.pcap_bytes(hdr, recs),
           "seed-nagle-read-head.pcapng": pcapng(recs),
           "seed-nagle-read-head.pcap.gz": gzip.compress(mc.pcap_bytes(hdr, recs), 9, mtime=0),
           # the other compressions Python makes itself (zstd and lz4 would need their tools)
           "seed-nagle-read-head.pcap.xz": lzma.compress(mc.pcap_bytes(hdr, recs)),
           "seed-nagle-read-head.pcap.bz2": bz2.compress(mc.pcap_bytes(hdr, recs), 9)}
    # other link types the fast decoder handles itself: raw IPv4, Linux cooked (SLL), 802.1Q
    out["seed-nagle-read-head-raw-ip.pcap"] = relink(hdr, recs, 101, lambda b: b)
    out["seed-nagle-read-head-sll.pcap"] = relink(hdr, recs, 113, lambda b: struct.pack(">HHH8sH", 0, 1, 6, bytes(8), 0x0800))
    vlan = [[s, u, w + 4, bytearray(d[:12] + b"\x81\x00\x00\x2a" + d[12:])] for s, u, w, d in recs]
    out["seed-nagle-read-head-vlan.pcap"] = mc.pcap_bytes(hdr, vlan)
    # big-endian nanosecond pcap, the OSD capture's second connection (digests) from its SYN
    hdr, recs = fixture("scsi-osd-example-001.pcap.gz")
    recs = recs[19:45]
    be = struct.pack(">IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 65535, 1)
    out["seed-osd-digests-be-nsec.pcap"] = be + b"".join(
        struct.pack(">IIII", s, u * 1000, len(d), w) + bytes(d) for s, u, w, d in recs)
    out["seed-joined-resend-early-ack.pcap"] = joined_resend_early_ack()
    return out


def joined_resend_early_ack():
    """Captured beside the target, joined mid-session (no handshake): four 512-byte reads, each
    acknowledged 2 ms late, so the round-trip estimate is 2 ms over the true 8.05 ms; then a read
    whose last Data-In segment the target resends, acknowledged a true round trip later, sooner
    than the estimate: a real loss, not a spurious resend (docs/rules.md "Other findings")."""
    ends, port, nxt, recs = (bytes([10, 2, 0, 1]), bytes([10, 2, 0, 2])), (51000, 3260), [7000, 90000], []

    def seg(d, t_us, payload, seq=None, flags=0x18):
        s = nxt[d] if seq is None else seq
        recs.append(mc.synth_tcp(ends[d], port[d], ends[1 - d], port[1 - d], s, nxt[1 - d], flags if payload else 0x10,
                                 payload, 1000 + t_us // 10**6, t_us % 10**6))
        nxt[d] = max(nxt[d], s + len(payload))

    def read(itt, size, t_us):
        cdb = bytes([0x28, 0]) + struct.pack(">IxHx", itt * 8, size // 512) + bytes(6)
        seg(0, t_us, mc.pdu(0x01, 0xc1, itt, f20=struct.pack(">III", size, itt, itt) + cdb))
        return mc.pdu(0x25, 0x81, itt, bytes(size), f20=struct.pack(">IIIIIII", 0xffffffff, itt, itt + 1, itt + 8, 0, 0, 0))

    rtt = 8050  # us: 50 us to the target, 8 ms to the initiator
    for k in range(4):
        t = 20000 + 50000 * k
        seg(1, t + rtt + 100, read(100 + k, 512, t))
        seg(0, t + 2 * rtt + 2100, b"")
    t = 220000
    data = read(1, 2048, t)
    start = nxt[1]
    seg(1, t + rtt + 100, data[:1448])
    seg(1, t + rtt + 100, data[1448:])
    probe = t + 3 * rtt
    seg(1, probe, data[1448:], seq=start + 1448)
    seg(0, probe + rtt, b"")
    return mc.pcap_bytes(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1), recs)


TARGETS = {"fuzz_framer": framer_seeds, "fuzz_login_keys": login_keys_seeds, "fuzz_cdb": cdb_seeds,
           "fuzz_analyzer": analyzer_seeds, "fuzz_capture": capture_seeds}


def write_all(root):
    for target, make in TARGETS.items():
        folder = os.path.join(root, target)
        os.makedirs(folder, exist_ok=True)
        for name, data in make().items():
            limit = 8192 if target == "fuzz_capture" else MAX
            assert 0 < len(data) <= limit, (target, name, len(data))
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="compare with the committed seeds instead of writing")
    a = ap.parse_args()
    committed = os.path.join(HERE, "regressions")
    if not a.check:
        write_all(committed)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        write_all(tmp)
        bad = []
        for target in TARGETS:
            fresh = sorted(os.listdir(os.path.join(tmp, target)))
            have = sorted(f for f in os.listdir(os.path.join(committed, target)) if f.startswith("seed-"))
            if fresh != have:
                bad.append("%s: seeds %s, committed %s" % (target, fresh, have))
            for name in set(fresh) & set(have):
                with open(os.path.join(tmp, target, name), "rb") as f, open(os.path.join(committed, target, name), "rb") as g:
                    if f.read() != g.read():
                        bad.append("%s/%s differs" % (target, name))
        for b in bad:
            print(b, file=sys.stderr)
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
