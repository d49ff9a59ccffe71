# SPDX-License-Identifier: GPL-2.0-or-later
"""The Lua port's SCSI table is the engine's: lua/src/scsi/cdb.lua's generated block is what
lua/scsi_table.py makes of engine/src/scsi/table.def, and the amalgamated plugin carries it."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_lua_scsi_table_is_the_engines():
    r = subprocess.run([sys.executable, str(ROOT / "lua" / "scsi_table.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_amalgamated_plugin_carries_the_table():
    src = (ROOT / "lua" / "src" / "scsi" / "cdb.lua").read_text()
    block = src.split("-- BEGIN SCSI table", 1)[1].split("-- END SCSI table", 1)[0]
    assert '"CHECK_CONDITION"' in block and '"READ(10)"' in block
    assert block in (ROOT / "lua" / "iscsi_doctor.lua").read_text()
