# SPDX-License-Identifier: GPL-2.0-or-later
"""The bad-input corpus: each broken capture gives its expected exit code and messages (naming the
file and the frame), and still yields the commands the damage leaves (tests/corpus/expect.json).

No count here is read from iscsi-doctor's output. How each expectation is derived:

- exit, stderr, notices, notices_once: stated per file in expect.json (the messages name the file,
  the frame and the cap from the arguments). A message's counts are taken from tshark on the
  corpus file: {never_answered} (SCSI Command PDUs Wireshark pairs with no status),
  {first_never_answered} ("ITT 0x..., frame N" of the first of them; {first_never_answered_frame}
  that frame alone), {past_open_cap} (those beyond the --max-open-commands cap) and
  {open_cap_hit_frame} (the frame of the command one past the cap).
- The counts of SCSI commands (the report's commands with iscsi_opcode 1) and of completed ones
  come from tshark (tests/integration/tshark_oracle.py, the integration tests' oracle: Wireshark's
  framing, and its pairing of each SCSI Command with its SCSI Response or status-bearing Data-In). expect.json's "counts" says on which capture:
  - "source": tshark on the undamaged fixture each corpus file was made from, minus what the
    file's damage takes, as make_corpus.py states it in the fixture's frame numbers ("damage":
    cut_after_frame, starts_at_frame, frames_dropped, directions, and "unreadable": the frames in
    which a direction's PDUs begin that cannot be framed). A PDU is readable when its BHS lies in a
    frame of the file outside its direction's unreadable ranges and, before a cut, the whole PDU
    does. At least the commands whose SCSI Command PDU is readable must be reported, at least
    those of them whose status PDU is readable completed; at most the commands whose SCSI Command
    PDU's BHS is in the file at all, at most those of them whose status PDU's BHS is too
    completed. A file made of several fixtures (or copies) is one connection per part: each
    part's completed commands must be found on a connection of its own.
  - "corpus": tshark on the corpus file itself, where Wireshark reads the damage as a tool can
    and the frames alone cannot say it (a snaplen, a shared ITT), or the file is made up whole (no
    fixture): Wireshark's counts are the minimum; the maximum comes from the fixture when there
    is one, else is the same (a generated file is undamaged).
  - "none": the file is no readable capture: no command.
  Caps from the arguments bound them: --max-connections K keeps the first K parts (connections);
  --max-open-commands C keeps at most C open commands, so with no command answered exactly C.
- test_corpus_is_what_make_corpus_makes: make_corpus.py, run again, makes every corpus file byte
  for byte and states the same damage as expect.json, so the damage the counts subtract is the one
  the files carry.
- A file where the tool falls short of its input-derived minimum names the shortfall in
  expect.json ("shortfall": {"commands" or "completed": why}); that check is a strict xfail, so it
  fails once the tool is fixed and the entry must go.
"""
import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import tshark_oracle  # noqa: E402


def wireshark_commands(path):
    """tshark's SCSI commands in path, each with its connection; a damaged file as far as tshark reads it."""
    return tshark_oracle.commands(path, streams=True, damaged_ok=True)

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


RUNS = tempfile.TemporaryDirectory(prefix="corpus-runs-")  # removed when the tests end


@functools.lru_cache(maxsize=None)
def doctor(name):
    """iscsi-doctor on one corpus file, once for the three tests of that file."""
    e = CASES[name]
    where = Path(RUNS.name) / name
    where.mkdir()
    return run(e.get("args", []) + [str(HERE / name)], where)


def cap(args, option):
    return int(args[args.index(option) + 1]) if option in args else None


# ---- what the input says ------------------------------------------------------------------------

def in_ranges(frame, ranges):
    return any(a <= frame <= b for a, b in ranges)


def part_bounds(part):
    """(lower commands, lower completed, upper commands, upper completed) of one fixture under its
    damage: tshark's commands and pairing on the fixture, the damage in its frame numbers."""
    cmds = wireshark_commands(ROOT / part["source"])
    cut = part.get("cut_after_frame")
    start = part.get("starts_at_frame", 1)
    dropped = set(part.get("frames_dropped", ()))
    directions = part.get("directions", ["initiator", "target"])
    unreadable = part.get("unreadable", {})

    def present(pdu, direction):  # its BHS is in the file
        f = pdu.first_frame
        return direction in directions and f >= start and (cut is None or f <= cut) and f not in dropped

    def readable(pdu, direction):  # and can be framed, and is not cut short by the end of the file
        return (present(pdu, direction) and (cut is None or pdu.frame <= cut)
                and not in_ranges(pdu.first_frame, unreadable.get(direction, ())))

    lo = [c for c in cmds if readable(c.pdu, "initiator")]
    hi = [c for c in cmds if present(c.pdu, "initiator")]
    return (len(lo), sum(c.answered and readable(c.status_pdu, "target") for c in lo),
            len(hi), sum(c.answered and present(c.status_pdu, "target") for c in hi))


def parts_of(damage):
    """One entry per connection the damage statement describes (copies expanded)."""
    out = []
    for part in damage.get("sources", [damage]):
        out += [part] * part.get("copies", 1)
    return out


@functools.lru_cache(maxsize=None)
def bounds(name):
    """{"commands": (min, max), "completed": (min, max), "connections": [min completed of each
    part]} of one corpus file, from the input only."""
    e = CASES[name]
    args = e.get("args", [])
    if e["counts"] == "none":
        return {"commands": (0, 0), "completed": (0, 0), "connections": []}
    parts = parts_of(e["damage"]) if "damage" in e else []
    keep = cap(args, "--max-connections")
    if keep is not None:
        parts = parts[:keep]  # connections beyond the cap are not analysed
    per = [part_bounds(p) for p in parts]
    if e["counts"] == "corpus":
        streams = sorted({c.pdu.stream for c in wireshark_commands(HERE / name)})
        kept = set(streams[:keep] if keep is not None else streams)
        cmds = [c for c in wireshark_commands(HERE / name) if c.pdu.stream in kept]
        lo = (len(cmds), sum(c.answered for c in cmds))
        hi = (sum(p[2] for p in per), sum(p[3] for p in per)) if per else lo
        connections = []
    else:
        assert e["counts"] == "source", e["counts"]
        lo = (sum(p[0] for p in per), sum(p[1] for p in per))
        hi = (sum(p[2] for p in per), sum(p[3] for p in per))
        connections = [p[1] for p in per] if len(per) > 1 else []
    assert lo[0] <= hi[0] and lo[1] <= hi[1], (name, lo, hi)
    open_cap = cap(args, "--max-open-commands")
    if open_cap is not None and hi[0] > open_cap:
        # no more than open_cap commands are ever open: with none answered, exactly open_cap are kept
        assert hi[1] == 0, "expect.json: an open-command cap with answered commands needs its own rule"
        lo, hi = (min(lo[0], open_cap), 0), (open_cap, 0)
    return {"commands": (lo[0], hi[0]), "completed": (lo[1], hi[1]), "connections": connections}


class Facts(dict):
    """The counts a message may name, from tshark on the corpus file, computed when named."""

    def __init__(self, name):
        super().__init__()
        self.name = name

    def __missing__(self, key):
        cmds = wireshark_commands(HERE / self.name)
        never = [c for c in cmds if not c.answered]
        open_cap = cap(CASES[self.name].get("args", []), "--max-open-commands")
        value = {"never_answered": lambda: len(never),
                 "first_never_answered": lambda: "ITT 0x%08x, frame %d" % (never[0].pdu.itt, never[0].pdu.first_frame),
                 "first_never_answered_frame": lambda: never[0].pdu.first_frame,
                 "past_open_cap": lambda: len(never) - open_cap,
                 "open_cap_hit_frame": lambda: cmds[open_cap].pdu.first_frame}[key]()
        self[key] = value
        return value


def said(name, key):
    facts = Facts(name)
    return [s.format_map(facts) for s in CASES[name].get(key, [])]


# ---- the tests ----------------------------------------------------------------------------------

def test_every_corpus_file_has_an_expectation():
    files = {p.name for p in HERE.iterdir() if p.suffix in (".pcap", ".gz", ".pcapng")}
    assert files == set(CASES)


def test_corpus_is_what_make_corpus_makes(tmp_path):
    """make_corpus.py makes every committed corpus file byte for byte from the fixtures, and its
    statement of each file's damage is expect.json's: the counts subtract the damage the files
    carry (a fixture changed since the corpus was made shows here)."""
    out = subprocess.run([sys.executable, str(HERE / "make_corpus.py"), "--out", str(tmp_path), "--json"],
                         stdout=subprocess.PIPE, check=True, text=True, timeout=300).stdout
    made = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    committed = {n: hashlib.sha256((HERE / n).read_bytes()).hexdigest() for n in CASES}
    assert made == committed, sorted(n for n in set(made) | set(committed) if made.get(n) != committed.get(n))
    assert json.loads(out) == {n: e["damage"] for n, e in CASES.items() if "damage" in e}


def case(name, check):
    why = CASES[name].get("shortfall", {}).get(check)
    return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=why)) if why else name


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_file(name):
    """Exit code and messages."""
    e = CASES[name]
    r, report = doctor(name)
    assert r.returncode == e["exit"], r.stderr
    assert "AddressSanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr
    for s in said(name, "stderr"):
        assert s in r.stderr, "%r not in stderr:\n%s" % (s, r.stderr)
    for s in said(name, "not_stderr"):
        assert s not in r.stderr, r.stderr
    notices = [n["message"] for n in report.get("notices", [])] if report else []
    for s in said(name, "notices"):
        assert any(s in n for n in notices), "%r not among the notices:\n%s" % (s, "\n".join(notices))
    for s in said(name, "notices_once"):
        assert sum(s in n for n in notices) == 1, "%r not in exactly one notice:\n%s" % (s, "\n".join(notices))


@pytest.mark.parametrize("name", sorted(n for n, e in CASES.items() if e.get("undecided")))
def test_corpus_undecided(name):
    """A release later than the path has shown, within the most it may add: the capture cannot tell
    think from a hold, and says so on the command the damage names, with the ACK; never the disks'
    advice (target_think) nor a hold it cannot prove."""
    d = CASES[name]["damage"]
    _, report = doctor(name)
    cmd = [c for c in report["commands"] if c["first_frame"] == d["command_frame"]]
    assert len(cmd) == 1, [c["first_frame"] for c in report["commands"]]
    assert "think_or_hold" in cmd[0]["findings"], cmd[0]["findings"]
    assert not {"target_think", "nagle_hold"} & set(cmd[0]["findings"]), cmd[0]["findings"]
    mine = [f for f in report["findings"] if f["kind"] == "think_or_hold" and f["command_first_frame"] == d["command_frame"]]
    assert [f["related"].get("may_be_released_by") for f in mine] == [d["released_by_frame"]], mine


def scsi_commands(report):
    return [c for c in (report or {"commands": []})["commands"] if c.get("iscsi_opcode", 1) == 1]


@pytest.mark.parametrize("name", [case(n, "commands") for n in sorted(CASES)])
def test_corpus_commands(name):
    """The SCSI commands reported: at least those the damage leaves readable, at most those whose
    SCSI Command PDU is in the file at all (tshark's counts, expect.json's damage)."""
    _, report = doctor(name)
    lo, hi = bounds(name)["commands"]
    n = len(scsi_commands(report))
    assert lo <= n <= hi, "%d SCSI commands reported; the input has %d to %d" % (n, lo, hi)


@pytest.mark.parametrize("name", [case(n, "completed") for n in sorted(CASES)])
def test_corpus_completed(name):
    """The completed commands: at least those whose command and status PDUs the damage leaves
    readable, at most those whose status PDU is in the file; and each fixture's connection of a
    file made of several is found whole on a connection of its own."""
    _, report = doctor(name)
    b = bounds(name)
    lo, hi = b["completed"]
    cmds = scsi_commands(report)
    done = sum(c["completed"] for c in cmds)
    assert lo <= done <= hi, "%d commands completed; the input answers %d to %d" % (done, lo, hi)
    if b["connections"]:
        per = {}
        for c in cmds:
            key = (c["capture"], c["connection"])
            per[key] = per.get(key, 0) + c["completed"]
        have = sorted(per.values(), reverse=True)
        want = sorted(b["connections"], reverse=True)
        assert len(have) >= len(want) and all(h >= w for h, w in zip(have, want)), (have, want)


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
    assert len(said) == 1 and ": frame 412505: warning: " in said[0], r.stderr
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


STORM = 20_000


@pytest.mark.parametrize("close", ["both", "initiator", "none"])
def test_connection_storm_is_analysed_within_the_budget(tmp_path, close):
    """2x10^4 connections begun 30 us apart (0.6 s of capture time), each a login and one READ,
    closed with FIN both ways, half-closed (the initiator's FIN only) or never closed, against a
    connection cap of 4096: every command is analysed, each with its own connection and the latency
    and round trips the capture shows (the READ's Data-In 200 us after the command, 1 round trip).
    Ended connections are retired as soon as nothing can change their results, so the closed and
    half-closed storms never fill the cap nor the budget; the never-closed one is kept within the
    budget by finishing its idle connections, each counted. Without a budget the cap is the limit
    met (the half-closed storm: 15,904 connections not analysed)."""
    sys.path.insert(0, str(HERE))
    import make_corpus
    path = tmp_path / "storm.pcap"
    path.write_bytes(make_corpus.many_connections(STORM, spacing_us=30, close=close))
    r, report, rss_mib = run_measured(["--max-connections", "4096", "--memory-budget", "40", str(path)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "connection cap" not in r.stderr
    cmds = report["commands"]
    assert len(cmds) == STORM and len({c["connection"] for c in cmds}) == STORM
    assert all(c["completed"] and c["op"] == "READ(10)" and abs(c["latency_ms"] - 0.2) < 1e-6 and
               c["round_trips"] == 1 and c["findings"] == [] for c in cmds), cmds[:3]
    evicted = report["captures"][0]["connections_evicted"]
    if close == "none":  # the budget (16 MiB left of 40 for the analysis) holds ~2000 quiet connections
        assert evicted["connections"] == evicted["idle"] > STORM // 2, evicted
        assert evicted["busy"] == evicted["ended"] == evicted["commands_open"] == 0, evicted
        said = [n["message"] for n in report["notices"] if "finished early by the memory budget" in n["message"]]
        assert said and said[0].startswith("%d connections finished early" % evicted["connections"]), said
    else:
        assert evicted["connections"] == 0, evicted
    listed = sum(len(s["connections"]) for s in report["sessions"])
    assert listed + report["captures"][0]["connections_unlisted"]["connections"] == STORM
    if not SANITIZED:
        assert rss_mib < 64, rss_mib
    if close == "initiator":  # without a budget, half-closed connections stay until the cap is full
        r, report = run(["--max-connections", "4096", "--memory-budget", "0", str(path)], tmp_path)
        assert "%d connections not analysed: the connection cap (4096) was full when it began" % (STORM - 4096) in [
            n["message"] for n in report["notices"]]


def test_concurrent_connections_hit_the_open_cap(tmp_path):
    """10^5 connections open at once, without a memory budget: the cap (open connections) refuses
    the later ones, says so once, and the closing notice counts them (with the default budget they
    are all analysed, the idle ones finished early: test_connection_storm_is_analysed_within_the_budget)."""
    n = 70_000
    path = big_case(tmp_path, "concurrent.pcap", n)
    r, report = run(["--memory-budget", "0", str(path)], tmp_path)
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
