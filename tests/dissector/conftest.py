# SPDX-License-Identifier: GPL-2.0-or-later
"""Shared helpers for the Wireshark plugin tests: where the plugin, tshark and the CLI are, and how
to run tshark with the built plugin loaded (and nothing from the user's own Wireshark setup)."""
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("ISCSI_DOCTOR_BUILD", ROOT / "build"))
CLI = os.environ.get("ISCSI_DOCTOR", str(BUILD / "cli" / "iscsi-doctor"))
PLUGIN_ROOT = Path(os.environ.get("ISCSI_DOCTOR_PLUGIN_DIR", BUILD / "dissector" / "plugins"))
TSHARK = os.environ.get("TSHARK") or shutil.which("tshark") or "tshark"
MANIFEST = ROOT / "captures" / "MANIFEST.json"


# ISCSI_DOCTOR_CAPTURE_SETS=lab (scripts/test-wireshark-versions.sh): only the manifest's sets named
# (a fixture's `set`, `lab` when it has none), so that each other Wireshark version runs the first
# sets and the host's own run (every set) stays the one that sees all.
CAPTURE_SETS = {s for s in os.environ.get("ISCSI_DOCTOR_CAPTURE_SETS", "").split(",") if s}


def capture_files():
    """Every capture in captures/MANIFEST.json, plus every fixture and Wireshark wiki capture on
    disk. A manifest entry whose file is missing stays in the list, so its tests fail."""
    files, left_out = [], set()
    if MANIFEST.exists():
        for e in json.loads(MANIFEST.read_text())["captures"]:
            if CAPTURE_SETS and e.get("set", "lab") not in CAPTURE_SETS:
                left_out.add(ROOT / "captures" / e["file"])
                continue
            files.append(ROOT / "captures" / e["file"])
    for d in ("fixtures", "wireshark-wiki"):
        for f in sorted((ROOT / "captures" / d).glob("*.pcap*")):
            if f not in files and f not in left_out:
                files.append(f)
    return files


def plugin_env(home):
    env = dict(os.environ)
    env["WIRESHARK_PLUGIN_DIR"] = str(PLUGIN_ROOT)
    env["HOME"] = str(home)  # no personal plugins or preferences
    env.pop("XDG_CONFIG_HOME", None)
    env.pop("WIRESHARK_CONFIG_DIR", None)
    return env


def unprivileged():
    """Wireshark ignores WIRESHARK_PLUGIN_DIR and the personal plugin folder when run as root
    (started_with_special_privs), so as root tshark runs as nobody."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("running as root without setpriv: Wireshark would not load a plugin from "
                    "the build folder")
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]


@pytest.fixture(scope="session")
def ws_home():
    home = Path(tempfile.mkdtemp(prefix="iscsi-doctor-ws-home-"))
    home.chmod(0o777)
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def tshark(ws_home):
    """Run tshark with the built plugin; returns stdout."""
    if not shutil.which(TSHARK):
        pytest.skip("tshark not installed")
    if not any(PLUGIN_ROOT.glob("*/epan/iscsi_doctor.so")):
        pytest.skip(f"plugin not built under {PLUGIN_ROOT}")

    def run(*args, check=True, timeout=900):
        out = subprocess.run([*unprivileged(), TSHARK, *args], capture_output=True, text=True, timeout=timeout,
                             env=plugin_env(ws_home))
        if check:
            assert out.returncode == 0, f"tshark {args}: exit {out.returncode}: {out.stderr[-3000:]}"
        return out

    return run


_cli_reports = {}


def cli_report(path, *args):
    key = (path, args)
    if key not in _cli_reports:
        out = subprocess.run([CLI, "--format", "json", *args, str(path)], capture_output=True, text=True,
                             timeout=900)
        assert out.returncode in (0, 1), f"{path}: exit {out.returncode}: {out.stderr[-2000:]}"
        _cli_reports[key] = json.loads(out.stdout)
    return _cli_reports[key]


def cli_text(path, *args):
    out = subprocess.run([CLI, *args, str(path)], capture_output=True, text=True, timeout=900)
    assert out.returncode in (0, 1), f"{path}: exit {out.returncode}: {out.stderr[-2000:]}"
    return out.stdout
