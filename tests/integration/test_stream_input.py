# SPDX-License-Identifier: GPL-2.0-or-later
"""Captures read as streams: `-` (standard input), a FIFO, /dev/stdin, gzip or not, pcap or
pcapng. A stream gives the same analysis as the file it carries; what differs is only what a stream
cannot have (its name, its size on disk). Ctrl-C ends a stream with the report of what came before.
Also the tshark habits: -r FILE, and -i IFACE's usage.
"""
import gzip
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
FIXTURES = ROOT / "captures" / "fixtures"
GZ = FIXTURES / "scripted-nagle-read-1k--initiator.pcap.gz"   # Nagle holds and delayed ACKs
PCAPNG = ROOT / "tests" / "fuzz" / "regressions" / "fuzz_capture" / "seed-nagle-read-head.pcapng"


def run(args, data=None, **kw):
    return subprocess.run([BIN, *args], input=data, capture_output=True, timeout=120, **kw)


def report(args, data=None):
    out = run(["--format", "json", *args], data)
    assert out.returncode in (0, 1), out.stderr.decode()[-2000:]
    return json.loads(out.stdout)


def analysis(r):
    """What the engine found: everything but the input's own description."""
    cap = {k: v for k, v in r["captures"][0].items()
           if k not in ("path", "size_bytes", "stream", "gzip", "compression")}
    return r["commands"], r["findings"], r["sessions"], r["summary"], cap


@pytest.mark.parametrize("path,gzipped", [(GZ, True), (PCAPNG, False)], ids=["pcap-gzip", "pcapng"])
def test_stdin_gives_the_files_analysis(path, gzipped):
    data = path.read_bytes()
    from_file, from_pipe = report([str(path)]), report(["-"], data)
    assert from_pipe["commands"], "no command analysed"
    assert analysis(from_pipe) == analysis(from_file)
    c = from_pipe["captures"][0]
    assert (c["path"], c["stream"], c["gzip"], c["size_bytes"]) == ("-", True, gzipped, len(data))
    assert from_file["captures"][0]["stream"] is False


def test_uncompressed_stream_fifo_and_dev_stdin():
    raw = gzip.decompress(GZ.read_bytes())
    want = analysis(report([str(GZ)]))
    assert analysis(report(["-"], raw)) == want
    assert analysis(report(["/dev/stdin"], raw)) == want
    with tempfile.TemporaryDirectory() as d:
        fifo = Path(d) / "capture"
        os.mkfifo(fifo)
        writer = subprocess.Popen(["sh", "-c", f"cat > '{fifo}'"], stdin=subprocess.PIPE)
        reader = subprocess.Popen([BIN, "--format", "json", str(fifo)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        writer.communicate(raw, timeout=60)
        out, err = reader.communicate(timeout=60)
        assert reader.returncode in (0, 1), err.decode()
        assert analysis(json.loads(out)) == want
        assert json.loads(out)["captures"][0]["stream"] is True


def test_read_option_is_naming_the_file():
    assert analysis(report(["-r", str(GZ)])) == analysis(report([str(GZ)]))


def test_cut_gzip_stream_is_damage_not_failure():
    data = GZ.read_bytes()
    r = report(["-"], data[: len(data) // 2])
    c = r["captures"][0]
    assert c["usable"] and c["damaged"] and 0 < c["packets"]
    messages = " ".join(n["message"] for n in r["notices"])
    assert "gzip stream truncated" in messages and "the analysis covers frames 1-" in messages


@pytest.mark.parametrize("data,words", [(b"", "-: empty input"),
                                        (b"not a capture at all\n", "-: not a pcap, pcapng or gzip"),
                                        (gzip.compress(b"hi"), "-: gzip stream holds no capture (too short)"),
                                        (gzip.compress(b"hello"), "-: gzip stream does not hold a pcap or pcapng"),
                                        (gzip.compress(b"")[:10] + b"\xff" * 64, "-: corrupt gzip data (invalid block type)")],
                         ids=["empty", "text", "gzip-short", "gzip-of-text", "gzip-corrupt"])
def test_unusable_stream_says_why(data, words):
    out = run(["-"], data)
    assert out.returncode == 2
    assert words in out.stderr.decode()


def test_ctrl_c_ends_the_stream_with_a_report():
    # The writer keeps the pipe open after the capture, as tcpdump does until it is stopped.
    want = report([str(GZ)])
    writer = subprocess.Popen(["sh", "-c", f"cat '{GZ}'; exec sleep 60"], stdout=subprocess.PIPE)
    try:
        reader = subprocess.Popen([BIN, "--format", "json", "-"], stdin=writer.stdout, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        writer.stdout.close()
        time.sleep(1.5)  # read and analysed up to here, then waiting for more
        assert reader.poll() is None, "ended before the signal"
        reader.send_signal(signal.SIGINT)
        out, err = reader.communicate(timeout=30)
    finally:
        writer.kill()
        writer.wait()
    assert reader.returncode in (0, 1), err.decode()
    r = json.loads(out)
    assert r["commands"] == want["commands"]
    assert any("reading stopped by Ctrl-C (SIGINT) after frame %d" % want["captures"][0]["packets"] in n["message"]
               for n in r["notices"])


def test_html_from_a_stream_leaves_no_temporary_file():
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as out_dir:
        html = Path(out_dir) / "r.html"
        out = run(["--html", str(html), "-"], GZ.read_bytes(), env=dict(os.environ, TMPDIR=tmp))
        assert out.returncode in (0, 1), out.stderr.decode()
        text = html.read_text()
        assert "<svg" in text and "nagle_hold" in text  # ladders drawn: the second pass read the copy
        assert not os.listdir(tmp)


def test_stdin_named_twice_and_no_input():
    out = run(["--format", "json", "-", "-"], GZ.read_bytes())
    r = json.loads(out.stdout)
    assert [c["usable"] for c in r["captures"]] == [True, False]
    assert "standard input named twice" in r["captures"][1]["error"]
    out = run([])
    assert out.returncode == 2 and "no capture given" in out.stderr.decode()


def test_live_capture_usage():
    """-i captures live (tests/captures/test_lab_live.py runs it on the lab's traffic); its usage
    errors say what to do."""
    out = run(["-i", "nosuch0", "--format", "json"])
    assert out.returncode == 2
    assert json.loads(out.stdout)["captures"][0]["error"].startswith("-i nosuch0: cannot capture")
    out = run(["-i", "lo", str(GZ)])
    assert out.returncode == 2 and "name no capture file" in out.stderr.decode()
    # -c N on a file is its first N packets, as tshark -c (#27); a capture filter needs -i
    out = run(["--count", "3", "--format", "json", str(GZ)])
    assert out.returncode == 0 and json.loads(out.stdout)["captures"][0]["packets"] == 3
    out = run(["-f", "tcp", str(GZ)])
    assert out.returncode == 2 and "requires --interface" in out.stderr.decode()
    out = run(["-i", "lo", "--html", os.devnull])
    assert out.returncode == 2 and "keep it with -w FILE" in out.stderr.decode()


@pytest.mark.skipif(os.geteuid() != 0, reason="a live capture needs root (or CAP_NET_RAW)")
def test_live_capture_ends_after_its_duration(tmp_path):
    t0 = time.time()
    out = run(["-i", "lo", "--duration", "0.5", "-w", str(tmp_path / "lo.pcap"), "--format", "json"])
    assert time.time() - t0 < 10
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["captures"][0]["path"] == "live:lo"
    assert r["captures"][0]["format"] == "live"
    assert any("captured live in" in n["message"] for n in r["notices"]), r["notices"]
    assert "capturing on lo" in out.stderr.decode()
    assert (tmp_path / "lo.pcap").read_bytes()[:4] in (b"\x4d\x3c\xb2\xa1", b"\xd4\xc3\xb2\xa1")
