# SPDX-License-Identifier: GPL-2.0-or-later
"""A small pcap toolkit to re-encapsulate Ethernet captures in the other link layers the tools
read (Linux cooked v1/v2, raw IP, BSD loopback, 802.1Q/802.1ad tags, IPv6, a trailer after each
frame). Checksums are not recomputed: no front-end checks them. Used by the CLI's and both
plugins' link-type tests, each against the original capture's results."""
import contextlib
import gzip
import os
import shutil
import struct
import tempfile
from pathlib import Path


def parse_pcap(data):
    """(endian, 24-byte header, link type, [[sec, frac, frame, orig_len], ...]) of pcap bytes."""
    magic = data[:4]
    endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    header = data[:24]
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    records, off = [], 24
    while off + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        records.append([sec, frac, data[off + 16:off + 16 + incl], orig])
        off += 16 + incl
    return endian, header, linktype, records


def write_pcap(path, endian, header, linktype, records):
    out = bytearray(header[:20] + struct.pack(endian + "I", linktype))
    for sec, frac, pkt, orig in records:
        out += struct.pack(endian + "IIII", sec, frac, len(pkt), orig) + pkt
    Path(path).write_bytes(bytes(out))


def _to_ipv6(pkt):
    """Ethernet + IPv4 -> Ethernet + IPv6 (2001:db8::a.b.c.d); other frames unchanged."""
    if len(pkt) < 34 or pkt[12:14] != b"\x08\x00":
        return pkt, 0
    ip = pkt[14:]
    ihl = (ip[0] & 15) * 4
    tot = struct.unpack(">H", ip[2:4])[0]
    v6 = (struct.pack(">IHBB", 6 << 28, tot - ihl, ip[9], ip[8]) + b"\x20\x01\x0d\xb8" + bytes(8) + ip[12:16]
          + b"\x20\x01\x0d\xb8" + bytes(8) + ip[16:20])
    return pkt[:12] + b"\x86\xdd" + v6 + ip[ihl:], 40 - ihl


def _vlan(pkt, tags):
    return pkt[:12] + b"".join(tpid + struct.pack(">H", 100 + i) for i, tpid in enumerate(tags)) + pkt[12:]


TRANSFORMS = {
    # name: (linktype, function(frame) -> (new frame, growth of the original length))
    "sll": (113, lambda p: (struct.pack(">HHH", 0, 1, 6) + p[6:12] + b"\0\0" + p[12:14] + p[14:], 2)),
    "sll2": (276, lambda p: (p[12:14] + b"\0\0" + struct.pack(">IHBB", 1, 1, 0, 6) + p[6:12] + b"\0\0" + p[14:], 6)),
    "raw": (101, lambda p: (p[14:], -14)),
    "ipv4": (228, lambda p: (p[14:], -14)),
    "null": (0, lambda p: (struct.pack("<I", 2) + p[14:], -10)),
    "vlan": (1, lambda p: (_vlan(p, [b"\x81\x00"]), 4)),
    "qinq": (1, lambda p: (_vlan(p, [b"\x88\xa8", b"\x81\x00"]), 8)),
    "ipv6": (1, _to_ipv6),
    "padded": (1, None),  # 4 bytes of trailer after every complete frame: not payload
}


def relink(data, kind, path):
    """Writes the Ethernet capture `data` (pcap bytes) re-encapsulated as `kind` to `path`."""
    endian, header, linktype, records = parse_pcap(data)
    assert linktype == 1, "an Ethernet capture"
    new_type, fn = TRANSFORMS[kind]
    out = []
    for sec, frac, pkt, orig in records:
        if fn is None:
            if len(pkt) == orig:
                pkt, orig = pkt + b"\xde\xad\xbe\xef", orig + 4
        else:
            pkt, grow = fn(pkt)
            orig += grow
        out.append([sec, frac, pkt, orig])
    write_pcap(path, endian, header, new_type, out)


@contextlib.contextmanager
def relinked(capture, kind):
    """The Ethernet capture file `capture` (gzip or not) re-encapsulated as `kind`, as a file in a
    folder of its own that tshark run as nobody can read; both removed afterwards."""
    data = Path(capture).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    folder = tempfile.mkdtemp(prefix="iscsi-doctor-link-")
    try:
        os.chmod(folder, 0o755)
        path = Path(folder) / f"{kind}.pcap"
        relink(data, kind, path)
        os.chmod(path, 0o644)
        yield path
    finally:
        shutil.rmtree(folder, True)
