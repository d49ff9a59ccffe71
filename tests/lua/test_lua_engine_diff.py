# SPDX-License-Identifier: GPL-2.0-or-later
"""The Lua port against the engine, field by field, on every capture the engine is tested on.

For each capture of captures/fixtures, captures/wireshark-wiki, tests/corpus and the fuzz
regressions (tests/fuzz/regressions/fuzz_capture, tests/fuzz/regressions/captures), the analysis
core of lua/iscsi_doctor.lua (through tests/lua/run_core.lua, json mode) and
`iscsi-doctor --format json` must give the same commands and the same findings, in the same
order, every field equal: times to 1 us, the finding's fix equal to the engine's fix_for() text
for its kind and side (engine/src/advice/summary.cpp, which the CLI prints as the advice's fix);
so are the connection facts and the sessions. Commands past a cap (open commands) are not
listed by the engine, so the lists' lengths also check that the Lua applies the same caps.
Captures the CLI cannot read are skipped with its reason. gzip is undone here (a truncated stream
as far as it goes, as the CLI reads it) and pcapng converted with editcap, since run_core reads
pcap only.
"""
import bz2
import gzip
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest

import lua_compare as lc

ROOT = lc.ROOT
RUN_CORE = ROOT / "tests" / "lua" / "run_core.lua"
LUA = os.environ.get("LUA", "lua5.4")
TOL_MS = 1e-3  # 1 us

CAPTURE_DIRS = ["captures/fixtures", "captures/wireshark-wiki", "tests/corpus",
                "tests/fuzz/regressions/fuzz_capture", "tests/fuzz/regressions/captures"]
NOT_CAPTURES = {".py", ".json", ".txt", ".md", ".cmake"}

# Captures whose difference is known and not fixed yet: name -> reason (strict xfail).
XFAIL = {}


def all_captures():
    out = []
    for d in CAPTURE_DIRS:
        for p in sorted((ROOT / d).iterdir()):
            if p.is_file() and p.suffix not in NOT_CAPTURES and p.name != "CMakeLists.txt":
                out.append(p)
    return out


CAPTURES = all_captures()


def capture_id(p):
    return f"{p.parent.name}/{p.name}"


# ---------------------------------------------------------------------------------------------
# The engine's fix texts: the finding-kind table (engine/include/iscsi_doctor/finding_kinds.hpp);
# an empty initiator text means the target's.

LITERALS = re.compile(r'"((?:[^"\\]|\\.)*)"|//[^\n]*|/\*.*?\*/|(\S)', re.S)


def string_groups(code, seps=","):
    """C++ string literals in `code`, adjacent ones joined; a token in `seps` ends a group."""
    groups, cur = [], None
    for m in LITERALS.finditer(code):
        if m.group(0).startswith('"'):
            cur = (cur or "") + m.group(1).encode().decode("unicode_escape")
        elif m.group(2) and m.group(2) in seps and cur is not None:
            groups.append(cur)
            cur = None
    if cur is not None:
        groups.append(cur)
    return groups


def engine_fixes():
    table = ROOT / "engine" / "include" / "iscsi_doctor" / "finding_kinds.hpp"
    rows = re.findall(r"\{FindingKind::(\w+),(.*?)\}(?=,?\s*(?:\{FindingKind::|\}\};))", table.read_text(), re.S)
    assert rows, f"no rows in {table}"
    fixes = {}
    for kind, row in rows:
        groups = string_groups(row)
        fixes[(kind, "target")], fixes[(kind, "initiator")] = groups[-2], groups[-1] or groups[-2]
        fixes[(kind, "network")] = groups[-2]  # link_limited: the path's (fix_target)
    return fixes


FIXES = engine_fixes()


def test_fix_texts_parsed():
    kinds = set(re.findall(r'"(\w+)"', re.search(r"local FINDING_KINDS = \{(.*?)\}",
                                                  lc.PLUGIN.read_text(), re.S).group(1)))
    assert {k for k, _ in FIXES} == kinds


# ---------------------------------------------------------------------------------------------
# Running both sides


def cli_json(path, *extra):
    out = subprocess.run([lc.BINARY, "--format", "json", *extra, str(path)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode in (0, 1, 2), f"CLI exit {out.returncode}: {out.stderr[-2000:]}"
    return json.loads(out.stdout)


def gunzip_partial(raw):
    """As much of a gzip stream as inflates (a truncated one up to where it stops)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        return d.decompress(raw)
    except zlib.error:
        return gzip.decompress(raw)


def to_pcap(path, tmp):
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gunzip_partial(raw)
    elif raw[:6] == b"\xfd7zXZ\x00":  # xz and bzip2 seeds: Wireshark's to read, not the core's
        raw = lzma.decompress(raw)
    elif raw[:3] == b"BZh":
        raw = bz2.decompress(raw)
    plain = Path(tmp) / "in.cap"
    plain.write_bytes(raw)
    if raw[:4] == b"\x0a\x0d\x0d\x0a":
        if not shutil.which("editcap"):
            pytest.skip("editcap not installed (pcapng)")
        conv = Path(tmp) / "conv.pcap"
        # Nanosecond pcap: pcapng timestamps keep their resolution.
        subprocess.run(["editcap", "-F", "nsecpcap", str(plain), str(conv)], check=True,
                       capture_output=True)
        return conv
    return plain


def lua_json(pcap, lua=LUA):
    out = subprocess.run([lua, str(RUN_CORE), str(lc.PLUGIN), str(pcap), "json"],
                         capture_output=True, timeout=600)
    assert out.returncode == 0, f"{lua} run_core.lua: {out.stderr[-3000:].decode(errors='replace')}"
    got = {"command": [], "finding": [], "connection": [], "session": [], "end": []}
    for line in out.stdout.decode("utf-8", errors="replace").splitlines():
        o = json.loads(line)
        got[o.pop("type")].append(o)
    assert len(got["end"]) == 1, "run_core.lua printed no end line"
    return got


# ---------------------------------------------------------------------------------------------
# Comparing


def close(a, b):
    if a is None or b is None:
        return a is b
    return abs(a - b) <= TOL_MS


def command_diffs(cli, lua, base_ns):
    d = []
    for k in ("session", "connection", "itt", "cmdsn", "op", "iscsi_opcode", "kind", "lba",
              "bytes", "first_frame", "status_frame", "round_trips", "ideal_round_trips",
              "findings", "status", "response", "sense", "completed", "data_incomplete"):
        got = cli.get(k)
        if k == "sense" and got:  # asc_name: the CLI's report names the pair from its T10 table
            got = {n: v for n, v in got.items() if n != "asc_name"}
        if got != lua.get(k):
            d.append(k)
    # Lua times are doubles from the first packet's second: exact within 2^53 ns (104 days).
    # A pcapng time beyond pcap's 32-bit seconds (a fuzzed one) cannot reach run_core.lua.
    if 0 <= cli["time_ns"] < 2**32 * 10**9 and abs(cli["time_ns"] - base_ns - lua["time_ns"]) > TOL_MS * 1e6:
        d.append("time_ns")
    if not close(cli["latency_ms"], lua["latency_ms"]):
        d.append("latency_ms")
    for part, v in cli["breakdown_ms"].items():
        if not close(v, lua["breakdown_ms"].get(part)):
            d.append(f"breakdown_ms.{part}")
    return d


def finding_diffs(cli, lua):
    d = []
    for k in ("kind", "side", "session", "connection", "frame", "related", "itt",
              "command_first_frame", "detail", "inferred"):
        if cli.get(k) != lua.get(k):
            d.append(k)
    if not close(cli["lost_ms"], lua["lost_ms"]):
        d.append("lost_ms")
    if lua.get("fix") != FIXES.get((cli["kind"], cli["side"])):
        d.append("fix")
    return d


def connection_diffs(cli, lua):
    d = [k for k in ("connection", "session", "vantage", "mss", "window_scale", "offload_segments", "nagle_off_frame", "keys",
                     "header_digest", "data_digest",
                     "saw_handshake", "saw_login", "mid_session_start", "counts")
         if cli.get(k) != lua.get(k)]
    for k in ("rtt_ms", "rtt_initiator_ms", "rtt_target_ms"):
        if not close(cli[k], lua[k]):
            d.append(k)
    return d


def session_diffs(cli, lua):
    return [k for k in ("session", "initiator_name", "target_name", "session_type", "isid", "tsih",
                        "connections") if cli.get(k) != lua.get(k)]


def first_difference(what, cli_list, lua_list, diff_fn):
    for i, (c, l) in enumerate(zip(cli_list, lua_list)):
        d = diff_fn(c, l)
        if d:
            return (f"{what} #{i} differs in {d}:\n  CLI: {json.dumps(c, sort_keys=True)}\n"
                    f"  Lua: {json.dumps(l, sort_keys=True)}")
    if len(cli_list) != len(lua_list):
        n = min(len(cli_list), len(lua_list))
        extra = cli_list[n] if len(cli_list) > n else lua_list[n]
        side = "CLI" if len(cli_list) > n else "Lua"
        return (f"{what}: CLI {len(cli_list)}, Lua {len(lua_list)}; first extra ({side}) #{n}: "
                f"{json.dumps(extra, sort_keys=True)}")
    return None


@pytest.fixture(scope="module")
def need_tools():
    if not Path(lc.BINARY).exists():
        pytest.skip(f"CLI not built: {lc.BINARY} (set ISCSI_DOCTOR)")
    if not shutil.which(LUA):
        pytest.skip(f"{LUA} not installed")


def compare(path, lua=LUA, cli_args=()):
    rep = cli_json(path, *cli_args)
    assert len(rep["captures"]) == 1
    cap = rep["captures"][0]
    if not cap["usable"]:
        pytest.skip(f"CLI: capture not usable: {cap['error']}")
    with tempfile.TemporaryDirectory() as tmp:
        got = lua_json(to_pcap(path, tmp), lua)
    cmds, finds = got["command"], got["finding"]
    base_ns = got["end"][0]["base_s"] * 1_000_000_000
    for a in (cap["summary"] or {}).get("advice", []):
        assert a["fix"] == FIXES[(a["kind"], a["side"])], f"advice fix of {a['kind']}"
    # Connection facts: the CLI lists up to 4096 connections (the rest only counted), by id.
    cli_conns = sorted((dict(c, session=s["session"]) for s in rep["sessions"] for c in s["connections"]),
                       key=lambda c: c["connection"])
    listed = {c["connection"] for c in cli_conns}
    lua_conns = [c for c in got["connection"] if c["connection"] in listed]
    cli_sessions = [dict(s, connections=sorted(c["connection"] for c in s["connections"]))
                    for s in rep["sessions"]]
    lua_sessions = [dict(s, connections=sorted(c for c in s["connections"] if c in listed))
                    for s in got["session"] if s["connections"]]
    problems = []
    if len(got["connection"]) != len(listed) + cap["connections_unlisted"]["connections"]:
        problems.append(f"connections: CLI {len(listed)} listed + "
                        f"{cap['connections_unlisted']['connections']} unlisted, Lua {len(got['connection'])}")
    for what, c, l, fn in (("command", rep["commands"], cmds, lambda a, b: command_diffs(a, b, base_ns)),
                           ("finding", rep["findings"], finds, finding_diffs),
                           ("connection", cli_conns, lua_conns, connection_diffs),
                           ("session", cli_sessions, lua_sessions, session_diffs)):
        p = first_difference(what, c, l, fn)
        if p:
            problems.append(p)
    if problems:
        caps = [n["message"] for n in rep["notices"] if "cap (" in n["message"]]
        if caps:  # commands past a cap are not listed by the engine: counts must still agree
            problems.append("CLI cap notices: " + "; ".join(caps[:5]))
        summary = (f"{path.name}: CLI {len(rep['commands'])} commands "
                   f"({sum(c['completed'] for c in rep['commands'])} completed), "
                   f"{len(rep['findings'])} findings; Lua {len(cmds)} commands "
                   f"({sum(c['completed'] for c in cmds)} completed), {len(finds)} findings")
        pytest.fail(summary + "\n" + "\n".join(problems), pytrace=False)


def params():
    out = []
    for p in CAPTURES:
        marks = []
        if capture_id(p) in XFAIL:
            marks.append(pytest.mark.xfail(reason=XFAIL[capture_id(p)], strict=True))
        out.append(pytest.param(p, id=capture_id(p), marks=marks))
    return out


def test_capture_list():
    """Every directory of captures the engine's tests use is here, with its captures."""
    names = {capture_id(p) for p in CAPTURES}
    assert len(CAPTURES) >= 90
    assert all(k in names for k in XFAIL), set(XFAIL) - names
    for d in CAPTURE_DIRS:
        assert any(p.parent == ROOT / d for p in CAPTURES), d


@pytest.mark.parametrize("path", params())
def test_lua_equals_engine(need_tools, path):
    compare(path)


# Lua 5.1 (Wireshark up to 4.2) on small captures that exercise 64-bit LBAs, digests, the
# MRDSL bound and big-endian nanosecond pcap: the same output as the default interpreter.
OTHER_LUA_CAPTURES = ["tests/fuzz/regressions/captures/html-lba-overflow.pcap",
                      "tests/fuzz/regressions/fuzz_capture/seed-osd-digests-be-nsec.pcap",
                      "tests/corpus/bhs-huge-length.pcap.gz",
                      "captures/fixtures/scripted-nagle-read-1k--initiator.pcap.gz"]


@pytest.mark.parametrize("version", ["5.1", "5.2", "5.3"])
@pytest.mark.parametrize("name", OTHER_LUA_CAPTURES, ids=[Path(n).name for n in OTHER_LUA_CAPTURES])
def test_same_json_under_other_lua(need_tools, version, name):
    lua = shutil.which(f"lua{version}")
    if not lua:
        pytest.skip(f"lua{version} not installed")
    with tempfile.TemporaryDirectory() as tmp:
        pcap = to_pcap(ROOT / name, tmp)
        assert lua_json(pcap, lua) == lua_json(pcap, LUA)


# iSCSI on another port, joined mid-session (no SYN, no login): found from the PDUs' structure
# (docs/rules.md "Ports") by the Lua core as by the engine, on lab captures whose target port is
# rewritten (tests/integration/test_port_detection.py's rewriter).
MOVED = ["captures/fixtures/scripted-nagle-read-8k-joined--initiator.pcap.gz",
         "captures/fixtures/stock-idle-read-joined--target.pcap.gz",
         "captures/fixtures/initiator-nagle-write-1k-joined--target.pcap.gz"]


@pytest.mark.parametrize("name", MOVED, ids=[Path(n).name for n in MOVED])
def test_lua_equals_engine_on_another_port(need_tools, name, tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from test_port_detection import rewrite_port
    moved = tmp_path / "moved.pcap"
    rewrite_port(ROOT / name, moved, 3260, 13260)
    assert cli_json(moved)["commands"], "the engine finds the moved connection"
    compare(moved)
