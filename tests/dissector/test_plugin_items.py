# SPDX-License-Identifier: GPL-2.0-or-later
"""The Lua plugin marks what the C plugin marks. tshark -2 with both plugins loaded (the C one
from the build, the Lua one by -X lua_script) writes PDML; every item the C plugin adds to a frame
(each field with its value and text, each expert info with its field, message, severity and group)
must be on the same frame under iscsi_doctor_lua, and nothing else, but for the differences
lua/README.md lists ("What it does not do that the C plugin does"). The captures hold completed
commands, findings, a joined connection and commands never answered (a lab fixture cut short,
and tests/corpus/command-no-response), whose notice the C plugin puts on the first one's frame."""
import collections
import gzip
import shutil
import struct
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import ROOT

LUA_PLUGIN = ROOT / "lua" / "iscsi_doctor.lua"
FIXTURES = ROOT / "captures" / "fixtures"
CAPTURES = [FIXTURES / "scripted-nagle-read-1k--initiator.pcap.gz",
            FIXTURES / "initiator-nagle-write-1k-joined--initiator.pcap.gz",
            ROOT / "tests" / "corpus" / "command-no-response.pcap.gz",
            ROOT / "tests" / "corpus" / "starts-mid-pdu.pcap.gz",
            ROOT / "captures" / "wireshark-wiki" / "iscsi-tapel.pcap.gz"]
CUT_SOURCE, CUT_FRAMES = FIXTURES / "stock-qd8-read--initiator.pcap.gz", 400  # 8 reads open at the cut

# C plugin only (lua/README.md): where a result was decided, and the engine's other notices.
C_ONLY_FIELDS = {"decided_in", "decided_at_end", "command_decided_at_end", "reported", "reported.frame",
                 "reported.finding", "reported.status_frame", "reported.round_trips"}
NEVER_ANSWERED = "never answered by the end of the capture"
# Lua plugin only (lua/README.md): a Note on a command with more round trips than ideal, and the
# command's findings named in its tree item (the C plugin tags the Info column instead).
LUA_ONLY_EXPERT = {"expert.excess_round_trips"}


@pytest.fixture(scope="module")
def cut_capture():
    """The first CUT_FRAMES frames of a queue-depth-8 read fixture: commands open at the end."""
    d = Path(tempfile.mkdtemp(prefix="iscsi-doctor-items-"))
    d.chmod(0o755)  # tshark runs as nobody
    raw = gzip.decompress(CUT_SOURCE.read_bytes())
    out, off = [raw[:24]], 24
    for _ in range(CUT_FRAMES):
        (n,) = struct.unpack("<I", raw[off + 8:off + 12])
        out.append(raw[off:off + 16 + n])
        off += 16 + n
    path = d / "stock-qd8-read-cut.pcap"
    path.write_bytes(b"".join(out))
    path.chmod(0o644)
    yield path
    shutil.rmtree(d, ignore_errors=True)


def items(root, proto):
    """frame -> Counter of the items `proto` added: (name without the prefix, value, text) per field,
    ("expert", expert field, message, severity, group) per expert info."""
    out = collections.defaultdict(collections.Counter)
    prefix = proto + "."

    def walk(frame, elem):
        for f in elem.findall("field"):
            name = f.get("name") or ""
            if name == "_ws.expert":
                parts = {c.get("name"): c.get("show") for c in f.findall("field")}
                field = next((k[len(prefix):] for k in parts if k.startswith(prefix + "expert.")), None)
                out[frame][("expert", field, parts.get("_ws.expert.message"), parts.get("_ws.expert.severity"),
                            parts.get("_ws.expert.group"))] += 1
                continue
            short = name[len(prefix):] if name.startswith(prefix) else name
            text = (f.get("showname") or "").replace(prefix, "")
            out[frame][(short, f.get("show"), text)] += 1
            walk(frame, f)

    for pkt in root.iter("packet"):
        frame = int(next(f.get("show") for f in pkt.iter("field") if f.get("name") == "num"))
        for p in pkt.findall("proto"):
            if p.get("name") == proto:
                walk(frame, p)
    return out


def c_item_shared(item):
    if item[0] == "expert":
        return not item[2].startswith("iscsi-doctor: ") or NEVER_ANSWERED in item[2]
    if item[0] == "notice":
        return NEVER_ANSWERED in item[1]
    return item[0] not in C_ONLY_FIELDS


def lua_item_shared(item):
    """The item as the C plugin would show it; None for what only the Lua plugin shows."""
    if item[0] == "expert":
        return None if item[1] in LUA_ONLY_EXPERT else item
    if item[0] == "command":  # "... 8.264 ms [nagle_hold]": the Lua plugin names the findings
        return (item[0], item[1], item[2].split(" [")[0])
    return item


def compare(tshark, path):
    out = tshark("-X", f"lua_script:{LUA_PLUGIN}", "-r", str(path), "-2", "-T", "pdml",
                 "-J", "iscsi_doctor iscsi_doctor_lua", "-Y", "iscsi_doctor || iscsi_doctor_lua")
    assert "Lua: Error" not in out.stderr, out.stderr[-2000:]
    root = ET.fromstring(out.stdout)
    c_items, lua_items = items(root, "iscsi_doctor"), items(root, "iscsi_doctor_lua")
    assert c_items, f"{path.name}: the C plugin added nothing"
    diffs = []
    for frame in sorted(set(c_items) | set(lua_items)):
        want = collections.Counter()
        for k, n in c_items[frame].items():
            if c_item_shared(k):
                want[k] += n
        got = collections.Counter()
        for k, n in lua_items[frame].items():
            k = lua_item_shared(k)
            if k:
                got[k] += n
        if want != got:
            diffs.append((frame, sorted(want - got)[:4], sorted(got - want)[:4]))
    assert not diffs, f"{path.name}: (frame, C only, Lua only): {diffs[:5]}"
    return c_items


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name.split(".")[0] for p in CAPTURES])
def test_lua_marks_what_c_marks(tshark, path):
    if not path.exists():
        pytest.skip(f"{path} missing")
    c_items = compare(tshark, path)
    if path.name.startswith("command-no-response"):
        assert any(k[0] == "notice" and NEVER_ANSWERED in k[1] for it in c_items.values() for k in it)


def test_lua_marks_never_answered_commands(tshark, cut_capture):
    c_items = compare(tshark, cut_capture)
    notices = [(frame, k[1]) for frame, it in c_items.items() for k in it if k[0] == "notice"]
    assert len(notices) == 1 and NEVER_ANSWERED in notices[0][1], notices
    assert notices[0][1].startswith("8 commands never answered"), notices
    assert f"frame {notices[0][0]})" in notices[0][1], notices
