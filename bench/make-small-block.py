#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Makes the small-block benchmark capture: many short packets, where per-packet cost shows.

Real lab captures of 1 KiB and 8 KiB queue-depth-1 reads and writes (tgtd + libiscsi, Nagle on and
off, initiator vantage) are written one after another until the file holds PACKETS packets. Each
copy is shifted in time past the previous one and gets its own initiator port, so every copy is a
connection of its own, as the sessions of a long field capture are. TCP checksums are left as they
are (neither iscsi-doctor nor tshark checks them by default).

usage: bench/make-small-block.py OUT.pcap [PACKETS]        (default 450000)
"""
import gzip
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["scripted-nagle-read-1k", "scripted-nodelay-read-1k", "scripted-nagle-read-8k",
           "scripted-nodelay-read-8k", "initiator-nagle-write-1k", "initiator-nagle-write-8k",
           "target-nagle-read-batch2", "target-nagle-write-batch2"]
ISCSI_PORT = 3260


def read_pcap(path):
    raw = gzip.decompress(path.read_bytes())
    if raw[:4] != b"\xd4\xc3\xb2\xa1":
        sys.exit(f"{path}: not a little-endian microsecond pcap")
    linktype = struct.unpack_from("<I", raw, 20)[0]
    if linktype != 1:
        sys.exit(f"{path}: link type {linktype}, not Ethernet")
    packets, off = [], 24
    while off + 16 <= len(raw):
        sec, usec, caplen, length = struct.unpack_from("<IIII", raw, off)
        packets.append((sec * 1_000_000 + usec, bytearray(raw[off + 16:off + 16 + caplen]), length))
        off += 16 + caplen
    return packets


def tcp_header_at(frame):
    """Offset of the TCP header in an Ethernet/IPv4 frame, or None."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
        return None
    return 14 + (frame[14] & 0x0F) * 4


def main():
    out = Path(sys.argv[1])
    want = int(sys.argv[2]) if len(sys.argv) > 2 else 450_000
    units = [read_pcap(ROOT / "captures" / "fixtures" / f"{s}--initiator.pcap.gz") for s in SOURCES]
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        written, copy, clock = 0, 0, units[0][0][0]
        while written < want:
            for unit in units:
                shift = clock + 1_000_000 - unit[0][0]  # one idle second between copies
                port_delta = copy % 20000
                for t, frame, length in unit:
                    if written >= want:
                        break
                    frame = bytearray(frame)
                    tcp = tcp_header_at(frame)
                    if tcp is not None and len(frame) >= tcp + 4:
                        for at in (tcp, tcp + 2):
                            port = struct.unpack_from(">H", frame, at)[0]
                            if port != ISCSI_PORT:
                                struct.pack_into(">H", frame, at, 30000 + (port + port_delta) % 30000)
                    t += shift
                    f.write(struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(frame), length))
                    f.write(frame)
                    written += 1
                clock = unit[-1][0] + shift
                copy += 1
    print(f"{out}: {written} packets, {copy} connections' captures")


if __name__ == "__main__":
    main()
