# SPDX-License-Identifier: GPL-2.0-or-later
"""The captures kept by whole-capture fuzzing (tests/fuzz/regressions/captures/) through every
front-end: the CLI (json, json with the libtins decoder, text, csv, --html, ladder, json piped into
standard input, jsonl), the Lua core without Wireshark (lua5.4, lua5.1), tshark with the C plugin and with the Lua plugin (one pass, two passes, fields). Each
run must finish within TIMEOUT without a crash, a sanitizer report, unparseable output, a
"Dissector bug" or a Lua error (the checks of fuzz_captures.py). And the mutator itself: its
mutants are valid pcap files and the same for the same seed.

The tshark and Lua interpreter tests skip when those are missing, and fail instead with
ISCSI_DOCTOR_PLUGINS_REQUIRED=1."""
import os
import shutil
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_mutator as cm  # noqa: E402
import fuzz_captures as fc  # noqa: E402

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", cm.ROOT))
BUILD = Path(os.environ.get("ISCSI_DOCTOR_BUILD", ROOT / "build"))
CLI = os.environ.get("ISCSI_DOCTOR", str(BUILD / "cli" / "iscsi-doctor"))
PLUGIN_DIR = Path(os.environ.get("ISCSI_DOCTOR_PLUGIN_DIR", BUILD / "dissector" / "plugins"))
TSHARK = os.environ.get("TSHARK", "tshark")
REQUIRED = os.environ.get("ISCSI_DOCTOR_PLUGINS_REQUIRED") == "1"
TIMEOUT = 10
FILES = sorted(p for p in fc.REGRESSIONS.glob("*.pcap*") if cm.is_pcap(p))
IDS = [p.name.split(".")[0] for p in FILES]


def need(ok, reason):
    if not ok:
        (pytest.fail if REQUIRED else pytest.skip)(reason)


def test_regressions_present():
    assert FILES, f"no captures in {fc.REGRESSIONS}"


@pytest.mark.parametrize("frontend", fc.CLI_FRONTENDS)
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_cli(path, frontend, tmp_path):
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"CLI not built: {CLI} (set ISCSI_DOCTOR)")
    counts = {}
    f = fc.check_cli(CLI, path, tmp_path, TIMEOUT, counts, only=frontend)
    assert f is None, str(f)
    if frontend not in counts:
        pytest.skip("the JSON report holds no command to draw")


@pytest.mark.parametrize("lua", ["lua5.4", "lua5.1"])
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_lua_core(path, lua):
    need(shutil.which(lua), f"{lua} not installed")
    counts = {}
    f = fc.check_lua_core(lua, path, TIMEOUT, counts)
    assert f is None, str(f)
    if counts.get(f"{lua}-core-harness-error"):
        pytest.skip("tests/lua/run_core.lua cannot read this file's packets")


@pytest.fixture(scope="module")
def tshark():
    need(shutil.which(TSHARK), "tshark not installed")
    need(any(PLUGIN_DIR.glob("*/epan/iscsi_doctor.so")), f"C plugin not built under {PLUGIN_DIR}")
    need(os.geteuid() != 0 or shutil.which("setpriv"), "root without setpriv: tshark would load no plugin")
    ts = fc.Tshark(shutil.which(TSHARK), PLUGIN_DIR, TIMEOUT, slow_floor=5.0)
    yield ts
    ts.close()


@pytest.mark.parametrize("mode", list(fc.Tshark.MODES))
@pytest.mark.parametrize("variant", ["c", "lua"])
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_tshark(tshark, path, variant, mode):
    counts = {}
    f = tshark.check(path, [variant], counts, only=f"{variant}-{mode}")
    assert f is None, str(f)
    assert f"{variant}-{mode}" in counts


# --- the mutator ---------------------------------------------------------------------------------

SEEDS = range(40)


@pytest.fixture(scope="module")
def sources():
    return cm.Sources()


def records(data):
    """(snaplen, [(caplen, orig_len)]) of a pcap file, asserting every record header parses."""
    e, _ = cm.PCAP_MAGIC[data[:4]]
    assert struct.unpack_from(e + "HH", data, 4) == (2, 4)
    snaplen = struct.unpack_from(e + "I", data, 16)[0]
    out, pos = [], 24
    while pos < len(data):
        assert pos + 16 <= len(data), "record header cut"
        _, _, incl, orig = struct.unpack_from(e + "IIII", data, pos)
        pos += 16 + incl
        assert pos <= len(data), "record data cut"
        out.append((incl, orig))
    return snaplen, out


@pytest.mark.parametrize("seed", SEEDS)
def test_mutant_valid(sources, seed):
    data, what = cm.mutate(sources, seed)
    snaplen, recs = records(data)
    assert recs, what
    assert all(incl <= snaplen and incl <= orig for incl, orig in recs), what


def test_mutants_deterministic(sources):
    fresh = cm.Sources()
    first = [cm.mutate(sources, s) for s in SEEDS]
    assert first == [cm.mutate(fresh, s) for s in SEEDS]
    assert len({d for d, _ in first}) == len(first)


@pytest.mark.parametrize("name", ["captures/fixtures/stock-read--initiator.pcap.gz",
                                  "tests/fuzz/regressions/fuzz_capture/seed-osd-digests-be-nsec.pcap"])
def test_read_write_round_trip(name):
    """Both byte orders and timestamp precisions are written back as read."""
    path = ROOT / name
    raw = cm._open_bytes(path)
    assert cm.write_pcap(cm.read_pcap(path)) == raw
