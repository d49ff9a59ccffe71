# SPDX-License-Identifier: GPL-2.0-or-later
"""Captures libpcap cannot read, read through libwiretap (cli/input/wiretap_reader.cpp), and the pcap
fields libpcap and Wireshark read differently:

- a pcapng whose two interfaces have different link types (Linux cooked v1 and Ethernet, made with
  mergecap from two bundled captures): the commands of its parts, each as iscsi-doctor reports it
  on the part alone, and first/status frames as Wireshark pairs them in the merged file; the same
  compressed (gzip, xz, zstd), from standard input, and as two pcapng sections one after the other
  (libpcap gives up at the second section's interface, wiretap goes on);
- other formats Wireshark opens (snoop, Network Monitor, ERF): the commands of the pcap they were
  made from;
- link type 14 (raw IP as OpenBSD numbers it): the commands of the Ethernet original;
- a pcap record whose microsecond field is 0xFFFFFFFF: timed as Wireshark times it (the latency of
  the command it answers is Wireshark's iscsi.time), with one notice.

Expectations come from the parts read alone and from tshark, never from the file under test.
"""
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "captures"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import link_types  # noqa: E402
import tshark_oracle  # noqa: E402

BIN = Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor"))
WIKI = next(d for d in (ROOT / "captures" / "wireshark-wiki", ROOT.parent / "shared" / "captures" / "wireshark-wiki")
            if any(d.glob("*.pcap*")))
# Two parts with no known difference from Wireshark's pairing (tests/integration/test_cli.py).
PART_SLL, PART_ETH = "scsi-osd-example-001", "iscsi-scsi-data-cdrom"
# What a command is, whatever file and frame numbers it was read from.
SAME = ("itt", "cmdsn", "op", "lba", "bytes", "latency_ms", "round_trips", "ideal_round_trips", "status",
        "completed", "findings", "breakdown_ms")


def need(*tools):
    for t in tools:
        if not shutil.which(t):
            pytest.fail(f"{t} is required (Wireshark's tools make and check these captures)")


def wiretap_built():
    p = subprocess.run([str(BIN), "--version"], capture_output=True, text=True, timeout=60)
    return "wiretap" in p.stdout + p.stderr


@pytest.fixture(scope="module", autouse=True)
def _needs_wiretap():
    assert BIN.exists(), f"iscsi-doctor binary not found at {BIN} (set ISCSI_DOCTOR)"
    if not wiretap_built():
        pytest.skip("iscsi-doctor built without libwiretap (libwireshark-dev)")


def pcap_bytes(name):
    path = next(p for p in (WIKI / f"{name}.pcap", WIKI / f"{name}.pcap.gz") if p.exists())
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def report(path, *extra, stdin=None):
    p = subprocess.run([str(BIN), "--format", "json", "-q", *map(str, extra), str(path)], capture_output=True,
                       timeout=600, stdin=stdin)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return json.loads(p.stdout)


def commands(doc):
    return sorted(json.dumps({k: c.get(k) for k in SAME}, sort_keys=True) for c in doc["commands"])


def scsi_frames(doc):
    return {(int(c["itt"], 16), c["first_frame"]): c["status_frame"] for c in doc["commands"]
            if c.get("iscsi_opcode", 1) == 1}


def assert_pairs_as_wireshark(doc, path):
    """Every SCSI command Wireshark sees in `path` is reported from the same first frame, and those
    Wireshark pairs end at its response frame."""
    ts = tshark_oracle.commands(path, streams=True)
    ours = scsi_frames(doc)
    assert ts and {(c.itt, c.first_frame) for c in ts} == set(ours)
    for c in ts:
        if c.response_frame is not None:
            assert ours[(c.itt, c.first_frame)] == c.response_frame, (hex(c.itt), c.first_frame)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """The two parts: one relinked to Linux cooked v1, one Ethernet."""
    d = tmp_path_factory.mktemp("parts")
    sll, eth = d / "sll.pcap", d / "eth.pcap"
    link_types.relink(pcap_bytes(PART_SLL), "sll", sll)
    eth.write_bytes(pcap_bytes(PART_ETH))
    return sll, eth


@pytest.fixture(scope="module")
def merged(parts, tmp_path_factory):
    need("mergecap")
    out = tmp_path_factory.mktemp("merged") / "two-interfaces.pcapng"
    subprocess.run(["mergecap", "-w", str(out), *map(str, parts)], check=True)
    return out


def test_two_interface_pcapng_gives_the_commands_of_its_parts(parts, merged):
    alone = [report(p) for p in parts]
    assert all(len(a["commands"]) > 10 for a in alone)
    doc = report(merged)
    c = doc["captures"][0]
    assert (c["format"], c["reader"]) == ("pcapng", "wiretap")
    assert set(c["link_type"].split(",")) == {"EN10MB", "LINUX_SLL"}
    assert c["packets"] == sum(a["captures"][0]["packets"] for a in alone)
    assert commands(doc) == sorted(commands(alone[0]) + commands(alone[1]))
    assert any("read through wiretap" in n["message"] for n in doc["notices"])
    assert_pairs_as_wireshark(doc, merged)
    # each part alone still goes through libpcap
    assert {a["captures"][0]["reader"] for a in alone} == {"libpcap"}


@pytest.mark.parametrize("tool", ["gzip", "xz", "zstd"])
def test_compressed_two_interface_pcapng_from_a_file_and_a_pipe(merged, tmp_path, tool):
    need(tool)
    packed = tmp_path / f"two.pcapng.{tool}"
    packed.write_bytes(subprocess.run([tool, "-c", str(merged)], capture_output=True, check=True).stdout)
    want = commands(report(merged))
    for doc in (report(packed), report("-", stdin=packed.open("rb"))):
        assert doc["captures"][0]["reader"] == "wiretap"
        assert doc["captures"][0]["compression"] == {"gzip": "gzip", "xz": "xz", "zstd": "zstd"}[tool]
        assert commands(doc) == want


def test_two_interface_pcapng_from_standard_input(merged):
    doc = report("-", stdin=merged.open("rb"))
    assert doc["captures"][0]["stream"] and doc["captures"][0]["reader"] == "wiretap"
    assert commands(doc) == commands(report(merged))


def test_second_section_with_another_link_type(parts, tmp_path):
    """Two pcapng files one after the other: libpcap reads the first section's packets, meets the
    second's Ethernet interface and gives up; wiretap takes over from there, the frames already
    read not read twice."""
    need("editcap")
    ng = []
    for p in parts:
        ng.append(tmp_path / (p.stem + ".pcapng"))
        subprocess.run(["editcap", "-F", "pcapng", str(p), str(ng[-1])], check=True)
    both = tmp_path / "two-sections.pcapng"
    both.write_bytes(ng[0].read_bytes() + ng[1].read_bytes())
    alone = [report(p) for p in parts]
    for doc in (report(both), report("-", stdin=both.open("rb"))):
        assert doc["captures"][0]["reader"] == "wiretap"
        assert doc["captures"][0]["packets"] == sum(a["captures"][0]["packets"] for a in alone)
        assert commands(doc) == sorted(commands(alone[0]) + commands(alone[1]))
        switch = [n for n in doc["notices"] if "read through wiretap" in n["message"]]
        assert len(switch) == 1 and switch[0]["frame"] == alone[0]["captures"][0]["packets"]
    assert_pairs_as_wireshark(report(both), both)


def erf_bytes(pcap):
    """The Ethernet pcap as Endace ERF records (type ETH: 2 bytes of pad before the frame)."""
    _, _, _, records = link_types.parse_pcap(pcap)
    out = bytearray()
    for sec, frac, pkt, orig in records:
        body = b"\0\0" + pkt
        rlen = 16 + len(body)
        pad = -rlen % 8
        out += struct.pack("<Q", (sec << 32) + (frac << 32) // 1_000_000)
        out += struct.pack(">BBHHH", 2, 0x04, rlen + pad, 0, orig) + body + bytes(pad)
    return bytes(out)


@pytest.mark.parametrize("fmt", ["snoop", "netmon2", "erf"])
def test_other_formats_give_the_commands_of_the_pcap(tmp_path, fmt):
    src = tmp_path / "src.pcap"
    src.write_bytes(pcap_bytes(PART_SLL))
    out = tmp_path / f"capture.{fmt}"
    if fmt == "erf":
        out.write_bytes(erf_bytes(src.read_bytes()))
    else:
        need("editcap")
        subprocess.run(["editcap", "-F", fmt, str(src), str(out)], check=True)
    want = report(src)
    for doc in (report(out), report("-", stdin=out.open("rb"))):
        c = doc["captures"][0]
        assert (c["format"], c["reader"], c["link_type"]) == (fmt, "wiretap", "EN10MB")
        assert commands(doc) == commands(want)
        assert scsi_frames(doc) == scsi_frames(want)
    # a directory holding it finds it as a capture
    assert report(tmp_path)["captures"][-1]["path"].endswith(f"capture.{fmt}") or \
        any(c["path"].endswith(f"capture.{fmt}") for c in report(tmp_path)["captures"])


def test_link_type_14_is_raw_ip(tmp_path):
    raw = tmp_path / "raw.pcap"
    link_types.relink(pcap_bytes(PART_SLL), "raw", raw)
    data = bytearray(raw.read_bytes())
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    struct.pack_into(endian + "I", data, 20, 14)
    lt14 = tmp_path / "lt14.pcap"
    lt14.write_bytes(bytes(data))
    doc, want = report(lt14), report(raw)
    assert (doc["captures"][0]["link_type"], doc["captures"][0]["reader"]) == ("RAW", "libpcap")
    assert len(doc["commands"]) > 10 and doc["commands"] == want["commands"]
    assert report(lt14, "--decoder", "libtins")["commands"] == want["commands"]
    assert_pairs_as_wireshark(doc, lt14)


def test_out_of_range_microseconds_are_timed_as_wireshark_times_them(tmp_path):
    """A response record's microsecond field set to 0xFFFFFFFF (and its second to the next, so that
    the latency stays positive): Wireshark times the frame 1 us before that second. The command it
    answers gets Wireshark's iscsi.time as its latency."""
    src = tmp_path / "src.pcap"
    src.write_bytes(pcap_bytes(PART_ETH))
    endian, header, linktype, records = link_types.parse_pcap(src.read_bytes())
    ts = tshark_oracle.commands(src, streams=True)
    answered = [c for c in ts if c.response_frame and c.first_frame == c.request_frame]
    pick = answered[len(answered) // 2]
    records[pick.response_frame - 1][0] += 1
    records[pick.response_frame - 1][1] = 0xFFFFFFFF
    odd = tmp_path / "odd-usec.pcap"
    link_types.write_pcap(odd, endian, header, linktype, records)
    for path in (odd, Path(str(odd) + ".gz")):  # our own walk over pcap records, and libpcap's
        if path.suffix == ".gz":
            path.write_bytes(gzip.compress(odd.read_bytes()))
        doc = report(path)
        notices = [n for n in doc["notices"] if "sub-second field is out of range" in n["message"]]
        assert len(notices) == 1 and notices[0]["frame"] == pick.response_frame
        assert "-0.000001000 s from its second" in notices[0]["message"]
        wireshark = {(c.itt, c.first_frame): c.time_ns for c in tshark_oracle.commands(odd, streams=True)}
        ours = {(int(c["itt"], 16), c["first_frame"]): c["latency_ms"] for c in doc["commands"]
                if c.get("iscsi_opcode", 1) == 1}
        key = (pick.itt, pick.first_frame)
        assert wireshark[key] is not None and wireshark[key] > 0
        assert ours[key] == pytest.approx(wireshark[key] / 1e6, abs=1e-3)
