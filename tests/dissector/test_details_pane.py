# SPDX-License-Identifier: GPL-2.0-or-later
"""The packet details pane says each fact once (tshark -V prints the tree as the pane shows it,
without hidden items): no `Command: 10` after `Command's first frame: 10`, no
`Related frame: 12 (released_by)` after `Released by: 12`, and, once the first pass is over, no
`Decided here: ...` link for a result that is on its own frame. The fields that say a fact twice
stay in the tree, hidden, so their filters still select what they did."""
import re
from collections import defaultdict

import pytest

from conftest import ROOT, cli_report

NAGLE = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"
LUA = ROOT / "lua" / "iscsi_doctor.lua"
ROLES = {"released_by": "Released by", "acks": "Acknowledges", "released": "Released",
         "previous_small": "Previous small segment", "original": "Original"}


def plugin_args(prefix):
    return ["-X", f"lua_script:{LUA}"] if prefix == "iscsi_doctor_lua" else []


def frames_text(tshark, prefix, *args):
    """frame number -> the lines of its `prefix` protocol subtree (tshark -V -O)."""
    out = tshark(*plugin_args(prefix), "-r", str(NAGLE), *args, "-V", "-O", prefix).stdout
    frames, cur, inside = defaultdict(list), None, False
    for line in out.splitlines():
        m = re.match(r"Frame (\d+):", line)
        if m:
            cur, inside = int(m.group(1)), False
        elif re.match(r"\[?iSCSI Doctor", line):
            inside = True
        elif inside and line.startswith("    "):
            frames[cur].append(line.strip().strip("[]"))
        elif line and not line.startswith(" "):
            inside = False
    return frames


@pytest.mark.parametrize("prefix", ["iscsi_doctor", "iscsi_doctor_lua"])
def test_each_fact_once(tshark, prefix):
    rep = cli_report(NAGLE)
    frames = frames_text(tshark, prefix, "-2")
    assert len(frames) >= len({f["frame"] for f in rep["findings"]})
    related = sum(len(f.get("related", {})) for f in rep["findings"])
    assert related, "the fixture's findings have related frames"
    seen_roles = 0
    for frame, lines in frames.items():
        text = "\n".join(lines)
        assert not re.search(r"^Command: \d+$", text, re.M), (frame, text)
        assert not re.search(r"^Related frame: \d+ \((%s|command)\)$" % "|".join(ROLES), text,
                             re.M), (frame, text)
        assert "Decided here" not in text, (frame, text)
        seen_roles += len(re.findall(r"^(%s): \d+$" % "|".join(ROLES.values()), text, re.M))
        # The facts those items said are still there, once.
        if re.search(r"^Command ITT", text, re.M):
            assert len(re.findall(r"^Command's first frame: \d+$", text, re.M)) == \
                len(re.findall(r"^Command ITT", text, re.M)), (frame, text)
    assert seen_roles > 0


def test_one_pass_keeps_decided_here(tshark):
    """One-pass tshark has printed the evidence frame when a later frame decides its finding:
    there the link is the only place the finding shows."""
    frames = frames_text(tshark, "iscsi_doctor")
    assert any("Decided here" in l for lines in frames.values() for l in lines)


@pytest.mark.parametrize("prefix", ["iscsi_doctor", "iscsi_doctor_lua"])
def test_hidden_duplicates_still_filter(tshark, prefix):
    rep = cli_report(NAGLE)
    with_command = {f["frame"] for f in rep["findings"] if f.get("command_first_frame")}
    with_command |= {c["status_frame"] for c in rep["commands"]
                     if c["completed"] and c.get("status_frame")}
    with_related = {f["frame"] for f in rep["findings"] if f.get("related")}

    def frames(flt):
        out = tshark(*plugin_args(prefix), "-r", str(NAGLE), "-2", "-Y", flt, "-T", "fields", "-e",
                     "frame.number").stdout
        return {int(x) for x in out.split()}

    assert frames(f"{prefix}.command_frame") == with_command
    assert frames(f"{prefix}.related_frame") == with_related
    if prefix == "iscsi_doctor":
        assert frames("iscsi_doctor.reported")  # decided on later frames: hidden, still there
