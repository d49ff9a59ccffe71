# SPDX-License-Identifier: GPL-2.0-or-later
"""cmake --install puts the plugin where Wireshark looks: into DESTDIR + the plugin folder that
pkg-config names + epan/, the layout tshark loads when WIRESHARK_PLUGIN_DIR points at it."""
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import BUILD, TSHARK, plugin_env, unprivileged


def cache_value(name):
    cache = BUILD / "CMakeCache.txt"
    if not cache.exists():
        pytest.skip(f"no build folder at {BUILD} (set ISCSI_DOCTOR_BUILD)")
    m = re.search(rf"^{name}:\w+=(.*)$", cache.read_text(), re.M)
    return m.group(1) if m else None


@pytest.fixture
def tmp_dir():
    """A temporary folder tshark can read when it runs as nobody (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="iscsi-doctor-install-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_install_into_wireshark_plugin_folder(tmp_dir, ws_home):
    tmp_path = tmp_dir
    plugin_dir = cache_value("ISCSI_DOCTOR_PLUGIN_DIR")
    if not plugin_dir or not shutil.which("cmake") or not shutil.which("pkg-config"):
        pytest.skip("plugin not configured, or cmake/pkg-config missing")
    system = subprocess.run(["pkg-config", "--variable=plugindir", "wireshark"],
                            capture_output=True, text=True).stdout.strip()
    # The default is Wireshark's own system folder (.../plugins/<major.minor>/epan).
    if system:
        assert plugin_dir == f"{system}/epan", plugin_dir
    dest = tmp_path / "root"
    out = subprocess.run(["cmake", "--install", str(BUILD), "--component", "wireshark-plugin"],
                         env={**os.environ, "DESTDIR": str(dest)}, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    so = dest / plugin_dir.lstrip("/") / "iscsi_doctor.so"
    assert so.is_file(), list(dest.rglob("*"))
    # Wireshark reads <plugin root>/<major.minor>/epan: load it from the installed tree.
    root = so.parent.parent.parent
    assert re.fullmatch(r"\d+\.\d+", so.parent.parent.name), so
    env = {**plugin_env(ws_home), "WIRESHARK_PLUGIN_DIR": str(root)}
    out = subprocess.run([*unprivileged(), TSHARK, "-G", "plugins"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert re.search(rf"^iscsi_doctor\.so\s.*{re.escape(str(so.parent))}", out.stdout, re.M), \
        out.stdout + out.stderr
