# SPDX-License-Identifier: GPL-2.0-or-later
"""Issue 27, a report a storage engineer trusts at a glance: the verdict first (root causes in the
first screen of a many-connection capture), one meaning per number (time lost sums up, touched is
named touched, in JSON, CSV, JUnit, diff and text), root causes that hold one causal chain, the
vantage said and a diff across capture points, advice that fits the device, quiet outputs.

Expectations come from the capture lab's configuration (captures/MANIFEST.json: which findings each
scenario was built to show, where it was captured, what tshark measured) and from the public
captures' known content, never from snapshots of this tool's output.
"""
import csv
import io
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")))
FIX = ROOT / "captures" / "fixtures"
WIKI = ROOT / "captures" / "wireshark-wiki"
MANIFEST = {c["file"]: c for c in json.loads((ROOT / "captures" / "MANIFEST.json").read_text())["captures"]}
NAGLE = FIX / "scripted-nagle-read-1k--initiator.pcap.gz"
# Scenarios merged into one many-connection capture: libiscsi's test suite (28 connections) and
# three lab scenarios, each built to show one cause (MANIFEST.json "expect").
MERGED = ["test-cu", "scripted-nagle-read-1k", "stock-write", "scripted-think-read"]
# A delayed ACK costs time only because a segment waited for it: the hold is the cause.
FACTOR_OF = {"delayed_ack": "nagle_hold"}


def run(*args, code=(0,)):
    r = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=600)
    assert r.returncode in code, r.stderr
    return r.stdout


def report(path, *extra):
    return json.loads(run("-q", "--format", "json", *extra, path))


def ms(text):
    """'2.46 s' / '59.8 ms' -> milliseconds."""
    v, unit = text.split()
    return float(v) * (1000 if unit == "s" else 1)


def close(text_ms, value_ms):
    """A figure as the text prints it (3 significant digits, or 2 decimals of a second) agrees."""
    return math.isclose(ms(text_ms), value_ms, rel_tol=0.006, abs_tol=0.0011)


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    if not shutil.which("mergecap"):
        pytest.skip("mergecap (wireshark-common) not installed")
    out = tmp_path_factory.mktemp("merged") / "many-connections.pcapng"
    subprocess.run(["mergecap", "-w", str(out), *(str(FIX / f"{n}--initiator.pcap.gz") for n in MERGED)],
                   check=True)
    return out


def expected_causes(names):
    """(kind, side) of each cause the lab built the scenarios to show."""
    causes = set()
    for n in names:
        for e in MANIFEST[f"fixtures/{n}--initiator.pcap.gz"]["expect"]:
            kinds = e.get("findings", {})
            for kind, side in kinds.items():
                if FACTOR_OF.get(kind) not in kinds:
                    causes.add((kind, side))
    return causes


# ---- 1. The verdict first ---------------------------------------------------------------------

def test_root_causes_in_the_first_screen(merged):
    rep = report(merged)
    connections = sum(len(s["connections"]) for s in rep["sessions"])
    assert connections >= 13, "the test wants a many-connection capture"
    lines = run("-q", merged).splitlines()
    screen = "\n".join(lines[:40])
    assert "Verdict:" in screen and "Root causes" in screen
    for kind, side in expected_causes(MERGED):
        assert f"{kind} ({side})" in screen, f"{kind} ({side}) not in the first screen:\n{screen}"
    # the per-connection facts come after the tables
    text = "\n".join(lines)
    assert text.index("Command classes") < text.index("\nConnections\n") < text.index("  connection 1  initiator")


def test_connection_level_sentence_says_what_its_figures_total(merged):
    rep = report(merged)
    serialized = [f for f in rep["findings"] if f["kind"] == "serialized"]
    assert len(serialized) > 1
    text = run("-q", merged)
    line = next(ln for ln in text.splitlines() if "connection level: serialized" in ln)
    m = re.search(r"in (\d+) connections, ([\d.]+ m?s) touched in all", line)
    assert m, line
    assert int(m.group(1)) == len(serialized)
    assert close(m.group(2), sum(f["touched_ms"] for f in serialized))


# ---- 2. One meaning per number ----------------------------------------------------------------

@pytest.mark.parametrize("path", [NAGLE, FIX / "stock-loss-read--initiator.pcap.gz",
                                  FIX / "initiator-nagle-write-1k--target.pcap.gz",
                                  WIKI / "iscsi-scsi-10TB-data-device.pcap.gz"], ids=lambda p: p.name)
def test_summed_time_lost_is_the_texts(path):
    rep = report(path)
    by_kind = {}
    for f in rep["findings"]:
        by_kind[f["kind"]] = by_kind.get(f["kind"], 0) + f["time_lost_ms"]
        assert f["lost_ms"] == f["touched_ms"], "lost_ms is touched_ms's alias"
    advice = rep["summary"]["advice"]
    for a in advice:
        assert math.isclose(by_kind.get(a["kind"], 0), a["time_lost_ms"], rel_tol=1e-6, abs_tol=1e-5), a["kind"]
        assert a["lost_ms"] == a["touched_ms"] and a["time_lost_ms"] == a["exclusive_ms"]
    total = sum(by_kind.values())
    assert math.isclose(total, rep["summary"]["time_lost_total_ms"], rel_tol=1e-6, abs_tol=1e-5)
    text = run("-q", path)
    m = re.search(r"Verdict: ([\d.]+ m?s) of the", text)
    assert m and close(m.group(1), total), (m and m.group(1), total)
    # the per-kind table: time lost and touched, as JSON names them
    for a in advice:
        if not a["commands"]:
            continue
        row = re.search(rf"^\s+\d+\s+{a['kind']}\s+\S+\s+[\d,]+\s+([\d.]+ m?s)\s+([\d.]+ m?s)", text, re.M)
        assert row and close(row.group(1), a["time_lost_ms"]) and close(row.group(2), a["touched_ms"])


def test_csv_junit_and_diff_say_time_lost(tmp_path):
    rep = report(NAGLE)
    findings_csv, junit = tmp_path / "f.csv", tmp_path / "j.xml"
    run("-q", "--format", "csv", "--findings-csv", findings_csv, "--junit", junit, NAGLE)
    rows = list(csv.DictReader(io.StringIO(findings_csv.read_text())))
    assert len(rows) == len(rep["findings"])
    for kind in {r["kind"] for r in rows}:
        got = sum(float(r["time_lost_ms"]) for r in rows if r["kind"] == kind)
        want = next(a["time_lost_ms"] for a in rep["summary"]["advice"] if a["kind"] == kind)
        assert math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-5)
        assert all(r["lost_ms"] == r["touched_ms"] for r in rows)
    xml = junit.read_text()
    nagle = next(a for a in rep["summary"]["advice"] if a["kind"] == "nagle_hold")
    m = re.search(r"nagle_hold: \d+ commands, ([\d.]+ m?s) time lost \(([\d.]+ m?s) touched\)", xml)
    assert m and close(m.group(1), nagle["time_lost_ms"]) and close(m.group(2), nagle["touched_ms"])
    # diff: a new kind is told by its time lost, not by what it touched
    out = run("diff", FIX / "scripted-nodelay-read-1k--initiator.pcap.gz", NAGLE, code=(0, 1))
    line = next(ln for ln in out.splitlines() if "nagle_hold (target): new" in ln)
    m = re.search(r"([\d.]+ m?s) time lost", line)
    assert m and close(m.group(1), nagle["time_lost_ms"]), line


# ---- 3. Root causes ranked by gain --------------------------------------------------------------

def test_nagle_hold_is_the_cause_and_its_fix_gains_most():
    entry = MANIFEST["fixtures/scripted-nagle-read-1k--initiator.pcap.gz"]
    kinds = {k: v for e in entry["expect"] for k, v in e.get("findings", {}).items()}
    assert kinds == {"nagle_hold": "target", "delayed_ack": "initiator"}
    text = run("-q", NAGLE)
    roots = text[text.index("Root causes"):text.index("Command classes")]
    first = roots.splitlines()[1]
    assert first.strip().startswith("1. nagle_hold (target) with delayed_ack (initiator)"), first
    assert "delayed_ack" not in "".join(ln for ln in roots.splitlines() if re.match(r"\s+2\. ", ln))
    fixes = re.findall(r"fix (\d) \((\w+)\):.*?gains ([\d.]+ m?s); median ([\d.]+ m?s) -> ([\d.]+ m?s)", roots, re.S)
    assert [(n, side) for n, side, *_ in fixes] == [("1", "target"), ("2", "initiator")]
    gains = [ms(g) for _, _, g, _, _ in fixes]
    after = [ms(a) for *_, a in fixes]
    assert gains[0] > gains[1] and after[0] < after[1]
    # with no hold, a read takes one round trip: what the lab measured without Nagle (tshark)
    rtt = entry["measured"]["rtt_ms"]
    assert rtt * 0.95 <= after[0] <= rtt * 1.2
    assert all(a >= rtt * 0.95 for a in after), "after a fix, never below the round trip"


def test_after_fix_never_below_the_round_trip():
    for path in (WIKI / "iscsi-scsi-10TB-data-device.pcap.gz", FIX / "stock-write--initiator.pcap.gz",
                 FIX / "scripted-think-read--initiator.pcap.gz"):
        rep = report(path)
        rtt = rep["summary"]["vantage"]["rtt_ms"]
        text = run("-q", path)
        for now, after in re.findall(r"median ([\d.]+ m?s) -> ([\d.]+ m?s)", text):
            assert ms(after) >= min(ms(now), rtt) * 0.99 - 0.001, (path.name, now, after, rtt)


# ---- 4. The vantage ---------------------------------------------------------------------------

def test_vantage_said_and_initiator_estimated():
    target = FIX / "stock-read--target.pcap.gz"
    entry = MANIFEST["fixtures/stock-read--target.pcap.gz"]
    initiator_side = MANIFEST["fixtures/stock-read--initiator.pcap.gz"]["measured"]["median_latency_ms"]
    assert entry["made"]["vantage"] == "target"
    rep = report(target)
    assert rep["summary"]["vantage"]["capture_point"] == "target"
    for c in rep["summary"]["classes"]:
        key = f"{c['kind']} {c['bytes']}"
        if key in initiator_side:  # tshark at the initiator, the same exchange
            assert math.isclose(c["initiator_median_ms"], initiator_side[key], rel_tol=0.05), key
            assert c["median_ms"] < initiator_side[key] / 2, "near the target the network is not in it"
    text = run("-q", target)
    assert "Latencies measured near the target" in text and "initiator (est.)" in text


def test_diff_across_vantages():
    before, after = FIX / "stock-read--target.pcap.gz", FIX / "stock-read--initiator.pcap.gz"
    assert MANIFEST["fixtures/stock-read--target.pcap.gz"]["made"]["vantage"] == "target"
    assert MANIFEST["fixtures/stock-read--initiator.pcap.gz"]["made"]["vantage"] == "initiator"
    text = run("diff", "--fail-on-regression", before, after)  # exit 0: no regression
    assert "BEFORE was captured at the target, AFTER at the initiator" in text
    assert "as the initiator saw it" in text
    out = json.loads(run("diff", "--format", "json", "--fail-on-regression", before, after))
    assert out["vantage"]["compared"] == "initiator estimates"
    assert out["regressions"] == [] and not out["gate"]["tripped"]
    # the same point on both sides: compared as captured
    same = json.loads(run("diff", "--format", "json", after, after))
    assert same["vantage"]["compared"] == "as captured"


def test_diff_across_vantages_with_a_round_trip_known_only_as_a_bound(tmp_path):
    """The same exchange captured at both ends, AFTER's round trip to the initiator known only from
    its answers and 40 ms too long (a delayed ACK in every sample, Linux's timer): no regression, and
    the comparison says the figure is at most that."""
    assert report(FIX / "scripted-nagle-read-1k-25ms--target.pcap.gz")["captures"][0]["summary"]["vantage"][
        "to_initiator_at_most"] is True  # the initiator ACKs each sub-MSS Data-In late (the lab's "how")
    before = report(FIX / "stock-read--initiator.pcap.gz")
    after = report(FIX / "stock-read--target.pcap.gz")
    v = after["summary"]["vantage"]  # what diff reads
    assert v["to_initiator_at_most"] is False and v["rtt_at_most"] is False  # timestamps: tight
    (tmp_path / "before.json").write_text(json.dumps(before))
    (tmp_path / "after.json").write_text(json.dumps(after))
    assert json.loads(run("diff", "--format", "json", tmp_path / "before.json", tmp_path / "after.json"))[
        "regressions"] == []
    v["to_initiator_ms"] += 40.0
    (tmp_path / "late.json").write_text(json.dumps(after))
    late = json.loads(run("diff", "--format", "json", tmp_path / "before.json", tmp_path / "late.json"))
    assert late["regressions"], "40 ms more on every latency is a regression when the round trip is tight"
    v["to_initiator_at_most"] = True
    (tmp_path / "bound.json").write_text(json.dumps(after))
    out = json.loads(run("diff", "--format", "json", "--fail-on-regression", tmp_path / "before.json",
                         tmp_path / "bound.json"))
    assert out["vantage"]["compared"] == "initiator estimates"
    assert out["regressions"] == [] and not out["gate"]["tripped"]
    assert "at most 48" in out["vantage"]["why"] and "known only from the initiator's answers" in out["vantage"]["why"]


@pytest.mark.parametrize("scenario", ["stock-read", "stock-write"])
def test_initiator_estimate_per_command(scenario, tmp_path):
    """commands[].initiator_latency_ms: near the target, the latency plus the lab's round trip (two
    one-way delays); near the initiator, the latency itself; the same in CSV and HTML."""
    target = FIX / f"{scenario}--target.pcap.gz"
    made = MANIFEST[f"fixtures/{scenario}--target.pcap.gz"]["made"]
    assert made["vantage"] == "target"
    round_trip = 2 * made["one_way_delay_ms"]
    rep = report(target)
    done = [c for c in rep["commands"] if c["completed"]]
    assert done
    for c in done:
        extra = c["initiator_latency_ms"] - c["latency_ms"]
        assert math.isclose(extra, round_trip, rel_tol=0.1, abs_tol=0.3), (c["itt"], extra, round_trip)
    assert all(c["initiator_latency_ms"] is None for c in rep["commands"] if not c["completed"])
    # the medians as tshark measured them at the initiator, for the same exchange
    at_initiator = MANIFEST[f"fixtures/{scenario}--initiator.pcap.gz"]["measured"]["median_latency_ms"]
    for key, want in at_initiator.items():
        kind, size = key.split()
        mine = sorted(c["initiator_latency_ms"] for c in done if c["kind"] == kind and c["bytes"] == int(size))
        if len(mine) >= 10:
            assert math.isclose(mine[len(mine) // 2], want, rel_tol=0.1, abs_tol=0.3), (key, want)
    near = report(FIX / f"{scenario}--initiator.pcap.gz")
    assert MANIFEST[f"fixtures/{scenario}--initiator.pcap.gz"]["made"]["vantage"] == "initiator"
    assert all(c["initiator_latency_ms"] == c["latency_ms"] for c in near["commands"] if c["completed"])
    rows = list(csv.DictReader(io.StringIO(run("-q", "--format", "csv", target))))
    assert list(rows[0])[-1] == "initiator_latency_ms", "a new column goes last"
    assert [float(r["initiator_latency_ms"]) if r["initiator_latency_ms"] else None for r in rows] == \
        [c["initiator_latency_ms"] for c in rep["commands"]]
    page = tmp_path / "r.html"
    run("-q", "--html", page, target)
    cells = re.findall(r'<td class="n initiator-est">([^<]+)</td>', page.read_text())
    assert cells and all(c == "-" or ms(c) > round_trip * 0.9 for c in cells), cells


def test_verbose_gives_every_connection_fact():
    """-v: each connection's block says what the lab configured, usual or not."""
    digest = FIX / "stock-header-digest--target.pcap.gz"
    made = MANIFEST["fixtures/stock-header-digest--target.pcap.gz"]["made"]
    plain, verbose = run("-q", digest), run("-q", "-v", digest)
    assert "header digest" not in plain
    want = "header digest {}, data digest {}".format("CRC32C" if made["digests"]["header"] else "none",
                                                     "CRC32C" if made["digests"]["data"] else "none")
    assert want in verbose
    assert made["vantage"] == "target"
    rtt = re.search(r"the initiator saw each latency ([\d.]+ m?s) longer", verbose)
    assert rtt and math.isclose(ms(rtt.group(1)), 2 * made["one_way_delay_ms"], rel_tol=0.1, abs_tol=0.3)
    mid = FIX / "stock-read-midsession--target.pcap.gz"
    assert MANIFEST["fixtures/stock-read-midsession--target.pcap.gz"]["made"]["starts_mid_session"]
    assert "no TCP handshake in the capture" in run("-q", "--verbose", mid)
    assert "no TCP handshake in the capture" not in run("-q", "-v", digest)
    # the tables come first either way: -v adds to the Connections section only
    assert verbose.split("\nConnections\n")[0] == plain.split("\nConnections\n")[0]


def test_initiator_round_trip_known_only_from_delayed_acks_is_an_upper_bound():
    """Near the target, with every Data-In one sub-MSS segment the initiator ACKs late (the study's
    delayed-ACK case): its round trip may hold that timer, so what it adds is said to be at most it."""
    name = "fixtures/scripted-nagle-read-1k-25ms--target.pcap.gz"
    made = MANIFEST[name]["made"]
    assert made["vantage"] == "target" and made["nagle"]["target"] and "delays its ACK" in made["how"]
    text = " ".join(run("-q", "-v", ROOT / "captures" / name).split())
    head = re.search(r"the initiator saw at most ([\d.]+ m?s) more \(the round trip between the capture point "
                     r"and it, known only from the initiator's answers, which may hold its own time\)", text)
    assert head, text[:600]
    assert 2 * made["one_way_delay_ms"] * 0.98 <= ms(head.group(1)) <= 2 * made["one_way_delay_ms"] + 45
    assert re.search(r"the initiator saw each latency at most [\d.]+ m?s longer \(round trip capture point - "
                     r"initiator, which may hold the initiator's own time\)", text), text
    assert "saw about" not in text


# ---- 5. Advice that fits the device -----------------------------------------------------------

def test_tape_library_gets_no_disk_advice(tmp_path):
    tape = WIKI / "iscsi-tapel.pcap.gz"
    assert "tape library" in MANIFEST["wireshark-wiki/iscsi-tapel.pcap.gz"]["made"]["peers"]
    junit = tmp_path / "j.xml"
    text = run("-q", "--junit", junit, tape)
    assert "disks" not in text, text
    head = text[:text.index("Command classes")]
    assert "target_think (target)" in head and "mechanical work" in head
    assert "disks" not in junit.read_text() and "no disk is behind it" in junit.read_text()


def test_rates_over_few_commands_are_shown_as_such():
    tape = WIKI / "iscsi-tapel.pcap.gz"
    rep = report(tape)
    luns = rep["summary"]["luns"]
    assert any(l["commands"] < 10 for l in luns)
    for l in luns:
        assert l["rate_meaningful"] == (l["commands"] >= 10 and l["seconds"] >= 1), l
    text = run("-q", tape)
    for l in luns:
        row = re.search(rf"^\s+{re.escape(l['target'])}\s+{l['lun']}\s+{l['commands']}\s+(\S+)", text, re.M)
        assert row, l
        assert (row.group(1) == "(few)") == (not l["rate_meaningful"])


# ---- 6. Quiet ---------------------------------------------------------------------------------

def test_verdict_says_a_capture_is_damaged():
    damaged = ROOT / "tests" / "corpus" / "corrupt-record-length.pcap"
    assert report(damaged)["captures"][0]["damaged"]
    assert "DAMAGED" in run("-q", "--format", "verdict", damaged)
    assert "DAMAGED" not in run("-q", "--format", "verdict", NAGLE)


# ---- 7. HTML ----------------------------------------------------------------------------------

def test_html_vantage_device_advice_and_one_command_classes(tmp_path):
    tape = WIKI / "iscsi-tapel.pcap.gz"
    page = tmp_path / "tape.html"
    run("-q", "--html", page, tape)
    html = page.read_text()
    assert 'class="vantage"' in html
    assert "look at the target&#39;s disks" not in html and "no disk is behind it" in html
    classes = {(c["kind"], c["bytes"]): c["commands"] for c in report(tape)["summary"]["classes"]}
    assert 1 in classes.values(), "the tape capture has classes of one command"
    drawn = re.findall(r'class="latency-chart"[^>]*data-kind="(\w+)" data-bytes="(\d+)"', html)
    assert drawn and all(classes[(k, int(b))] > 1 for k, b in drawn), drawn
    assert not re.search(r"\b1 commands\b", html)
    # near the target, the median as the initiator saw it is estimated beside the one captured
    run("-q", "--html", page, FIX / "stock-read--target.pcap.gz")
    assert "initiator (est.)" in page.read_text()


# ---- 6. Quiet: a ladder tells its command's notices only --------------------------------------

def test_ladder_prints_only_its_commands_notices(tmp_path):
    cap = WIKI / "iscsi-scsi-10TB-data-device.pcap.gz"
    rep = report(cap)
    frames = [n["frame"] for n in rep["notices"] if n["frame"]]
    assert len(frames) > 10
    with_notice = next(c for c in rep["commands"] if c["completed"]
                       and any(c["first_frame"] <= f <= c["status_frame"] for f in frames))
    quiet_one = next(c for c in rep["commands"] if c["completed"] and c["first_frame"] > 1000
                     and not any(c["first_frame"] <= f <= c["status_frame"] for f in frames))
    for c in (with_notice, quiet_one):
        r = subprocess.run([BIN, "ladder", "--itt", c["itt"], "--frame", str(c["first_frame"]), str(cap),
                            "-o", str(tmp_path / "l.svg")], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        told = [int(m) for m in re.findall(r": frame (\d+): ", r.stderr)]
        want = sorted(f for f in frames if c["first_frame"] <= f <= c["status_frame"])
        assert sorted(told) == want, (c["itt"], r.stderr)
        assert "more notices" not in r.stderr


# ---- 8. The command line ----------------------------------------------------------------------

def tshark_fields(path, count, fields, display):
    cmd = ["tshark", "-r", str(path), "-c", str(count), "-Y", display, "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout.split()


@pytest.mark.skipif(not shutil.which("tshark"), reason="tshark not installed")
def test_count_on_a_file_as_tshark():
    for n in (40, 100, 170):
        rep = report(NAGLE, "-c", n)
        assert rep["captures"][0]["packets"] == n
        # the SCSI Commands tshark sees in the first n frames
        want = sorted(int(f) for f in tshark_fields(NAGLE, n, ["frame.number"], "iscsi.opcode == 0x01"))
        assert sorted(c["first_frame"] for c in rep["commands"]) == want
        assert all(c["first_frame"] <= n and (c["status_frame"] or 0) <= n for c in rep["commands"])


@pytest.mark.skipif(not shutil.which("tshark"), reason="tshark not installed")
def test_list_interfaces_as_tshark():
    ours = run("-D").splitlines()
    assert ours and all(re.match(r"\d+\. \S+", ln) for ln in ours)
    theirs = subprocess.run(["tshark", "-D"], capture_output=True, text=True, timeout=60).stdout
    names = {ln.split(". ", 1)[1].split()[0] for ln in theirs.splitlines() if ". " in ln}
    for ln in ours:
        assert ln.split(". ", 1)[1].split()[0] in names, ln


@pytest.mark.skipif(os.geteuid() != 0, reason="a live capture needs root")
def test_bpf_filter_for_live_capture():
    r = subprocess.run([BIN, "-i", "lo", "-f", "port 9", "--duration", "0.3"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "filter '(tcp) and (port 9)'" in r.stderr
    bad = subprocess.run([BIN, "-i", "lo", "-f", "no such filter (", "--duration", "0.3"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "no such filter (" in bad.stderr
    # -f belongs to live captures
    assert subprocess.run([BIN, "-f", "tcp", NAGLE], capture_output=True, timeout=60).returncode == 2


def test_man_page_after_install(tmp_path):
    build = Path(BIN).resolve().parents[1]
    if not (build / "CMakeCache.txt").exists() or not shutil.which("pandoc") or not shutil.which("man"):
        pytest.skip("needs the build tree, pandoc and man")
    subprocess.run(["cmake", "--build", str(build), "--target", "iscsi-doctor-man"], check=True,
                   capture_output=True, timeout=600)
    subprocess.run(["cmake", "--install", str(build), "--prefix", "/usr/local", "--component", "man"],
                   env={**os.environ, "DESTDIR": str(tmp_path)}, check=True, capture_output=True, timeout=300)
    page = subprocess.run(["man", "-P", "cat", "iscsi-doctor"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MANPATH": str(tmp_path / "usr/local/share/man"), "MANWIDTH": "100"})
    assert page.returncode == 0, page.stderr
    text = page.stdout
    # what --help says and what docs/cli.md says, both in it
    assert "--fail-on" in text and "--list-interfaces" in text
    assert "Exit codes" in text.replace("EXIT CODES", "Exit codes")
    assert "iscsi-doctor diff" in text and "--fail-on-regression" in text


@pytest.mark.skipif(not shutil.which("tshark"), reason="tshark not installed")
def test_think_shading_over_the_wait_it_names(tmp_path):
    """A 4 KiB write of the 10TB capture: R2T at once, then ~50 ms until its SCSI Response (tshark;
    the Data-Out between is partly missing from the capture). The target-think shade covers that
    wait, after the R2T, not the time before it (the idle break and the previous command)."""
    cap = WIKI / "iscsi-scsi-10TB-data-device.pcap.gz"
    itt = "0x0001a22f"
    rows = subprocess.run(["tshark", "-r", str(cap), "-Y", f"iscsi.initiatortasktag == {itt}", "-T", "fields",
                           "-e", "frame.number", "-e", "iscsi.opcode", "-e", "frame.time_relative"],
                          capture_output=True, text=True, check=True, timeout=300).stdout.split("\n")
    frames = {}
    for row in filter(None, rows):
        number, opcode, t = row.split("\t")
        frames.setdefault(int(opcode, 16), (int(number), float(t)))
    r2t, response = frames[0x31], frames[0x21]
    assert response[1] - r2t[1] > 0.04, "the wait the shade must cover"
    svg = tmp_path / "l.svg"
    run("-q", "ladder", "--itt", itt, cap, "-o", svg)
    text = svg.read_text()

    def y_of(frame):
        m = re.search(rf'data-frame="{frame}"[^>]*>.*?<polyline points="[\d.]+,([\d.]+)', text, re.S)
        return float(m.group(1))

    m = re.search(r'data-role="think"><title>[^<]*</title><rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" '
                  r'height="([\d.]+)"', text)
    assert m, "no think shade"
    top, height = float(m.group(1)), float(m.group(2))
    y_out, y_rsp = y_of(r2t[0]), y_of(response[0])
    assert y_out - 1 <= top and top + height <= y_rsp + 1, (top, height, y_out, y_rsp)
    assert height >= 0.8 * (y_rsp - y_out)


# ---- 5. ASC/ASCQ with their T10 names ---------------------------------------------------------

@pytest.mark.skipif(not shutil.which("tshark"), reason="tshark not installed")
@pytest.mark.parametrize("path", [WIKI / "iscsi-tapel.pcap.gz", FIX / "test-cu--initiator.pcap.gz"],
                         ids=lambda p: p.name)
def test_asc_ascq_named_as_wireshark_names_them(path):
    pdml = subprocess.run(["tshark", "-r", str(path), "-Y", "scsi.sns.ascascq", "-T", "pdml"],
                          capture_output=True, text=True, check=True, timeout=300).stdout
    wireshark = {int(v, 16): name for name, v in
                 re.findall(r'name="scsi.sns.ascascq" showname="[^:]*: (.*?) \(0x[0-9a-f]+\)"[^>]*value="([0-9a-f]+)"', pdml)}
    assert wireshark, "the capture has sense data"
    norm = lambda s: re.sub(r"\s+", " ", s).strip().lower()
    rep = report(path)
    rows = [s for s in rep["summary"]["statuses"] if s["asc"] is not None]
    assert {r["asc"] << 8 | r["ascq"] for r in rows} == set(wireshark)
    text = run("-q", path)
    for r in rows:
        want = wireshark[r["asc"] << 8 | r["ascq"]]
        assert norm(r["asc_name"]) == norm(want)
        assert f"({r['asc_name']})" in text
    for c in rep["commands"]:
        if c["sense"] and c["sense"]["asc"] is not None:
            assert norm(c["sense"]["asc_name"]) == norm(wireshark[c["sense"]["asc"] << 8 | c["sense"]["ascq"]])
