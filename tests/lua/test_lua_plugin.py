# SPDX-License-Identifier: GPL-2.0-or-later
"""The Lua plugin (lua/iscsi_doctor.lua) against the CLI, docs/rules.md and the manifest.

- every capture of captures/MANIFEST.json plus the Wireshark-wiki captures, through
  `tshark -X lua_script:lua/iscsi_doctor.lua`, one pass and two passes (-2): the (evidence frame,
  finding) pairs and the (status frame, ITT, round trips) of every completed command equal
  `iscsi-doctor --format json`, for every finding kind the plugin supports;
- the script loads without errors, registers its fields, and `-Y` filters on them;
- docs/rules.md is the single source of truth: its "Rule constants" table equals the plugin's
  RULES table and the engine's sources, and the plugin records the document's digest, so any
  change of the rules fails here until the plugin follows;
- the analysis core alone gives the CLI's verdicts under every Lua 5.1-5.4 interpreter installed.
"""
import collections
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import lua_compare as lc

sys.path.insert(0, str(lc.ROOT / "tests" / "captures"))
import link_types  # noqa: E402

ROOT = lc.ROOT
PLUGIN = lc.PLUGIN
RULES_MD = ROOT / "docs" / "rules.md"
LUA_SRC = PLUGIN.read_text()

# Finding kinds left out of the comparison, with the reason. Empty: the plugin ports every rule.
# (A kind the plugin cannot reproduce goes here and in lua/README.md, "What it does not do".)
EXCLUDED = {}

# `serialized` is a connection-level verdict known only at the end of the capture: a one-pass
# tshark has printed every frame by then, so in one pass it is checked in the end-of-run report
# (-o iscsi_doctor_lua.report:TRUE) instead of on its evidence frame.
END_ONLY = {"serialized"}

NAGLE_FIXTURE = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"


def lua_table(name):
    """`local NAME = { ... }` from the plugin source, as a dict of key -> number or string."""
    m = re.search(r"^local %s = \{\n(.*?)^\}" % name, LUA_SRC, re.S | re.M)
    assert m, f"no table {name} in {PLUGIN}"
    out = {}
    for k, v in re.findall(r"^\s*(\w+)\s*=\s*([^,\n]+),", m.group(1), re.M):
        v = v.strip()
        out[k] = v.strip('"') if v.startswith('"') else float(v)
    return out


def lua_list(name):
    m = re.search(r"^local %s = \{(.*?)\}" % name, LUA_SRC, re.S | re.M)
    assert m, f"no list {name} in {PLUGIN}"
    return re.findall(r'"(\w+)"', m.group(1))


SUPPORTED = set(lua_list("FINDING_KINDS")) - set(EXCLUDED)


def doc_constants():
    text = RULES_MD.read_text()
    sec = text.split("## Rule constants", 1)
    assert len(sec) == 2, "docs/rules.md has no 'Rule constants' section"
    rows = re.findall(r"^\| `(\w+)` \| ([0-9.]+) \|", sec[1], re.M)
    assert rows, "docs/rules.md: empty 'Rule constants' table"
    return {k: float(v) for k, v in rows}


@pytest.fixture(scope="module")
def cli():
    if not Path(lc.BINARY).exists():
        pytest.skip(f"CLI not built: {lc.BINARY} (set ISCSI_DOCTOR)")
    cache = {}

    def report(path):
        if path not in cache:
            cache[path] = lc.cli_report(path)
        return cache[path]
    return report


def need_tshark():
    if not shutil.which(lc.TSHARK):
        pytest.skip("tshark not installed")


CAPTURES = lc.captures()


def test_capture_list_complete():
    """Every manifest capture and every Wireshark-wiki capture is compared."""
    names = {p.name for p in CAPTURES}
    manifest = json.loads(lc.MANIFEST.read_text())["captures"]
    assert {Path(e["file"]).name for e in manifest} <= names
    assert {p.name for p in (ROOT / "captures" / "wireshark-wiki").glob("*.pcap*")} <= names
    assert len(CAPTURES) >= 40


@pytest.mark.parametrize("two_pass", [False, True], ids=["1pass", "2pass"])
@pytest.mark.parametrize("path", CAPTURES, ids=[p.name.split(".")[0] for p in CAPTURES])
def test_same_verdicts_as_cli(cli, path, two_pass):
    need_tshark()
    rep = cli(path)
    kinds = SUPPORTED if two_pass else SUPPORTED - END_ONLY
    want_f, want_c = lc.cli_sets(rep, kinds)
    extra = [] if two_pass else ["-o", "iscsi_doctor_lua.report:TRUE"]
    out = lc.tshark(path, two_pass, extra)
    fields = "\n".join(l for l in out.splitlines() if re.match(r"\d+\t", l))
    got_f, got_c, shown = lc.lua_sets(fields)
    got_f = collections.Counter({k: n for k, n in got_f.items() if k[1] in kinds})
    joined = {c["connection"] for s in rep["sessions"] for c in s["connections"] if not c["saw_handshake"]}
    if not two_pass and joined:
        # A joined connection (no SYN) is judged when its probation ends (docs/rules.md "Joined
        # connections"), which can be when the capture ends: one pass has then printed its frames,
        # and its results are only in the end-of-run report (checked below). No other result may
        # be missing, and none may differ.
        late = {(c["status_frame"], c["itt"], c["round_trips"]) for c in rep["commands"] if c["connection"] in joined}
        assert not got_c - want_c and not got_f - want_f, f"Lua only: {got_c - want_c}, {got_f - want_f}"
        assert set(want_c - got_c) <= late, f"commands (CLI only): {set(want_c - got_c) - late}"
    else:
        assert got_f == want_f, f"findings (CLI only, Lua only): {lc.diff(want_f, got_f)}"
        assert got_c == want_c, f"commands (CLI only, Lua only): {lc.diff(want_c, got_c)}"
    if two_pass:
        # Results sit on their evidence frames once the first pass is over.
        assert all(f == e for f, e, _ in shown), [x for x in shown if x[0] != x[1]][:10]
    else:
        # The end-of-run report holds every finding, the end-only ones included.
        found = collections.Counter()
        for line in out.splitlines():
            if line.startswith("finding "):
                _, frame, kind = line.split()[:3]
                if kind in SUPPORTED:
                    found[(int(frame), kind)] += 1
        want_all, _ = lc.cli_sets(rep, SUPPORTED)
        assert found == want_all, f"report (CLI only, Lua only): {lc.diff(want_all, found)}"


def test_two_pass_without_filter_still_analyses(cli):
    """tshark's first pass of -2 builds no protocol tree when nothing filters: the plugin reads
    the frames' bytes, not fields, so it analyses there all the same, and the second pass shows
    every result (the end-of-capture serialized one too) on its evidence frame."""
    need_tshark()
    rep = cli(NAGLE_FIXTURE)
    want_f, want_c = lc.cli_sets(rep, SUPPORTED)
    cmd = ["-X", f"lua_script:{PLUGIN}", "-r", str(NAGLE_FIXTURE), "-2", "-T", "fields",
           "-E", "occurrence=a", "-E", "aggregator=;"]
    for f in lc.FIELDS:
        cmd += ["-e", f]
    out = lc.run_tshark(cmd, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got_f, got_c, shown = lc.lua_sets(out.stdout)
    assert want_f and got_f == want_f, lc.diff(want_f, got_f)
    assert got_c == want_c, lc.diff(want_c, got_c)
    assert all(f == e for f, e, _ in shown), [x for x in shown if x[0] != x[1]][:10]


@pytest.mark.parametrize("kind", sorted(link_types.TRANSFORMS))
def test_every_link_layer_the_cli_reads(cli, kind):
    """Wireshark does not tell a Lua plugin a frame's link type: the plugin reads the frame's bytes
    with the decoder whose segment carries the ports Wireshark's TCP dissector saw. A capture
    re-encapsulated in each link layer the CLI reads (Linux cooked v1/v2, raw IP, loopback, VLAN
    tags, IPv6, a trailer) gives the plugin the verdicts the CLI gives on the original."""
    need_tshark()
    name = "scsi-osd-example-001" if kind != "padded" else "iscsi-tapel"
    original = next(p for p in CAPTURES if p.name.split(".")[0] == name)
    want_f, want_c = lc.cli_sets(cli(original), SUPPORTED)
    assert len(want_c) > 10
    with link_types.relinked(original, kind) as path:
        got_f, got_c, _ = lc.lua_sets(lc.tshark(path, True))
    assert got_c == want_c, f"commands (CLI only, Lua only): {lc.diff(want_c, got_c)}"
    assert got_f == want_f, f"findings (CLI only, Lua only): {lc.diff(want_f, got_f)}"


def run_tshark(*args, timeout=600):
    need_tshark()
    first = list(args[:2]) if args[0] == "-G" else []  # -G must come first
    out = lc.run_tshark([*first, "-X", f"lua_script:{PLUGIN}", *args[len(first):]], timeout=timeout)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def test_script_loads_and_registers_fields():
    out = run_tshark("-G", "fields")
    assert "Lua: Error" not in out.stderr and "lua_script" not in out.stderr, out.stderr[-2000:]
    names = {l.split("\t")[2] for l in out.stdout.splitlines() if l.startswith("F\t")}
    for f in ["itt", "round_trips", "ideal_round_trips", "latency_ms", "finding", "side",
              "lost_ms", "fix"]:
        assert f"iscsi_doctor_lua.{f}" in names, f
    assert any(l.startswith("P\tiSCSI Doctor (Lua)\tiscsi_doctor_lua") for l in out.stdout.splitlines())


def test_filter_selects_the_cli_nagle_frames(cli):
    want = sorted(f["frame"] for f in cli(NAGLE_FIXTURE)["findings"] if f["kind"] == "nagle_hold")
    assert want
    for passes in ([], ["-2"]):
        out = run_tshark("-r", str(NAGLE_FIXTURE), *passes, "-Y",
                         'iscsi_doctor_lua.finding == "nagle_hold"', "-T", "fields", "-e",
                         "frame.number")
        assert sorted(int(x) for x in out.stdout.split()) == want, passes


def test_fields_and_expert_info(cli):
    """Each finding carries side, lost time and fix; its evidence frame gets expert info."""
    rep = cli(NAGLE_FIXTURE)
    out = run_tshark("-r", str(NAGLE_FIXTURE), "-2", "-Y", "iscsi_doctor_lua.finding", "-T",
                     "fields", "-E", "occurrence=f", "-e", "frame.number", "-e",
                     "iscsi_doctor_lua.finding", "-e", "iscsi_doctor_lua.side", "-e",
                     "iscsi_doctor_lua.lost_ms", "-e", "iscsi_doctor_lua.fix")
    rows = [l.split("\t") for l in out.stdout.splitlines()]
    assert len(rows) == len({f["frame"] for f in rep["findings"]})
    by_frame = collections.defaultdict(list)
    for f in rep["findings"]:
        by_frame[f["frame"]].append((f["kind"], f["side"], f["lost_ms"]))
    for frame, kind, side, lost, fix in rows:
        # Both print milliseconds to the microsecond; allow the last digit's rounding.
        assert any(k == kind and s == side and abs(v - float(lost)) <= 0.0015
                   for k, s, v in by_frame[int(frame)]), (frame, kind, side, lost)
        assert fix
    # one expert field per kind, as the C plugin's iscsi_doctor.expert.<kind>
    exp = run_tshark("-r", str(NAGLE_FIXTURE), "-2", "-Y",
                     " || ".join("iscsi_doctor_lua.expert." + k for k in lua_list("FINDING_KINDS")),
                     "-T", "fields", "-e", "frame.number")
    assert sorted(int(x) for x in exp.stdout.split()) == sorted(by_frame)
    cmd = run_tshark("-r", str(NAGLE_FIXTURE), "-2", "-Y", "iscsi_doctor_lua.round_trips > "
                     "iscsi_doctor_lua.ideal_round_trips", "-T", "fields", "-e", "frame.number")
    slow = [c["status_frame"] for c in rep["commands"]
            if c["completed"] and c["round_trips"] > c["ideal_round_trips"]]
    assert sorted(int(x) for x in cmd.stdout.split()) == sorted(slow)


def test_menu_is_guarded_for_tshark():
    m = re.search(r"if gui_enabled\(\) then(.*?)\nend", LUA_SRC, re.S)
    assert m and "register_menu(" in m.group(1)
    assert LUA_SRC.count("register_menu(") == 1


# ---------------------------------------------------------------------------------------------
# docs/rules.md is the single source of truth


def test_rule_constants_match_docs():
    doc = doc_constants()
    lua = {k: v for k, v in lua_table("RULES").items() if k != "doc_sha256"}
    assert lua == doc, "lua/iscsi_doctor.lua RULES differs from docs/rules.md 'Rule constants'"


def test_rules_doc_digest():
    digest = hashlib.sha256(RULES_MD.read_bytes()).hexdigest()
    recorded = lua_table("RULES")["doc_sha256"]
    assert recorded == digest, (
        "docs/rules.md changed since the Lua plugin was last checked against it: port the change "
        f"to lua/iscsi_doctor.lua, then set RULES.doc_sha256 = \"{digest}\"")


# The engine's table: one constants header per layer (tcp, session, rules), in the document's order,
# one `inline constexpr T name = value;` each, plus the two Options defaults a front-end may change
# (engine/include/iscsi_doctor/analyzer.hpp: the number, or the rule constant it is taken from).
ENGINE_TABLE = [ROOT / "engine" / "src" / layer / "constants.hpp" for layer in ("tcp", "session", "rules")]
OPTION_DEFAULTS = {"delayed_ack_min_ms", "think_min_ms"}


def engine_constants():
    rows = [r for h in ENGINE_TABLE
            for r in re.findall(r"^inline constexpr \w+ (\w+) = ([0-9.']+);", h.read_text(), re.M)]
    assert len(rows) == len({k for k, _ in rows}), "a constant is defined in two layers' headers"
    return {k: float(v.replace("'", "")) for k, v in rows}


def test_engine_uses_the_documented_constants():
    doc = doc_constants()
    engine = engine_constants()
    assert engine == doc, "engine/src/{tcp,session,rules}/constants.hpp differ from docs/rules.md 'Rule constants'"
    assert list(engine) == list(doc), "the engine's table is not in the document's order"
    options = (ROOT / "engine" / "include" / "iscsi_doctor" / "analyzer.hpp").read_text()
    for name in OPTION_DEFAULTS:
        m = re.search(r"%s = ([0-9.]+|rules::(\w+));" % name, options)
        assert m, f"Options::{name} has no default"
        value = engine[m.group(2)] if m.group(2) else float(m.group(1))
        assert value == doc[name], f"Options::{name} default differs from docs/rules.md"


def test_finding_kinds_match_docs():
    schema = (ROOT / "docs" / "json-schema.md").read_text()
    line = re.search(r"Finding kinds: (.*?)\(see docs/rules.md\)", schema, re.S).group(1)
    documented = set(re.findall(r"`(\w+)`", line))
    rules = RULES_MD.read_text()
    for k in documented:
        assert f"`{k}`" in rules, f"{k} not described in docs/rules.md"
    assert set(lua_list("FINDING_KINDS")) | set(lua_list("UNSUPPORTED_KINDS")) == documented
    readme = (ROOT / "lua" / "README.md").read_text()
    for k in set(lua_list("UNSUPPORTED_KINDS")) | set(EXCLUDED):
        assert f"`{k}`" in readme, f"{k}: not supported but not explained in lua/README.md"


# ---------------------------------------------------------------------------------------------
# The analysis core under each Lua version (Wireshark ships 5.1 up to 4.2, 5.4 from 4.4)

CORE_FIXTURES = ["scripted-nagle-read-1k--initiator", "initiator-nagle-write-8k--target",
                 "stock-write--target", "stock-read-midsession--initiator",
                 "stock-header-digest--target", "target-nagle-write-batch2--initiator"]


@pytest.mark.parametrize("version", ["5.1", "5.2", "5.3", "5.4"])
def test_core_under_lua_version(cli, version):
    lua = shutil.which(f"lua{version}")
    if not lua:
        pytest.skip(f"lua{version} not installed")
    if not shutil.which("editcap"):
        pytest.skip("editcap not installed")
    with tempfile.TemporaryDirectory() as tmp:
        for name in CORE_FIXTURES:
            path = ROOT / "captures" / "fixtures" / f"{name}.pcap.gz"
            pcap = Path(tmp) / f"{name}.pcap"
            subprocess.run(["editcap", "-F", "pcap", str(path), str(pcap)], check=True)
            out = subprocess.run([lua, str(ROOT / "tests" / "lua" / "run_core.lua"), str(PLUGIN),
                                  str(pcap)], capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr[-2000:]
            got_f, got_c = collections.Counter(), collections.Counter()
            for line in out.stdout.splitlines():
                w = line.split()
                if w[:1] == ["finding"] and w[2] in SUPPORTED:
                    got_f[(int(w[1]), w[2])] += 1
                elif w[:1] == ["command"]:
                    got_c[(int(w[1]), w[2], int(w[3]))] += 1
            want_f, want_c = lc.cli_sets(cli(path), SUPPORTED)
            assert got_f == want_f, f"{name}: {lc.diff(want_f, got_f)}"
            assert got_c == want_c, f"{name}: {lc.diff(want_c, got_c)}"


def test_plugin_file_is_generated_from_its_parts():
    """lua/iscsi_doctor.lua is lua/src/ concatenated (lua/amalgamate.py): an edit of one and not
    the other fails here."""
    r = subprocess.run(["python3", str(ROOT / "lua" / "amalgamate.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    parts = (ROOT / "lua" / "src" / "ORDER").read_text().split()
    for name in parts:
        assert (ROOT / "lua" / "src" / name).exists(), name
    # every part that ports an engine file names one that exists
    for name in parts:
        text = (ROOT / "lua" / "src" / name).read_text()
        for ref in re.findall(r"engine/src/[\w/]+\.(?:cpp|hpp)", text):
            assert (ROOT / ref).exists(), f"{name} names {ref}, which does not exist"


# ---------------------------------------------------------------------------------------------
# The plugin in Wireshark's GUI terms: the Info column, the packet list after the first pass


def test_info_column_carries_the_verdict(cli):
    """As the C plugin's: " [kind]" per finding on its evidence frame, " [N round trips, ideal M]"
    on the status frame of a command that needed more (figures from the CLI's JSON)."""
    rep = cli(NAGLE_FIXTURE)
    want = collections.defaultdict(list)
    for f in rep["findings"]:
        want[f["frame"]].append(f" [{f['kind']}]")
    for c in rep["commands"]:
        if c["completed"] and c["round_trips"] > c["ideal_round_trips"]:
            want[c["status_frame"]].append(f" [{c['round_trips']} round trips, ideal "
                                           f"{c['ideal_round_trips']}]")
    assert any(len(v) > 1 for v in want.values())
    # The packet summary lines (tshark 4.6 leaves a Lua plugin's Info text out of -e _ws.col.*).
    out = run_tshark("-r", str(NAGLE_FIXTURE), "-2")
    info = {l.split(None, 1)[0]: l for l in out.stdout.splitlines() if l.strip()}
    for frame, parts in want.items():
        text = info[str(frame)]
        tail = re.findall(r" \[[a-z_]+\]| \[\d+ round trips, ideal \d+\]", text)
        assert sorted(tail) == sorted(parts), (frame, text)
    quiet = run_tshark("-r", str(NAGLE_FIXTURE), "-2", "-o", "iscsi_doctor_lua.info_column:FALSE")
    assert "round trips, ideal" not in quiet.stdout and "[nagle_hold]" not in quiet.stdout


def gui_module():
    sys.path.insert(0, str(ROOT / "tests" / "dissector"))
    import wsgui
    return wsgui


@pytest.mark.parametrize("capture", [NAGLE_FIXTURE, ROOT / "captures" / "wireshark-wiki" /
                                     "iscsi-tapel.pcap.gz"], ids=lambda p: p.name)
def test_gui_filter_given_at_start_shows_every_frame_with_findings(capture):
    """Opened with -Y iscsi_doctor_lua.finding, the GUI's packet list shows, without the user
    applying the filter again, the frames tshark -2 selects (also those whose findings were
    decided on later frames). The C plugin is not loaded (an empty plugin folder): it would apply
    the filter again on its own."""
    wsgui = gui_module()
    if wsgui.missing_tools():
        pytest.skip(f"GUI test needs {', '.join(wsgui.missing_tools())}")
    if not capture.exists():
        pytest.skip(f"{capture} missing")
    flt = "iscsi_doctor_lua.finding"
    two = set(run_tshark("-r", str(capture), "-2", "-Y", flt, "-T", "fields", "-e",
                         "frame.number").stdout.split())
    one = set(run_tshark("-r", str(capture), "-Y", flt, "-T", "fields", "-e",
                         "frame.number").stdout.split())
    assert two != one, "the capture must have findings decided after their frame"
    work = Path(tempfile.mkdtemp(prefix="iscsi-doctor-lua-gui-"))
    work.chmod(0o777)  # tshark runs as nobody
    want = len(two)
    empty = work / "plugins"
    empty.mkdir()
    import conftest
    saved, conftest.PLUGIN_ROOT = conftest.PLUGIN_ROOT, empty
    try:
        with wsgui.Gui(capture, ["-X", f"lua_script:{PLUGIN}", "-Y", flt]) as g:
            main = g.window(f"^{re.escape(capture.name)}$")
            g.wait_log(r"Compiled display filter: iscsi_doctor_lua\.finding")
            import time
            time.sleep(3)  # the read, then the refiltering pass
            shown = wsgui.export_displayed(g, main)
            assert g.quit(main) == 0, g.log_text()[-3000:]
            log = g.log_text()
    finally:
        conftest.PLUGIN_ROOT = saved
        shutil.rmtree(work, ignore_errors=True)
    assert "Lua: Error" not in log, log[-3000:]
    assert shown == want, f"the packet list shows {shown} rows, tshark -2 selects {want}"


def test_gui_report_buttons_go_to_frames(cli):
    """Tools > iSCSI Doctor (Lua) > Report: its buttons show frames of the report in the packet
    list (a TextWindow has no links; set_filter and apply_filter are what every 4.0-4.6 Lua API
    offers): "Go to frames..." the frames typed, "Frames with findings" every evidence frame."""
    wsgui = gui_module()
    if wsgui.missing_tools():
        pytest.skip(f"GUI test needs {', '.join(wsgui.missing_tools())}")
    rep = cli(NAGLE_FIXTURE)
    evidence = {f["frame"] for f in rep["findings"]}
    picked = sorted(evidence)[:2]
    work = Path(tempfile.mkdtemp(prefix="iscsi-doctor-lua-gui-"))
    work.chmod(0o777)
    (work / "plugins").mkdir()
    import conftest
    import time
    saved, conftest.PLUGIN_ROOT = conftest.PLUGIN_ROOT, work / "plugins"
    try:
        with wsgui.Gui(NAGLE_FIXTURE, ["-X", f"lua_script:{PLUGIN}"]) as g:
            main = g.window(f"^{re.escape(NAGLE_FIXTURE.name)}$")
            time.sleep(3)

            def report():
                g.key(main, "alt+t", "Up", "Return", "Return")  # the last item, its first entry
                w = g.window(r"iSCSI Doctor \(Lua\)$")
                geo = g.xdo("getwindowgeometry", w)
                width, height = map(int, re.search(r"Geometry: (\d+)x(\d+)", geo).groups())
                return w, width, height

            w, width, height = report()
            # The buttons sit in the bottom row, left to right: Go to frames..., Frames with
            # findings, Slow commands, Close.
            wsgui.click(g, w, int(width * 0.24), height - 24)
            d = g.window("go to frames")
            time.sleep(1)
            dw, dh = map(int, re.search(r"Geometry: (\d+)x(\d+)",
                                        g.xdo("getwindowgeometry", d)).groups())
            wsgui.click(g, d, int(dw * 0.75), int(dh * 0.3))  # its text field, top right
            g.xdo("type", ", ".join(map(str, picked)))
            g.xdo("key", "Return")
            g.wait_log(r"Compiled display filter: frame\.number == %d \|\| frame\.number == %d"
                       % tuple(picked))
            time.sleep(1)
            assert wsgui.export_displayed(g, main) == len(picked)

            w, width, height = report()
            wsgui.click(g, w, int(width * 0.50), height - 24)
            g.wait_log(r"Compiled display filter: iscsi_doctor_lua\.finding$")
            time.sleep(2)
            assert wsgui.export_displayed(g, main) == len(evidence)
            assert g.quit(main) == 0, g.log_text()[-3000:]
            log = g.log_text()
    finally:
        conftest.PLUGIN_ROOT = saved
        shutil.rmtree(work, ignore_errors=True)
    assert "Lua: Error" not in log, log[-3000:]
