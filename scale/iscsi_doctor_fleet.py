#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""iscsi-doctor over an archive of captures, on a Dask cluster, into Parquet.

Each capture is analysed by `iscsi-doctor --format jsonl -q` on a Dask worker, which writes the
file's commands and findings as Parquet parts itself; the job then writes the captures table and
the fleet summary. Datasets, schemas and queries: scale/README.md.

usage:
  iscsi_doctor_fleet.py run -o OUT [--workers N | --scheduler ADDRESS] INPUT...
  iscsi_doctor_fleet.py query OUT [--set NAME=VALUE]... QUERY.sql|NAME...

INPUT: a capture file, a directory (searched recursively), or a glob; local paths or any fsspec
URL the workers can open (s3://bucket/2026/*/*.pcap.gz, zip://*.pcap::/archives/host1.zip).
Files met through a directory or a glob that the CLI does not take for a capture are skipped, as
the CLI skips them in a directory; files named one by one are always recorded, with their error if
they fail. Exit codes: 0 done (files that failed are in captures/), 2 usage, 1 the job could not run.
"""
import argparse
import datetime as dt
import glob as globmod
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute

KINDS = ["nagle_hold", "delayed_ack", "r2t_round_trip", "cwnd_limited", "rwnd_limited",
         "retransmission", "target_think", "serialized"]
# The breakdown part that is each kind's own time (docs/cli.md "Time lost"); serialized owns none.
# cwnd_limited and rwnd_limited share `window`: the JSON does not split it (see _kind_rows).
KIND_PART = {"nagle_hold": "nagle", "delayed_ack": "delayed_ack", "r2t_round_trip": "r2t",
             "cwnd_limited": "window", "rwnd_limited": "window", "retransmission": "loss",
             "target_think": "think"}
PARTS = ["request", "think", "data", "nagle", "delayed_ack", "r2t", "window", "loss", "response"]
TS = pa.timestamp("ns")  # UTC, naive: days and weeks are UTC ones in every tool

# The datasets' schemas: stable, explicit, documented in scale/README.md. `day` is the hive
# partition key (directory day=YYYY-MM-DD), not a column of the files.
COMMANDS = pa.schema([
    ("capture_id", pa.string()), ("path", pa.string()), ("time", TS),
    ("target", pa.string()), ("target_name", pa.string()),
    ("initiator", pa.string()), ("initiator_name", pa.string()), ("vantage", pa.string()),
    ("session", pa.int32()), ("connection", pa.int32()), ("itt", pa.string()), ("cmdsn", pa.int64()),
    ("lun", pa.uint64()), ("op", pa.string()), ("iscsi_opcode", pa.int16()), ("kind", pa.string()),
    ("lba", pa.uint64()), ("bytes", pa.int64()), ("first_frame", pa.int64()),
    ("status_frame", pa.int64()), ("latency_ms", pa.float64()), ("round_trips", pa.int32()),
    ("ideal_round_trips", pa.int32()), ("excess_round_trips", pa.int32()),
    ("findings", pa.list_(pa.string())),
    *[(f"{p}_ms", pa.float64()) for p in PARTS],
    ("status", pa.string()), ("response", pa.int16()), ("sense_key", pa.string()),
    ("asc", pa.int16()), ("ascq", pa.int16()), ("completed", pa.bool_()),
    ("data_incomplete", pa.bool_()),
])
FINDINGS = pa.schema([
    ("capture_id", pa.string()), ("path", pa.string()), ("time", TS),
    ("target", pa.string()), ("target_name", pa.string()),
    ("initiator", pa.string()), ("initiator_name", pa.string()),
    ("session", pa.int32()), ("connection", pa.int32()), ("lun", pa.uint64()), ("kind", pa.string()),
    ("side", pa.string()), ("frame", pa.int64()), ("related", pa.string()), ("lost_ms", pa.float64()),
    ("itt", pa.string()), ("command_first_frame", pa.int64()), ("inferred", pa.list_(pa.string())),
    ("detail", pa.string()),
])
ADVICE = pa.struct([("kind", pa.string()), ("side", pa.string()), ("commands", pa.int64()),
                    ("occurrences", pa.int64()), ("time_lost_ms", pa.float64()),
                    ("touched_ms", pa.float64())])
CAPTURES = pa.schema([
    ("capture_id", pa.string()), ("path", pa.string()), ("status", pa.string()), ("error", pa.string()),
    ("exit_code", pa.int32()), ("seconds", pa.float64()), ("worker", pa.string()),
    ("size_bytes", pa.int64()), ("format", pa.string()), ("gzip", pa.bool_()),
    ("link_type", pa.string()), ("packets", pa.int64()), ("tcp_segments", pa.int64()),
    ("damaged", pa.bool_()), ("first_time", TS), ("duration_s", pa.float64()),
    ("sessions", pa.int32()), ("commands", pa.int64()), ("completed", pa.int64()),
    ("findings", pa.int64()), ("excess_round_trips", pa.int64()), ("latency_total_ms", pa.float64()),
    ("time_lost_ms", pa.float64()), ("advice", pa.list_(ADVICE)), ("notices", pa.int32()),
    ("tool_version", pa.string()),
])
SUMMARY_KEYS = [("target", pa.string()), ("target_name", pa.string()),
                ("initiator", pa.string()), ("lun", pa.uint64())]
SUMMARY_LUNS = pa.schema([
    *SUMMARY_KEYS, ("captures", pa.int64()), ("commands", pa.int64()), ("completed", pa.int64()),
    ("never_answered", pa.int64()), ("bytes_read", pa.int64()), ("bytes_written", pa.int64()),
    ("p50_ms", pa.float64()), ("p90_ms", pa.float64()), ("p99_ms", pa.float64()),
    ("p999_ms", pa.float64()), ("max_ms", pa.float64()), ("latency_total_ms", pa.float64()),
    ("excess_round_trips", pa.int64()),
])
SUMMARY_KINDS = pa.schema([
    *SUMMARY_KEYS, ("kind", pa.string()), ("findings", pa.int64()), ("commands", pa.int64()),
    ("time_lost_ms", pa.float64()), ("touched_ms", pa.float64()),
])


class Source:
    """One capture: where it is (an fsspec filesystem and path) and how it is named."""

    def __init__(self, url, fs, path, named):
        self.url, self.fs, self.path, self.named = url, fs, path, named
        self.capture_id = hashlib.sha1(url.encode()).hexdigest()[:16]

    @property
    def local(self):
        return "file" in _protocols(self.fs)


def _protocols(fs):
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)


def expand(inputs):
    """Sources for the inputs: files as named, directories walked, globs matched; sorted, unique."""
    from fsspec.core import url_to_fs
    out, seen = [], set()

    def add(url, fs, path, named):
        if url not in seen:
            seen.add(url)
            out.append(Source(url, fs, path, named))

    for item in inputs:
        chain = item.split("::", 1)[1] if "::" in item else None
        fs, path = url_to_fs(item)
        local = "file" in _protocols(fs)

        def url_of(p):
            if local:
                return p
            u = fs.unstrip_protocol(p)
            return f"{u}::{chain}" if chain else u

        if any(c in path for c in "*?["):
            hits = sorted(globmod.glob(path, recursive=True) if local else fs.glob(path))
            for p in hits:
                if fs.isfile(p):
                    add(url_of(p), fs, p, False)
                elif fs.isdir(p):
                    for q in sorted(fs.find(p)):
                        add(url_of(q), fs, q, False)
        elif fs.isdir(path):
            for p in sorted(fs.find(path)):
                add(url_of(p), fs, p, False)
        elif local and not os.path.exists(path):
            raise FileNotFoundError(item)
        else:
            add(url_of(path), fs, path, True)
    return out


def _endpoint_address(ep):
    """'10.0.0.1:33740' -> '10.0.0.1', '[2001:db8::1]:3260' -> '2001:db8::1'."""
    if ep is None:
        return None
    if ep.startswith("["):
        return ep[1:ep.index("]")]
    return ep.rsplit(":", 1)[0]


def _day(ns):
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).date().isoformat()


# The CLI's command and finding records as Arrow reads them (one schema for both, told apart by
# `type`; members it does not name are ignored, so new keys do not break the job).
RAW = pa.schema([
    ("type", pa.string()), ("capture_start_ns", pa.int64()), ("session", pa.int64()),
    ("connection", pa.int64()), ("itt", pa.string()), ("cmdsn", pa.int64()), ("lun", pa.uint64()),
    ("op", pa.string()), ("iscsi_opcode", pa.int64()), ("kind", pa.string()), ("lba", pa.uint64()),
    ("bytes", pa.int64()), ("first_frame", pa.int64()), ("status_frame", pa.int64()),
    ("time_ns", pa.int64()), ("latency_ms", pa.float64()), ("round_trips", pa.int64()),
    ("ideal_round_trips", pa.int64()), ("findings", pa.list_(pa.string())),
    ("breakdown_ms", pa.struct([(p, pa.float64()) for p in PARTS])), ("status", pa.string()),
    ("response", pa.int64()),
    ("sense", pa.struct([("key", pa.int64()), ("key_name", pa.string()), ("asc", pa.int64()),
                         ("ascq", pa.int64())])),
    ("completed", pa.bool_()), ("data_incomplete", pa.bool_()), ("side", pa.string()),
    ("frame", pa.int64()), ("lost_ms", pa.float64()), ("command_first_frame", pa.int64()),
    ("inferred", pa.list_(pa.string())), ("detail", pa.string()),
])
FAST = (b'{"type":"command"', b'{"type":"finding"')  # as the CLI writes them; any other order is parsed too
RELATED = re.compile(rb'"related":(\{[^{}]*\})')  # evidence frames: numbers and arrays, never an object


class _Output:
    """The CLI's JSON Lines, a chunk at a time: commands and findings parsed by Arrow, the few
    other records (sessions, notices, the capture, the run) by json."""

    def __init__(self):
        self.parts, self.related = [], []
        self.sessions, self.capture, self.run, self.notices = [], None, None, []
        self.bad_line = None

    def chunk(self, data):
        import pyarrow.json as pj
        body = []
        for raw in data.split(b"\n"):
            if raw.startswith(FAST):
                body.append(raw)
                continue
            if not raw.strip():
                continue
            try:
                r = json.loads(raw)
                t = r["type"]
            except (ValueError, KeyError, TypeError) as e:
                if self.bad_line is None:
                    self.bad_line = f"unparseable output: {e}: {raw[:120]!r}"
                continue
            if t in ("command", "finding"):  # written with other members first: Arrow reads it all the same
                body.append(raw)
            elif t == "session":
                self.sessions.append(r)
            elif t == "notice":
                self.notices.append(r)
            elif t == "capture":
                self.capture = r
            elif t == "run":
                self.run = r
        if not body or self.bad_line:
            return
        text = b"\n".join(body)
        try:
            table = pj.read_json(io.BytesIO(text), read_options=pj.ReadOptions(use_threads=False),
                                 parse_options=pj.ParseOptions(explicit_schema=RAW, unexpected_field_behavior="ignore"))
        except pa.ArrowInvalid as e:
            self.bad_line = f"unparseable output: {e}"
            return
        related = [m.decode() for m in RELATED.findall(text)]
        n = pa.compute.sum(pa.compute.equal(table["type"], "finding")).as_py() or 0
        if len(related) != n:  # not the shape expected: the slow way, line by line
            recs = [json.loads(line) for line in text.splitlines() if line.strip()]
            related = [json.dumps(r.get("related"), sort_keys=True) for r in recs if r.get("type") == "finding"]
        self.parts.append(table)
        self.related.extend(related)

    def table(self):
        return pa.concat_tables(self.parts) if self.parts else RAW.empty_table()


def _run_cli(source, binary, cli_args, timeout, chunk=16 << 20):
    """Runs the CLI on one source; returns (exit code, _Output, stderr tail, problem or None)."""
    remote = not source.local
    cmd = [binary, "--format", "jsonl", "-q", *cli_args, "-" if remote else source.path]
    # A session of its own, so a timeout kills whatever it started too (a wrapper's children would
    # otherwise hold its output open).
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if remote else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    problems = []

    def kill(why):
        problems.append(why)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill, [f"timed out after {timeout:g} s"])
    timer.start()
    err = []
    threads = [threading.Thread(target=lambda: err.append(proc.stderr.read()))]

    def feed():  # a remote file's bytes into the CLI's standard input, which reads them as a stream
        try:
            with source.fs.open(source.path, "rb") as f:
                while block := f.read(1 << 20):
                    proc.stdin.write(block)
        except BrokenPipeError:
            pass
        except Exception as e:  # noqa: BLE001 - any store error names the file's failure
            kill(f"reading {source.url}: {type(e).__name__}: {e}")
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass

    if remote:
        threads.append(threading.Thread(target=feed))
    for t in threads:
        t.start()
    out = _Output()
    while data := proc.stdout.read(chunk):  # whole lines, memory bounded by the chunk
        out.chunk(data + (proc.stdout.readline() if not data.endswith(b"\n") else b""))
    rc = proc.wait()
    timer.cancel()
    for t in threads:
        t.join()
    tail = (err[0] if err else b"").decode(errors="replace").strip()[-500:]
    return rc, out, tail, (problems[0] if problems else None)


def _status(rc, out, tail, problem):
    """(status, error) of one run: ok, damaged, unusable, failed, unparseable, timeout, unreadable."""
    if problem:
        return ("timeout" if problem.startswith("timed out") else "unreadable"), problem
    if rc is None or rc < 0 or rc not in (0, 1, 2):
        how = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exited {rc}"
        return "failed", f"iscsi-doctor {how}" + (f": {tail}" if tail else "")
    if out.bad_line:
        return "unparseable", out.bad_line
    if out.capture is None or out.run is None:
        return "unparseable", "output ended before the " + ("capture" if out.capture is None else "run") + " record"
    if not out.capture.get("usable", False):
        return "unusable", out.capture.get("error") or tail or "unusable input"
    if rc == 2:  # usable, yet usage error: an option in --cli-args, say
        return "failed", f"iscsi-doctor exited 2: {tail}"
    if out.capture.get("damaged"):
        errors = [n["message"] for n in out.notices if n.get("level") == "error"]
        return "damaged", errors[0] if errors else "damaged"
    return "ok", None


FACTS = pa.schema([("session", pa.int64()), ("connection", pa.int64()), ("target", pa.string()),
                   ("target_name", pa.string()), ("initiator", pa.string()),
                   ("initiator_name", pa.string()), ("vantage", pa.string())])


def _connection_facts(sessions):
    """Per (session, connection) its peers and names; connection null: the session's first, for
    connections past the CLI's listing cap."""
    rows = []
    for s in sessions:
        peers = s.get("peers") or {}
        rows.append(dict(session=s["session"], connection=None, target=peers.get("target"),
                         target_name=s.get("target_name"), initiator=_endpoint_address(peers.get("initiator")),
                         initiator_name=s.get("initiator_name"), vantage=s.get("vantage")))
        for c in s.get("connections") or []:
            rows.append(dict(session=s["session"], connection=c["connection"], target=c.get("target"),
                             target_name=s.get("target_name"), initiator=_endpoint_address(c.get("initiator")),
                             initiator_name=s.get("initiator_name"), vantage=c.get("vantage")))
    return pa.Table.from_pylist(rows, schema=FACTS)


def _with_facts(t, facts, names):
    """t with its connections' facts (names), in t's own row order (joined on the keys alone:
    Arrow joins carry no list columns)."""
    import pyarrow.compute as pc
    k = pa.table({"session": t["session"], "connection": t["connection"],
                  "_row": pa.array(range(t.num_rows), pa.int64())})
    listed = facts.filter(pc.is_valid(facts["connection"])).select(["session", "connection", *names])
    first = facts.filter(pc.is_null(facts["connection"])).select(["session", *names])
    first = first.rename_columns(["session", *[f"_s_{n}" for n in names]])
    k = k.join(listed, ["session", "connection"], join_type="left outer")
    k = k.join(first, ["session"], join_type="left outer").sort_by("_row")
    for n in names:
        t = t.append_column(n, pc.coalesce(k[n], k[f"_s_{n}"]))
    return t


def _tables(source, out):
    """The file's commands and findings as Arrow tables, with their connections' facts."""
    import pyarrow.compute as pc
    raw = out.table()
    facts = _connection_facts(out.sessions)
    names = ["target", "target_name", "initiator", "initiator_name", "vantage"]
    c = raw.filter(pc.equal(raw["type"], "command"))
    c = _with_facts(c, facts, names)
    excess = pc.max_element_wise(pc.subtract(c["round_trips"], c["ideal_round_trips"]), 0)
    cols = {"capture_id": pa.array([source.capture_id] * c.num_rows, pa.string()),
            "path": pa.array([source.url] * c.num_rows, pa.string()),
            "time": c["time_ns"].cast(TS), "excess_round_trips": excess,
            "sense_key": pc.struct_field(c["sense"], "key_name"), "asc": pc.struct_field(c["sense"], "asc"),
            "ascq": pc.struct_field(c["sense"], "ascq")}
    for p in PARTS:
        cols[f"{p}_ms"] = pc.struct_field(c["breakdown_ms"], p)
    cmds = pa.table({n: cols[n] if n in cols else c[n] for n in COMMANDS.names}).cast(COMMANDS)
    f = raw.filter(pc.equal(raw["type"], "finding"))
    f = f.append_column("related", pa.array(out.related, pa.string()))
    f = _with_facts(f, facts, names[:4])
    # a finding's time is its command's; a connection-level one's, the capture's start
    when = c.select(["session", "connection", "itt", "first_frame", "time_ns"]).rename_columns(
        ["session", "connection", "itt", "command_first_frame", "_when"])
    k = f.select(["session", "connection", "itt", "command_first_frame"]).append_column(
        "_row", pa.array(range(f.num_rows), pa.int64()))
    k = k.join(when, ["session", "connection", "itt", "command_first_frame"], join_type="left outer").sort_by("_row")
    start = (out.capture or {}).get("first_time_ns")
    t = pc.coalesce(k["_when"], f["capture_start_ns"], pa.scalar(start, pa.int64()))
    cols = {"capture_id": pa.array([source.capture_id] * f.num_rows, pa.string()),
            "path": pa.array([source.url] * f.num_rows, pa.string()), "time": t.cast(TS)}
    fnds = pa.table({n: cols[n] if n in cols else f[n] for n in FINDINGS.names}).cast(FINDINGS)
    return cmds, fnds


def _kind_rows(out, cmds, fnds, default_day):
    """Per (day, target, initiator, LUN, kind): [findings, commands carrying it, time lost, time
    touched, target name].

    Time lost is each completed command's own breakdown part for each kind it carries, as the CLI
    counts it. A command with both window kinds has one `window` part in the JSON: it is shared
    between them in the proportion the capture's own advice leaves to them, so per capture the
    sums equal the CLI's exclusive_ms."""
    import pyarrow.compute as pc
    advice = {a["kind"]: a["exclusive_ms"] for a in ((out.capture or {}).get("summary") or {}).get("advice", [])}
    keys = ["day", "target", "initiator", "lun"]
    done = cmds.filter(cmds["completed"])
    flat, parent = pc.list_flatten(done["findings"]), pc.list_parent_indices(done["findings"])
    x = done.select(["time", "target", "initiator", "lun", "target_name", *[f"{p}_ms" for p in PARTS]]).take(parent)
    x = x.append_column("kind", flat)
    cw = set(parent.filter(pc.equal(flat, "cwnd_limited")).to_pylist())
    rw = set(parent.filter(pc.equal(flat, "rwnd_limited")).to_pylist())
    both = pc.is_in(parent, pa.array(sorted(cw & rw), pa.int64()))
    window = x["window_ms"]
    alone = {k: pc.sum(window.filter(pc.and_(pc.equal(x["kind"], k), pc.invert(both)))).as_py() or 0.0
             for k in ("cwnd_limited", "rwnd_limited")}
    left = {k: max(0.0, advice.get(k, 0.0) - alone[k]) for k in alone}
    total = sum(left.values())
    lost = pa.array([0.0] * x.num_rows, pa.float64())
    for kind, part in KIND_PART.items():
        lost = pc.if_else(pc.equal(x["kind"], kind), x[f"{part}_ms"], lost)
    for kind in left:
        share = left[kind] / total if total > 0 else 0.5
        lost = pc.if_else(pc.and_(both, pc.equal(x["kind"], kind)), pc.multiply(window, share), lost)
    x = x.append_column("lost", pc.fill_null(lost, 0.0)).append_column("day", _days(x["time"], default_day))
    acc = {}
    for r in x.group_by([*keys, "kind"], use_threads=False).aggregate(
            [("kind", "count"), ("lost", "sum"), ("target_name", "max")]).to_pylist():
        acc[tuple(r[k] for k in [*keys, "kind"])] = [0, r["kind_count"], r["lost_sum"], 0.0, r["target_name_max"]]
    y = fnds.select(["time", "target", "initiator", "lun", "kind", "lost_ms", "target_name"])
    y = y.append_column("day", _days(y["time"], default_day))
    for r in y.group_by([*keys, "kind"], use_threads=False).aggregate(
            [("kind", "count"), ("lost_ms", "sum"), ("target_name", "max")]).to_pylist():
        row = acc.setdefault(tuple(r[k] for k in [*keys, "kind"]), [0, 0, 0.0, 0.0, None])
        row[0], row[3] = r["kind_count"], r["lost_ms_sum"] or 0.0
        row[4] = row[4] or r["target_name_max"]
    return list(acc.items())


def _write(fs, root, dataset, day, name, table):
    d = f"{root}/{dataset}/day={day}"
    fs.makedirs(d, exist_ok=True)
    import pyarrow.parquet as pq
    with fs.open(f"{d}/{name}.parquet", "wb") as f:
        pq.write_table(table, f, compression="zstd")


def _days(times, default):
    """UTC days of timestamps; `default` where there is no time."""
    import pyarrow.compute as pc
    return pc.fill_null(pc.strftime(times, format="%Y-%m-%d"), default)


def _by_day(table, default):
    """(day, rows of that day) for a table with a `time` column."""
    import pyarrow.compute as pc
    days = _days(table["time"], default)
    for d in pc.unique(days).to_pylist():
        yield d, table.filter(pc.equal(days, d))


def analyse(source, out_url, binary, cli_args, timeout):
    """On a worker: one capture through the CLI, its parts written; returns its captures row."""
    from fsspec.core import url_to_fs
    started = time.monotonic()
    row = {f.name: None for f in CAPTURES}
    row.update(capture_id=source.capture_id, path=source.url, worker=socket.gethostname())
    try:
        size = source.fs.info(source.path).get("size")
    except Exception:  # noqa: BLE001 - the size is a fact to report, not a condition to run
        size = None
    rc, out, tail, problem = _run_cli(source, binary, cli_args, timeout)
    status, error = _status(rc, out, tail, problem)
    if status == "unusable" and not source.named and out.capture.get("format") is None:
        return {"skipped": True, "row": row}  # not a capture: skipped, as the CLI skips it in a directory
    row.update(status=status, error=error, exit_code=rc)
    kinds = []
    if status in ("ok", "damaged"):
        cap = out.capture
        s = cap.get("summary") or {}
        row.update({k: cap.get(k) for k in ("format", "gzip", "link_type", "packets", "tcp_segments",
                                             "damaged", "duration_s", "commands")})
        row.update(first_time=cap.get("first_time_ns"), sessions=len(out.sessions),
                   completed=s.get("completed"), excess_round_trips=s.get("excess_round_trips"),
                   latency_total_ms=s.get("latency_total_ms"), time_lost_ms=s.get("exclusive_total_ms"),
                   findings=sum((s.get("finding_counts") or {}).values()), notices=len(out.notices),
                   tool_version=(out.run.get("tool") or {}).get("version"),
                   advice=[{"kind": a["kind"], "side": a["side"], "commands": a["commands"],
                            "occurrences": a["occurrences"], "time_lost_ms": a["exclusive_ms"],
                            "touched_ms": a["lost_ms"]} for a in s.get("advice", [])])
        size = size if size is not None else cap.get("size_bytes")
        cmds, fnds = _tables(source, out)
        day = _day(cap["first_time_ns"]) if cap.get("first_time_ns") else _file_day(source)
        fs, root = url_to_fs(out_url)
        for d, part in _by_day(cmds, day):
            _write(fs, root, "commands", d, source.capture_id, part)
        for d, part in _by_day(fnds, day):
            _write(fs, root, "findings", d, source.capture_id, part)
        kinds = _kind_rows(out, cmds, fnds, day)
    return {"row": _finish(row, source, size, started), "kinds": kinds}


def _finish(row, source, size, started):
    row["size_bytes"] = size
    row["seconds"] = round(time.monotonic() - started, 6)
    row["day"] = _day(row["first_time"]) if row.get("first_time") else _file_day(source)
    return row


def _file_day(source):
    """A capture without a first packet is filed under its file's modification day (else today)."""
    try:
        info = source.fs.info(source.path)
        for k in ("mtime", "LastModified", "last_modified", "created", "date_time"):
            v = info.get(k)
            if isinstance(v, (int, float)):
                return _day(int(v * 1e9))
            if isinstance(v, dt.datetime):
                return v.astimezone(dt.timezone.utc).date().isoformat()
            if isinstance(v, tuple) and len(v) >= 3:  # zip members: (Y, M, D, h, m, s)
                return dt.date(*v[:3]).isoformat()
    except Exception:  # noqa: BLE001
        pass
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def _which(binary):
    return shutil.which(binary)


def _lun_stats(g):
    """One summary/luns row from a group's SCSI commands (pandas), percentiles ranked as the CLI ranks."""
    import math

    import pandas as pd
    done = g[g["completed"]]
    lat = sorted(done["latency_ms"].tolist())

    def at(q):
        return lat[int(math.floor(q * (len(lat) - 1) + 0.5))] if lat else None

    return pd.DataFrame([{
        "target_name": g["target_name"].dropna().max() if g["target_name"].notna().any() else None,
        "captures": g["capture_id"].nunique(), "commands": len(g), "completed": len(done),
        "never_answered": int((~g["completed"]).sum()),
        "bytes_read": int(done.loc[done["kind"] == "read", "bytes"].sum()),
        "bytes_written": int(done.loc[done["kind"] == "write", "bytes"].sum()),
        "p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99), "p999_ms": at(0.999), "max_ms": at(1),
        "latency_total_ms": float(sum(lat)),
        "excess_round_trips": int(done["excess_round_trips"].fillna(0).sum())}])


def _summarise_luns(out_url, workers, on_disk):
    """summary/luns: a Dask groupby over every SCSI command of the fleet (shuffled by key)."""
    import dask.dataframe as dd
    import pandas as pd
    cols = ["capture_id", "time", "target", "target_name", "initiator", "lun", "kind", "bytes",
            "latency_ms", "excess_round_trips", "completed", "iscsi_opcode"]
    ddf = dd.read_parquet(f"{out_url}/commands", columns=cols, filters=[("iscsi_opcode", "==", 1)],
                          dataset={"partitioning": "hive"})
    ddf = ddf.assign(day=ddf["time"].dt.strftime("%Y-%m-%d"))
    # One file is one partition; coalescing small ones (no shuffle) saves a task set per file.
    want = max(workers, int(on_disk // (32 << 20)) + 1)
    if ddf.npartitions > want:
        ddf = ddf.repartition(npartitions=want)
    meta = pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SUMMARY_LUNS
                         if f.name not in ("target", "initiator", "lun")})
    meta["target_name"] = meta["target_name"].astype(object)
    res = ddf.groupby(["day", "target", "initiator", "lun"], dropna=False).apply(_lun_stats, meta=meta)
    return res.compute().reset_index(level=[0, 1, 2, 3]).reset_index(drop=True)


def _write_dataset(fs, root, name, schema, frame_by_day, today):
    """Writes one file per day; a dataset without rows gets one empty file so queries can read it."""
    wrote = False
    for day, table in frame_by_day:
        if table.num_rows:
            _write(fs, root, name, day, "part-0", table.select(schema.names).cast(schema))
            wrote = True
    if not wrote:
        _write(fs, root, name, today, "empty", schema.empty_table())


def _split_days(rows, schema):
    by = {}
    for r in rows:
        by.setdefault(r["day"], []).append(r)
    return [(d, pa.Table.from_pylist(rs, schema=schema)) for d, rs in sorted(by.items())]


def run_job(args):
    from dask.distributed import Client, LocalCluster, as_completed
    from fsspec.core import url_to_fs
    import cloudpickle

    try:
        sources = expand(args.inputs)
    except (FileNotFoundError, ValueError) as e:
        print(f"iscsi-doctor-fleet: no such input: {e}", file=sys.stderr)
        return 2
    if not sources:
        print("iscsi-doctor-fleet: the inputs name no file", file=sys.stderr)
        return 2
    fs, root = url_to_fs(args.output)
    if fs.exists(root) and fs.ls(root) and not args.overwrite:
        print(f"iscsi-doctor-fleet: {args.output} exists and is not empty (--overwrite replaces it)",
              file=sys.stderr)
        return 2
    out_url = fs.unstrip_protocol(root) if "file" not in _protocols(fs) else os.path.abspath(root)

    # Workers get this file's functions by value: nothing of it needs installing on them.
    if __name__ != "__main__":
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    started = time.monotonic()
    cluster = None
    try:
        if args.scheduler:
            client = Client(args.scheduler, timeout="30s")
        else:
            cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=40)
            client = Client(cluster)
    except (OSError, TimeoutError) as e:
        print(f"iscsi-doctor-fleet: cannot reach the cluster: {e}", file=sys.stderr)
        return 1
    up = time.monotonic()
    try:
        missing = [w for w, p in client.run(_which, args.iscsi_doctor).items() if not p]
        if missing:
            print(f"iscsi-doctor-fleet: {args.iscsi_doctor} not found on worker(s) {', '.join(missing)}",
                  file=sys.stderr)
            return 2
        if fs.exists(root):  # replaced only once the cluster is there to make it anew
            fs.rm(root, recursive=True)
        fs.makedirs(root, exist_ok=True)
        cli_args = shlex.split(args.cli_args or "")
        futures = client.map(analyse, sources, out_url=out_url, binary=args.iscsi_doctor,
                             cli_args=cli_args, timeout=args.timeout, pure=False)
        by_key = {f.key: s for f, s in zip(futures, sources)}
        rows, kinds, skipped = [], [], 0
        for fut in as_completed(futures):
            try:
                r = fut.result()
            except Exception as e:  # noqa: BLE001 - a worker died on it: the file's failure, not the job's
                s = by_key[fut.key]
                row = {f.name: None for f in CAPTURES}
                row.update(capture_id=s.capture_id, path=s.url, status="failed",
                           error=f"{type(e).__name__}: {e}", day=_file_day(s))
                rows.append(row)
                continue
            if r.get("skipped"):
                skipped += 1
                continue
            rows.append(r["row"])
            kinds.extend(r["kinds"])
            if not args.quiet and len(rows) % 100 == 0:
                print(f"iscsi-doctor-fleet: {len(rows) + skipped} of {len(sources)} files", file=sys.stderr)
        analysed_at = time.monotonic()
        today = dt.datetime.now(dt.timezone.utc).date().isoformat()
        _write_dataset(fs, root, "captures", CAPTURES, _split_days(rows, CAPTURES), today)
        analysed = [r for r in rows if r["status"] in ("ok", "damaged")]
        for name, schema in (("commands", COMMANDS), ("findings", FINDINGS)):
            if not fs.exists(f"{root}/{name}"):
                _write(fs, root, name, today, "empty", schema.empty_table())
        # summary/kinds: sums of the files' own rows; summary/luns: percentiles need every command
        acc = {}
        for key, (n_f, n_c, lost, touched, name) in kinds:
            a = acc.setdefault(tuple(key), [0, 0, 0.0, 0.0, None])
            for i, v in enumerate((n_f, n_c, lost, touched)):
                a[i] += v
            a[4] = max(filter(None, (a[4], name)), default=None)
        krows = [dict(day=k[0], target=k[1], initiator=k[2], lun=k[3], kind=k[4], findings=v[0],
                      commands=v[1], time_lost_ms=v[2], touched_ms=v[3], target_name=v[4])
                 for k, v in acc.items()]
        _write_dataset(fs, root, "summary/kinds", SUMMARY_KINDS, _split_days(krows, SUMMARY_KINDS), today)
        workers = max(1, len(client.scheduler_info()["workers"]))
        on_disk = fs.du(f"{root}/commands")
        luns = _summarise_luns(out_url, workers, on_disk) if sum(r["commands"] or 0 for r in analysed) else None
        lrows = [] if luns is None else luns.to_dict("records")
        for r in lrows:
            r["target_name"] = r["target_name"] if isinstance(r["target_name"], str) else None
        _write_dataset(fs, root, "summary/luns", SUMMARY_LUNS, _split_days(lrows, SUMMARY_LUNS), today)
        done = time.monotonic()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"iscsi-doctor-fleet: {len(rows)} files ("
          + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
          + (f"; {skipped} not captures, skipped" if skipped else "")
          + f"), {sum(r['commands'] or 0 for r in analysed)} commands -> {args.output} in {done - started:.2f} s"
          + f" (cluster {up - started:.2f} s, analysis {analysed_at - up:.2f} s, summary {done - analysed_at:.2f} s)")
    return 0


# --- queries -------------------------------------------------------------------------------------

QUERIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "queries")


def connect(out, variables=()):
    """A DuckDB connection with the fleet's views (scale/queries/_views.sql) on OUT."""
    import duckdb
    con = duckdb.connect()
    con.execute("SET VARIABLE fleet = ?", [str(out).rstrip("/")])
    for name, value in variables:
        con.execute(f"SET VARIABLE {name} = ?", [value])
    with open(os.path.join(QUERIES, "_views.sql")) as f:
        con.execute(f.read())
    return con


def query_file(name):
    if os.path.exists(name):
        return name
    path = os.path.join(QUERIES, name if name.endswith(".sql") else f"{name}.sql")
    if not os.path.exists(path):
        raise FileNotFoundError(name)
    return path


def run_query(args):
    variables = []
    for s in args.set or []:
        if "=" not in s:
            print(f"iscsi-doctor-fleet: --set wants NAME=VALUE, not {s}", file=sys.stderr)
            return 2
        variables.append(tuple(s.split("=", 1)))
    try:
        files = [query_file(q) for q in args.queries]
    except FileNotFoundError as e:
        names = sorted(f[:-4] for f in os.listdir(QUERIES) if f.endswith(".sql") and not f.startswith("_"))
        print(f"iscsi-doctor-fleet: no query {e}; the queries: {', '.join(names)}", file=sys.stderr)
        return 2
    if not os.path.isdir(args.output) and "://" not in args.output:
        print(f"iscsi-doctor-fleet: no such output directory: {args.output}", file=sys.stderr)
        return 2
    import duckdb
    try:
        con = connect(args.output, variables)
        for q in files:
            with open(q) as f:
                rel = con.sql(f.read())
            if len(files) > 1:
                print(f"-- {os.path.basename(q)}")
            if args.csv:
                print(rel.df().to_csv(index=False), end="")
            else:
                rel.show(max_rows=args.max_rows, max_width=200)
    except duckdb.Error as e:
        print(f"iscsi-doctor-fleet: {e}", file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="iscsi_doctor_fleet.py", description=__doc__.split("\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="analyse captures into Parquet datasets under OUT")
    r.add_argument("inputs", nargs="+", metavar="INPUT", help="capture file, directory, glob or fsspec URL")
    r.add_argument("-o", "--output", required=True, help="output directory (local path or fsspec URL)")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--scheduler", metavar="ADDRESS", help="use this Dask scheduler (tcp://host:8786)")
    g.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="else start N local worker processes (default: the number of cores)")
    r.add_argument("--iscsi-doctor", default=os.environ.get("ISCSI_DOCTOR", "iscsi-doctor"), metavar="PATH",
                   help="the CLI on the workers (default: $ISCSI_DOCTOR, else iscsi-doctor on PATH)")
    r.add_argument("--cli-args", metavar="ARGS", help="more options for every CLI run, e.g. '--port 3260,860'")
    r.add_argument("--timeout", type=float, default=3600, metavar="S", help="per file (default 3600)")
    r.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress lines on standard error")
    q = sub.add_parser("query", help="run queries of scale/queries (or SQL files) with DuckDB over OUT")
    q.add_argument("output", metavar="OUT")
    q.add_argument("queries", nargs="+", metavar="QUERY", help="a name in scale/queries or a .sql file")
    q.add_argument("--set", action="append", metavar="NAME=VALUE", help="a DuckDB variable, e.g. until=2026-11-25")
    q.add_argument("--csv", action="store_true", help="CSV instead of a table")
    q.add_argument("--max-rows", type=int, default=100)
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    if args.cmd == "run":
        if args.workers is not None and args.workers < 1:
            print("iscsi-doctor-fleet: --workers must be at least 1", file=sys.stderr)
            return 2
        return run_job(args)
    return run_query(args)


if __name__ == "__main__":
    sys.exit(main())
