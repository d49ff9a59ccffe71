# SPDX-License-Identifier: GPL-2.0-or-later
"""Soak: memory stays flat over a long live run. An endless pcap stream (a real fixture's session
replayed again and again, each time as a new connection from another port, an hour of capture time
every few seconds) is piped into `iscsi-doctor -` for SOAK_SECONDS (30) of wall time, as `tcpdump -U -w -`
would feed it; its resident size is sampled from /proc every 0.5 s. After the first quarter (buffers,
allocator arenas), the largest RSS of the last quarter must not exceed the largest of the second
quarter by more than 5% + 2 MiB: a per-command or per-connection leak of the replayed volume
(hundreds of thousands of commands) shows far above that."""
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(ROOT / "tests" / "corpus"))
import make_corpus  # noqa: E402  (the tests' shared pcap reader)
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
# 0 turns it off: scripts/test-sanitize.sh does, ASan's quarantine holds freed memory on purpose.
SOAK_SECONDS = float(os.environ.get("ISCSI_DOCTOR_SOAK_SECONDS", "30"))
FIXTURE = ROOT / "captures" / "fixtures" / "stock-qd8-read--initiator.pcap.gz"


def records():
    """(ts_ns, frame bytes) of the fixture, read with the corpus's pcap reader."""
    _, recs = make_corpus.read_pcap(FIXTURE.name, str(FIXTURE.parent))
    return [((sec * 10**6 + usec) * 1000, bytes(data)) for sec, usec, _, data in recs]


def endless_stream(out, stop, recs):
    """Writes the session again and again, each copy a new connection (the initiator's port
    changes: bytes 34-35 of an Ethernet/IPv4 frame from it, 36-37 to it) a second after the last."""
    t0 = recs[0][0]
    span = recs[-1][0] - t0 + 10**9
    ini_port = recs[0][1][34:36]
    out.write(struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 262144, 1))
    k = 0
    try:
        while not stop.is_set():
            port = struct.pack(">H", 20000 + k % 40000)
            chunk = []
            for ts, frame in recs:
                f = bytearray(frame)
                if f[34:36] == ini_port:
                    f[34:36] = port
                elif f[36:38] == ini_port:
                    f[36:38] = port
                t = ts - t0 + k * span
                chunk.append(struct.pack("<IIII", t // 10**9, t % 10**9, len(f), len(f)) + bytes(f))
            out.write(b"".join(chunk))
            k += 1
    except (BrokenPipeError, OSError):
        pass


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.mark.parametrize("fmt", ["jsonl", "text"])
def test_memory_flat_over_a_long_stream(fmt):
    if SOAK_SECONDS <= 0:
        pytest.skip("ISCSI_DOCTOR_SOAK_SECONDS=0 (a sanitizer build: its quarantine keeps freed memory)")
    recs = records()
    args = [BIN, "-q", "--format", fmt, "-"] + (["--interval", "60"] if fmt == "jsonl" else [])
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stop = threading.Event()
    writer = threading.Thread(target=endless_stream, args=(p.stdin, stop, recs), daemon=True)
    writer.start()
    samples = []
    t_end = time.time() + SOAK_SECONDS
    while time.time() < t_end and p.poll() is None:
        samples.append(rss_kib(p.pid))
        time.sleep(0.5)
    alive = p.poll() is None
    p.send_signal(signal.SIGTERM)  # as Ctrl-C ends a live run: the report is still written
    stop.set()
    _, err = p.communicate(timeout=300)
    assert alive, f"iscsi-doctor ended early: {err.decode(errors='replace')[-2000:]}"
    assert p.returncode in (0, 1), err.decode(errors="replace")[-2000:]
    q = len(samples) // 4
    assert q >= 4, samples
    base, late = max(samples[q:2 * q]), max(samples[3 * q:])
    print(f"{fmt}: RSS {samples[0]} KiB at start, {base} KiB (second quarter), {late} KiB (last quarter)")
    assert late <= base * 1.05 + 2048, f"RSS grew from {base} to {late} KiB: {samples}"
