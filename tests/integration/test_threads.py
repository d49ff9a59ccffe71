# SPDX-License-Identifier: GPL-2.0-or-later
"""--threads: reading and decoding on a thread of their own (and JSON formatted on another) give
byte for byte the output of one thread (--threads 1), standard error included, on every bundled
capture and on a small-block capture long enough for the read-ahead's queue to fill."""
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
# As scripts/same-output.sh: every capture the repository carries.
GLOBS = ["captures/fixtures/*.pcap*", "captures/wireshark-wiki/*.pcap*", "tests/corpus/*.pcap*",
         "tests/fuzz/regressions/captures/*", "tests/fuzz/regressions/fuzz_capture/*"]
CAPTURES = sorted(p for g in GLOBS for p in ROOT.glob(g) if p.is_file())
FORMATS = ["json", "text", "csv"]


def run(threads, fmt, path):
    r = subprocess.run([BIN, "--threads", str(threads), "--format", fmt, str(path)], capture_output=True,
                       timeout=600)
    return r.returncode, r.stdout, r.stderr


def differing(paths, formats):
    jobs = [(p, f) for p in paths for f in formats]

    def one(job):
        p, f = job
        return None if run(1, f, p) == run(2, f, p) else f"{p.relative_to(ROOT)} ({f})"

    with ThreadPoolExecutor(max_workers=2) as pool:
        return [d for d in pool.map(one, jobs) if d]


def test_every_bundled_capture_same_in_one_thread_and_two():
    assert len(CAPTURES) > 200
    assert differing(CAPTURES, FORMATS) == []


@pytest.fixture(scope="module")
def small_block(tmp_path_factory):
    path = tmp_path_factory.mktemp("threads") / "small-block.pcap"
    subprocess.run([sys.executable, str(ROOT / "bench" / "make-small-block.py"), str(path), "30000"], check=True,
                   capture_output=True)
    return path


@pytest.mark.parametrize("fmt", ["json", "jsonl", "text"])
def test_small_block_same_in_one_thread_and_two(small_block, fmt):
    one, two = run(1, fmt, small_block), run(2, fmt, small_block)
    assert one[0] == 0 and b"READ" in one[1]
    assert one == two


def test_small_block_has_many_batches(small_block):
    """The capture is long enough for the read-ahead to hand over dozens of batches (512 segments
    or 256 KiB each; 4 wait at most) and the JSON writer several (1024 elements each)."""
    code, out, _ = run(2, "json", small_block)
    assert code == 0 and out.count(b'"itt":') > 4 * 1024


def test_threads_is_checked():
    r = subprocess.run([BIN, "--threads", "0", str(CAPTURES[0])], capture_output=True, text=True)
    assert r.returncode == 2 and "--threads" in r.stderr
