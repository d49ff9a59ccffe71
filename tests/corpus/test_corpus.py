# SPDX-License-Identifier: GPL-2.0-or-later
"""The bad-input corpus: each broken capture gives its expected exit code and message (naming the
file and the frame), and still yields the commands it can (tests/corpus/expect.json)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DOCTOR = os.environ.get("ISCSI_DOCTOR", "iscsi-doctor")
EXPECT = json.loads((HERE / "expect.json").read_text())
CASES = EXPECT["files"]


SANITIZED = os.environ.get("ISCSI_DOCTOR_SANITIZED", "0").upper() in ("1", "ON", "TRUE", "YES")


def run(args, tmp_path):
    r, report, _ = run_measured(args, tmp_path)
    return r, report


def run_measured(args, tmp_path):
    """The CLI's result, its JSON report and its own peak RSS in MiB, measured by peak_rss.py for
    this one run (not the running maximum over every child, which an earlier run would mask)."""
    out = tmp_path / "report.json"
    rss = tmp_path / "rss.txt"
    r = subprocess.run([sys.executable, str(HERE / "peak_rss.py"), str(rss), DOCTOR, "--format", "json", "-o",
                        str(out)] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       errors="replace", timeout=600)
    rss_mib = int(rss.read_text()) / 1024 if rss.exists() else float("inf")
    report = json.loads(out.read_text()) if out.exists() and out.stat().st_size else None
    return r, report, rss_mib


def test_every_corpus_file_has_an_expectation():
    files = {p.name for p in HERE.iterdir() if p.suffix in (".pcap", ".gz", ".pcapng")}
    assert files == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_file(name, tmp_path):
    e = CASES[name]
    r, report = run(e.get("args", []) + [str(HERE / name)], tmp_path)
    assert r.returncode == e["exit"], r.stderr
    assert "AddressSanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr
    for s in e.get("stderr", []):
        assert s in r.stderr, "%r not in stderr:\n%s" % (s, r.stderr)
    for s in e.get("not_stderr", []):
        assert s not in r.stderr, r.stderr
    if report is None:
        assert not e.get("min_commands"), "no report written"
        return
    cmds = report["commands"]
    assert len(cmds) >= e.get("min_commands", 0)
    assert sum(c["completed"] for c in cmds) >= e.get("min_completed", 0)
    if "max_commands" in e:
        assert len(cmds) <= e["max_commands"]
    if "min_incomplete" in e:
        assert sum(not c["completed"] for c in cmds) >= e["min_incomplete"]
    notices = [n["message"] for n in report.get("notices", [])]
    for s in e.get("notices", []):
        assert any(s in n for n in notices), "%r not among the notices:\n%s" % (s, "\n".join(notices))
    for s in e.get("notices_once", []):
        assert sum(s in n for n in notices) == 1, "%r not in exactly one notice:\n%s" % (s, "\n".join(notices))
    if "connection_min_completed" in e:
        # the undamaged connection is analysed in full: its commands all complete
        per = {}
        for c in cmds:
            per.setdefault(c["connection"], []).append(c["completed"])
        best = max(sum(v) for v in per.values())
        assert best >= e["connection_min_completed"], per.keys()


def test_millions_of_open_commands(tmp_path):
    """2 million commands, none answered: the open-command cap is hit and said, memory stays low."""
    subprocess.run([sys.executable, str(HERE / "make_corpus.py"), "--big", str(tmp_path)], check=True,
                   stdout=subprocess.DEVNULL)
    r, report, rss_mib = run_measured(["-q", str(tmp_path / "open-commands-2m.pcap")], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "open-command cap (65536) hit" in r.stderr
    # the closing count includes what the cap left untracked
    assert ("2000000 commands never answered by the end of the capture (1934464 of them past the "
            "open-command cap, not tracked; first: ITT 0x00000000, frame 3)") in [n["message"] for n in report["notices"]]
    assert sum("open-command cap (65536) hit" in n["message"] for n in report["notices"]) == 1
    # 66,667 segments, none acknowledged: the record of unacknowledged segments is capped too
    said = [n for n in report["notices"] if "unacknowledged-segment cap (65536 per direction) hit" in n["message"]]
    assert [n["frame"] for n in said] == [65539], report["notices"]
    if not SANITIZED:  # ASan's shadow memory is not the tool's
        assert rss_mib < 200, rss_mib


def test_html_pending_findings_cap(tmp_path):
    """200,100 open commands, each with a retransmission finding before it is reported: the HTML
    report's buffer of such findings (200,000) is cleared and says so, once."""
    subprocess.run([sys.executable, str(HERE / "make_corpus.py"), "--big", str(tmp_path),
                    "retransmitted-commands-200k.pcap"], check=True, stdout=subprocess.DEVNULL)
    page = tmp_path / "report.html"
    r = subprocess.run([DOCTOR, "--html", str(page), "--max-open-commands", "250000",
                        str(tmp_path / "retransmitted-commands-200k.pcap")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    said = [l for l in r.stderr.splitlines() if "pending-findings cap (200000) hit" in l]
    assert len(said) == 1 and ": frame 412504: warning: " in said[0], r.stderr
    assert "pending-findings cap (200000) hit" in page.read_text()



def big_case(tmp_path, name, n):
    sys.path.insert(0, str(HERE))
    import make_corpus
    path = tmp_path / name
    path.write_bytes(make_corpus.many_connections(n, concurrent="concurrent" in name))
    return path


def test_sequential_connections_are_freed(tmp_path):
    """10^5 connections one after another (handshake, login, one READ, FIN both ways): every one is
    analysed, memory stays flat (closed connections are reported and freed), the report lists the
    first 4096 and counts the rest."""
    n = 10_000 if SANITIZED else 100_000
    path = big_case(tmp_path, "sequential.pcap", n)
    r, report, rss_mib = run_measured([str(path)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "connection cap" not in r.stderr
    cmds = report["commands"]
    assert len(cmds) == n and all(c["completed"] for c in cmds)
    assert len({c["connection"] for c in cmds}) == n
    listed = sum(len(s["connections"]) for s in report["sessions"])
    unlisted = report["captures"][0]["connections_unlisted"]
    assert listed == min(n, 4096) and listed + unlisted["connections"] == n
    assert unlisted["commands"] == n - listed
    if not SANITIZED:
        assert rss_mib < 64, rss_mib


def test_concurrent_connections_hit_the_open_cap(tmp_path):
    """10^5 connections open at once: the cap (open connections) refuses the later ones, says so
    once, and the closing notice counts them."""
    n = 70_000
    path = big_case(tmp_path, "concurrent.pcap", n)
    r, report = run([str(path)], tmp_path)
    assert r.returncode == 0, r.stderr
    notices = [x["message"] for x in report["notices"]]
    assert sum("connection cap (65536) hit" in x for x in notices) == 1, notices
    assert "%d connections not analysed: the connection cap (65536) was full when it began" % (n - 65536) in notices
    assert len(report["commands"]) == 65536


@pytest.mark.parametrize("timeout,analysed", [(None, 3), ("1000", 2)])
def test_idle_connections_make_room_at_the_cap(tmp_path, timeout, analysed):
    """Two connections left open and idle, a third 100 s later, against --max-connections 2: with the
    default idle timeout (60 s) the idle ones are reported and freed and the third is analysed; with
    --idle-timeout 1000 it is refused and counted."""
    sys.path.insert(0, str(HERE))
    import make_corpus as m
    recs = []
    for k in range(3):
        c = m.Synth(ini=bytes([10, 5, 0, 1 + k]), sport=40000 + k)
        c.t = 1000 * 10**6 + k * (100 * 10**6 if k == 2 else 10**4)
        for r in c.recs:
            c.t += 100
            r[0], r[1] = c.t // 10**6, c.t % 10**6
        m.login_then_reads(c, [(0x87, m.OPERATIONAL)], reads=1, size=512)
        recs += c.recs
    recs.sort(key=lambda r: (r[0], r[1]))
    hdr = m.struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1)
    path = tmp_path / "idle.pcap"
    path.write_bytes(m.pcap_bytes(hdr, recs))
    args = ["--max-connections", "2"] + (["--idle-timeout", timeout] if timeout else []) + [str(path)]
    r, report = run(args, tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(report["commands"]) == analysed and all(c["completed"] for c in report["commands"])
    notices = [n["message"] for n in report["notices"]]
    assert ("1 connection not analysed: the connection cap (2) was full when it began" in notices) == (analysed == 2)
