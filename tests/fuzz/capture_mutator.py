#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Structure-aware pcap mutator for whole-capture fuzzing (tests/fuzz/fuzz_captures.py).

Takes a window of packets from a source capture (pcap or gzip-compressed pcap, either byte order,
usec or nsec; pcapng sources are skipped) and applies a few mutations that know the layers: TCP
header fields and options, IP lengths, iSCSI BHS fields (found by following each direction's PDU
framing), replies moved before their commands, login/text key=value data, payload bytes, packet
drops/duplicates/reorders, caplen cuts, splices from another capture, timestamps. Record headers always stay valid (caplen <= len,
caplen <= snaplen), so the front-ends get past the file reader into the analysis.

A mutant depends only on the seed and the source list, so it can be recreated:
    tests/fuzz/capture_mutator.py --seed 1234 -o mutant.pcap
    tests/fuzz/capture_mutator.py --seed 1000 --count 20 -o outdir/   # seeds 1000..1019
"""
import argparse
import gzip
import math
import random
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE_GLOBS = ["captures/fixtures/*.pcap*", "captures/wireshark-wiki/*.pcap*",
                "tests/fuzz/regressions/captures/*.pcap*", "tests/fuzz/regressions/fuzz_capture/seed-*.pcap*"]
M32 = 0xFFFFFFFF
PCAP_MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", False), b"\xa1\xb2\xc3\xd4": (">", False),
              b"\x4d\x3c\xb2\xa1": ("<", True), b"\xa1\xb2\x3c\x4d": (">", True)}


class Packet:
    __slots__ = ("sec", "frac", "data", "orig")

    def __init__(self, sec, frac, data, orig):
        self.sec, self.frac, self.data, self.orig = sec, frac, bytearray(data), orig

    def copy(self):
        return Packet(self.sec, self.frac, self.data, self.orig)


class Capture:
    def __init__(self, endian, nsec, snaplen, linktype, packets):
        self.endian, self.nsec, self.snaplen, self.linktype, self.packets = endian, nsec, snaplen, linktype, packets


def _open_bytes(path):
    raw = Path(path).read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def is_pcap(path):
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            if head[:2] == b"\x1f\x8b":
                f.seek(0)
                head = gzip.GzipFile(fileobj=f).read(4)
        return head in PCAP_MAGIC
    except OSError:
        return False


def read_pcap(path):
    """Parses a pcap file; a record cut short ends the list. Raises ValueError for other formats."""
    buf = _open_bytes(path)
    if len(buf) < 24 or buf[:4] not in PCAP_MAGIC:
        raise ValueError(f"{path}: not a pcap file")
    e, nsec = PCAP_MAGIC[buf[:4]]
    snaplen, linktype = struct.unpack_from(e + "II", buf, 16)
    pkts, pos = [], 24
    while pos + 16 <= len(buf):
        sec, frac, incl, orig = struct.unpack_from(e + "IIII", buf, pos)
        if pos + 16 + incl > len(buf):
            break
        pkts.append(Packet(sec, frac, buf[pos + 16:pos + 16 + incl], max(orig, incl)))
        pos += 16 + incl
    return Capture(e, nsec, snaplen, linktype & 0xFFFF, pkts)


def write_pcap(cap):
    e = cap.endian
    snap = max([cap.snaplen] + [len(p.data) for p in cap.packets])
    out = [struct.pack(e + "IHHiIII", 0xA1B23C4D if cap.nsec else 0xA1B2C3D4, 2, 4, 0, 0, snap, cap.linktype)]
    for p in cap.packets:
        out.append(struct.pack(e + "IIII", p.sec & M32, p.frac & M32, len(p.data), max(p.orig, len(p.data)) & M32))
        out.append(bytes(p.data))
    return b"".join(out)


# --- layers --------------------------------------------------------------------------------------

def be(d, off, n):
    return int.from_bytes(d[off:off + n], "big") if off + n <= len(d) else None


def put(d, off, n, v):
    """Writes v big-endian where the packet holds all n bytes (a cut packet keeps its length)."""
    if 0 <= off and off + n <= len(d):
        d[off:off + n] = (v & ((1 << 8 * n) - 1)).to_bytes(n, "big")
        return True
    return False


class Loc:
    """Offsets of one TCP packet's layers inside its record data."""
    __slots__ = ("ip", "v6", "ip_end", "tcp", "hl", "pay", "src", "dst", "sport", "dport")


def ip_offset(linktype, d):
    if linktype == 1:  # Ethernet with any number of VLAN tags
        off, et = 14, be(d, 12, 2)
        while et in (0x8100, 0x88A8, 0x9100) and off + 4 <= len(d):
            et, off = be(d, off + 2, 2), off + 4
        return off if et in (0x0800, 0x86DD) else None
    if linktype == 113:
        return 16 if be(d, 14, 2) in (0x0800, 0x86DD) else None
    if linktype == 276:
        return 20 if be(d, 0, 2) in (0x0800, 0x86DD) else None
    if linktype in (0, 108):
        return 4
    if linktype in (12, 14, 101, 228, 229):
        return 0
    return None


def locate(linktype, d):
    ip = ip_offset(linktype, d)
    if ip is None or ip + 20 > len(d):
        return None
    loc = Loc()
    loc.ip, ver = ip, d[ip] >> 4
    if ver == 4:
        ihl = (d[ip] & 15) * 4
        if d[ip + 9] != 6 or ihl < 20:
            return None
        loc.v6, loc.tcp, loc.ip_end = False, ip + ihl, ip + be(d, ip + 2, 2)
        loc.src, loc.dst = bytes(d[ip + 12:ip + 16]), bytes(d[ip + 16:ip + 20])
    elif ver == 6 and ip + 40 <= len(d):
        if d[ip + 6] != 6:
            return None
        loc.v6, loc.tcp, loc.ip_end = True, ip + 40, ip + 40 + be(d, ip + 4, 2)
        loc.src, loc.dst = bytes(d[ip + 8:ip + 24]), bytes(d[ip + 24:ip + 40])
    else:
        return None
    if loc.tcp + 20 > len(d):
        return None
    loc.hl = (d[loc.tcp + 12] >> 4) * 4
    loc.sport, loc.dport = be(d, loc.tcp, 2), be(d, loc.tcp + 2, 2)
    loc.pay = loc.tcp + max(loc.hl, 20)
    loc.ip_end = min(max(loc.ip_end, loc.pay), len(d))
    return loc


def flow(loc):
    return (loc.src, loc.sport, loc.dst, loc.dport)


def resize(cap, i, loc, off, old_len, new, shift):
    """Replaces old_len bytes at off in packet i with `new`, fixing the IP length and the record's
    lengths; with `shift`, later segments of the same direction move their seq (and the reverse
    direction its ack) so the stream stays consistent."""
    p = cap.packets[i]
    delta = len(new) - old_len
    p.data[off:off + old_len] = new
    p.orig = max(len(p.data), p.orig + delta)
    lf = loc.ip + (4 if loc.v6 else 2)
    put(p.data, lf, 2, max(0, be(p.data, lf, 2) + delta))
    if shift and delta:
        f = flow(loc)
        rev = (f[2], f[3], f[0], f[1])
        for q in cap.packets[i + 1:]:
            ql = locate(cap.linktype, q.data)
            if ql and flow(ql) == f:
                put(q.data, ql.tcp + 4, 4, be(q.data, ql.tcp + 4, 4) + delta)
            elif ql and flow(ql) == rev:
                put(q.data, ql.tcp + 8, 4, be(q.data, ql.tcp + 8, 4) + delta)
    return delta


def pdus(cap):
    """(packet index, BHS offset) of each iSCSI PDU header found by following every direction's
    framing in packet order (48-byte BHS, AHS, padded data, digests when a login turned them on);
    a direction that loses step resyncs on the next segment that starts with a plausible BHS."""
    out, state, digests = [], {}, {}
    for i, p in enumerate(cap.packets):
        loc = locate(cap.linktype, p.data)
        if not loc or loc.ip_end <= loc.pay:
            continue
        d, f = p.data, flow(loc)
        conn = tuple(sorted([f[:2], f[2:]]))
        if b"HeaderDigest=CRC32C" in d or b"DataDigest=CRC32C" in d:
            dg = digests.setdefault(conn, [0, 0])
            dg[0] |= b"HeaderDigest=CRC32C" in d
            dg[1] |= b"DataDigest=CRC32C" in d
        hd, dd = digests.get(conn, (0, 0))
        seq, end = be(d, loc.tcp + 4, 4), loc.ip_end
        nxt, skip = state.get(f, (None, 0))
        o = loc.pay + (skip if seq == nxt else 0)
        if seq != nxt and (d[loc.pay] & 0x3F) not in OPCODES:
            state[f] = (None, 0)
            continue
        while o + 48 <= end:
            out.append((i, o))
            dsl = be(d, o + 5, 3)
            o += 48 + d[o + 4] * 4 + 4 * hd + ((dsl + 3) & ~3) + (4 * dd if dsl else 0)
        if o < end:  # a header split across segments: give up on this direction until a resync
            state[f] = (None, 0)
        else:
            state[f] = ((seq + (end - loc.pay)) & M32, o - end)
    return out


# --- mutations -----------------------------------------------------------------------------------
# Each takes (rng, cap, donors) and returns a short description, or None when it found nothing
# to act on (another one is drawn then).

OPCODES = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10, 0x1C, 0x1D, 0x1E,
           0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x31, 0x32, 0x3C, 0x3D, 0x3E, 0x3F}
LOGIN_KEYS = [b"MaxRecvDataSegmentLength", b"FirstBurstLength", b"MaxBurstLength", b"HeaderDigest",
              b"DataDigest", b"ImmediateData", b"InitialR2T", b"MaxOutstandingR2T", b"DataPDUInOrder",
              b"DataSequenceInOrder", b"ErrorRecoveryLevel", b"MaxConnections", b"SessionType",
              b"TargetName", b"InitiatorName", b"DefaultTime2Wait", b"AuthMethod"]


def u32_value(rng, old):
    return rng.choice([0, 1, M32, 0x7FFFFFFF, 0x80000000, rng.getrandbits(32), old ^ (1 << rng.randrange(32)),
                       old + rng.choice([-1, 1, -1448, 1448, -65536, 65536, 1 << 31])]) & M32


def tcp_packets(cap):
    out = []
    for i, p in enumerate(cap.packets):
        loc = locate(cap.linktype, p.data)
        if loc:
            out.append((i, loc))
    return out


def pick_tcp(rng, cap, with_payload=False):
    c = [x for x in tcp_packets(cap) if not with_payload or x[1].ip_end > x[1].pay]
    return rng.choice(c) if c else (None, None)


def m_tcp_seq_ack(rng, cap, _):
    i, loc = pick_tcp(rng, cap)
    if i is None:
        return None
    off = loc.tcp + rng.choice([4, 8])
    put(cap.packets[i].data, off, 4, u32_value(rng, be(cap.packets[i].data, off, 4)))
    return f"seq/ack #{i}"


def m_seq_rebase(rng, cap, _):
    """Moves one direction's sequence space (and the other side's acks) near or across the wrap."""
    pk = tcp_packets(cap)
    if not pk:
        return None
    f = flow(rng.choice(pk)[1])
    rev = (f[2], f[3], f[0], f[1])
    first = next(be(cap.packets[i].data, l.tcp + 4, 4) for i, l in pk if flow(l) == f)
    delta = rng.choice([-rng.randrange(1, 100000), rng.randrange(1 << 32)]) - first
    for i, l in pk:
        d = cap.packets[i].data
        if flow(l) == f:
            put(d, l.tcp + 4, 4, be(d, l.tcp + 4, 4) + delta)
        elif flow(l) == rev:
            put(d, l.tcp + 8, 4, be(d, l.tcp + 8, 4) + delta)
    return "seq rebase"


def m_tcp_flags(rng, cap, _):
    i, loc = pick_tcp(rng, cap)
    if i is None:
        return None
    d = cap.packets[i].data
    d[loc.tcp + 13] = rng.choice([d[loc.tcp + 13] ^ (1 << rng.randrange(8)), 0x02, 0x12, 0x11, 0x04, 0x14,
                                  0x01, 0x00, 0xFF, 0x18 | 0x01])
    return f"flags #{i}"


def m_tcp_window(rng, cap, _):
    i, loc = pick_tcp(rng, cap)
    if i is None:
        return None
    d = cap.packets[i].data
    put(d, loc.tcp + 14, 2, rng.choice([0, 1, 2, 0xFFFF, rng.getrandbits(16), be(d, loc.tcp + 14, 2) >> 4]))
    return f"window #{i}"


def build_options(rng, seq):
    opts = b""
    for _ in range(rng.randrange(1, 5)):
        k = rng.randrange(7)
        if k == 0:
            opts += struct.pack(">BBH", 2, 4, rng.choice([0, 1, 88, 536, 1460, 8960, 0xFFFF]))
        elif k == 1:
            opts += bytes([3, 3, rng.choice([0, 7, 14, 15, 255])])
        elif k == 2:
            opts += b"\x04\x02"
        elif k == 3:
            n = rng.randrange(1, 5)
            blocks = b"".join(struct.pack(">II", (seq + a) & M32, (seq + a + b) & M32)
                              for a, b in ((rng.randrange(-70000, 70000), rng.randrange(-10, 70000)) for _ in range(n)))
            opts += bytes([5, 2 + 8 * n]) + blocks
        elif k == 4:
            opts += struct.pack(">BBII", 8, 10, rng.getrandbits(32), rng.getrandbits(32))
        elif k == 5:
            opts += bytes([rng.randrange(256), rng.choice([0, 1, 2, 40, 255])])  # bad kinds/lengths
        else:
            opts += b"\x01" * rng.randrange(1, 4)
    opts = opts[:40]
    return opts + b"\x00" * (-len(opts) % 4)


def m_tcp_options(rng, cap, _):
    i, loc = pick_tcp(rng, cap)
    if i is None:
        return None
    d = cap.packets[i].data
    if loc.hl > 20 and loc.tcp + loc.hl <= len(d) and rng.random() < 0.5:
        o = loc.tcp + 20 + rng.randrange(loc.hl - 20)  # poke one option byte in place
        d[o] = rng.choice([0, 1, 2, 3, 4, 5, 8, 255, rng.randrange(256)])
        return f"option byte #{i}"
    if rng.random() < 0.2:
        d[loc.tcp + 12] = (rng.randrange(16) << 4) | (d[loc.tcp + 12] & 15)  # data offset
        return f"data offset #{i}"
    old = max(0, min(loc.hl, len(d) - loc.tcp) - 20)
    opts = build_options(rng, be(d, loc.tcp + 4, 4))
    resize(cap, i, loc, loc.tcp + 20, old, opts, False)
    d[loc.tcp + 12] = (((20 + len(opts)) // 4) << 4) | (d[loc.tcp + 12] & 15)
    return f"options #{i}"


def m_ip_length(rng, cap, _):
    i, loc = pick_tcp(rng, cap)
    if i is None:
        return None
    d = cap.packets[i].data
    if not loc.v6 and rng.random() < 0.25:
        r = rng.random()
        if r < 0.4:
            d[loc.ip] = 0x40 | rng.randrange(16)  # IHL
        else:
            put(d, loc.ip + 6, 2, rng.choice([0x2000, 0x0001, 0x2001, 0x4000, rng.getrandbits(16)]))  # fragments
        return f"ip header #{i}"
    off = loc.ip + (4 if loc.v6 else 2)
    old = be(d, off, 2)
    headers_only = loc.hl if loc.v6 else loc.tcp - loc.ip + loc.hl
    put(d, off, 2, max(0, rng.choice([0, 1, 20, 0xFFFF, headers_only, old - 1, old + 1, old - rng.randrange(1, 1500),
                                      old + rng.randrange(1, 1500), rng.getrandbits(16)])))
    return f"ip length #{i}"


# BHS fields: (offset, size, opcodes it matters for or None for any)
BHS_FIELDS = [(0, 1, None), (1, 1, None), (2, 1, {0x21, 0x23}), (3, 1, {0x21, 0x25}), (4, 1, None),
              (5, 3, None), (8, 8, None), (16, 4, None), (20, 4, None), (24, 4, None), (28, 4, None),
              (32, 4, None), (36, 4, {0x05, 0x25, 0x31, 0x21}), (40, 4, {0x05, 0x25, 0x31}),
              (44, 4, {0x25, 0x31, 0x21}), (32, 1, {0x01}), (34, 8, {0x01}), (42, 4, {0x01})]


def m_bhs(rng, cap, _):
    found = pdus(cap)
    if not found:
        return None
    i, o = rng.choice(found)
    d = cap.packets[i].data
    op = d[o] & 0x3F
    off, n, ops = rng.choice([f for f in BHS_FIELDS if f[2] is None or op in f[2]])
    old = be(d, o + off, n)
    if old is None:
        return None
    if off == 0:
        v = (rng.choice(sorted(OPCODES)) | rng.choice([0, 0x40])) if rng.random() < 0.8 else rng.randrange(256)
    elif off == 16 and rng.random() < 0.5:  # ITT of another PDU: collisions, replies to the wrong command
        j, p = rng.choice(found)
        v = be(cap.packets[j].data, p + 16, 4) or 0
    elif off == 32 and n == 1:  # CDB opcode: the READ/WRITE families, variable length, any
        v = rng.choice([0x08, 0x0A, 0x28, 0x2A, 0x88, 0x8A, 0xA8, 0xAA, 0x7F, 0x00, 0x12, 0x25, 0x9E, rng.randrange(256)])
    elif n == 1:
        v = rng.choice([old ^ (1 << rng.randrange(8)), 0, 0xFF, rng.randrange(256), 0x80, 0x81, 0xC1])
    elif n == 3:
        v = rng.choice([0, 1, 3, 4, 47, 48, old - 1, old + 1, old + 4, old * 2, 0xFFFFFF, 8192, 65536, 262144,
                        rng.getrandbits(24)])
    else:
        v = u32_value(rng, old) if n == 4 else rng.getrandbits(8 * n)
    put(d, o + off, n, v)
    return f"bhs[{off}] op {op:#x} #{i}"


def m_login_text(rng, cap, _):
    found = [(i, o) for i, o in pdus(cap) if cap.packets[i].data[o] & 0x3F in (0x03, 0x04, 0x23, 0x24)]
    if not found:
        return None
    i, o = rng.choice(found)
    p = cap.packets[i]
    loc = locate(cap.linktype, p.data)
    start = o + 48 + p.data[o + 4] * 4
    dsl = be(p.data, o + 5, 3)
    end = min(start + dsl, loc.ip_end)
    if start > end:
        return None
    text = bytes(p.data[start:end])
    pairs = [x for x in text.split(b"\0") if x] or [b"HeaderDigest=None"]
    k = rng.randrange(len(pairs))
    r = rng.random()
    if r < 0.5:
        key = pairs[k].split(b"=")[0] if rng.random() < 0.5 else rng.choice(LOGIN_KEYS)
        val = rng.choice([b"9" * rng.randrange(11, 40), b"0", b"1", b"-1", b"4294967296", b"16777215", b"512",
                          b"", b"Yes", b"No", b"CRC32C", b"None,CRC32C", b"CRC32C,None", b"0x" + b"f" * 20,
                          b"x" * rng.randrange(100, 3000), b"Irrelevant", b"Reject",
                          bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 40)))])  # any byte but NUL
        pairs[k] = key + b"=" + val
    elif r < 0.65:
        pairs.insert(rng.randrange(len(pairs) + 1), pairs[k])
    elif r < 0.8:
        pairs[k] = pairs[k].replace(b"=", b"")
    else:
        del pairs[k]
    new = b"\0".join(pairs) + b"\0"
    if rng.random() < 0.3:
        new = new.replace(b"\0", rng.choice([b"", b"&", b"\n"]), rng.randrange(1, 4))  # NULs missing
    if rng.random() < 0.1:
        p.data[o + 1] ^= 0x40  # the C (continue) bit
    padded = new + b"\0" * (-len(new) % 4)
    old_padded = min(start + ((dsl + 3) & ~3), loc.ip_end) - start
    put(p.data, o + 5, 3, len(new))
    resize(cap, i, loc, start, old_padded, padded, rng.random() < 0.8)
    return f"login text #{i}"


REPLIES = {0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x31, 0x32, 0x3F}


def m_reply_first(rng, cap, _):
    """A reply (or a copy of it) moved before its command, or a command's ITT given to an earlier
    reply: replies whose command is not seen yet, then seen."""
    found = pdus(cap)
    replies = [(i, o) for i, o in found if cap.packets[i].data[o] & 0x3F in REPLIES]
    if not replies:
        return None
    j, o = rng.choice(replies)
    itt = be(cap.packets[j].data, o + 16, 4)
    cmds = [i for i, p in found if i < j and cap.packets[i].data[p] & 0x3F < 0x20 and
            be(cap.packets[i].data, p + 16, 4) == itt]
    if not cmds:
        later = [(i, p) for i, p in found if i > j and cap.packets[i].data[p] & 0x3F < 0x20]
        if not later:
            return None
        i, p = rng.choice(later)
        put(cap.packets[j].data, o + 16, 4, be(cap.packets[i].data, p + 16, 4))
        return f"reply #{j} takes the ITT of command #{i}"
    at = max(0, cmds[-1] - rng.randrange(3))
    pkt = cap.packets[j] if rng.random() < 0.5 else cap.packets[j].copy()
    if pkt is cap.packets[j]:
        del cap.packets[j]
    cap.packets.insert(at, pkt)
    return f"reply #{j} before its command #{cmds[-1]}"


def m_payload_bytes(rng, cap, _):
    i, loc = pick_tcp(rng, cap, with_payload=True)
    if i is None:
        return None
    d = cap.packets[i].data
    n = loc.ip_end - loc.pay
    r = rng.random()
    if r < 0.6:
        for _ in range(rng.randrange(1, 9)):
            d[loc.pay + rng.randrange(n)] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        return f"payload bytes #{i}"
    a = loc.pay + rng.randrange(n)
    if r < 0.8:
        resize(cap, i, loc, a, 0, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))), rng.random() < 0.5)
        return f"payload insert #{i}"
    resize(cap, i, loc, a, min(rng.randrange(1, 512), loc.ip_end - a), b"", rng.random() < 0.5)
    return f"payload delete #{i}"


def m_drop(rng, cap, _):
    if len(cap.packets) < 2:
        return None
    i = rng.randrange(len(cap.packets))
    n = rng.choice([1, 1, 1, 2, rng.randrange(1, max(2, len(cap.packets) // 4))])
    del cap.packets[i:i + n]
    return f"drop {n} at #{i}"


def m_duplicate(rng, cap, _):
    i = rng.randrange(len(cap.packets))
    j = rng.choice([i + 1, rng.randrange(len(cap.packets) + 1)])
    for _ in range(rng.choice([1, 1, 2, 50])):
        cap.packets.insert(j, cap.packets[i].copy())
    return f"duplicate #{i}"


def m_reorder(rng, cap, _):
    n = len(cap.packets)
    if n < 2:
        return None
    i = rng.randrange(n)
    if rng.random() < 0.7:
        j = max(0, min(n - 1, i + rng.choice([-3, -2, -1, 1, 2, 3, rng.randrange(-n, n)])))
        cap.packets.insert(j, cap.packets.pop(i))
        return f"move #{i} to #{j}"
    cap.packets[i:i + 8] = cap.packets[i:i + 8][::-1]
    return f"reverse #{i}"


def m_caplen_cut(rng, cap, _):
    if rng.random() < 0.2:  # a small snaplen over the whole capture
        cap.snaplen = rng.choice([54, 64, 68, 96, 128, 200, 1000])
        for p in cap.packets:
            del p.data[cap.snaplen:]
        return f"snaplen {cap.snaplen}"
    i = rng.randrange(len(cap.packets))
    d = cap.packets[i].data
    if not d:
        return None
    del d[rng.randrange(len(d)):]
    return f"caplen cut #{i}"


def m_splice(rng, cap, donors):
    """Packets from another capture, often re-addressed onto a connection of this one with their
    sequence numbers rebased, so they land inside its streams."""
    donor = donors()
    if donor is None or not donor.packets or donor.linktype != cap.linktype:
        return None
    a = rng.randrange(len(donor.packets))
    new = [p.copy() for p in donor.packets[a:a + rng.randrange(1, 30)]]
    mine, theirs = tcp_packets(cap), tcp_packets(Capture("<", False, 0, cap.linktype, new))
    if mine and theirs and rng.random() < 0.7:
        f = flow(rng.choice(mine)[1])
        sf = flow(theirs[0][1])
        rev = (f[2], f[3], f[0], f[1])
        ref = next(be(cap.packets[i].data, l.tcp + 4, 4) for i, l in mine if flow(l) == f)
        dseq = ref + rng.randrange(-3000, 3000) - be(new[theirs[0][0]].data, theirs[0][1].tcp + 4, 4)
        for i, l in theirs:
            d = new[i].data
            if len(l.src) != len(f[0]):
                continue
            to = f if flow(l) == sf else rev
            alen = len(l.src)
            s = 12 if alen == 4 else 8
            d[l.ip + s:l.ip + s + alen], d[l.ip + s + alen:l.ip + s + 2 * alen] = to[0], to[2]
            put(d, l.tcp, 2, to[1])
            put(d, l.tcp + 2, 2, to[3])
            put(d, l.tcp + (4 if to == f else 8), 4, be(d, l.tcp + (4 if to == f else 8), 4) + dseq)
    at = rng.randrange(len(cap.packets) + 1)
    base = cap.packets[min(at, len(cap.packets) - 1)]
    for p in new:
        p.sec, p.frac = base.sec, base.frac
    cap.packets[at:at] = new
    return f"splice {len(new)} at #{at}"


def m_timestamps(rng, cap, _):
    i = rng.randrange(len(cap.packets))
    p = cap.packets[i]
    unit = 10 ** 9 if cap.nsec else 10 ** 6
    r = rng.random()
    if r < 0.3:
        p.sec = max(0, p.sec - rng.choice([1, 60, 86400, p.sec]))
        return f"time back #{i}"
    if r < 0.6:
        jump = rng.choice([1, 3600, 10 ** 6, 0x7FFFFFFF, M32 - p.sec])
        for q in cap.packets[i:]:
            q.sec = min(M32, q.sec + jump)
        return f"time jump #{i}"
    if r < 0.8:
        p.frac = rng.choice([unit - 1, unit, M32])  # sub-second part out of range
        return f"time frac #{i}"
    for q in cap.packets[i:]:
        q.sec, q.frac = p.sec, p.frac
    return f"time frozen #{i}"


def m_format(rng, cap, _):
    """The same packets in another byte order or timestamp precision: the readers' other paths."""
    if rng.random() < 0.5:
        cap.endian = ">" if cap.endian == "<" else "<"
    else:
        for p in cap.packets:
            p.frac = p.frac * 1000 if not cap.nsec else p.frac // 1000
        cap.nsec = not cap.nsec
    return f"format {cap.endian} {'ns' if cap.nsec else 'us'}"


MUTATIONS = [(m_tcp_seq_ack, 6), (m_seq_rebase, 2), (m_tcp_flags, 5), (m_tcp_window, 4), (m_tcp_options, 4),
             (m_ip_length, 4), (m_bhs, 16), (m_reply_first, 4), (m_login_text, 5), (m_payload_bytes, 6), (m_drop, 6),
             (m_duplicate, 5), (m_reorder, 5), (m_caplen_cut, 4), (m_splice, 5), (m_timestamps, 3),
             (m_format, 1)]


# --- sources and mutants -------------------------------------------------------------------------

class Sources:
    """Source captures, parsed on first use (a mutant reads only its source and one donor)."""

    def __init__(self, paths=None):
        if paths is None:
            paths = [p for g in SOURCE_GLOBS for p in sorted(ROOT.glob(g))]
        self.paths = [Path(p) for p in paths if is_pcap(p)]
        if not self.paths:
            raise SystemExit("capture_mutator: no pcap sources")
        self._cache = {}

    def get(self, k):
        if k not in self._cache:
            self._cache[k] = read_pcap(self.paths[k])
        return self._cache[k]


def mutate(sources, seed, min_packets=4, max_packets=400):
    """Returns (pcap bytes, description) of mutant `seed`."""
    rng = random.Random(seed)
    k = rng.randrange(len(sources.paths))
    src = sources.get(k)
    n = int(math.exp(rng.uniform(math.log(min_packets), math.log(max_packets + 1))))
    start = 0 if rng.random() < 0.3 or len(src.packets) <= n else rng.randrange(len(src.packets) - n)
    cap = Capture(src.endian, src.nsec, src.snaplen, src.linktype, [p.copy() for p in src.packets[start:start + n]])
    log = [f"{sources.paths[k].name}[{start}:{start + len(cap.packets)}]"]
    donor_k = rng.randrange(len(sources.paths))

    def donors():
        return sources.get(donor_k)
    funcs, weights = zip(*MUTATIONS)
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 4, 6, 10])):
        for _attempt in range(5):
            if not cap.packets:
                break
            what = rng.choices(funcs, weights)[0](rng, cap, donors)
            if what:
                log.append(what)
                break
    for p in cap.packets:  # a record never claims fewer bytes on the wire than it holds
        p.orig = max(p.orig, len(p.data))
    return write_pcap(cap), " ".join(log)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, default=1, help="mutants of seeds SEED.. (-o is then a folder)")
    ap.add_argument("--source", action="append", help="source capture (repeatable); default: the fixtures, "
                    "the Wireshark wiki captures and the fuzz regressions")
    ap.add_argument("--min-packets", type=int, default=4)
    ap.add_argument("--max-packets", type=int, default=400)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    sources = Sources(a.source)
    for s in range(a.seed, a.seed + a.count):
        data, what = mutate(sources, s, a.min_packets, a.max_packets)
        out = Path(a.output)
        if a.count > 1:
            out.mkdir(parents=True, exist_ok=True)
            out = out / f"mutant-{s}.pcap"
        out.write_bytes(data)
        print(f"{out}: seed {s}: {what}")


if __name__ == "__main__":
    sys.exit(main())
