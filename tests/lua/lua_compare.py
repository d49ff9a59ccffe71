# SPDX-License-Identifier: GPL-2.0-or-later
"""Helpers for the Lua plugin tests: run tshark with lua/iscsi_doctor.lua and the CLI, and
reduce both to comparable (frame, finding) and (status frame, itt, round trips) sets."""
import atexit
import collections
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BINARY = os.environ.get("ISCSI_DOCTOR", str(ROOT / "build" / "cli" / "iscsi-doctor"))
PLUGIN = ROOT / "lua" / "iscsi_doctor.lua"
MANIFEST = ROOT / "captures" / "MANIFEST.json"
WIKI = [ROOT / "captures" / "wireshark-wiki", Path("/work/shared/captures/wireshark-wiki")]
TSHARK = os.environ.get("TSHARK", "tshark")


def captures():
    """Every capture in captures/MANIFEST.json; without a manifest, the fixtures. Plus the real
    Wireshark-wiki captures."""
    out = []
    if MANIFEST.exists():
        for e in json.loads(MANIFEST.read_text())["captures"]:
            out.append(ROOT / "captures" / e["file"])
    else:
        out += sorted((ROOT / "captures" / "fixtures").glob("*.pcap*"))
    for d in WIKI:
        if d.is_dir():
            out += sorted(p for p in d.glob("*.pcap*"))
            break
    seen, uniq = set(), []
    for p in out:
        if p.name not in seen and p.exists():
            seen.add(p.name)
            uniq.append(p)
    return uniq


_home = []


def run_tshark(args, timeout=1800):
    """tshark with `args`, as nobody when we are root: Wireshark 4.4+ skips Lua scripts as root
    without a word (4.0 ran them). HOME is an empty folder, so no personal plugins or prefs."""
    if not _home:
        _home.append(tempfile.mkdtemp(prefix="iscsi-doctor-lua-home-"))
        os.chmod(_home[0], 0o777)
        atexit.register(shutil.rmtree, _home[0], True)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "WIRESHARK_CONFIG_DIR")}
    env["HOME"] = _home[0]
    prefix = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "running as root without setpriv: Wireshark 4.4+ would not run the Lua script"
        prefix = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
    return subprocess.run([*prefix, TSHARK, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def cli_report(path):
    out = subprocess.run([BINARY, "--format", "json", str(path)], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode in (0, 1), f"{path}: CLI exit {out.returncode}: {out.stderr[-2000:]}"
    return json.loads(out.stdout)


def cli_sets(report, kinds):
    findings = collections.Counter((f["frame"], f["kind"]) for f in report["findings"]
                                   if f["kind"] in kinds)
    commands = collections.Counter((c["status_frame"], c["itt"], c["round_trips"])
                                   for c in report["commands"] if c["completed"])
    return findings, commands


FIELDS = ["frame.number", "iscsi_doctor_lua.finding", "iscsi_doctor_lua.evidence_frame",
          "iscsi_doctor_lua.round_trips", "iscsi_doctor_lua.itt", "iscsi_doctor_lua.status_frame"]


def tshark(path, two_pass, extra=()):
    cmd = ["-X", f"lua_script:{PLUGIN}", "-r", str(path), "-T", "fields",
           "-E", "occurrence=a", "-E", "aggregator=;"]
    if two_pass:
        # "-Y frame" passes every frame and makes the first pass build trees, as the GUI does (the
        # plugin analyses there either way: test_two_pass_without_filter_still_analyses).
        cmd += ["-2", "-Y", "frame"]
    for f in FIELDS:
        cmd += ["-e", f]
    cmd += list(extra)
    out = run_tshark(cmd)
    assert out.returncode == 0, f"tshark exit {out.returncode}: {out.stderr[-2000:]}"
    assert "Lua: Error" not in out.stderr and "lua_script" not in out.stderr, out.stderr[-2000:]
    return out.stdout


def lua_sets(stdout):
    """(evidence frame, kind) of every finding shown; (status frame, itt, round trips) of every
    command; and (shown-on frame, evidence frame, kind) for checking where findings appear."""
    findings, commands, shown = collections.Counter(), collections.Counter(), []
    for line in stdout.splitlines():
        cols = line.split("\t")
        cols += [""] * (len(FIELDS) - len(cols))
        frame = int(cols[0])
        kinds = [k for k in cols[1].split(";") if k]
        evid = [int(x) for x in cols[2].split(";") if x]
        rts = [int(x) for x in cols[3].split(";") if x]
        itts = [x for x in cols[4].split(";") if x]
        status = [int(x) for x in cols[5].split(";") if x]
        assert len(status) == len(rts), line
        assert len(kinds) == len(evid), line
        for k, e in zip(kinds, evid):
            findings[(e, k)] += 1
            shown.append((frame, e, k))
        # Commands come first in the tree, so the first len(rts) ITTs are theirs.
        for i, rt in enumerate(rts):
            commands[(status[i], itts[i], rt)] += 1
    return findings, commands, shown


def report_findings(path):
    """The end-of-run report (one pass, -q): every finding, including the connection-level
    serialized one, which no single pass can show on its (earlier) evidence frame."""
    cmd = ["-X", f"lua_script:{PLUGIN}", "-r", str(path), "-q", "-o", "iscsi_doctor_lua.report:TRUE"]
    out = run_tshark(cmd)
    assert out.returncode == 0, out.stderr[-2000:]
    found = collections.Counter()
    for line in out.stdout.splitlines():
        if line.startswith("finding "):
            _, frame, kind = line.split()[:3]
            found[(int(frame), kind)] += 1
    return found, out.stdout


def diff(a, b):
    return sorted((a - b).items())[:20], sorted((b - a).items())[:20]
