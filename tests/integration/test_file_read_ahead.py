# SPDX-License-Identifier: GPL-2.0-or-later
"""An uncompressed pcap file's bytes are read on a thread of their own unless --threads 1
(input/file_read_ahead.hpp: in 1 MiB chunks, a record the chunk boundary cuts carried over). The
output is byte for byte that of --threads 1, standard error and exit code included, on a capture of
many chunks and on cuts of it around the chunks' boundaries; and a file cut inside a record says how
many of the record's bytes the file holds, as libpcap does (counted here from the file itself)."""
import os
import random
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
MIB = 1 << 20


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("read-ahead") / "small-block.pcap"
    subprocess.run([sys.executable, str(ROOT / "bench" / "make-small-block.py"), str(path), "12000"], check=True,
                   capture_output=True)
    assert path.stat().st_size > 5 * MIB
    return path


def run(path, *args):
    r = subprocess.run([BIN, *args, "--format", "json", str(path)], capture_output=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def cut_record(data):
    """(frame number, caplen, bytes after its header) of the record the end of `data` cuts; None if none."""
    off, frame = 24, 0
    while off + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, off + 8)[0]
        frame += 1
        if off + 16 + caplen > len(data):
            return frame, caplen, len(data) - off - 16
        off += 16 + caplen
    return None


def test_whole_file_same_as_one_thread(capture):
    one, ahead = run(capture, "--threads", "1"), run(capture)
    assert one[0] == 0 and b"READ" in one[1]
    assert ahead == one


def cuts(size):
    # Around where the chunks meet (the first is read at open, the rest by the thread), and elsewhere.
    near = [k * MIB + d for k in range(1, 5) for d in (-17, -1, 0, 1, 15, 16, 17, 300, 1500)]
    return sorted(set(near + random.Random(7).sample(range(25, size), 12)))


def test_cut_files_same_as_one_thread(capture, tmp_path):
    data = capture.read_bytes()
    differ = []
    for n in cuts(len(data)):
        cut = tmp_path / f"cut-{n}.pcap"
        cut.write_bytes(data[:n])
        if run(cut, "--threads", "1") != run(cut):
            differ.append(n)
        cut.unlink()
    assert differ == []


def test_cut_record_says_what_the_file_holds(capture, tmp_path):
    data = capture.read_bytes()
    checked = 0
    for n in cuts(len(data)):
        rec = cut_record(data[:n])
        if not rec:
            continue  # cut inside a record's header, or between records
        frame, caplen, held = rec
        cut = tmp_path / f"cut-{n}.pcap"
        cut.write_bytes(data[:n])
        err = run(cut)[2].decode()
        cut.unlink()
        m = re.search(r"tried to read (\d+) captured bytes, only got (\d+)", err)
        assert m, err
        assert (int(m.group(1)), int(m.group(2))) == (caplen, held), (n, err)
        assert f"the analysis covers frames 1-{frame - 1}" in err
        checked += 1
    assert checked >= 10
