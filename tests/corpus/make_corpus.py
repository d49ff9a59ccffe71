#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Makes the bad-input corpus (tests/corpus/*.pcap*) from the lab's real fixtures.

Every file is a real capture damaged in one known way; expect.json says what iscsi-doctor must
say about it and how much it must still analyse. Deterministic: rerunning gives the same bytes.

Each case also states its damage in input terms (the `damage` objects of expect.json, which
test_corpus.py checks against this script's output): the fixture it was made from, in that
fixture's frame numbers, which frames are gone (cut_after_frame, starts_at_frame, frames_dropped,
directions) and in which frames the PDUs of one direction begin that a reader cannot frame
(unreadable): a damaged BHS, or a hole or a start that takes a BHS, loses that direction's framing
from that PDU until the next segment of that direction that begins with a BHS. Counts are not
stated here: the test takes them from tshark on the fixture and removes what the damage takes.

  python3 tests/corpus/make_corpus.py            # rewrite the committed corpus
  python3 tests/corpus/make_corpus.py --out DIR --json  # write it into DIR, print the damage
  python3 tests/corpus/make_corpus.py --big DIR  # the large generated cases (not committed)
"""
import argparse
import gzip
import json
import os
import random
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "..", "captures", "fixtures")
WIKI = os.path.join(HERE, "..", "..", "captures", "wireshark-wiki")
OUT = HERE  # where the corpus is written (--out)


# ---- pcap in and out (the fixtures are tcpdump's little-endian microsecond pcap, Ethernet) ----

def read_pcap(name, folder=FIX):
    d = gzip.open(os.path.join(folder, name)).read()
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
    path = os.path.join(OUT, name)
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

    def __init__(self, recs, key, digests=False, data_digests=False):
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
        off, hd, dd = 0, 0, 0
        while off + 48 <= len(buf):
            b = buf[off:off + 48]
            op, ahs, dsl = b[0] & 0x3f, b[4] * 4, int.from_bytes(b[5:8], "big")
            self.pdus.append((off, op))
            off += 48 + ahs + hd + (dsl + 3) // 4 * 4 + (dd if dsl else 0)
            if digests and op in (0x03, 0x23) and b[1] & 0x80 and b[1] & 0x03 == 3:
                hd = 4
                dd = 4 if data_digests else 0
        self.header_digest, self.data_digest = hd, dd

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

    def frame_of(self, off):
        return self.locate(off)[0] + 1

    def framing_lost(self, off, gone=()):
        """[first, last] frames (1-based) in which the PDUs of this direction begin that a reader
        cannot frame once the BHS at stream offset off cannot be read: from that PDU until the next
        segment of this direction that begins with a BHS and is in the capture (record indexes not
        in gone). No earlier PDU may begin in the first frame (the range would take it too)."""
        starts = {start: i for start, i, _, _ in self.map}
        first = self.record_of(off)
        assert not any(o < off and self.record_of(o) == first for o, _ in self.pdus), off
        res = next((o for o, _ in self.pdus if o > off and o in starts and starts[o] not in gone), None)
        return [first + 1, self.record_of(res) if res is not None else len(self.recs)]

    def bhs_at(self, off):
        """What a damage statement says of the PDU at stream offset off."""
        b = self.buf[off:off + 48]
        return "frame %d, ITT 0x%08x" % (self.frame_of(off), int.from_bytes(b[16:20], "big"))


def keys(recs, nth=0):
    """(initiator->target key, target->initiator key) of the nth connection (by first packet)."""
    seen = []
    for _, _, _, data in recs:
        if tcp_of(data) and to_target(data):
            s, sp, d, dp = flow(data)
            if (s, sp, d, dp) not in seen:
                seen.append((s, sp, d, dp))
            if len(seen) > nth:
                return (s, sp, d, dp), (d, dp, s, sp)
    raise ValueError("no connection")


# ---- the cases ----

def base(name):
    hdr, recs = read_pcap(name)
    return hdr, recs


def source(name, folder=FIX):
    """A fixture's path from the repository's root, as the damage statements name it."""
    root = os.path.join(HERE, "..", "..")
    return os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")


def merged(ranges):
    out = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def holes(st, gone):
    """The frame ranges in which st's direction's PDUs begin that cannot be framed when the
    records in gone are not in the capture: a hole that takes a byte of a BHS loses the framing
    until the next segment that begins with a BHS; a hole inside a PDU's data does not (the BHS
    before it gave the length, TCP's sequence numbers the size of the hole)."""
    out = []
    for start, i, _, n in st.map:
        if i in gone:
            touched = [o for o, _ in st.pdus if o < start + n and o + 48 > start]
            if touched:
                out.append(st.framing_lost(touched[0], gone))
    return merged(out)


def start_mid_stream(st, first_record):
    """The frames in which st's direction's PDUs begin that cannot be framed when the capture
    starts at record first_record: none when that direction's first segment begins with a BHS,
    else up to its first later segment that does."""
    starts = {o: i for o, i, _, _ in st.map}
    first = next(o for o, i, _, _ in st.map if i >= first_record)
    if first in {o for o, _ in st.pdus}:
        return []
    res = next(o for o, _ in st.pdus if o > first and o in starts)
    return [[first_record + 1, st.record_of(res)]]


def case_file_level(made):
    hdr, recs = base("scripted-nagle-read-1k--initiator.pcap.gz")
    src = source("scripted-nagle-read-1k--initiator.pcap.gz")
    full = pcap_bytes(hdr, recs)
    made["header-only.pcap"] = {"source": src, "cut_after_frame": 0,
                                "says": "the source's 24-byte file header alone: no frame"}
    write("zero-length.pcap", b"")
    write("header-only.pcap", full[:24])
    write("short-header.pcap", full[:10])
    write("bad-magic.pcap", b"\x12\x34\x56\x78" + full[4:2048])
    # cut inside a record half-way through: everything before it must still be analysed
    cut = 24
    for sec, usec, wl, data in recs[:len(recs) // 2]:
        cut += 16 + len(data)
    write("truncated-mid-record.pcap", full[:cut + 16 + 40])
    half = len(recs) // 2
    made["truncated-mid-record.pcap"] = {
        "source": src, "cut_after_frame": half,
        "says": "the file ends 40 bytes into frame %d's record: frames %d.. are gone" % (half + 1, half + 1)}
    # a record header whose length is absurd (corrupt record) half-way
    bad = bytearray(full)
    struct.pack_into("<I", bad, cut + 8, 0x7ffffff0)
    write("corrupt-record-length.pcap", bytes(bad))
    made["corrupt-record-length.pcap"] = {
        "source": src, "cut_after_frame": half,
        "says": "frame %d's record header claims 2147483632 bytes: no reader can go past it, frames %d.. are gone"
                % (half + 1, half + 1)}
    # a gzip stream cut short
    gz = gzip.compress(full, 9, mtime=0)
    with open(os.path.join(OUT, "truncated-gzip.pcap.gz"), "wb") as f:
        f.write(gz[:len(gz) * 2 // 3])
    # the frames whose records lie whole in what the cut stream still decompresses to
    plain = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(gz[:len(gz) * 2 // 3])
    off, whole = 24, 0
    while off + 16 <= len(plain) and off + 16 + struct.unpack_from("<I", plain, off + 8)[0] <= len(plain):
        off += 16 + struct.unpack_from("<I", plain, off + 8)[0]
        whole += 1
    made["truncated-gzip.pcap.gz"] = {
        "source": src, "cut_after_frame": whole,
        "says": "the gzip stream cut at two thirds of its %d bytes: it decompresses to %d bytes, whole records "
                "for frames 1-%d; frames %d.. are gone" % (len(gz), len(plain), whole, whole + 1)}
    # gzip holding something that is not a capture
    with open(os.path.join(OUT, "gzip-not-capture.pcap.gz"), "wb") as f:
        f.write(gzip.compress(b"GET / HTTP/1.1\r\n" * 10, 9, mtime=0))


def case_snaplen(made):
    # 96 bytes: never a whole BHS; 200 bytes: 134 bytes of TCP payload, a whole BHS at a segment's start
    for snap in (96, 200):
        hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
        hdr = hdr[:16] + struct.pack("<I", snap) + hdr[20:]
        for r in recs:
            r[3] = r[3][:snap]
        write("snaplen-%d.pcap.gz" % snap, pcap_bytes(hdr, recs))
        made["snaplen-%d.pcap.gz" % snap] = {
            "source": source("stock-qd8-read--initiator.pcap.gz"), "snaplen": snap,
            "says": "every frame cut to %d bytes (%d bytes of TCP payload after this capture's 66 bytes of "
                    "headers): no frame is gone, the bytes past %d of each are" % (snap, snap - 66, snap)}


def case_lost(made):
    hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
    rnd = random.Random(1)
    keep, gone = [], set()
    for i, r in enumerate(recs):
        t = tcp_of(r[3])
        data_seg = t and t[2] > t[1]
        if data_seg and rnd.random() < 0.01:
            gone.add(i)
            continue
        keep.append(r)
    write("lost-1pct.pcap.gz", pcap_bytes(hdr, keep))
    ki, kt = keys(recs)
    made["lost-1pct.pcap.gz"] = {
        "source": source("stock-qd8-read--initiator.pcap.gz"), "frames_dropped": [i + 1 for i in sorted(gone)],
        "unreadable": {d: holes(Stream(recs, k), gone) for d, k in (("initiator", ki), ("target", kt))
                       if holes(Stream(recs, k), gone)},
        "says": "%d data segments dropped (seed 1); where a dropped segment held a byte of a BHS, that "
                "direction's framing is lost until its next segment that begins with a BHS" % len(gone)}


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
    dups = [i + 1 for i in range(len(recs)) if i % 20 == 10]
    made["dup-reorder.pcap.gz"] = {
        "source": source("stock-qd8-read--initiator.pcap.gz"),
        "says": "%d frames duplicated (source frames %d, %d, ... every 20th), then every 15th frame of the result "
                "swapped with the next (%d swaps, timestamps as captured): no frame and no byte is gone"
                % (len(dups), dups[0], dups[1], len(range(15, len(out) - 1, 15)))}


def case_subsecond(made):
    """A record whose microsecond field is 0xFFFFFFFF: Wireshark (wiretap/libpcap.c) times it 1 us
    before its second (the field times 1000, cut to 32 bits, signed); so must iscsi-doctor, with a
    notice."""
    hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
    k = 40
    recs[k][1] = 0xFFFFFFFF
    write("subsecond-out-of-range.pcap.gz", pcap_bytes(hdr, recs))
    made["subsecond-out-of-range.pcap.gz"] = {
        "source": source("stock-qd8-read--initiator.pcap.gz"),
        "says": "frame %d's microsecond field set to 0xFFFFFFFF: no frame and no byte is gone" % (k + 1)}


def case_late_release(made):
    """An 8 KiB read at the initiator on a steady 4 ms path (Nagle holds the Response until the
    initiator's ACK of the last Data-In), with one Response 3.5 ms later than the path ever brought
    one, and every frame after it as much: later than the path has shown, within the most it may
    add (half the round trip). The capture cannot tell that wait from the target's own time."""
    src = "scripted-nagle-read-8k--initiator.pcap.gz"
    hdr, recs = base(src)
    responses = []
    for i, r in enumerate(recs):
        t = tcp_of(r[3])
        if t and not to_target(r[3]) and t[2] - t[1] == 48 and r[3][t[1]] & 0x3F == 0x21:
            responses.append(i)
    k = responses[20]
    # the initiator's ACK that released it: its latest segment without data before it
    ack = max(i for i in range(k) if to_target(recs[i][3]) and tcp_of(recs[i][3])[2] == tcp_of(recs[i][3])[1])
    itt = recs[k][3][tcp_of(recs[k][3])[1] + 16:tcp_of(recs[k][3])[1] + 20]
    command = max(i for i in range(k) if to_target(recs[i][3]) and tcp_of(recs[i][3])[2] - tcp_of(recs[i][3])[1] >= 48
                  and recs[i][3][tcp_of(recs[i][3])[1]] & 0x3F == 0x01
                  and recs[i][3][tcp_of(recs[i][3])[1] + 16:tcp_of(recs[i][3])[1] + 20] == itt)
    for r in recs[k:]:
        us = r[0] * 1_000_000 + r[1] + 3500
        r[0], r[1] = us // 1_000_000, us % 1_000_000
    write("release-later-than-shown.pcap.gz", pcap_bytes(hdr, recs))
    made["release-later-than-shown.pcap.gz"] = {
        "source": source(src), "delayed_from_frame": k + 1, "delay_ms": 3.5,
        "command_frame": command + 1, "released_by_frame": ack + 1,
        "says": "frames %d.. 3.5 ms later (the SCSI Response at frame %d of the command at frame %d, held by "
                "Nagle until the initiator's ACK at frame %d): no frame and no byte is gone"
                % (k + 1, k + 1, command + 1, ack + 1)}


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
    unreadable = {d: start_mid_stream(Stream(recs, k), start) for d, k in (("initiator", ki), ("target", kt))}
    made["starts-mid-pdu.pcap.gz"] = {
        "source": source("stock-qd8-read--initiator.pcap.gz"), "starts_at_frame": start + 1,
        "unreadable": {d: r for d, r in unreadable.items() if r},
        "says": "frames 1-%d gone: the file starts inside the Data-In at %s; each direction's framing "
                "starts at its first segment that begins with a BHS" % (start, st.bhs_at(off))}


def mutate_bhs(src, pick, mutate, name, direction, what):
    hdr, recs = base(src)
    ki, kt = keys(recs)
    st = Stream(recs, ki if direction == "initiator" else kt)
    off = pick(st)
    b = bytearray(st.buf[off:off + 48])
    mutate(b)
    st.patch(off, b)
    write(name, pcap_bytes(hdr, recs))
    lost = st.framing_lost(off)
    return {"source": source(src), "unreadable": {direction: [lost]},
            "says": "the %s at %s gets %s: the %s's framing is lost from it until frame %d, its next segment "
                    "that begins with a BHS" % (what[0], st.bhs_at(off), what[1], direction, lost[1] + 1)}


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
                                                 "bhs-huge-length.pcap.gz", "target",
                                                 ("61st Data-In", "DataSegmentLength 0xfffff0"))
    made["bhs-bad-opcode.pcap.gz"] = mutate_bhs("stock-qd8-read--initiator.pcap.gz", nth(0x01, 60), bad_opcode,
                                                "bhs-bad-opcode.pcap.gz", "initiator",
                                                ("61st SCSI Command", "opcode 0x1e"))
    made["ahs-longer-than-pdu.pcap.gz"] = mutate_bhs("stock-qd8-read--initiator.pcap.gz", nth(0x01, 70), long_ahs,
                                                     "ahs-longer-than-pdu.pcap.gz", "initiator",
                                                     ("71st SCSI Command", "TotalAHSLength 255 (1020 bytes)"))


def case_digest(made):
    hdr, recs = base("stock-header-digest--initiator.pcap.gz")
    ki, kt = keys(recs)
    for key, name, d, what in ((ki, "header-digest-mismatch-i2t.pcap.gz", "initiator", "21st SCSI Command"),
                               (kt, "header-digest-mismatch-t2i.pcap.gz", "target", "21st SCSI Response")):
        h2, r2 = base("stock-header-digest--initiator.pcap.gz")
        st = Stream(r2, key, digests=True)
        assert st.header_digest == 4
        cmd = [o for o, p in st.pdus if p in (0x01, 0x21)][20]
        ahs = st.buf[cmd + 4] * 4
        at = cmd + 48 + ahs
        st.patch(at, bytes([st.buf[at] ^ 0x5a]))
        lost = st.framing_lost(cmd)
        made[name] = {"source": source("stock-header-digest--initiator.pcap.gz"), "unreadable": {d: [lost]},
                      "says": "the header digest of the %s at %s altered: its header cannot be trusted (RFC 3720 "
                              "6.7: discarded), the %s's framing is lost from it until frame %d, its next segment "
                              "that begins with a BHS" % (what, st.bhs_at(cmd), d, lost[1] + 1)}
        write(name, pcap_bytes(h2, r2))


def case_data_digest(made):
    """DataDigest=CRC32C (the lab's peers never negotiate it: the Wireshark wiki's OSD capture
    does, on its second connection); one Data-In's data digest altered."""
    hdr, recs = read_pcap("scsi-osd-example-001.pcap.gz", WIKI)
    ki, kt = keys(recs, 1)
    st = Stream(recs, kt, digests=True, data_digests=True)
    assert st.header_digest == 4 and st.data_digest == 4
    off = [o for o, p in st.pdus if p == 0x25 and int.from_bytes(st.buf[o + 5:o + 8], "big") > 0][4]
    dsl = int.from_bytes(st.buf[off + 5:off + 8], "big")
    at = off + 48 + st.buf[off + 4] * 4 + 4 + (dsl + 3) // 4 * 4  # the data digest
    st.patch(at, bytes([st.buf[at] ^ 0x5a]))
    name = "data-digest-mismatch.pcap.gz"
    # the PDU may be discarded (RFC 3720 6.7); its header digest holds, so the framing does
    first = st.frame_of(off)
    assert [o for o, _ in st.pdus if st.frame_of(o) == first] == [off]
    made[name] = {"source": source("scsi-osd-example-001.pcap.gz", WIKI), "unreadable": {"target": [[first, first]]},
                  "says": "the data digest (in frame %d) of the 5th Data-In with data, at %s, altered: that PDU may "
                          "be discarded; its header digest holds, so the target's framing does"
                          % (st.frame_of(at), st.bhs_at(off))}
    write(name, pcap_bytes(hdr, recs))


def case_reorder_cap(made):
    """A target-side capture that missed one of the target's segments: the rest of the burst waits
    out of order until the initiator's ACK; with --max-reorder-bytes 4096 the cap comes first."""
    hdr, recs = base("stock-qd8-read--target.pcap.gz")
    ki, kt = keys(recs)
    st = Stream(recs, kt)
    # the 60th Data-In: drop the segment holding its data's middle (the BHS stays)
    off = [o for o, p in st.pdus if p == 0x25][60]
    i = st.record_of(off + 2048)
    assert i != st.record_of(off)
    assert not holes(st, {i}) and not holes(Stream(recs, ki), {i})
    made["reorder-cap.pcap.gz"] = {
        "source": source("stock-qd8-read--target.pcap.gz"), "frames_dropped": [i + 1],
        "says": "frame %d dropped: the middle of the data of the 61st Data-In (BHS at %s); no BHS is in it, so "
                "the framing holds" % (i + 1, st.bhs_at(off))}
    write("reorder-cap.pcap.gz", pcap_bytes(hdr, recs[:i] + recs[i + 1:]))


def case_one_direction(made):
    """Only the target's side of the traffic was captured (one direction of a SPAN port): every
    reply waits for a command that never shows."""
    hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
    out = [r for r in recs if not (tcp_of(r[3]) and to_target(r[3]))]
    write("target-direction-only.pcap.gz", pcap_bytes(hdr, out))
    made["target-direction-only.pcap.gz"] = {
        "source": source("stock-qd8-read--initiator.pcap.gz"), "directions": ["target"],
        "says": "the %d frames the initiator sent are gone, the target's %d kept" % (len(recs) - len(out), len(out))}


def case_max_connections(made):
    """Three copies of one short session from three initiator addresses, interleaved by time;
    run with --max-connections 2."""
    hdr, recs = base("scripted-nagle-read-1k--initiator.pcap.gz")
    out = []
    for k in range(3):
        _, rk = base("scripted-nagle-read-1k--initiator.pcap.gz")
        addr = bytes([10, 77, 0, 1]) if k == 0 else bytes([10, 77, 1, k])
        for r in rk:
            d = r[3]
            if d[12:14] == b"\x08\x00":
                if d[26:30] == bytes([10, 77, 0, 1]):
                    d[26:30] = addr
                if d[30:34] == bytes([10, 77, 0, 1]):
                    d[30:34] = addr
            t = r[0] * 10**6 + r[1] + k * 700000  # the third starts half-way through the others
            r[0], r[1] = t // 10**6, t % 10**6
        out += rk
    out.sort(key=lambda r: (r[0], r[1]))
    write("max-connections.pcap.gz", pcap_bytes(hdr, out))
    made["max-connections.pcap.gz"] = {
        "source": source("scripted-nagle-read-1k--initiator.pcap.gz"), "copies": 3,
        "says": "three copies of the source from initiators 10.77.0.1, 10.77.1.1 and 10.77.1.2, each 0.7 s after "
                "the one before, merged by time: no frame is gone"}


def synth_tcp(src, sport, dst, dport, seq, ack, flags, payload, sec, usec):
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + 20 + len(payload), 1, 0x4000, 64, 6, 0, src, dst)
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
    frame = eth + ip + tcp + payload
    return [sec, usec, len(frame), bytearray(frame)]


class Synth:
    """One made-up connection: handshake, then iSCSI PDUs each way cut into 1448-byte segments,
    each burst acknowledged by the peer 100 us later."""

    def __init__(self, ini=bytes([10, 2, 0, 1]), tgt=bytes([10, 2, 0, 2]), sport=51000):
        self.ends, self.port = (ini, tgt), (sport, 3260)
        self.next, self.t, self.recs = [0, 0], 1000 * 10**6, []
        self.seg(0, 0x02, b"")
        self.seg(1, 0x12, b"")
        self.seg(0, 0x10, b"")

    def seg(self, d, flags, payload):
        self.t += 100
        self.recs.append(synth_tcp(self.ends[d], self.port[d], self.ends[1 - d], self.port[1 - d], self.next[d],
                                   self.next[1 - d], flags, payload, self.t // 10**6, self.t % 10**6))
        self.next[d] = (self.next[d] + (len(payload) or (flags & 0x02) // 2)) & 0xffffffff

    def send(self, d, pdu):
        for i in range(0, len(pdu), 1448):
            self.seg(d, 0x18, pdu[i:i + 1448])
        self.seg(1 - d, 0x10, b"")


def pdu(op, flags, itt, data=b"", b2=b"\0\0", f8=bytes(8), f20=bytes(28)):
    """A BHS (DataSegmentLength from data) and the data, padded to 4 bytes."""
    assert len(f8) == 8 and len(f20) == 28
    return (bytes([op, flags]) + b2 + b"\0" + len(data).to_bytes(3, "big") + f8 + struct.pack(">I", itt) + f20 +
            data + bytes(-len(data) % 4))


def login_then_reads(c, requests, reads=4, size=4096):
    """Login Requests (each answered by an empty Login Response, the last by the final one), then
    READ(10)s of 4 KiB, each answered by a Data-In with status."""
    isid = bytes([0x80, 0, 0x02, 0x3d, 0, 1, 0, 0])
    for k, (flags, text) in enumerate(requests):
        c.send(0, pdu(0x43, flags, 1, text, f8=isid, f20=struct.pack(">4xII", 1, 0) + bytes(16)))
        final = flags & 0x80
        answer = (b"HeaderDigest=None\0DataDigest=None\0ImmediateData=Yes\0InitialR2T=No\0"
                  b"MaxRecvDataSegmentLength=262144\0TargetPortalGroupTag=1\0") if final else b""
        c.send(1, pdu(0x23, 0x87 if final else 0x04, 1, answer, f8=isid[:6] + b"\0\1",
                      f20=struct.pack(">4xIII", k, 1, 9) + bytes(12)))
    for k in range(reads):
        itt = 0x10 + k
        cdb = bytes([0x28, 0]) + struct.pack(">IxHx", k * 8, size // 512) + bytes(6)
        c.send(0, pdu(0x01, 0xc1, itt, f8=bytes(8), f20=struct.pack(">III", size, 1 + k, 1 + k) + cdb))
        c.send(1, pdu(0x25, 0x81, itt, bytes(size), f20=struct.pack(">IIIIIII", 0xffffffff, 1 + k, 2 + k, 9 + k,
                                                                       0, 0, 0)))


OPERATIONAL = (b"InitiatorName=iqn.2024-01.test:ini\0SessionType=Normal\0TargetName=iqn.2024-01.test:tgt\0"
               b"HeaderDigest=None\0DataDigest=None\0ImmediateData=Yes\0InitialR2T=No\0")


def case_login_caps(made):
    """Login text beyond the engine's caps: a C-bit sequence of 5 x 64 KiB (the text cap is
    256 KiB), and one Login Request with 5000 keys (the key list keeps 4096)."""
    c = Synth()
    chunk = OPERATIONAL + b"".join(b"X-org.example.pad%03d=" % i + b"v" * 8000 + b"\0" for i in range(8))
    chunk = chunk[:65536]
    login_then_reads(c, [(0x44, chunk)] * 5 + [(0x87, b"MaxBurstLength=262144\0")])
    hdr = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1)
    write("login-text-over-256k.pcap.gz", pcap_bytes(hdr, c.recs))
    c = Synth()
    keys = OPERATIONAL + b"".join(b"X-k%04d=1\0" % i for i in range(5000))
    login_then_reads(c, [(0x87, keys)])
    write("login-5000-keys.pcap.gz", pcap_bytes(hdr, c.recs))


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
    made["non-iscsi-on-3260.pcap.gz"] = {
        "source": source("stock-qd8-read--initiator.pcap.gz"),
        "says": "%d frames of HTTP-like text between 10.9.9.1:40000 and 10.9.9.2:3260 added after every 25th "
                "frame: no frame of the source is gone" % (len(out) - len(recs))}


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
    made["itt-reuse.pcap.gz"] = {
        "source": source("stock-qd8-read--initiator.pcap.gz"),
        "says": "the 42nd SCSI Command (%s) and its replies take the ITT of the 41st (%s), still open: no frame "
                "is gone, the two commands' replies are told apart only by the order of the tags' use"
                % (si.bhs_at(b).split(",")[0], si.bhs_at(a))}
    write("itt-reuse.pcap.gz", pcap_bytes(hdr, recs))


def case_no_response(made):
    """The capture ends right after a command was sent: its response is never seen."""
    hdr, recs = base("stock-qd8-read--initiator.pcap.gz")
    ki, kt = keys(recs)
    si = Stream(recs, ki)
    cmds = [o for o, p in si.pdus if p == 0x01]
    last = si.record_of(cmds[150])
    write("command-no-response.pcap.gz", pcap_bytes(hdr, recs[:last + 1]))
    made["command-no-response.pcap.gz"] = {
        "source": source("stock-qd8-read--initiator.pcap.gz"), "cut_after_frame": last + 1,
        "says": "the capture ends with the frame of the 151st SCSI Command (%s): frames %d.. are gone"
                % (si.bhs_at(cmds[150]), last + 2)}


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


def retransmitted_commands(n):
    """One connection whose initiator sends n READ(10) commands, one per segment, each segment sent
    twice (a retransmission finding for every command), every 16 acknowledged; no answer. The
    handshake is complete and short (a path under 0.2 ms: no side is near, so a resend is not
    judged spurious)."""
    hdr = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1)
    ini, tgt = bytes([10, 3, 0, 1]), bytes([10, 3, 0, 2])
    recs = [synth_tcp(ini, 50000, tgt, 3260, 0, 0, 0x02, b"", 1000, 0),
            synth_tcp(tgt, 3260, ini, 50000, 0, 1, 0x12, b"", 1000, 10),
            synth_tcp(ini, 50000, tgt, 3260, 1, 1, 0x10, b"", 1000, 20)]
    out = [pcap_bytes(hdr, recs)]
    rec = struct.Struct("<IIII")
    seq, t = 1, 1001 * 10**6
    for itt in range(n):
        cdb = bytes([0x28, 0]) + struct.pack(">I", itt * 8 % (1 << 32)) + b"\x00\x00\x08\x00" + bytes(6)
        bhs = pdu(0x01, 0xc1, itt, f20=struct.pack(">III", 4096, itt + 1, 1) + cdb)
        for k in range(2):
            t += 50
            r = synth_tcp(ini, 50000, tgt, 3260, seq, 1, 0x18, bhs, t // 10**6, t % 10**6)
            out.append(rec.pack(r[0], r[1], len(r[3]), r[2]) + bytes(r[3]))
        seq += len(bhs)
        if itt % 16 == 15:
            r = synth_tcp(tgt, 3260, ini, 50000, 1, seq, 0x10, b"", t // 10**6, t % 10**6 + 1)
            out.append(rec.pack(r[0], r[1], len(r[3]), r[2]) + bytes(r[3]))
    return b"".join(out)


def many_connections(n, concurrent=False, spacing_us=None, close=None):
    """n connections from distinct 4-tuples, each a handshake, a login and one 512-byte READ; one after
    another, each closed with FIN both ways (sequential), or all opened before any closes (concurrent:
    the connection cap's test, never closed). A storm: one begins every spacing_us (overlapping,
    each ~1.4 ms long), closed as `close` says: "both" (FIN both ways), "initiator" (the initiator's
    FIN, acknowledged, the target's never seen) or "none"."""
    hdr = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1)
    rec = struct.Struct("<IIII")
    out = [hdr]
    login = [(0x87, OPERATIONAL)]
    conns = []
    if spacing_us is None:
        spacing_us = 10 if concurrent else 2000
        close = "none" if concurrent else "both"
    for k in range(n):
        c = Synth(ini=bytes([10, 4, (k >> 14) & 255, 1 + (k >> 22)]), sport=1024 + (k & 0x3fff))
        c.t = 1000 * 10**6 + k * spacing_us
        for r in c.recs:  # the handshake, retimed
            c.t += 100
            r[0], r[1] = c.t // 10**6, c.t % 10**6
        login_then_reads(c, login, reads=1, size=512)
        if close in ("both", "initiator"):
            c.seg(0, 0x11, b"")
            c.next[0] += 1
            if close == "both":
                c.seg(1, 0x11, b"")
                c.next[1] += 1
            c.seg(1 - (close == "both"), 0x10, b"")
        conns.append(c.recs)
    if spacing_us < 2000:  # they overlap
        recs = sorted((r for rs in conns for r in rs), key=lambda r: (r[0], r[1]))
    else:
        recs = [r for rs in conns for r in rs]
    for r in recs:
        out.append(rec.pack(r[0], r[1], len(r[3]), r[2]) + bytes(r[3]))
    return b"".join(out)


def huge_claims():
    """One connection after a login: a WRITE whose ExpectedDataTransferLength is 2^32 - 1, an R2T
    asking for 2^32 - 1 bytes at BufferOffset 2^32 - 1, a Data-Out at that offset, a Data-In with
    DataSegmentLength 2^24 - 1 (the largest the field holds) and a READ of 2^32 - 1 bytes."""
    hdr = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1)
    c = Synth(ini=bytes([10, 6, 0, 1]))
    login_then_reads(c, [(0x87, OPERATIONAL)], reads=1, size=512)
    big = 0xffffffff
    cdb = bytes([0x2a, 0]) + struct.pack(">IxHx", 0xfffffff0, 0xffff) + bytes(6)
    c.send(0, pdu(0x01, 0xa1, 0x40, f20=struct.pack(">III", big, 2, 2) + cdb))
    c.send(1, pdu(0x31, 0x80, 0x40, f20=struct.pack(">IIIIIII", 0x1234, 2, 3, 10, 0, big, big)))
    c.send(0, pdu(0x05, 0x80, 0x40, bytes(1024), f20=struct.pack(">IIIIIII", 0x1234, 0, 2, 0, 0, big, 0)))
    claim = pdu(0x25, 0x00, 0x41, f20=struct.pack(">IIIIIII", 0xffffffff, 3, 4, 11, 0, big, 0))
    claim = claim[:5] + b"\xff\xff\xff" + claim[8:]
    c.send(1, claim + bytes(8192))
    cdb = bytes([0x88, 0]) + struct.pack(">QI", 2**64 - 1, big) + bytes(2)
    c.send(0, pdu(0x01, 0xc1, 0x42, f20=struct.pack(">III", big, 3, 3) + cdb))
    return pcap_bytes(hdr, c.recs)


def random_payload(megabytes):
    """One connection on port 3260 (handshake, no login) carrying random bytes both ways, 1448 per
    segment, every other segment acknowledged."""
    hdr = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1)
    rnd = random.Random(7)
    c = Synth(ini=bytes([10, 7, 0, 1]))
    out = [pcap_bytes(hdr, c.recs)]
    rec = struct.Struct("<IIII")
    block = bytes(rnd.getrandbits(8) for _ in range(1 << 16))
    for k in range(megabytes * (1 << 20) // 1448):
        c.recs = []
        d = k % 2
        off = (k * 1448) % ((1 << 16) - 1448)
        c.seg(d, 0x18, block[off:off + 1448])
        if k % 2:
            c.seg(1 - d, 0x10, b"")
        for r in c.recs:
            out.append(rec.pack(r[0], r[1], len(r[3]), r[2]) + bytes(r[3]))
    return b"".join(out)


def random_bytes(megabytes, seed, handshake=True):
    """One connection on port 3260 carrying random bytes (each byte drawn, none repeated), with or
    without the handshake: each segment from a side drawn at random, half of them full (1448
    bytes), half of a random length, every other one acknowledged. Framing must find no command
    in it (docs/rules.md "Ports")."""
    hdr = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1)
    rnd = random.Random(seed)
    c = Synth(ini=bytes([10, 9, 0, 1]))
    if not handshake:
        c.recs = []
    out = [pcap_bytes(hdr, c.recs)]
    rec = struct.Struct("<IIII")
    left, k = megabytes << 20, 0
    while left > 0:
        c.recs = []
        d = rnd.getrandbits(1)
        n = 1448 if rnd.random() < 0.5 else rnd.randint(1, 1448)
        c.seg(d, 0x18, rnd.randbytes(n))
        if k % 2:
            c.seg(1 - d, 0x10, b"")
        for r in c.recs:
            out.append(rec.pack(r[0], r[1], len(r[3]), r[2]) + bytes(r[3]))
        left -= n
        k += 1
    return b"".join(out)


def resend_storm(n=65536, size=100):
    """The worst case for matching ACKs and resends to what was sent: the target sends n segments
    that no ACK covers (the record of unacknowledged segments full), resends the last one n times,
    then the initiator acknowledges them one segment at a time."""
    hdr = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1)
    rec = struct.Struct("<IIII")
    ini, tgt = bytes([10, 8, 0, 1]), bytes([10, 8, 0, 2])
    out = [hdr]
    t = [1000 * 10**6]

    def put(src, sport, dst, dport, seq, ack, flags, payload):
        t[0] += 10
        r = synth_tcp(src, sport, dst, dport, seq & 0xffffffff, ack & 0xffffffff, flags, payload,
                      t[0] // 10**6, t[0] % 10**6)
        out.append(rec.pack(r[0], r[1], len(r[3]), r[2]) + bytes(r[3]))

    put(ini, 50000, tgt, 3260, 0, 0, 0x02, b"")
    put(tgt, 3260, ini, 50000, 0, 1, 0x12, b"")
    put(ini, 50000, tgt, 3260, 1, 1, 0x10, b"")
    body = bytes(size)
    for k in range(n):
        put(tgt, 3260, ini, 50000, 1 + k * size, 1, 0x18, body)
    for _ in range(n):
        put(tgt, 3260, ini, 50000, 1 + (n - 1) * size, 1, 0x18, body)
    for k in range(n):
        put(ini, 50000, tgt, 3260, 1, 1 + (k + 1) * size, 0x10, b"")
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
    lost = st.framing_lost(off)
    made["two-connections-one-damaged.pcap.gz"] = {
        "sources": [{"source": source("stock-qd8-read--initiator.pcap.gz"), "unreadable": {"target": [lost]}},
                    {"source": source("stock-qd8-write--initiator.pcap.gz")}],
        "says": "the read fixture, whose 31st Data-In (%s) gets DataSegmentLength 0xfffff0 (the target's framing "
                "lost until frame %d, its next segment that begins with a BHS), merged by time with the write "
                "fixture from initiator 10.77.0.3, undamaged" % (st.bhs_at(off), lost[1] + 1)}
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


def case_reused_tuple(made):
    """A connection closed both ways, then the same 4-tuple again 50 ms later (within the first's
    linger), the new connection's SYN not captured: its SYN-ACK answers that SYN (RFC 9293 §3.5),
    so it is a connection of its own."""
    name = "scripted-nodelay-read-1k--initiator.pcap.gz"
    hdr, first = base(name)
    _, again = base(name)
    syn = again.pop(0)
    assert tcp_of(syn[3]) and syn[3][tcp_of(syn[3])[0] + 13] == 0x02, "the fixture begins with its SYN"
    shift = first[-1][0] * 10**6 + first[-1][1] + 50_000 - (again[0][0] * 10**6 + again[0][1])
    for r in again:
        t = r[0] * 10**6 + r[1] + shift
        r[0], r[1] = t // 10**6, t % 10**6
        d = r[3]
        o = tcp_of(d)[0]
        # new initial sequence numbers: both sides' sequence and acknowledgment numbers move on
        up = 0x10000000 if to_target(d) else 0x20000000
        seq, ack = struct.unpack_from(">II", d, o + 4)
        struct.pack_into(">II", d, o + 4, (seq + up) & 0xffffffff, (ack + (0x30000000 - up)) & 0xffffffff)
    write("reused-tuple-syn-lost.pcap.gz", pcap_bytes(hdr, first + again))
    made["reused-tuple-syn-lost.pcap.gz"] = {
        "sources": [{"source": source(name)}, {"source": source(name), "frames_dropped": [1]}],
        "says": "the fixture, closed both ways, then the fixture again 50 ms after its last frame on the same "
                "4-tuple, its sequence numbers moved on (initiator +0x10000000, target +0x20000000) and its "
                "SYN (frame 1) gone"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", metavar="DIR", help="write the large generated cases into DIR instead")
    ap.add_argument("cases", nargs="*", help="with --big: only these (default: all)")
    ap.add_argument("--out", metavar="DIR", help="write the corpus into DIR instead of next to this script")
    ap.add_argument("--json", action="store_true", help="print each file's damage statement as JSON")
    a = ap.parse_args()
    if a.big:
        big = {"open-commands-2m.pcap": lambda: open_commands(2_000_000),
               # the HTML report's pending-findings cap is 200000
               "retransmitted-commands-200k.pcap": lambda: retransmitted_commands(200_100),
               "sequential-connections-100k.pcap": lambda: many_connections(100_000),
               "concurrent-connections-100k.pcap": lambda: many_connections(100_000, concurrent=True),
               # a storm: 10^5 connections begun 30 us apart (3 s of capture time), three ways of closing
               "storm-closed-100k.pcap": lambda: many_connections(100_000, spacing_us=30, close="both"),
               "storm-half-closed-100k.pcap": lambda: many_connections(100_000, spacing_us=30, close="initiator"),
               "storm-open-100k.pcap": lambda: many_connections(100_000, spacing_us=30, close="none"),
               "open-commands-1m.pcap": lambda: open_commands(1_000_000),
               "huge-claims.pcap": huge_claims,
               "random-payload-500m.pcap": lambda: random_payload(500),
               "random-bytes-500m.pcap": lambda: random_bytes(500, 1),
               "random-bytes-500m-joined.pcap": lambda: random_bytes(500, 2, handshake=False),
               "resend-storm.pcap": resend_storm}
        for name in a.cases or big:
            path = os.path.join(a.big, name)
            with open(path, "wb") as f:
                f.write(big[name]())
            print(path)
        return 0
    global OUT
    OUT = a.out or HERE
    made = {}
    for case in (case_file_level, case_snaplen, case_lost, case_dup_reorder, case_mid_pdu, case_bhs, case_digest,
                 case_data_digest, case_non_iscsi, case_itt_reuse, case_no_response, case_open_commands,
                 case_two_connections, case_reorder_cap, case_max_connections, case_login_caps,
                 case_one_direction, case_subsecond, case_late_release, case_reused_tuple):
        case(made)
    if a.json:
        print(json.dumps(made, indent=1, sort_keys=True))
    else:
        for k, v in sorted(made.items()):
            print("%s: %s" % (k, v["says"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
