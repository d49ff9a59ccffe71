# SPDX-License-Identifier: GPL-2.0-or-later
"""Compressed captures: gzip, xz, zstd, lz4 (frame format) and bzip2, made here by the Debian
command-line tools (scripts/install-deps.sh installs them) from bundled captures, pcap and pcapng.

Every expectation comes from the uncompressed file: a compressed copy, named so that its name
says nothing, read as a file or from standard input, gives the analysis of the plain file; a copy
cut short gives the analysis of what an independent decoder recovers before the cut (Python's, or
the format's tool), with a notice naming the format; a copy whose integrity check was broken gives every packet
and an error; a copy broken at its start, or holding no capture, is an unusable input (exit 2) with
the format's name in the message. Directories pick compressed captures by their content, and the
second pass of the HTML report and of `ladder` reads them again.
"""
import bz2
import gzip
import json
import lzma
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
FIXTURES = ROOT / "captures" / "fixtures"

# format name (as the JSON report gives it) -> the Debian tool that makes it, writing to stdout
TOOLS = {"gzip": ["gzip", "-c"], "xz": ["xz", "-c"], "zstd": ["zstd", "-q", "-c"],
         "lz4": ["lz4", "-q", "-c"], "bzip2": ["bzip2", "-c"]}
FORMATS = list(TOOLS)
NEW = [f for f in FORMATS if f != "gzip"]

SOURCES = {  # name -> bundled capture; "ng": that capture converted to pcapng by editcap
    "nagle": FIXTURES / "scripted-nagle-read-1k--initiator.pcap.gz",
    "tape": ROOT / "captures" / "wireshark-wiki" / "iscsi-tapel.pcap.gz",
    "loss-ng": FIXTURES / "stock-loss-read--target.pcap.gz",
}
BIG = FIXTURES / "stock-1m--initiator.pcap.gz"  # 23 MB: many xz, lz4 and bzip2 blocks, to cut


def compress(fmt, data):
    tool = TOOLS[fmt]
    assert shutil.which(tool[0]), f"{tool[0]} not installed (scripts/install-deps.sh installs it)"
    return subprocess.run(tool, input=data, capture_output=True, check=True, timeout=300).stdout


def recover(fmt, data):
    """All that a decoder gets from data cut short: Python's own for gzip, xz and bzip2 (the bzip2
    tool drops its last 5000-byte chunk at an error), the format's tool for zstd and lz4."""
    if fmt in ("gzip", "xz", "bzip2"):
        d = {"gzip": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS), "xz": lzma.LZMADecompressor,
             "bzip2": bz2.BZ2Decompressor}[fmt]()
        return d.decompress(data)
    return subprocess.run([*TOOLS[fmt], "-d"], input=data, capture_output=True, timeout=300).stdout


def run(args, data=None):
    return subprocess.run([BIN, *map(str, args)], input=data, capture_output=True, timeout=300)


def report(args, data=None, rc=(0, 1)):
    out = run(["--format", "json", "-q", *args], data)
    assert out.returncode in rc, out.stderr.decode()[-2000:]
    return json.loads(out.stdout)


def analysis(r):
    """What the engine found and what the reader counted: all but the input's own description."""
    cap = {k: v for k, v in r["captures"][0].items()
           if k not in ("path", "size_bytes", "stream", "gzip", "compression")}
    notices = [{k: v for k, v in n.items() if k != "file"} for n in r["notices"]]
    return r["commands"], r["findings"], r["sessions"], r["summary"], cap, notices


def errors(r):
    return [n for n in r["notices"] if n["level"] == "error"]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The uncompressed captures, as files."""
    d = tmp_path_factory.mktemp("plain")
    out = {}
    for name, src in [*SOURCES.items(), ("big", BIG)]:
        out[name] = d / f"{name}.cap"
        out[name].write_bytes(gzip.decompress(src.read_bytes()))
        if name.endswith("-ng"):
            ng = d / f"{name}.ng"
            subprocess.run(["editcap", "-F", "pcapng", str(out[name]), str(ng)], check=True)
            assert ng.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"
            out[name] = ng
    return out


@pytest.fixture(scope="module")
def packed(plain, tmp_path_factory):
    """(format, capture name) -> the compressed copy, in a file whose name says nothing."""
    d = tmp_path_factory.mktemp("packed")
    out = {}
    for fmt in FORMATS:
        for name in [*SOURCES, "big"]:
            out[fmt, name] = d / f"{name}-{fmt}.bin"
            out[fmt, name].write_bytes(compress(fmt, plain[name].read_bytes()))
    return out


@pytest.mark.parametrize("name", list(SOURCES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_file_and_stdin_give_the_plain_files_analysis(fmt, name, plain, packed):
    want = report([plain[name]])
    assert want["commands"], "no command in the plain capture"
    from_file = report([packed[fmt, name]])
    data = packed[fmt, name].read_bytes()
    from_pipe = report(["-"], data)
    assert analysis(from_file) == analysis(want)
    assert analysis(from_pipe) == analysis(want)
    for r, stream in ((from_file, False), (from_pipe, True)):
        c = r["captures"][0]
        assert (c["compression"], c["gzip"], c["stream"]) == (fmt, fmt == "gzip", stream)
    assert from_pipe["captures"][0]["size_bytes"] == len(data)
    assert want["captures"][0]["compression"] is None
    fmt_word = "pcapng" if name.endswith("-ng") else "pcap"
    assert f"{fmt_word} ({fmt}), " in run([packed[fmt, name]]).stdout.decode()  # the text report's header


@pytest.mark.parametrize("fmt", FORMATS)
def test_cut_short_reads_what_the_tool_recovers(fmt, plain, packed, tmp_path):
    data = packed[fmt, "big"].read_bytes()
    cut = data[: len(data) * 2 // 3]
    prefix = tmp_path / "prefix.cap"  # the plain bytes before the cut, as the format's tool gives them
    prefix.write_bytes(recover(fmt, cut))
    want = report([prefix])
    full = report([plain["big"]])["captures"][0]["packets"]
    packets = want["captures"][0]["packets"]
    assert 0 < packets < full and want["commands"]
    (tmp_path / "cut.bin").write_bytes(cut)
    for r in (report([tmp_path / "cut.bin"]), report(["-"], cut)):
        c = r["captures"][0]
        assert c["usable"] and c["damaged"] and c["packets"] == packets
        assert r["commands"] == want["commands"]
        (e,) = errors(r)
        assert e["frame"] == packets
        assert f"{fmt} stream truncated (unexpected end of file)" in e["message"]
    out = run([tmp_path / "cut.bin"])
    assert out.returncode == 0, out.stderr.decode()  # damage is told, it does not fail the run


def break_check(fmt, data):
    """data with its integrity check broken: every byte before it decompresses as it did."""
    b = bytearray(data)
    if fmt == "gzip":
        at = len(b) - 8  # the member's CRC-32
    elif fmt == "xz":  # the block's check, just before the index (its size is in the stream footer)
        at = len(b) - 12 - (struct.unpack("<I", b[-8:-4])[0] + 1) * 4 - 1
    elif fmt == "bzip2":
        at = len(b) - 2  # the stream's combined CRC (its last byte holds padding bits)
    else:
        at = len(b) - 1  # zstd's frame checksum, lz4's content checksum
    b[at] ^= 0x01
    return bytes(b)


@pytest.mark.parametrize("fmt", FORMATS)
def test_broken_integrity_check_is_told_after_every_packet(fmt, plain, packed, tmp_path):
    want = report([plain["nagle"]])
    broken = tmp_path / "broken.bin"
    broken.write_bytes(break_check(fmt, packed[fmt, "nagle"].read_bytes()))
    for r in (report([broken]), report(["-"], broken.read_bytes())):
        c = r["captures"][0]
        assert c["usable"] and c["damaged"] and c["packets"] == want["captures"][0]["packets"]
        assert r["commands"] == want["commands"]
        (e,) = errors(r)
        assert e["frame"] == c["packets"] and f"corrupt {fmt} data (" in e["message"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_broken_start_is_an_unusable_input(fmt, packed, tmp_path):
    data = packed[fmt, "nagle"].read_bytes()
    keep = 10 if fmt == "gzip" else 6 if fmt == "xz" else 4  # the header up to what can be broken
    broken = tmp_path / "broken.bin"
    broken.write_bytes(data[:keep] + b"\xff" * 4096)
    for args, data_in, name in (([broken], None, str(broken)), (["-"], broken.read_bytes(), "-")):
        out = run(args, data_in)
        assert out.returncode == 2
        assert re.search(rf"{re.escape(name)}: corrupt {fmt} data \(.+\)", out.stderr.decode()), out.stderr


@pytest.mark.parametrize("fmt", FORMATS)
def test_not_a_capture_inside(fmt, tmp_path):
    for content, words in ((b"plain text, not a capture\n" * 20, "does not hold a pcap or pcapng capture"),
                           (b"hi", "holds no capture (too short)")):
        f = tmp_path / "text.bin"
        f.write_bytes(compress(fmt, content))
        out = run([f])
        assert out.returncode == 2 and f"{f}: {fmt} file {words}" in out.stderr.decode(), out.stderr
        out = run(["-"], f.read_bytes())
        assert out.returncode == 2 and f"-: {fmt} stream {words}" in out.stderr.decode(), out.stderr


@pytest.mark.parametrize("fmt", NEW)
def test_streams_one_after_another_padding_and_trailing_bytes(fmt, plain, tmp_path):
    raw = plain["nagle"].read_bytes()
    want = analysis(report([plain["nagle"]]))
    one = compress(fmt, raw)
    two = compress(fmt, raw[:10007]) + compress(fmt, raw[10007:])  # as `cat a.xz b.xz` makes
    f = tmp_path / "c.bin"
    for data in (two, one + bytes(512)):  # zero padding, as dd leaves it
        f.write_bytes(data)
        assert analysis(report([f])) == want
        assert analysis(report(["-"], data)) == want
    f.write_bytes(one + b"trailing bytes that are no compressed data")
    r = report([f])
    assert r["commands"] == want[0] and not r["captures"][0]["damaged"]
    assert [n["message"] for n in r["notices"] if n["level"] == "warning"] == [
        f"the bytes after the end of the {fmt} data are not {fmt} data: ignored"]


def test_directory_counts_compressed_captures_and_jobs_agree(packed, tmp_path):
    d = tmp_path / "dir"
    (d / "sub").mkdir(parents=True)
    want = {}  # path -> format
    for i, fmt in enumerate(FORMATS):
        name = "loss-ng" if fmt in ("xz", "lz4") else "nagle"
        f = d / ("sub" if i % 2 else ".") / f"c{i}"
        f.write_bytes(packed[fmt, name].read_bytes())
        want[str(f.resolve())] = fmt
        (d / f"notes{i}").write_bytes(compress(fmt, b"a compressed file that is no capture\n"))
    (d / "readme.txt").write_text("plain text\n")
    out = {}
    for jobs in ("1", "2"):
        p = run(["--format", "json", "-q", "-j", jobs, d])
        assert p.returncode in (0, 1), p.stderr.decode()
        out[jobs] = p.stdout
    r = json.loads(out["1"])
    assert {str(Path(c["path"]).resolve()): c["compression"] for c in r["captures"]} == want
    assert len(r["captures"]) == len(want) and all(c["usable"] and c["packets"] for c in r["captures"])
    assert out["1"] == out["2"]


def ladders(page):
    return re.findall(r'<svg class="ladder".*?</svg>', page, re.S)


@pytest.mark.parametrize("fmt", NEW)
def test_second_pass_reads_compressed_files(fmt, plain, packed, tmp_path):
    """--html and `ladder` read the file twice; from standard input, a temporary copy."""
    pages = {}
    for key, args, data in (("plain", [plain["nagle"]], None), ("file", [packed[fmt, "nagle"]], None),
                            ("stdin", ["-"], packed[fmt, "nagle"].read_bytes())):
        html = tmp_path / f"{key}.html"
        p = run(["-q", "--html", html, *args], data)
        assert p.returncode in (0, 1), p.stderr.decode()
        pages[key] = ladders(html.read_text())
    assert pages["plain"], "no ladder drawn"
    assert pages["file"] == pages["plain"] and pages["stdin"] == pages["plain"]
    itt = next(c["itt"] for c in report([plain["nagle"]])["commands"] if c["findings"])
    want = run(["ladder", "--itt", itt, plain["nagle"]]).stdout
    assert b"<svg" in want
    assert run(["ladder", "--itt", itt, packed[fmt, "nagle"]]).stdout == want
    assert run(["ladder", "--itt", itt, "-"], packed[fmt, "nagle"].read_bytes()).stdout == want
