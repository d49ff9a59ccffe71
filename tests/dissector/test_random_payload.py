# SPDX-License-Identifier: GPL-2.0-or-later
"""Random bytes on port 3260 are no SCSI commands (docs/rules.md "Ports"): a header that passes the
strict checks by chance is believed only when it chains with the next PDU. Seeded random payload
both ways (tests/corpus/make_corpus.py, random_bytes), with and without the TCP handshake,
through the CLI, the C plugin and the Lua plugin (tshark -2, both plugins in one run): no
command, completed or never answered. Before the rule, each gave 2 false commands."""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import CLI, ROOT

sys.path.insert(0, str(ROOT / "tests" / "corpus"))
import make_corpus as mc  # noqa: E402

LUA_PLUGIN = ROOT / "lua" / "iscsi_doctor.lua"
MEGABYTES = 8


@pytest.fixture(scope="module", params=[True, False], ids=["handshake", "joined"])
def capture(request):
    # A folder tshark can read when it runs as nobody (pytest's tmp_path is 0700).
    d = Path(tempfile.mkdtemp(prefix="iscsi-doctor-random-"))
    d.chmod(0o755)
    path = d / "random-payload.pcap"
    path.write_bytes(mc.random_bytes(MEGABYTES, 2, handshake=request.param))
    path.chmod(0o644)
    yield path
    shutil.rmtree(d, ignore_errors=True)


def test_cli_finds_no_command(capture):
    out = subprocess.run([CLI, "--format", "json", str(capture)], capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    r = json.loads(out.stdout)
    assert r["commands"] == [], [(c["itt"], c["first_frame"]) for c in r["commands"]]
    assert r["findings"] == []


def test_plugins_find_no_command(tshark, capture):
    fields = ["iscsi_doctor.itt", "iscsi_doctor.notice", "iscsi_doctor_lua.itt", "iscsi_doctor_lua.notice"]
    args = ["-X", f"lua_script:{LUA_PLUGIN}", "-r", str(capture), "-2", "-T", "fields", "-E", "occurrence=a"]
    for f in ["frame.number", *fields]:
        args += ["-e", f]
    out = tshark(*args, "-Y", "iscsi_doctor || iscsi_doctor_lua")
    assert "Lua: Error" not in out.stderr, out.stderr[-2000:]
    rows = [l.split("\t") for l in out.stdout.splitlines() if l.strip()]
    commands = [r for r in rows if r[1] or r[3]]
    never = [r for r in rows if "never answered" in r[2] or "never answered" in r[4]]
    assert not commands and not never, (commands + never)[:10]
