# SPDX-License-Identifier: GPL-2.0-or-later
"""The archive job (scale/iscsi_doctor_fleet.py) on a Dask LocalCluster of two worker processes,
over the bundled captures, uncompressed copies, a zip archive read through fsspec and the CLI's
standard input, damaged files and files that are not captures. Every dataset and every query of
scale/queries is checked against the CLI's own --format json for the same files, read here
independently; then a stand-in CLI that crashes, hangs and prints garbage."""
import collections
import csv
import gzip
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

# Installed by scripts/install-deps.sh: missing ones fail the test, they do not skip it.
import dask  # noqa: F401
import duckdb  # noqa: F401
import pyarrow.parquet as pq
import pytest
from dask.distributed import LocalCluster

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = str(Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")).resolve())
SCRIPT = ROOT / "scale" / "iscsi_doctor_fleet.py"
QUERIES = ROOT / "scale" / "queries"
FIXTURES = ROOT / "captures" / "fixtures"
WIKI = ROOT / "captures" / "wireshark-wiki"
KINDS = ["nagle_hold", "delayed_ack", "r2t_round_trip", "cwnd_limited", "rwnd_limited",
         "retransmission", "target_think", "serialized"]
SMALL = "scripted-nagle-read-1k--initiator.pcap.gz"

sys.path.insert(0, str(ROOT / "scale"))
import iscsi_doctor_fleet as fleet_mod  # noqa: E402


def fleet_cmd(*args, timeout=600):
    r = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, "ISCSI_DOCTOR": BIN})
    return r


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Inputs as the job is given them, and for each file the job should record, the local file
    with the same bytes for the CLI's reference run (None: not a capture the CLI reads)."""
    d = tmp_path_factory.mktemp("corpus")
    plain = d / "plain"
    plain.mkdir()
    # (the other public captures stay single: their LUN-days are anchored to the CLI's own rows)
    for src in [WIKI / "scsi-osd-example-001.pcap.gz"] + sorted(FIXTURES.glob("*-nagle-*-1k--target.pcap.gz")):
        (plain / src.name[:-3]).write_bytes(gzip.decompress(src.read_bytes()))
    (plain / "notes.txt").write_text("rotated by logrotate\n")  # met through a glob: skipped
    zipped = sorted(FIXTURES.glob("stock-*--initiator.pcap.gz"))[:2]
    extracted = d / "extracted"
    extracted.mkdir()
    with zipfile.ZipFile(d / "host1.zip", "w") as z:
        for src in zipped:
            z.write(src, f"host1/{src.name}")
            shutil.copy(src, extracted / src.name)
    bad = d / "bad"
    bad.mkdir()
    raw = gzip.decompress((FIXTURES / SMALL).read_bytes())
    (bad / "cut.pcap").write_bytes(raw[:20000])  # a record cut short
    packed = (FIXTURES / SMALL).read_bytes()
    (bad / "cut.pcap.gz").write_bytes(packed[:len(packed) // 2])  # a gzip stream that ends early
    (bad / "junk.pcap").write_bytes(bytes(range(256)) * 8)  # not a capture, named: recorded
    inputs = [FIXTURES, WIKI, f"{plain}/*", f"zip://host1/*.pcap.gz::{d / 'host1.zip'}",
              bad / "cut.pcap", bad / "cut.pcap.gz", bad / "junk.pcap"]
    expect = {}
    for f in sorted(FIXTURES.iterdir()) + sorted(WIKI.glob("*.pcap.gz")) + sorted(plain.glob("*.pcap")):
        expect[str(f)] = f
    for src in zipped:
        expect[f"zip://host1/{src.name}::{d / 'host1.zip'}"] = extracted / src.name
    expect[str(bad / "cut.pcap")] = bad / "cut.pcap"
    expect[str(bad / "cut.pcap.gz")] = bad / "cut.pcap.gz"
    expect[str(bad / "junk.pcap")] = None
    return {"dir": d, "inputs": inputs, "expect": expect}


@pytest.fixture(scope="module")
def reference(corpus):
    """The CLI's --format json over the same files, split per file (keyed by the job's path)."""
    paths = [k for k, v in corpus["expect"].items() if v is not None]
    r = subprocess.run([BIN, "--format", "json", "-q", "-j", "2", *[str(corpus["expect"][p]) for p in paths]],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    per = {p: {"capture": doc["captures"][i], "commands": [], "findings": [], "sessions": []}
           for i, p in enumerate(paths)}
    for key in ("commands", "findings", "sessions"):
        for item in doc[key]:
            per[paths[item["capture"]]][key].append(item)
    for p, ref in per.items():
        ref["facts"] = facts_of(ref["sessions"])
    return per


def address(endpoint):
    if endpoint is None:
        return None
    return endpoint[1:endpoint.index("]")] if endpoint.startswith("[") else endpoint.rsplit(":", 1)[0]


def facts_of(sessions):
    """(session, connection) -> (target portal, initiator address) from the CLI's sessions."""
    out = {}
    for s in sessions:
        for c in s["connections"]:
            out[(s["session"], c["connection"])] = (c["target"], address(c["initiator"]))
    return out


def day_of(ns):
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).date().isoformat()


def rank(values, q):
    v = sorted(values)
    return v[math.floor(q * (len(v) - 1) + 0.5)]


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as c:
        assert len(c.workers) == 2
        yield c.scheduler_address


@pytest.fixture(scope="module")
def fleet(corpus, cluster):
    out = corpus["dir"] / "fleet"
    r = fleet_cmd("run", "--scheduler", cluster, "-o", out, *corpus["inputs"])
    assert r.returncode == 0, r.stderr
    assert "2 not captures, skipped" in r.stdout, r.stdout  # SOURCES.txt and notes.txt
    tables = {}
    for name in ("commands", "findings", "captures", "summary/luns", "summary/kinds"):
        t = pq.read_table(out / name, partitioning="hive").to_pylist()
        for row in t:
            row["day"] = str(row["day"])
        tables[name] = t
    return {"out": out, "t": tables}


def by_path(rows):
    out = collections.defaultdict(list)
    for r in rows:
        out[r["path"]].append(r)
    return out


def test_every_file_recorded_once_with_its_status(corpus, fleet, reference):
    caps = {r["path"]: r for r in fleet["t"]["captures"]}
    assert len(caps) == len(fleet["t"]["captures"])
    assert set(caps) == set(corpus["expect"])
    bad = corpus["dir"] / "bad"
    for path, row in caps.items():
        if path == str(bad / "junk.pcap"):
            assert row["status"] == "unusable" and row["exit_code"] == 2
            cli = subprocess.run([BIN, "--format", "json", "-q", path], capture_output=True, text=True)
            assert cli.returncode == 2 and row["error"] == json.loads(cli.stdout)["captures"][0]["error"]
            assert row["commands"] is None
            continue
        cap = reference[path]["capture"]
        assert row["status"] == ("damaged" if cap["damaged"] else "ok"), (path, row["error"])
        assert row["packets"] == cap["packets"] and row["commands"] == cap["commands"]
        assert row["first_time"] is not None and row["day"] == day_of(cap["first_time_ns"])
        assert row["worker"] and row["seconds"] > 0
    for name in ("cut.pcap", "cut.pcap.gz"):
        row = caps[str(bad / name)]
        assert row["status"] == "damaged" and row["commands"] > 0
        assert re.match(r"capture damaged after frame \d+: ", row["error"]), row["error"]
    assert "gzip stream truncated" in caps[str(bad / "cut.pcap.gz")]["error"]
    # the zip members were streamed: same analysis as the extracted files
    zipped = [p for p in caps if p.startswith("zip://")]
    assert len(zipped) == 2 and all(caps[p]["status"] == "ok" and caps[p]["commands"] > 0 for p in zipped)


def test_commands_match_the_cli(fleet, reference):
    got = by_path(fleet["t"]["commands"])
    assert set(got) == set(p for p, r in reference.items() if r["commands"])
    for path, ref in reference.items():
        rows = {(r["connection"], r["itt"], r["first_frame"]): r for r in got.get(path, [])}
        assert len(rows) == len(ref["commands"]), path
        for c in ref["commands"]:
            r = rows[(c["connection"], c["itt"], c["first_frame"])]
            for k in ("op", "lun", "lba", "bytes", "status_frame", "latency_ms", "round_trips",
                      "ideal_round_trips", "findings", "status", "completed", "iscsi_opcode"):
                assert r[k] == c[k], (path, c["itt"], k)
            assert r["nagle_ms"] == c["breakdown_ms"]["nagle"]
            assert r["time"].replace(tzinfo=timezone.utc).timestamp() == pytest.approx(c["time_ns"] / 1e9, abs=1e-6)
            assert r["day"] == day_of(c["time_ns"])
            want = ref["facts"].get((c["session"], c["connection"]), (None, None))
            assert (r["target"], r["initiator"]) == want, (path, c["itt"])
            if c["round_trips"] is not None:
                assert r["excess_round_trips"] == max(0, c["round_trips"] - c["ideal_round_trips"])


def test_findings_match_the_cli(fleet, reference):
    got = by_path(fleet["t"]["findings"])
    for path, ref in reference.items():
        rows = got.get(path, [])
        assert collections.Counter(r["kind"] for r in rows) == collections.Counter(f["kind"] for f in ref["findings"])
        canon = lambda related: json.dumps(related, sort_keys=True)  # noqa: E731
        assert collections.Counter((r["kind"], r["side"], r["frame"], r["itt"], r["lost_ms"],
                                    canon(json.loads(r["related"]))) for r in rows) == \
            collections.Counter((f["kind"], f["side"], f["frame"], f["itt"], f["lost_ms"], canon(f["related"]))
                                for f in ref["findings"]), path


def test_time_lost_matches_the_cli(fleet, reference):
    caps = {r["path"]: r for r in fleet["t"]["captures"]}
    want_lost, want_found = collections.Counter(), collections.Counter()
    for path, ref in reference.items():
        summary = ref["capture"]["summary"]
        got = {a["kind"]: a for a in caps[path]["advice"]}
        assert [a["kind"] for a in caps[path]["advice"]] == [a["kind"] for a in summary["advice"]]
        for a in summary["advice"]:
            assert got[a["kind"]]["time_lost_ms"] == a["exclusive_ms"]
            assert got[a["kind"]]["occurrences"] == a["occurrences"]
            want_lost[a["kind"]] += a["exclusive_ms"]
        assert caps[path]["time_lost_ms"] == summary["exclusive_total_ms"]
        want_found.update(summary["finding_counts"])
    lost, found = collections.Counter(), collections.Counter()
    for r in fleet["t"]["summary/kinds"]:
        lost[r["kind"]] += r["time_lost_ms"]
        found[r["kind"]] += r["findings"]
    assert +found == +want_found
    for k in KINDS:
        assert lost[k] == pytest.approx(want_lost[k], rel=1e-9, abs=1e-6), k
    assert want_lost["cwnd_limited"] > 0 and want_lost["nagle_hold"] > 0


def expected_luns(reference):
    groups = collections.defaultdict(list)
    for path, ref in reference.items():
        for c in ref["commands"]:
            if c["iscsi_opcode"] == 1:
                t, i = ref["facts"].get((c["session"], c["connection"]), (None, None))
                groups[(day_of(c["time_ns"]), t, i, c["lun"])].append((path, c))
    out = {}
    for key, items in groups.items():
        done = [c for _, c in items if c["completed"]]
        lat = [c["latency_ms"] for c in done]
        out[key] = {
            "captures": len({p for p, _ in items}), "commands": len(items), "completed": len(done),
            "never_answered": len(items) - len(done),
            "bytes_read": sum(c["bytes"] for c in done if c["kind"] == "read"),
            "bytes_written": sum(c["bytes"] for c in done if c["kind"] == "write"),
            "p50_ms": rank(lat, 0.5) if lat else None, "p90_ms": rank(lat, 0.9) if lat else None,
            "p99_ms": rank(lat, 0.99) if lat else None, "p999_ms": rank(lat, 0.999) if lat else None,
            "max_ms": max(lat) if lat else None,
            "excess_round_trips": sum(max(0, c["round_trips"] - c["ideal_round_trips"]) for c in done)}
    return out


def test_lun_summary_matches_the_cli(fleet, reference):
    want = expected_luns(reference)
    got = {(r["day"], r["target"], r["initiator"], r["lun"]): r for r in fleet["t"]["summary/luns"]}
    assert set(got) == set(want)
    for key, w in want.items():
        assert {k: got[key][k] for k in w} == w, key
    # and a group of one capture is that capture's own per-LUN row (the CLI keeps 32-bit floats)
    anchored = 0
    for path, ref in reference.items():
        days = {day_of(c["time_ns"]) for c in ref["commands"]}
        initiators = {i for _, i in ref["facts"].values()}
        if len(days) != 1 or len(initiators) != 1:
            continue
        day, ini = days.pop(), initiators.pop()
        for lun in ref["capture"]["summary"]["luns"]:
            g = got.get((day, lun["target"], ini, lun["lun"]))
            if g and g["captures"] == 1:
                assert g["completed"] == lun["commands"]
                for k in ("p50_ms", "p99_ms", "max_ms"):
                    assert g[k] == pytest.approx(lun[k], rel=1e-6), (path, k)
                anchored += 1
    assert anchored >= 3


def query(fleet, name, **variables):
    con = fleet_mod.connect(fleet["out"], variables.items())
    rel = con.sql((QUERIES / f"{name}.sql").read_text())
    return [dict(zip(rel.columns, row)) for row in rel.fetchall()]


def test_every_query_answers_as_the_cli(fleet, reference, corpus):
    tested = {"nagle_this_week", "p99_by_target_day", "time_lost_by_kind", "failed_files", "worst_luns"}
    assert {p.stem for p in QUERIES.glob("*.sql") if not p.stem.startswith("_")} == tested

    # expected answers from the CLI's JSON
    facts = lambda ref, x: ref["facts"].get((x["session"], x["connection"]), (None, None))  # noqa: E731
    cmd_day = {}
    kinds = collections.defaultdict(lambda: [0, 0.0])  # (day, target, kind) -> findings, touched
    per_target_day = collections.defaultdict(list)
    for path, ref in reference.items():
        for c in ref["commands"]:
            cmd_day[(path, c["connection"], c["itt"], c["first_frame"])] = day_of(c["time_ns"])
            if c["iscsi_opcode"] == 1 and c["completed"]:
                per_target_day[(facts(ref, c)[0], day_of(c["time_ns"]))].append(c)
        start = ref["capture"]["first_time_ns"]
        for f in ref["findings"]:
            day = cmd_day.get((path, f["connection"], f["itt"], f["command_first_frame"]), day_of(start))
            k = kinds[(day, facts(ref, f)[0], f["kind"])]
            k[0] += 1
            k[1] += f["lost_ms"]

    # nagle_this_week: the week ending on the newest day with Nagle holds, and one with none
    nagle_days = sorted({d for (d, _, k) in kinds if k == "nagle_hold"})
    until = nagle_days[-1]
    lo = (datetime.fromisoformat(until).toordinal() - 7)
    want = collections.Counter()
    for (d, t, k), (n, _) in kinds.items():
        if k == "nagle_hold" and lo < datetime.fromisoformat(d).toordinal():
            want[t] += n
    rows = query(fleet, "nagle_this_week", until=until)
    assert {r["target"]: r["nagle_holds"] for r in rows} == dict(want) and want
    assert query(fleet, "nagle_this_week", until="2001-01-01") == []

    # p99_by_target_day
    rows = query(fleet, "p99_by_target_day")
    got = {(r["target"], str(r["day"])): r for r in rows}
    assert set(got) == set(per_target_day)
    for key, cs in per_target_day.items():
        lat = [c["latency_ms"] for c in cs]
        assert (got[key]["commands"], got[key]["p50_ms"], got[key]["p99_ms"], got[key]["max_ms"]) == \
            (len(cs), rank(lat, 0.5), rank(lat, 0.99), max(lat)), key

    # time_lost_by_kind: findings and touched from the findings, time lost from the advice
    rows = query(fleet, "time_lost_by_kind")
    got = {(r["target"], r["kind"]): r for r in rows}
    want = collections.defaultdict(lambda: [0, 0.0])
    for (_, t, k), (n, touched) in kinds.items():
        want[(t, k)][0] += n
        want[(t, k)][1] += touched
    assert {k for k, r in got.items() if r["findings"]} == set(want)
    for key, (n, touched) in want.items():
        assert got[key]["findings"] == n and got[key]["touched_ms"] == pytest.approx(touched, abs=2e-3)
    lost_by_kind = collections.Counter()
    for r in rows:
        lost_by_kind[r["kind"]] += r["time_lost_ms"]
    for k in KINDS:
        want_k = sum(a["exclusive_ms"] for ref in reference.values() for a in ref["capture"]["summary"]["advice"]
                     if a["kind"] == k)
        assert lost_by_kind[k] == pytest.approx(want_k, abs=0.01), k

    # failed_files
    rows = query(fleet, "failed_files")
    bad = corpus["dir"] / "bad"
    assert {(r["path"], r["status"]) for r in rows} == {
        (str(bad / "cut.pcap"), "damaged"), (str(bad / "cut.pcap.gz"), "damaged"), (str(bad / "junk.pcap"), "unusable")}

    # worst_luns: the 20 largest p99s of the expected LUN-days
    rows = query(fleet, "worst_luns")
    want = sorted((w["p99_ms"] for w in expected_luns(reference).values() if w["completed"]), reverse=True)[:20]
    assert [r["p99_ms"] for r in rows] == want

    # the command line runs them too
    r = fleet_cmd("query", fleet["out"], "failed_files", "--csv")
    assert r.returncode == 0, r.stderr
    assert sorted(row["status"] for row in csv.DictReader(io.StringIO(r.stdout))) == ["damaged", "damaged", "unusable"]


def test_the_documented_dask_examples(fleet, cluster):
    """scale/README.md's Dask dataframe snippets give what the queries give."""
    from dask.distributed import Client
    text = (ROOT / "scale" / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    with Client(cluster):
        env = {"fleet": str(fleet["out"])}
        exec(blocks[0], env)  # noqa: S102 - the documentation's own code
        exec(blocks[1], env)  # noqa: S102
    want = {(r["target"], str(r["day"])): r["p99_ms"] for r in query(fleet, "p99_by_target_day")}
    got = {(r["target"], str(r["day"])): r["p99_ms"] for r in env["p99"].to_dict("records")}
    assert got == want
    newest = max(r["day"] for r in fleet["t"]["summary/kinds"] if r["kind"] == "nagle_hold")
    want = {r["target"]: r["nagle_holds"] for r in query(fleet, "nagle_this_week", until=newest)}
    assert {t: int(n) for t, n in env["nagle"]["findings"].items() if n} == want


STAND_IN = """#!/bin/sh
# iscsi-doctor, except for files whose names say otherwise
for last; do :; done
case "$last" in
  *crash*) kill -SEGV $$ ;;
  *hang*) sleep 60 ;;
  *garble*) echo 'this is not JSON'; exit 0 ;;
  *short*) "{bin}" "$@" | head -n 3; exit 0 ;;
esac
exec "{bin}" "$@"
"""


def test_failures_are_recorded_and_do_not_fail_the_job(tmp_path):
    stand_in = tmp_path / "iscsi-doctor"
    stand_in.write_text(STAND_IN.replace("{bin}", BIN))
    stand_in.chmod(0o755)
    d = tmp_path / "in"
    d.mkdir()
    for name in ("ok", "crash", "hang", "garble", "short"):
        shutil.copy(FIXTURES / SMALL, d / f"{name}.pcap.gz")
    out = tmp_path / "out"
    r = fleet_cmd("run", "--workers", "1", "--timeout", "5", "--iscsi-doctor", stand_in, "-o", out, d)
    assert r.returncode == 0, r.stderr
    rows = {Path(r["path"]).name.split(".")[0]: r for r in pq.read_table(out / "captures").to_pylist()}
    assert {k: v["status"] for k, v in rows.items()} == {
        "ok": "ok", "crash": "failed", "hang": "timeout", "garble": "unparseable", "short": "unparseable"}
    assert rows["crash"]["error"] == "iscsi-doctor killed by signal 11" and rows["crash"]["exit_code"] == -11
    assert rows["hang"]["error"] == "timed out after 5 s" and rows["hang"]["seconds"] < 30
    assert rows["garble"]["error"].startswith("unparseable output: ")
    assert rows["short"]["error"] == "output ended before the capture record"
    cmds = pq.read_table(out / "commands").to_pylist()
    assert {c["path"] for c in cmds} == {str(d / "ok.pcap.gz")}
    assert "1 ok" in r.stdout and "1 timeout" in r.stdout


def test_usage_errors_exit_2(tmp_path, fleet):
    assert fleet_cmd("run", "-o", tmp_path / "o").returncode == 2  # no input
    assert fleet_cmd("run", "-o", tmp_path / "o", tmp_path / "missing.pcap").returncode == 2
    assert fleet_cmd("run", "-o", tmp_path / "o", f"{tmp_path}/*.none").returncode == 2
    assert fleet_cmd("run", "--workers", "0", "-o", tmp_path / "o", FIXTURES / SMALL).returncode == 2
    r = fleet_cmd("run", "--workers", "1", "-o", fleet["out"], FIXTURES / SMALL)
    assert r.returncode == 2 and "--overwrite" in r.stderr
    r = fleet_cmd("run", "--workers", "1", "--iscsi-doctor", tmp_path / "nope", "-o", tmp_path / "o", FIXTURES / SMALL)
    assert r.returncode == 2 and "not found on worker" in r.stderr
    r = fleet_cmd("query", fleet["out"], "no_such_query")
    assert r.returncode == 2 and "failed_files" in r.stderr
