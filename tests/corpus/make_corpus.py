#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Makes the bad-input corpus (tests/corpus/*.pcap*) from the lab's real fixtures.

Every file is a real capture damaged in one known way; expect.json says what iscsi-doctor must
say about it and how much it must still analyse. Deterministic: rerunning gives the same bytes.

  python3 tests/corpus/make_corpus.py            # rewrite the committed corpus
  python3 tests/corpus/make_corpus.py --big DIR  # the large generated cases (not committed)
"""
import argparse
import gzip
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "..", "captures", "fixtures")


# ---- pcap in and out (the fixtures are tcpdump's little-endian microsecond pcap, Ethernet) ----

def read_pcap(name):
    d = gzip.open(os.path.join(FIX, name)).read()
    hdr, recs, off = d[:24], [], 24
    while off + 16 <= len(d):
        sec, usec, caplen, wirelen = struct.unpack_from("<IIII", d, off)
        recs.append([sec, usec, wirelen, bytearray(d[off + 16:off + 16 + caplen])])
        off += 16 + caplen
    return hdr, recs


def pcap_bytes(hdr, recs):
    out = [hdr]
    for sec, usec, wirelen, data in recs:
        out.append(struct.pack("<IIII", sec, usec, len(data), wirelen) + bytes(data))
    return b"".join(out)


def write(name, data):
    path = os.path.join(HERE, name)
    if name.endswith(".gz"):
        data = gzip.compress(data, 9, mtime=0)
    with open(path, "wb") as f:
        f.write(data)


# ---- Ethernet / IPv4 / TCP fields ----

def tcp_of(data):
    """(tcp_offset, payload_offset, payload_end) of an Ethernet/IPv4/TCP frame, or None."""
    if len(data) < 54 or data[12:14] != b"\x08\x00" or data[23] != 6:
        return None
    ihl = (data[14] & 15) * 4
    tot = struct.unpack_from(">H", data, 16)[0]
    t = 14 + ihl
    p = t + (data[t + 12] >> 4) * 4
    return t, p, min(len(data), 14 + tot)


def flow(data):
    t = tcp_of(data)[0]
    return data[26:30], struct.unpack_from(">H", data, t)[0], data[30:34], struct.unpack_from(">H", data, t + 2)[0]


def to_target(data):
    return flow(data)[3] == 3260


def seq_of(data):
    return struct.unpack_from(">I", data, tcp_of(data)[0] + 4)[0]


# ---- iSCSI PDUs over the TCP byte stream ----

class Stream:
    """One direction of one connection: the in-order payload bytes, the packet each byte came
    from, and the PDUs found by walking BHS lengths (digests from the login's end on)."""

    def __init__(self, recs, key, digests=False):
        self.recs, self.map, buf = recs, [], bytearray()
        nxt = None
        for i, (_, _, _, data) in enumerate(recs):
            t = tcp_of(data)
            if not t or flow(data) != key:
                continue
            seq, (_, p, end) = seq_of(data), t
            if data[t[0] + 13] & 0x02:
                nxt = (seq + 1) & 0xffffffff
                continue
            if end <= p:
                continue
            if nxt is None:
                nxt = seq
            if seq != nxt:
                continue  # retransmission (the fixtures have none) or hole
            self.map.append((len(buf), i, p, end - p))
            buf += data[p:end]
            nxt = (nxt + end - p) & 0xffffffff
        self.buf, self.pdus = buf, []
        off, hd = 0, 0
        while off + 48 <= len(buf):
            b = buf[off:off + 48]
            op, ahs, dsl = b[0] & 0x3f, b[4] * 4, int.from_bytes(b[5:8], "big")
            self.pdus.append((off, op))
            off += 48 + ahs + hd + (dsl + 3) // 4 * 4
            if digests and op in (0x03, 0x23) and b[1] & 0x80 and b[1] & 0x03 == 3:
                hd = 4
        self.header_digest = hd

    def locate(self, off):
        """(record index, byte offset in its data) of stream byte off."""
        for start, i, p, n in self.map:
            if start <= off < start + n:
                return i, p + off - start
        raise IndexError(off)

    def patch(self, off, new):
        for k, v in enumerate(new):
            i, o = self.locate(off + k)
            self.recs[i][3][o] = v
            self.buf[off + k] = v

    def record_of(self, off):
        return self.locate(off)[0]


def keys(recs):
    """(initiator->target key, target->initiator key) of the first connection."""
    for _, _, _, data in recs:
        if tcp_of(data) and to_target(data):
            s, sp, d, dp = flow(data)
            return (s, sp, d, dp), (d, dp, s, sp)
    raise ValueError("no connection")


def frame_of(recs, i):
    return i + 1


# ---- the cases ----

def base(name):
    hdr, recs = read_pcap(name)
    return hdr, recs


def case_file_level(made):
    hdr, recs = base("scripted-nagle-read-1k--initiator.pcap.gz")
    full = pcap_bytes(hdr, recs)
    write("zero-length.pcap", b"")
    write("header-only.pcap", full[:24])
    write("short-header.pcap", full[:10])
    write("bad-magic.pcap", b"\x12\x34\x56\x78" + full[4:2048])
    # cut inside a record half-way through: everything before it must still be analysed
    cut = 24
    for sec, usec, wl, data in recs[:len(recs) // 2]:
        cut += 16 + len(data)
    write("truncated-mid-record.pcap", full[:cut + 16 + 40])
    # a record header whose length is absurd (corrupt record) half-way
    bad = bytearray(full)
    struct.pack_into("<I", bad, cut + 8, 0x7ffffff0)
    write("corrupt-record-length.pcap", bytes(bad))
    # a gzip stream cut short
    gz = gzip.compress(full, 9, mtime=0)
    with open(os.path.join(HERE, "truncated-gzip.pcap.gz"), "wb") as f:
        f.write(gz[:len(gz) * 2 // 3])
    # gzip holding something that is not a capture
    with open(os.path.join(HERE, "gzip-not-capture.pcap.gz"), "wb") as f:
        f.write(gzip.compress(b"GET / HTTP/1.1\r\n" * 10, 9, mtime=0))


def case_snaplen(made):
    hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
    hdr = hdr[:16] + struct.pack("<I", 96) + hdr[20:]
    for r in recs:
        r[3] = r[3][:96]
    write("snaplen-96.pcap.gz", pcap_bytes(hdr, recs))


def case_lost(made):
    hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
    rnd = random.Random(1)
    keep = []
    for r in recs:
        t = tcp_of(r[3])
        data_seg = t and t[2] > t[1]
        if data_seg and rnd.random() < 0.01:
            continue
        keep.append(r)
    write("lost-1pct.pcap.gz", pcap_bytes(hdr, keep))


def case_dup_reorder(made):
    hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
    out = []
    for i, r in enumerate(recs):
        out.append(r)
        if i % 20 == 10:
            out.append([r[0], r[1], r[2], bytearray(r[3])])  # duplicate
    for i in range(15, len(out) - 1, 15):
        out[i], out[i + 1] = out[i + 1], out[i]  # swap neighbours (timestamps stay as captured)
    write("dup-reorder.pcap.gz", pcap_bytes(hdr, out))


def case_mid_pdu(made):
    hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
    ki, kt = keys(recs)
    st = Stream(recs, kt)
    # the first Data-In that spans segments after the 50th PDU: start inside it
    for off, op in st.pdus[50:]:
        first, last = st.record_of(off), st.record_of(off + 48 + 4096 - 1)
        if op == 0x25 and last > first:
            start = first + 1
            break
    write("starts-mid-pdu.pcap.gz", pcap_bytes(hdr, recs[start:]))


def mutate_bhs(src, pick, mutate, name, direction="t2i"):
    hdr, recs = base(src)
    ki, kt = keys(recs)
    st = Stream(recs, ki if direction == "i2t" else kt)
    off = pick(st)
    b = bytearray(st.buf[off:off + 48])
    mutate(b)
    st.patch(off, b)
    write(name, pcap_bytes(hdr, recs))
    return frame_of(recs, st.record_of(off))


def nth(op, n):
    def pick(st):
        return [o for o, p in st.pdus if p == op][n]
    return pick


def case_bhs(made):
    def huge(b):
        b[5:8] = (0xfffff0).to_bytes(3, "big")

    def bad_opcode(b):
        b[0] = (b[0] & 0xc0) | 0x1e

    def long_ahs(b):
        b[4] = 255

    made["bhs-huge-length.pcap.gz"] = mutate_bhs("stock-qd8-read--initiator.pcap.gz", nth(0x25, 60), huge,
                                                 "bhs-huge-length.pcap.gz")
    made["bhs-bad-opcode.pcap.gz"] = mutate_bhs("stock-qd8-read--initiator.pcap.gz", nth(0x01, 60), bad_opcode,
                                                "bhs-bad-opcode.pcap.gz", "i2t")
    made["ahs-longer-than-pdu.pcap.gz"] = mutate_bhs("stock-qd8-read--initiator.pcap.gz", nth(0x01, 70), long_ahs,
                                                     "ahs-longer-than-pdu.pcap.gz", "i2t")


def case_digest(made):
    hdr, recs = base("stock-header-digest--initiator.pcap.gz")
    ki, kt = keys(recs)
    for key, name in ((ki, "header-digest-mismatch-i2t.pcap.gz"), (kt, "header-digest-mismatch-t2i.pcap.gz")):
        h2, r2 = base("stock-header-digest--initiator.pcap.gz")
        st = Stream(r2, key, digests=True)
        assert st.header_digest == 4
        cmd = [o for o, p in st.pdus if p in (0x01, 0x21)][20]
        ahs = st.buf[cmd + 4] * 4
        at = cmd + 48 + ahs
        st.patch(at, bytes([st.buf[at] ^ 0x5a]))
        made[name] = frame_of(r2, st.record_of(at))
        write(name, pcap_bytes(h2, r2))


def synth_tcp(src, sport, dst, dport, seq, ack, flags, payload, sec, usec):
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + 20 + len(payload), 1, 0x4000, 64, 6, 0, src, dst)
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
    frame = eth + ip + tcp + payload
    return [sec, usec, len(frame), bytearray(frame)]


def case_non_iscsi(made):
    """HTTP-like text on port 3260 between two other hosts, interleaved with a real session."""
    hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
    a, b = bytes([10, 9, 9, 1]), bytes([10, 9, 9, 2])
    out, si, st = [], 1000, 5000
    for i, r in enumerate(recs):
        out.append(r)
        if i % 25 == 5:
            msg = b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n" * 3
            out.append(synth_tcp(a, 40000, b, 3260, si, st, 0x18, msg, r[0], r[1]))
            si += len(msg)
            rsp = bytes(range(256)) * 4
            out.append(synth_tcp(b, 3260, a, 40000, st, si, 0x18, rsp, r[0], r[1]))
            st += len(rsp)
    write("non-iscsi-on-3260.pcap.gz", pcap_bytes(hdr, out))


def case_itt_reuse(made):
    """Command B takes the ITT of command A while A is still open (both in flight at QD 8)."""
    hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
    ki, kt = keys(recs)
    si, stt = Stream(recs, ki), Stream(recs, kt)
    cmds = [o for o, p in si.pdus if p == 0x01]
    a, b = cmds[40], cmds[41]
    itt_a, itt_b = si.buf[a + 16:a + 20], si.buf[b + 16:b + 20]
    for st in (si, stt):
        for off, op in st.pdus:
            if st.buf[off + 16:off + 20] == itt_b:
                st.patch(off + 16, itt_a)
    made["itt-reuse.pcap.gz"] = frame_of(recs, si.record_of(b))
    write("itt-reuse.pcap.gz", pcap_bytes(hdr, recs))


def case_no_response(made):
    """The capture ends right after a command was sent: its response is never seen."""
    hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
    ki, kt = keys(recs)
    si = Stream(recs, ki)
    cmds = [o for o, p in si.pdus if p == 0x01]
    last = si.record_of(cmds[150])
    write("command-no-response.pcap.gz", pcap_bytes(hdr, recs[:last + 1]))


def open_commands(n, per_segment=30):
    """A capture of one connection whose initiator sends n READ(10) commands, no answer."""
    hdr = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1)
    ini, tgt = bytes([10, 1, 0, 1]), bytes([10, 1, 0, 2])
    recs = [synth_tcp(ini, 50000, tgt, 3260, 0, 0, 0x02, b"", 1000, 0),
            synth_tcp(tgt, 3260, ini, 50000, 0, 1, 0x12, b"", 1000, 10)]
    seq, itt, out = 1, 0, [pcap_bytes(hdr, recs)]
    while itt < n:
        pdus = []
        for _ in range(min(per_segment, n - itt)):
            cdb = bytes([0x28, 0]) + struct.pack(">I", itt * 8 % (1 << 32)) + b"\x00\x00\x08\x00" + bytes(6)
            bhs = (bytes([0x01, 0xc0, 0, 0]) + bytes([0, 0, 0, 0]) + bytes([0, 1]) + bytes(6) +
                   struct.pack(">III", itt, 4096, itt + 1) + struct.pack(">I", 1) + cdb)
            pdus.append(bhs)
            itt += 1
        payload = b"".join(pdus)
        usec = 1000 + itt
        r = synth_tcp(ini, 50000, tgt, 3260, seq, 1, 0x18, payload, 1001 + usec // 1000000, usec % 1000000)
        out.append(struct.pack("<IIII", r[0], r[1], len(r[3]), r[2]) + bytes(r[3]))
        seq += len(payload)
    return b"".join(out)


def case_open_commands(made):
    write("open-commands-5000.pcap.gz", open_commands(5000))


def case_two_connections(made):
    """A damaged connection next to a clean one: the clean one must be analysed in full."""
    h1, r1 = base("stock-qd8-read--initiator.pcap.gz")
    ki, kt = keys(r1)
    st = Stream(r1, kt)
    off = [o for o, p in st.pdus if p == 0x25][30]
    b = bytearray(st.buf[off:off + 48])
    b[5:8] = (0xfffff0).to_bytes(3, "big")
    st.patch(off, b)
    h2, r2 = base("stock-qd8-write--initiator.pcap.gz")
    # the second connection: another initiator address, the same time span, interleaved by time
    t1 = r1[0][0] * 10**6 + r1[0][1]
    t2 = r2[0][0] * 10**6 + r2[0][1]
    for r in r2:
        d = r[3]
        if d[12:14] == b"\x08\x00":
            if d[26:30] == bytes([10, 77, 0, 1]):
                d[26:30] = bytes([10, 77, 0, 3])
            if d[30:34] == bytes([10, 77, 0, 1]):
                d[30:34] = bytes([10, 77, 0, 3])
        t = r[0] * 10**6 + r[1] - t2 + t1 + 137
        r[0], r[1] = t // 10**6, t % 10**6
    merged = sorted(r1 + r2, key=lambda r: (r[0], r[1]))
    write("two-connections-one-damaged.pcap.gz", pcap_bytes(h1, merged))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", metavar="DIR", help="write the large generated cases into DIR instead")
    a = ap.parse_args()
    if a.big:
        path = os.path.join(a.big, "open-commands-2m.pcap")
        with open(path, "wb") as f:
            f.write(open_commands(2_000_000))
        print(path)
        return 0
    made = {}
    for case in (case_file_level, case_snaplen, case_lost, case_dup_reorder, case_mid_pdu, case_bhs, case_digest,
                 case_non_iscsi, case_itt_reuse, case_no_response, case_open_commands, case_two_connections):
        case(made)
    for k, v in made.items():
        if v:
            print("%s: frame %s" % (k, v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
