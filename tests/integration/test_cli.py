# SPDX-License-Identifier: GPL-2.0-or-later
"""Front-end tests of the iscsi-doctor command: capture reading (formats, compression, link types,
damaged files), report formats, batch runs, exit codes and the CI gate, and Wireshark's iSCSI
dissector as the oracle for which commands exist and where their status is.

The binary is $ISCSI_DOCTOR (default build/cli/iscsi-doctor under the repository root), the root
$ISCSI_DOCTOR_ROOT. The real captures are captures/wireshark-wiki/ in the repository, or
../shared/captures/wireshark-wiki/ beside it.
"""
import collections
import csv
import functools
import gzip
import io
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "captures"))
import link_types  # noqa: E402
BIN = Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor"))


def _captures_dir():
    for d in (ROOT / "captures" / "wireshark-wiki", ROOT.parent / "shared" / "captures" / "wireshark-wiki"):
        if any(d.glob("*.pcap*")):
            return d
    raise RuntimeError("no captures/wireshark-wiki/ in the repository or ../shared")


WIKI = _captures_dir()
# The four public captures; some are stored gzip-compressed, either name is accepted.
NAMES = ["iscsi-scsi-10TB-data-device", "iscsi-scsi-data-cdrom", "iscsi-tapel", "scsi-osd-example-001"]


def wiki(name):
    for suffix in (".pcap", ".pcap.gz"):
        if (WIKI / (name + suffix)).exists():
            return WIKI / (name + suffix)
    raise FileNotFoundError(name)


def capture_bytes(name):
    """The uncompressed bytes of a capture, however it is stored."""
    path = wiki(name)
    return gzip.open(path).read() if path.read_bytes()[:2] == b"\x1f\x8b" else path.read_bytes()


FINDING_KINDS = {"nagle_hold", "delayed_ack", "r2t_round_trip", "cwnd_limited", "rwnd_limited",
                 "retransmission", "target_think", "serialized", "link_limited", "think_or_hold",
                 "think_or_network"}
BREAKDOWN = {"request", "think", "data", "nagle", "delayed_ack", "r2t", "window", "loss", "response", "link"}
COMMAND_KEYS = {"capture", "session", "connection", "itt", "cmdsn", "op", "kind", "lba", "bytes", "first_frame",
                "status_frame", "latency_ms", "round_trips", "ideal_round_trips", "findings", "breakdown_ms",
                "status", "sense", "completed"}


def run(*args, check_rc=None, **kw):
    assert BIN.exists(), f"iscsi-doctor binary not found at {BIN} (set ISCSI_DOCTOR)"
    p = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, timeout=600, **kw)
    if check_rc is not None:
        assert p.returncode == check_rc, f"rc={p.returncode}\nstdout:{p.stdout[-2000:]}\nstderr:{p.stderr[-2000:]}"
    return p


@functools.lru_cache(maxsize=None)
def report(path, *extra):
    p = run("--format", "json", "-q", *extra, path, check_rc=0)
    return json.loads(p.stdout)


def scsi_triples(doc):
    return {(int(c["itt"], 16), c["first_frame"], c["status_frame"]) for c in doc["commands"]
            if c.get("iscsi_opcode", 1) == 1}


def strip_paths(doc):
    """The document without what legitimately differs between copies of one capture."""
    d = json.loads(json.dumps(doc))
    for c in d["captures"]:
        for k in ("path", "gzip", "compression", "size_bytes", "format"):
            c.pop(k, None)
    for n in d["notices"]:
        n.pop("file", None)
    return d


# ---- Wireshark as the oracle ---------------------------------------------------------------------

def tshark(*args):
    if not shutil.which("tshark"):
        pytest.fail("tshark is required (Wireshark is the oracle of these tests)")
    p = subprocess.run(["tshark", *map(str, args)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    return p.stdout


@functools.lru_cache(maxsize=None)
def tshark_commands(path):
    """SCSI Command PDUs as Wireshark pairs them (two-pass):
    {(itt, frame where the PDU completes, first segment of the PDU, response frame or None)}."""
    out = tshark("-2", "-r", path, "-Y", "iscsi.opcode == 0x01", "-T", "fields", "-E", "separator=\t",
                 "-e", "frame.number", "-e", "iscsi.opcode", "-e", "iscsi.initiatortasktag",
                 "-e", "iscsi.response_frame", "-e", "tcp.segment")
    rows, ambiguous = [], 0
    for line in out.splitlines():
        frame, ops, itts, resp, segments = (line.split("\t") + [""] * 5)[:5]
        ops, itts = ops.split(","), itts.split(",")
        resp = [r for r in resp.split(",") if r]
        cmd = [i for i, o in enumerate(ops) if int(o, 16) == 1]
        if len(ops) != len(itts) or (resp and len(resp) != len(cmd)):
            ambiguous += 1  # several PDUs in the frame and fields that cannot be lined up
            continue
        # A PDU reassembled from several segments: Wireshark shows it in the last one and lists the
        # segments; iscsi-doctor's first_frame is the first segment.
        first = min(int(s) for s in segments.split(",")) if segments else int(frame)
        if len(cmd) > 1:
            first = int(frame)  # several commands in one frame: each starts in it
        for k, i in enumerate(cmd):
            rows.append((int(itts[i], 16), int(frame), first, int(resp[k]) if resp else None))
    assert ambiguous <= 2, f"{ambiguous} frames whose fields could not be lined up"
    return rows


# Where iscsi-doctor and Wireshark are known to differ, and why (capture, ITT, first frame).
KNOWN_DIFFERENCES = {
    # READ ELEMENT STATUS whose status-bearing Data-In lost a segment (frame 1310 arrives after the
    # hole; the retransmission at 1312 fills it). Wireshark's reassembly gives up and leaves the
    # command unpaired; iscsi-doctor pairs it (status at 1310, or 1312 once the hole is filled).
    ("iscsi-tapel", 0x0000000A, 1305): {1310, 1312},
}


@pytest.mark.parametrize("name", NAMES)
def test_commands_and_status_frames_match_wireshark(name):
    path = wiki(name)
    doc = report(path)
    ts = tshark_commands(path)
    assert ts, "Wireshark finds no SCSI command: wrong capture?"
    ours = {}
    for c in doc["commands"]:
        if c.get("iscsi_opcode", 1) == 1:
            ours.setdefault((int(c["itt"], 16), c["first_frame"]), []).append(c)
    # Every SCSI command Wireshark sees is reported, starting at the PDU's first segment.
    missing = [(hex(i), first) for i, _, first, _ in ts if (i, first) not in ours]
    assert not missing, f"commands Wireshark sees but iscsi-doctor does not report: {missing[:10]}"
    assert len(ours) == len({(i, first) for i, _, first, _ in ts}), "commands reported that Wireshark does not see"
    # Every pairing Wireshark makes is made alike; every command Wireshark leaves unpaired is left
    # unpaired too, unless it is a documented difference.
    for itt, frame, first, resp in ts:
        got = {c["status_frame"] for c in ours[(itt, first)]}
        known = KNOWN_DIFFERENCES.get((name, itt, first))
        if known is not None:
            assert got <= known | {None}, (hex(itt), first, got)
            continue
        if resp is None and got != {None}:
            # Wireshark needs the whole status PDU; when the capture lost its data, iscsi-doctor
            # pairs the command at the segment holding the header (docs/rules.md "Commands"),
            # checked here in the raw bytes of that segment.
            (sf,) = got
            assert status_header_in(path, sf, itt), f"ITT {itt:#x}: no status header in frame {sf}"
            continue
        assert got == {resp}, f"ITT {itt:#x} frame {first}: Wireshark status frame {resp}, iscsi-doctor {got}"


@functools.lru_cache(maxsize=None)
def target_payloads(path):
    out = tshark("-r", path, "-Y", "tcp.len > 0", "-T", "fields", "-e", "frame.number", "-e", "tcp.payload")
    return {int(f): bytes.fromhex(p.replace(":", "")) for f, p in (line.split("\t") for line in out.splitlines())}


def status_header_in(path, frame, itt):
    """A SCSI Response, or a Data-In with the S bit, for this ITT starts somewhere in the frame."""
    b = target_payloads(path).get(frame, b"")
    want = itt.to_bytes(4, "big")
    return any((b[i] & 0x3f == 0x21 or (b[i] & 0x3f == 0x25 and b[i + 1] & 0x01)) and b[i + 16:i + 20] == want
               for i in range(0, len(b) - 47))


def test_latency_matches_wireshark_where_both_measure_the_same():
    """iscsi.time is measured from the frame where the command PDU completes; with single-segment
    command PDUs that is iscsi-doctor's first frame, so the latencies agree to the microsecond."""
    path = wiki("scsi-osd-example-001")
    out = tshark("-2", "-r", path, "-Y", "iscsi.request_frame && (iscsi.opcode == 0x21)", "-T", "fields",
                 "-e", "frame.number", "-e", "iscsi.initiatortasktag", "-e", "iscsi.time")
    by_status = {c["status_frame"]: c for c in report(path)["commands"] if c["status_frame"]}
    compared = 0
    for line in out.splitlines():
        frame, itts, times = line.split("\t")
        if "," in itts:
            continue
        c = by_status.get(int(frame))
        if c is None or c["itt"] != f"0x{int(itts, 16):08x}":
            continue
        assert abs(c["latency_ms"] - float(times) * 1000) < 0.002, (frame, c["latency_ms"], times)
        compared += 1
    assert compared >= 10


def test_lost_segments_are_reported_not_guessed():
    """The 10TB capture holds only the first segment of every multi-segment PDU: the commands
    Wireshark cannot pair must not get a guessed status, and the missing bytes are reported."""
    path = wiki("iscsi-scsi-10TB-data-device")
    doc = report(path)
    unpaired = {(i, first) for i, _, first, resp in tshark_commands(path) if resp is None}
    assert len(unpaired) > 1000
    for c in doc["commands"]:
        if (int(c["itt"], 16), c["first_frame"]) in unpaired:
            assert c["status_frame"] is None or c["data_incomplete"], c
    assert sum(s["counts"]["bytes_missing"] for s in doc["sessions"]) > 1_000_000
    assert any(c["data_incomplete"] for c in doc["commands"])
    assert any("missing" in n["message"] for n in doc["notices"])
    # and the same notices reach stderr, naming the file and the frame
    p = run(path, "-o", os.devnull, check_rc=0)
    assert re.search(re.escape(str(path)) + r": frame \d+: warning: .*missing", p.stderr), p.stderr[:1000]


# ---- JSON and CSV ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_json_document_shape(name):
    doc = report(wiki(name))
    assert doc["schema"] == 1
    for key in ("captures", "sessions", "commands", "findings", "summary", "notices"):
        assert key in doc, key
    assert doc["captures"][0]["packets"] > 0 and doc["captures"][0]["commands"] == len(doc["commands"])
    assert doc["commands"]
    for c in doc["commands"]:
        assert COMMAND_KEYS <= set(c), COMMAND_KEYS - set(c)
        assert re.fullmatch(r"0x[0-9a-f]{8}", c["itt"]), c["itt"]
        assert c["kind"] in ("read", "write", "other")
        assert c["first_frame"] >= 1
        assert c["status_frame"] is None or c["status_frame"] >= c["first_frame"]
        assert set(c["breakdown_ms"]) == BREAKDOWN
        assert set(c["findings"]) <= FINDING_KINDS
        assert (c["latency_ms"] is None) == (not c["completed"])
        assert c["sense"] is None or {"key", "asc", "ascq"} <= set(c["sense"])
    for f in doc["findings"]:
        assert f["kind"] in FINDING_KINDS and f["side"] in ("initiator", "target")
        assert f["itt"] is None or re.fullmatch(r"0x[0-9a-f]{8}", f["itt"])
        assert isinstance(f["related"], dict)
    s = doc["summary"]
    for key in ("commands", "completed", "excess_round_trips", "finding_counts", "advice", "classes"):
        assert key in s, key
    assert s["commands"] == len(doc["commands"])
    assert sum(s["finding_counts"].values()) == len(doc["findings"])
    for a in s["advice"]:
        assert {"kind", "side", "commands", "lost_ms", "median_latency_ms", "median_fixed_ms", "fix",
                "example_frames"} <= set(a)
    for sess in doc["sessions"]:
        assert {"peers", "vantage", "rtt_ms", "rtt_initiator_ms", "rtt_target_ms", "mss", "keys", "counts"} <= set(sess)
    for n in doc["notices"]:
        assert n["level"] in ("info", "warning", "error") and n["file"] == str(wiki(name))


# The part of a command's breakdown that is each kind's own (docs/cli.md "Time lost"); cwnd and rwnd
# share `window`, so a command carrying both is left out of their check.
OWN_PART = {"nagle_hold": "nagle", "delayed_ack": "delayed_ack", "r2t_round_trip": "r2t",
            "retransmission": "loss", "target_think": "think", "link_limited": "link",
            "think_or_hold": "think", "think_or_network": "think"}


@pytest.mark.parametrize("path", sorted((ROOT / "captures" / "fixtures").glob("*.pcap*")) +
                         sorted((ROOT / "captures" / "wireshark-wiki").glob("*.pcap*")),
                         ids=lambda p: p.name.split(".")[0])
def test_time_lost_adds_up(path):
    """Over all kinds the time lost is at most the completed commands' latency, and each kind's is
    the sum of its own breakdown part over the commands carrying it (recomputed from the commands)."""
    doc = report(path)
    done = [c for c in doc["commands"] if c["completed"]]
    s = doc["summary"]
    total = sum(c["latency_ms"] for c in done)
    assert s["latency_total_ms"] == pytest.approx(total, abs=1e-3 * max(1, len(done)))
    assert s["exclusive_total_ms"] <= s["latency_total_ms"] + 1e-6 * max(1, len(done))
    assert s["exclusive_total_ms"] == pytest.approx(sum(a["exclusive_ms"] for a in s["advice"]), abs=1e-3)
    for a in s["advice"]:
        if a["kind"] in OWN_PART:
            own = sum(c["breakdown_ms"][OWN_PART[a["kind"]]] for c in done if a["kind"] in c["findings"])
            assert a["exclusive_ms"] == pytest.approx(own, abs=1e-3 * max(1, a["commands"])), a["kind"]
        elif a["kind"] in ("cwnd_limited", "rwnd_limited"):
            window = sum(c["breakdown_ms"]["window"] for c in done if a["kind"] in c["findings"])
            assert a["exclusive_ms"] <= window + 1e-3 * max(1, a["commands"]), a["kind"]
        else:  # serialized: idle time between commands, in none of their latencies
            assert a["exclusive_ms"] == 0
    ranks = [(a["exclusive_ms"], a["lost_ms"]) for a in s["advice"]]
    assert ranks == sorted(ranks, reverse=True)


@pytest.mark.parametrize("path", [wiki(n) for n in NAMES], ids=lambda p: p.name.split(".")[0])
def test_never_answered_commands_are_named_beside_in_flight(path):
    """A command the capture never answers stays in flight to its end, so it inflates "at most N in
    flight": each connection counts those commands (`never_answered`, the commands listed without a
    status) and the text report says the count includes them."""
    doc = report(path)
    never = collections.Counter(c["connection"] for c in doc["commands"] if not c["completed"])
    text = run(path).stdout
    for s in doc["sessions"]:
        for k in s["connections"]:
            n = k["counts"]["never_answered"]
            assert n == never.get(k["connection"], 0), k["connection"]
            if n and k["counts"]["max_outstanding"] > 1:
                assert f"at most {k['counts']['max_outstanding']} in flight (counting {n:,} never answered" in text


def nearest_rank(values, q):
    v = sorted(values)
    return v[int(q * (len(v) - 1) + 0.5)]


@pytest.mark.parametrize("path", [wiki(n) for n in NAMES] + [
    ROOT / "captures" / "fixtures" / f"{n}.pcap.gz" for n in (
        "stock-qd8-read--initiator", "stock-write--target", "scripted-nagle-read-1k-joined--target")] + [
    ROOT / "tests" / "corpus" / "two-connections-one-damaged.pcap.gz"],  # two sessions
    ids=lambda p: p.name.split(".")[0])
def test_lun_table_from_the_commands(path):
    """The per-target-and-LUN table, recomputed from the JSON commands and their connections'
    targets: completed SCSI commands, never answered ones, bytes, excess round trips, percentiles;
    and the per-initiator, per-target and per-session tables' counts and p99."""
    doc = report(path)
    target = {k["connection"]: k["target"] for s in doc["sessions"] for k in s["connections"]}
    want = {}
    for c in doc["commands"]:
        if c["iscsi_opcode"] != 1:
            continue
        row = want.setdefault((target[c["connection"]], c["lun"]), {"lat": [], "never": 0, "excess": 0, "r": 0, "w": 0})
        if not c["completed"]:
            row["never"] += 1
            continue
        row["lat"].append(c["latency_ms"])
        row["excess"] += max(0, c["round_trips"] - c["ideal_round_trips"])
        if c["kind"] in ("read", "write"):
            row[c["kind"][0]] += c["bytes"]
    got = {(l["target"], l["lun"]): l for l in doc["captures"][0]["summary"]["luns"]}
    assert set(got) == set(want)
    # Per initiator (its address): the same commands, grouped by the connections' initiators.
    initiator = {k["connection"]: k["initiator"].rsplit(":", 1)[0].strip("[]")
                 for s in doc["sessions"] for k in s["connections"]}
    by_ini = collections.Counter(initiator[c["connection"]] for c in doc["commands"]
                                 if c["iscsi_opcode"] == 1 and c["completed"])
    got_ini = {i["initiator"]: i["commands"] for i in doc["captures"][0]["summary"]["initiators"]}
    assert {k: v for k, v in got_ini.items() if v} == dict(by_ini)
    # Per target and per session: the same commands, grouped by the connection's target and session.
    session = {k["connection"]: s["session"] for s in doc["sessions"] for k in s["connections"]}
    for table, key, of in (("targets", "target", lambda c: target[c["connection"]]),
                           ("sessions", "session", lambda c: session[c["connection"]])):
        lat = collections.defaultdict(list)
        for c in doc["commands"]:
            if c["iscsi_opcode"] == 1 and c["completed"]:
                lat[of(c)].append(c["latency_ms"])
        rows = {r[key]: r for r in doc["captures"][0]["summary"][table] if r["commands"]}
        assert set(rows) == set(lat), table
        for k, v in lat.items():
            assert rows[k]["commands"] == len(v), (table, k)
            assert rows[k]["p99_ms"] == pytest.approx(nearest_rank(v, 0.99), rel=1e-5, abs=1e-3), (table, k)
        if table == "sessions":
            assert all(r["target"] == target[next(c for c in session if session[c] == r["session"])]
                       for r in rows.values())
    for key, w in want.items():
        g = got[key]
        assert (g["commands"], g["never_answered"], g["excess_round_trips"]) == (len(w["lat"]), w["never"], w["excess"]), key
        assert (g["bytes_read"], g["bytes_written"]) == (w["r"], w["w"]), key
        if w["lat"]:
            for q, k in ((0.5, "p50_ms"), (0.99, "p99_ms"), (0.999, "p999_ms")):
                assert g[k] == pytest.approx(nearest_rank(w["lat"], q), rel=1e-5, abs=1e-3), (key, k)
            assert g["max_ms"] == pytest.approx(max(w["lat"]), rel=1e-5, abs=1e-3), key


@pytest.mark.parametrize("path", [wiki(n) for n in NAMES] + [ROOT / "tests" / "corpus" / "command-no-response.pcap.gz"],
                         ids=lambda p: p.name.split(".")[0])
def test_status_table_from_the_commands(path):
    """How the SCSI commands ended, recounted from the JSON commands."""
    doc = report(path)
    want = collections.Counter()
    for c in doc["commands"]:
        if c["iscsi_opcode"] == 1:
            sense = c["sense"] or {}
            want[(c["completed"], c["status"], c["response"] or 0, sense.get("key_name"), sense.get("asc"),
                  sense.get("ascq"))] += 1
    got = collections.Counter()
    for st in doc["captures"][0]["summary"]["statuses"]:
        got[(st["answered"], st["status"], st["iscsi_response"], st["sense_key"], st["asc"], st["ascq"])] += st["commands"]
    assert got == want


@pytest.mark.parametrize("name", ["scripted-nagle-read-1k--initiator", "scripted-nagle-read-1k-joined--target",
                                  "initiator-rcvbuf-read--target", "initiator-rcvbuf-read-joined--target",
                                  "stock-write--initiator", "stock-write-joined--initiator"])
def test_findings_say_what_they_inferred(name):
    """Holds and window stalls found on a capture without the handshake rest on an inferred MSS
    (and a receive-window stall on an inferred window scale), an avoidable R2T without the login on
    inferred keys; with the handshake and login in the capture (tshark: a SYN, a Login), nothing is
    inferred."""
    path = ROOT / "captures" / "fixtures" / f"{name}.pcap.gz"
    seen = subprocess.run(["tshark", "-r", str(path), "-Y", "tcp.flags.syn == 1 && tcp.flags.ack == 0"],
                          capture_output=True, text=True, check=True).stdout.strip() != ""
    login = subprocess.run(["tshark", "-r", str(path), "-Y", "iscsi.opcode == 0x03"],
                           capture_output=True, text=True, check=True).stdout.strip() != ""
    findings = report(path)["findings"]
    assert findings
    for f in findings:
        want = []
        if f["kind"] in ("nagle_hold", "delayed_ack", "cwnd_limited", "rwnd_limited") and not seen:
            want.append("mss")
        if f["kind"] == "rwnd_limited" and not seen:
            want.append("window_scale")
        if f["kind"] == "r2t_round_trip" and not login:
            want.append("keys")
        assert f["inferred"] == want, (f["kind"], f["frame"])


def test_verdict_format_one_line_per_capture_and_the_gate():
    paths = [ROOT / "captures" / "fixtures" / f"{n}.pcap.gz" for n in
             ("scripted-nagle-read-1k-joined--target", "stock-read--target")]
    docs = [report(p) for p in paths]
    p = run("--format", "verdict", "--fail-on", "nagle_hold", "-q", "-j", "2", *paths, check_rc=1)
    lines = p.stdout.splitlines()
    assert len(lines) == 3 and lines[2].startswith("Gate: TRIPPED")
    for line, path, doc in zip(lines, paths, docs):
        s = doc["summary"]
        assert line.startswith(f"{path}: {s['commands']} commands, {s['excess_round_trips']} excess round trips")
        for a in s["advice"]:
            assert f"{a['kind']} {a['side']}" in line


def test_findings_csv_has_one_row_per_json_finding(tmp_path):
    paths = [wiki("iscsi-tapel"), ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k-joined--target.pcap.gz"]
    doc = json.loads(run("--format", "json", "-q", *paths, check_rc=0).stdout)
    out = tmp_path / "f.csv"
    run("--format", "csv", "--findings-csv", out, "-q", "-j", "2", *paths, check_rc=0)
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == len(doc["findings"]) > 0
    for row, f in zip(rows, doc["findings"]):
        assert (row["kind"], row["side"], int(row["frame"]), int(row["capture"])) == \
            (f["kind"], f["side"], f["frame"], f["capture"])
        assert float(row["lost_ms"]) == pytest.approx(f["lost_ms"], abs=1e-6)
        assert row["inferred"] == ";".join(f["inferred"]) and row["detail"] == f["detail"]
        assert row["itt"] == (f["itt"] or "")
    assert run("--findings-csv", out, paths[0], check_rc=2)


@pytest.mark.parametrize("name", NAMES)
def test_csv_has_one_row_per_json_command(name):
    path = wiki(name)
    doc = report(path)
    p = run("--format", "csv", "-q", path, check_rc=0)
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert len(rows) == len(doc["commands"])
    for row, c in zip(rows, doc["commands"]):
        assert row["itt"] == c["itt"] and int(row["first_frame"]) == c["first_frame"]
        assert row["findings"] == ";".join(c["findings"])
        assert row["status_frame"] == ("" if c["status_frame"] is None else str(c["status_frame"]))
        assert row["breakdown_think_ms"] != "" and row["kind"] == c["kind"]


def test_text_report_names_sessions_findings_and_worst_commands():
    path = wiki("scsi-osd-example-001")
    doc = report(path)
    text = run(path, check_rc=0).stdout
    assert str(path) in text
    peers = doc["sessions"][-1]["peers"]
    assert peers["initiator"] in text and peers["target"] in text
    for a in doc["summary"]["advice"]:
        assert a["kind"] in text
    worst = max(doc["commands"], key=lambda c: (c["round_trips"] - c["ideal_round_trips"], c["latency_ms"] or 0))
    assert worst["itt"] in text
    assert "Worst" in text


def test_text_report_tells_no_side_to_change_where_the_time_may_be_the_round_trip():
    # No timestamps, no handshake, no logout (captures/MANIFEST.json, set nots): the busy target's
    # round trip is known only as the upper bound its late pure ACKs give, so the capture cannot
    # tell its 60 ms from the round trip, and the report says so rather than naming the target.
    path = ROOT / "captures" / "fixtures" / "scripted-nodelay-slow-read-nots-open--initiator.pcap.gz"
    text = run(path, check_rc=0).stdout
    verdict = text[text.index("Verdict:"):text.index("Root causes")]
    assert "think_or_network (target)" in verdict
    assert "whether the target should change the capture cannot tell" in " ".join(verdict.split())
    assert "the target should change (" not in " ".join(verdict.split())
    assert "if it is the target's time, gains" in text
    assert "serialized" not in text


def test_text_report_never_calls_a_round_trip_known_only_from_the_answers_the_network():
    # As above, but the target answers each READ after 25 ms, under its 40 ms delayed-ACK timer
    # (captures/MANIFEST.json): its ACKs of the commands ride on its replies, so the 8 ms round trip
    # and the 25 ms cannot be told apart. The capture's own handshake tells them in the full cut.
    fixtures = ROOT / "captures" / "fixtures"
    text = " ".join(run(fixtures / "scripted-nodelay-busy-read-nots-open--initiator.pcap.gz",
                        check_rc=0).stdout.split())
    assert re.search(r"captured near the initiator; round trip at most 3\d\.\d ms, known only from the "
                     r"target's answers, which may hold its own time", text), text[:400]
    assert re.search(r"for \d+ ms \(\d+ ms of it either crossing the network or the answering side's own time, "
                     r"which this capture cannot tell apart", text), text
    assert "target_think" not in text
    full = " ".join(run(fixtures / "scripted-nodelay-busy-read-nots--initiator.pcap.gz", check_rc=0).stdout.split())
    assert re.search(r"captured near the initiator; round trip 8\.\d+ ms\)", full), full[:400]
    assert "target_think (target)" in full


def test_a_flipped_fin_under_the_memory_budget_loses_no_command(tmp_path):
    """A FIN flag set on the initiator's pure ACK at frame 55 of scsi-osd-example-001 (a damaged
    capture: its next command, frame 56, comes 22 ms later, past what the budget waits after a
    FIN). With the budget (the default) the connection is retired at that FIN; the rest is still
    analysed, as a connection joined mid-session, with a warning: every SCSI command Wireshark sees."""
    raw = bytearray(capture_bytes("scsi-osd-example-001"))
    assert raw[:4] == b"\xd4\xc3\xb2\xa1"
    pos, frame = 24, 0
    while True:
        frame += 1
        incl = struct.unpack_from("<I", raw, pos + 8)[0]
        if frame == 55:
            break
        pos += 16 + incl
    ip = pos + 16 + 14
    tcp = ip + (raw[ip] & 0x0F) * 4
    assert struct.unpack_from(">HH", raw, tcp) == (32861, 3260) and raw[tcp + 13] == 0x10  # a pure ACK
    assert struct.unpack_from(">H", raw, ip + 2)[0] == (raw[ip] & 0x0F) * 4 + (raw[tcp + 12] >> 4) * 4
    raw[tcp + 13] |= 0x01  # FIN
    path = tmp_path / "flipped-fin.pcap"
    path.write_bytes(bytes(raw))
    wireshark = len(tshark("-r", path, "-Y", "iscsi.opcode == 0x01").splitlines())
    assert wireshark == 41
    for budget in ((), ("--memory-budget", "0")):
        doc = json.loads(run("--format", "json", *budget, path, check_rc=0).stdout)
        assert len(doc["commands"]) == wireshark, budget
        said = [n for n in doc["notices"] if "new data came after the memory budget" in n["message"]]
        if budget:
            assert not said
        else:
            assert [n["frame"] for n in said] == [56], said
            joined = [c for s in doc["sessions"] for c in s["connections"] if c["mid_session_start"]]
            assert [c["initiator"] for c in joined] == ["192.168.11.3:32861"], joined


def test_output_file_and_unwritable_output(tmp_path):
    path = wiki("scsi-osd-example-001")
    out = tmp_path / "r.json"
    run("--format", "json", "-o", out, path, check_rc=0)
    assert json.loads(out.read_text())["commands"]
    p = run("-o", tmp_path / "no" / "such" / "dir" / "r.txt", path, check_rc=2)
    assert "cannot write" in p.stderr


# ---- Capture formats and link types ------------------------------------------------------------

def test_gzip_and_plain_copies_give_identical_json(tmp_path):
    for name in ("iscsi-tapel", "iscsi-scsi-data-cdrom"):
        raw = capture_bytes(name)
        plain, packed = tmp_path / f"{name}.cap", tmp_path / f"{name}.bin"  # names say nothing
        plain.write_bytes(raw)
        packed.write_bytes(gzip.compress(raw))
        a, b = report(plain), report(packed)
        assert a["captures"][0]["gzip"] is False and b["captures"][0]["gzip"] is True
        assert strip_paths(a) == strip_paths(b)


def test_pcapng_conversion_gives_identical_commands(tmp_path):
    for name in NAMES:
        ng = tmp_path / f"{name}.pcapng"
        subprocess.run(["editcap", "-F", "pcapng", str(wiki(name)), str(ng)], check=True)
        a, b = report(wiki(name)), report(ng)
        assert b["captures"][0]["format"] == "pcapng"
        assert a["commands"] == b["commands"], name
        assert a["findings"] == b["findings"], name


def test_libtins_decoder_agrees_with_the_fast_decoder():
    for name in NAMES:
        a, b = report(wiki(name)), report(wiki(name), "--decoder", "libtins")
        assert b["captures"][0]["decoder"] == "libtins"
        assert a["commands"] == b["commands"], name
        assert a["findings"] == b["findings"], name
        assert a["sessions"] == b["sessions"], name


def read_pcap(name):
    return link_types.parse_pcap(capture_bytes(name))


write_pcap = link_types.write_pcap
TRANSFORMS = link_types.TRANSFORMS


@pytest.mark.parametrize("kind", sorted(TRANSFORMS))
def test_link_types_give_identical_commands(tmp_path, kind):
    name = "scsi-osd-example-001" if kind != "padded" else "iscsi-tapel"
    path = tmp_path / f"{kind}.pcap"
    link_types.relink(capture_bytes(name), kind, path)
    a, b = report(wiki(name)), report(path)
    assert len(a["commands"]) > 10
    assert a["commands"] == b["commands"]
    assert [(f["kind"], f["frame"], f["itt"]) for f in a["findings"]] == \
           [(f["kind"], f["frame"], f["itt"]) for f in b["findings"]]
    if kind == "ipv6":
        assert b["sessions"][0]["peers"]["target"].startswith("[2001:db8::")
    # libtins decodes the same frames to the same segments (it does not know SLL2: the fast decoder
    # stands in, and says so)
    c = report(path, "--decoder", "libtins")
    assert c["captures"][0]["decoder"] == ("fast" if kind == "sll2" else "libtins")
    assert c["commands"] == b["commands"]


def test_ip_fragments_are_skipped_with_a_notice(tmp_path):
    endian, header, linktype, records = read_pcap("scsi-osd-example-001")
    eth = records[0][2][:14]
    assert eth[12:14] == b"\x08\x00"
    frag = eth + struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + 24, 7, 0x2000, 64, 6, 0, bytes([10, 0, 0, 1]),
                             bytes([10, 0, 0, 2])) + bytes(24)
    records.insert(3, [records[2][0], records[2][1], frag, len(frag)])
    path = tmp_path / "frag.pcap"
    write_pcap(path, endian, header, linktype, records)
    p = run("--format", "json", path, check_rc=0)
    doc = json.loads(p.stdout)
    assert any(n["frame"] == 4 and "fragment" in n["message"] for n in doc["notices"])
    assert re.search(r"frag\.pcap: frame 4: warning: .*fragment", p.stderr), p.stderr
    # frames after the inserted one shift by one; the commands are all still there
    assert len(doc["commands"]) == len(report(wiki("scsi-osd-example-001"))["commands"])


# ---- Damaged and unusable input, exit codes ----------------------------------------------------

def test_damaged_but_readable_capture_is_analysed_with_a_notice(tmp_path):
    raw = capture_bytes("iscsi-tapel")
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(raw[: len(raw) * 2 // 3])
    p = run("--format", "json", cut, check_rc=0)
    doc = json.loads(p.stdout)
    assert doc["captures"][0]["damaged"] is True
    packets = doc["captures"][0]["packets"]
    assert 0 < packets < 1484
    assert any(n["level"] == "error" and n["frame"] == packets for n in doc["notices"])
    assert re.search(r"cut\.pcap: frame %d: error: capture damaged" % packets, p.stderr), p.stderr
    full = {(c["itt"], c["first_frame"]) for c in report(wiki("iscsi-tapel"))["commands"]}
    part = {(c["itt"], c["first_frame"]) for c in doc["commands"]}
    assert part and part <= full
    # a gzip stream cut short is damaged-but-readable too
    gz = tmp_path / "cut.pcap.gz"
    packed = gzip.compress(raw)
    gz.write_bytes(packed[: len(packed) // 2])
    p = run("--format", "json", gz, check_rc=0)
    doc = json.loads(p.stdout)
    assert doc["captures"][0]["damaged"] is True and doc["commands"]
    assert "cut.pcap.gz" in p.stderr and "truncated" in p.stderr


@pytest.mark.parametrize("content,message", [
    (None, "cannot open"),
    (b"", "empty file"),
    (b"this is not a capture at all\n" * 10, "not a pcap"),
    (gzip.compress(b"plain text, gzip-compressed\n" * 10), "does not hold a pcap"),
    (b"\xd4\xc3\xb2\xa1" + bytes(4), "not a readable capture"),
])
def test_unusable_input_exits_2_naming_the_file(tmp_path, content, message):
    bad = tmp_path / "bad.pcap"
    if content is not None:
        bad.write_bytes(content)
    p = run(bad, check_rc=2)
    assert str(bad) in p.stderr and message in p.stderr, p.stderr
    # with a good capture beside it, the good one is still analysed, and the exit code is still 2
    p = run("--format", "json", wiki("scsi-osd-example-001"), bad, check_rc=2)
    doc = json.loads(p.stdout)
    assert doc["captures"][1]["usable"] is False and message in doc["captures"][1]["error"]
    assert len(doc["commands"]) == len(report(wiki("scsi-osd-example-001"))["commands"])


@pytest.mark.parametrize("args", [
    [], ["--format", "xml"], ["--no-such-option"], ["--fail-on", "no_such_kind"], ["--jobs", "0"],
    ["--port", "70000"],
])
def test_usage_errors_exit_2(args):
    extra = [wiki("scsi-osd-example-001")] if args else []
    p = run(*args, *extra, check_rc=2)
    assert p.stderr


def test_help_and_version_exit_0():
    assert "--fail-on" in run("--help", check_rc=0).stdout
    assert re.match(r"iscsi-doctor \d+\.\d+", run("--version", check_rc=0).stdout)


def _kind_counts():
    counts = {}
    for name in NAMES:
        for kind, n in report(wiki(name))["summary"]["finding_counts"].items():
            counts.setdefault(kind, {})[name] = n
    return counts


def test_fail_on_trips_with_exit_1_only_for_kinds_present():
    counts = _kind_counts()
    present = [(k, name) for k, per in counts.items() for name, n in per.items() if n]
    assert present, "no finding in any of the captures: the gate cannot be tested"
    kind, name = present[0]
    p = run("--fail-on", kind, "-o", os.devnull, wiki(name), check_rc=1)
    assert kind in p.stderr
    absent = [k for k, per in counts.items() if per.get(name, 0) == 0]
    if absent:
        run("--fail-on", ",".join(absent), "-o", os.devnull, wiki(name), check_rc=0)
    doc = json.loads(run("--format", "json", "--fail-on", kind, wiki(name), check_rc=1).stdout)
    assert doc["summary"]["gate"]["tripped"] is True and doc["summary"]["gate"]["fail_on"] == [kind]


def test_max_excess_round_trips_threshold():
    for name in NAMES:
        excess = report(wiki(name))["summary"]["excess_round_trips"]
        if excess:
            run("--max-excess-round-trips", excess - 1, "-o", os.devnull, wiki(name), check_rc=1)
            run("--max-excess-round-trips", excess, "-o", os.devnull, wiki(name), check_rc=0)
            return
    pytest.fail("no capture with excess round trips")


def test_gate_without_any_iscsi_command_exits_2():
    path = wiki("scsi-osd-example-001")
    # Without a gate, a capture with no iSCSI (here: iSCSI looked for on another port only) is fine.
    doc = json.loads(run("--format", "json", "--port", "1", "--no-detect-ports", path, check_rc=0).stdout)
    assert doc["commands"] == []
    p = run("--port", "1", "--no-detect-ports", "--fail-on", "nagle_hold", "-o", os.devnull, path, check_rc=2)
    assert "no SCSI command" in p.stderr


def test_ports_option():
    path = wiki("scsi-osd-example-001")
    n = len(report(path)["commands"])
    assert len(report(path, "--port", "1,3260", "--no-detect-ports")["commands"]) == n
    assert len(report(path, "--port", "1", "--port", "3260", "--no-detect-ports")["commands"]) == n


# ---- Batches ----------------------------------------------------------------------------------

def test_directory_argument_and_batch_order(tmp_path):
    (tmp_path / "b" / "deeper").mkdir(parents=True)
    shutil.copy(wiki("scsi-osd-example-001"), tmp_path / "b" / "deeper" / "osd.pcap")
    (tmp_path / "a.pcap").write_bytes(capture_bytes("iscsi-tapel"))
    (tmp_path / "b" / "notes.txt").write_text("not a capture")
    doc = report(tmp_path)
    assert [Path(c["path"]).name for c in doc["captures"]] == ["a.pcap", "osd.pcap"]
    parts = [report(wiki("iscsi-tapel")), report(wiki("scsi-osd-example-001"))]
    for i, part in enumerate(parts):
        mine = [c for c in doc["commands"] if c["capture"] == i]
        assert [{**c, "capture": 0} for c in mine] == part["commands"]
    assert doc["summary"]["commands"] == sum(p["summary"]["commands"] for p in parts)
    assert doc["summary"]["captures"] == 2
    for kind in FINDING_KINDS & set(doc["summary"]["finding_counts"]):
        assert doc["summary"]["finding_counts"][kind] == sum(p["summary"]["finding_counts"][kind] for p in parts)
    # a directory without captures is unusable input
    empty = tmp_path / "empty"
    empty.mkdir()
    p = run(empty, check_rc=2)
    assert "no capture files" in p.stderr and str(empty) in p.stderr


def test_jobs_do_not_change_the_output():
    paths = [wiki(n) for n in NAMES]
    outputs = {}
    for fmt in ("json", "csv", "text"):
        outputs[fmt] = run("--format", fmt, "-q", "-j", "1", *paths, check_rc=0).stdout
        three = run("--format", fmt, "-q", "-j", "3", *paths, check_rc=0).stdout
        assert outputs[fmt] == three, fmt
    doc = json.loads(outputs["json"])
    assert sorted({c["capture"] for c in doc["commands"]}) == [0, 1, 2, 3]


def test_html_jobs_do_not_change_the_page(tmp_path):
    # --html goes through the same pipeline: -j 2 analyses both captures (and their ladders'
    # second passes) at once, and the page is the same bytes as with -j 1, gate included.
    fixtures = ROOT / "captures" / "fixtures"
    paths = [fixtures / "stock-loss-read--target.pcap.gz", fixtures / "scripted-nagle-read-1k--initiator.pcap.gz"]
    pages = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}.html"
        run("--html", out, "-q", "-j", jobs, "--fail-on", "nagle_hold", *paths, check_rc=1)
        pages[jobs] = out.read_bytes()
    assert pages["1"] == pages["2"]
    page = pages["1"].decode()
    assert 'id="c0"' in page and 'id="c1"' in page and 'class="ladder"' in page
    assert "Gate: TRIPPED (nagle_hold:" in page


def test_progress_only_on_a_terminal():
    path = wiki("iscsi-scsi-10TB-data-device")  # > 65536 packets: at least one progress update
    p = run("-o", os.devnull, path, check_rc=0)
    assert "%" not in p.stderr and "\r" not in p.stderr
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([str(BIN), "-o", os.devnull, str(path)], stdout=subprocess.DEVNULL, stderr=secondary)
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=600) == 0
    os.close(primary)
    assert re.search(rb"\d+\.\d%\s+[\d]+ packets", b"".join(chunks)), b"".join(chunks)[:500]


def test_finding_kinds_are_the_engines():
    """The kinds these tests know are exactly those the binary names (its --fail-on help lists
    the engine's finding-kind table), so a test cannot rely on a kind that does not exist."""
    out = subprocess.run([str(BIN), "--help"], capture_output=True, text=True).stdout
    line = " ".join(out.split())
    m = re.search(r"comma-separated: ([a-z0-9_, ]+)\)", line)
    assert m, out
    assert {k.strip() for k in m.group(1).split(",")} == FINDING_KINDS


@pytest.mark.skipif(os.geteuid() != 0, reason="capturing on lo needs root or CAP_NET_RAW")
def test_probe_interrupted_leaves_no_temporary_capture(tmp_path):
    """Ctrl-C during a probe stops it (here in a login a listener never answers) with exit 2 and
    a message saying so, and the temporary capture it made goes with it."""
    import signal
    import socket
    import time
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = subprocess.Popen([str(BIN), "probe", "-i", "lo", f"iscsi://127.0.0.1:{port}/iqn.2026-11.test:none/0"],
                         env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    listener.settimeout(10)
    try:
        conn, _ = listener.accept()  # the login's connection: held open, never answered
        assert list(tmp.iterdir()), "no temporary capture made"  # opened before the login
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        conn.close()
    finally:
        p.kill()
        listener.close()
    assert p.returncode == 2, err
    assert "interrupted" in err, err
    assert not list(tmp.iterdir())


def test_options_before_a_subcommand(tmp_path):
    """`iscsi-doctor -q ladder ...` is the ladder subcommand with -q (it was read as a capture named
    'ladder', and a text report went into the SVG file)."""
    path = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"
    doc = json.loads(subprocess.run([BIN, "-q", "--format", "json", str(path)], capture_output=True, text=True,
                                    check=True).stdout)
    c = doc["commands"][3]
    out = tmp_path / "l.svg"
    r = subprocess.run([BIN, "-q", "ladder", "--itt", c["itt"], str(path), "-o", str(out)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    svg = out.read_text()
    assert svg.startswith("<?xml") and f'data-first-frame="{c["first_frame"]}"' in svg


def test_probe_refuses_a_wrong_report_option_before_it_logs_in():
    """The plain command's options given to probe (docs/cli.md, probe step 5) are checked before the
    login: a wrong one is a usage error at once (exit 2), and no connection is made (they were
    parsed only after the battery had run)."""
    import socket
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        r = run("probe", f"iscsi://127.0.0.1:{port}/iqn.2026-11.test:none/0", "--format", "nope")
        assert r.returncode == 2, r.stderr
        assert "--format" in r.stderr and "logging in" not in r.stderr, r.stderr
        with pytest.raises(socket.timeout):
            listener.accept()[0].close()  # nobody tried to log in
        r = run("probe", f"iscsi://127.0.0.1:{port}/iqn.2026-11.test:none/0", "extra.pcap")
        assert r.returncode == 2 and "extra.pcap" in r.stderr, r.stderr
    finally:
        listener.close()


def test_a_subcommand_after_a_capture_is_refused(tmp_path):
    """A subcommand's name after a capture is the subcommand, and the capture before it an error
    naming the way out (docs/cli.md, Options)."""
    path = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"
    r = run(path, "diff", path, path)
    assert r.returncode == 2 and "./diff" in r.stderr, r.stderr
    # The same capture named first, then the subcommand with its own arguments, is a diff.
    r = run("diff", path, path, check_rc=0)
    assert "BEFORE" in r.stdout
