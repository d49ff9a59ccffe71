# SPDX-License-Identifier: GPL-2.0-or-later
"""What a tshark user does with the plugin: it loads, display filters on its fields select the
evidence frames, the statistics tree (-z iscsi_doctor,tree) and the expert info (-z expert) list
the findings."""
import re

import pytest

from conftest import ROOT, cli_report, cli_text

NAGLE = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"
NODELAY = ROOT / "captures" / "fixtures" / "scripted-nodelay-read-1k--initiator.pcap.gz"

needs_nagle = pytest.mark.skipif(not NAGLE.exists(), reason=f"{NAGLE} missing")


def nagle_frames():
    return sorted(f["frame"] for f in cli_report(NAGLE)["findings"] if f["kind"] == "nagle_hold")


def test_plugin_loads(tshark):
    out = tshark("-G", "plugins").stdout
    assert re.search(r"^iscsi_doctor\.so\s", out, re.M), out
    protocols = tshark("-G", "protocols").stdout
    # name, short name, filter name; 4.4+ add enabled, enabled by default, can toggle
    assert re.search(r"^[^\t]*\t[^\t]*\tiscsi_doctor(\t|$)", protocols, re.M)
    fields = tshark("-G", "fields").stdout
    for f in ["iscsi_doctor.finding", "iscsi_doctor.round_trips", "iscsi_doctor.fix",
              "iscsi_doctor.released_by", "iscsi_doctor.first_frame",
              "iscsi_doctor.breakdown.delayed_ack_ms"]:
        assert f"\t{f}\t" in fields, f


@needs_nagle
@pytest.mark.parametrize("two_pass", [False, True], ids=["one-pass", "two-pass"])
def test_display_filter_nagle_hold(tshark, two_pass):
    expected = nagle_frames()
    assert expected, "the Nagle fixture has no nagle_hold in the CLI report"
    args = ["-n", "-r", str(NAGLE), "-Y", 'iscsi_doctor.finding == "nagle_hold"', "-T", "fields",
            "-e", "frame.number", "-e", "iscsi_doctor.side", "-e", "iscsi_doctor.lost_ms",
            "-e", "iscsi_doctor.fix", "-e", "iscsi_doctor.released_by"]
    if two_pass:
        args.insert(0, "-2")
    rows = [line.split("\t") for line in tshark(*args).stdout.splitlines()]
    assert sorted(int(r[0]) for r in rows) == expected
    for r in rows:
        assert r[1] in ("initiator", "target", "initiator,target", "target,initiator")
        assert float(r[2].split(",")[0]) > 0
        assert r[3], "no fix text"
        assert r[4], "no released_by link"


@needs_nagle
def test_command_fields(tshark):
    report = cli_report(NAGLE)
    want = {c["status_frame"]: c for c in report["commands"] if c["completed"]}
    out = tshark("-n", "-r", str(NAGLE), "-Y", "iscsi_doctor.itt", "-T", "fields",
                 "-e", "frame.number", "-e", "iscsi_doctor.itt", "-e", "iscsi_doctor.round_trips",
                 "-e", "iscsi_doctor.ideal_round_trips", "-e", "iscsi_doctor.latency_ms",
                 "-e", "iscsi_doctor.first_frame", "-e", "iscsi_doctor.op").stdout
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(rows) == len(want)
    for frame, itt, rt, ideal, lat, first, op in rows:
        c = want[int(frame)]
        assert int(itt, 16) == int(str(c["itt"]), 0)
        assert int(rt) == c["round_trips"] and int(ideal) == c["ideal_round_trips"]
        assert int(first) == c["first_frame"]
        assert abs(float(lat) - c["latency_ms"]) < 0.01
        assert op == c["op"]


@needs_nagle
@pytest.mark.parametrize("two_pass", [False, True], ids=["one-pass", "two-pass"])
def test_stats_tree(tshark, two_pass):
    args = ["-n", "-q", "-r", str(NAGLE), "-z", "iscsi_doctor,tree"]
    if two_pass:
        args.insert(0, "-2")
    out = tshark(*args).stdout
    assert "iSCSI Doctor" in out
    assert "Session 1" in out and "All sessions" in out
    assert re.search(r"^\s*nagle_hold\s+\d+", out, re.M), out
    assert "fix: " in out and "round trips" in out and "touched per finding (us)" in out
    # Count of nagle_hold under "All sessions" = the CLI's number of nagle_hold findings.
    all_part = out.split("iSCSI Doctor findings", 1)[1].split("All sessions", 1)[1]
    m = re.search(r"^\s*nagle_hold\s+(\d+)", all_part, re.M)
    assert m and int(m.group(1)) == len(nagle_frames()), out
    # "All sessions" of the commands tree counts the completed commands.
    m = re.search(r"^\s*All sessions\s+(\d+)", out, re.M)
    completed = sum(1 for c in cli_report(NAGLE)["commands"] if c["completed"])
    assert m and int(m.group(1)) == completed, out
    # Under the kind: the commands it delayed, with their round trips against the ideal.
    held = [c for c in cli_report(NAGLE)["commands"] if "nagle_hold" in c["findings"]]
    kind_part = all_part.split("nagle_hold", 1)[1]
    m = re.search(r"^\s*commands delayed\s+(\d+).*?\n\s*round trips\s+\d+\s+([\d.]+).*?\n"
                  r"\s*ideal round trips\s+\d+\s+([\d.]+)", kind_part, re.M | re.S)
    assert m, kind_part
    assert int(m.group(1)) == len(held)
    assert float(m.group(2)) == pytest.approx(sum(c["round_trips"] for c in held) / len(held), abs=0.01)
    assert float(m.group(3)) == pytest.approx(sum(c["ideal_round_trips"] for c in held) / len(held), abs=0.01)
    # Its time lost in each (each millisecond counted once): the nagle part of its latency.
    m = re.search(r"^\s*time lost \(us\)\s+(\d+)\s+([\d.]+)", kind_part, re.M)
    assert m and int(m.group(1)) == len(held), kind_part
    assert int(m.group(1)) * float(m.group(2)) / 1000 == pytest.approx(
        sum(c["breakdown_ms"]["nagle"] for c in held), abs=0.001 * len(held)), kind_part


@needs_nagle
def test_expert_info(tshark):
    out = tshark("-n", "-q", "-r", str(NAGLE), "-z", "expert").stdout
    lines = [l for l in out.splitlines() if "iSCSI Doctor" in l and "nagle_hold" in l]
    assert lines, out
    # Grouped per kind and side: one line whose frequency is the number of evidence frames.
    m = re.search(r"^\s*(\d+)\s+Sequence\s+iSCSI Doctor\s+nagle_hold \(target side\); fix: ", out,
                  re.M)
    assert m and int(m.group(1)) == len(nagle_frames()), lines


@pytest.mark.skipif(not NODELAY.exists(), reason=f"{NODELAY} missing")
def test_no_nagle_with_nodelay(tshark):
    out = tshark("-2", "-n", "-r", str(NODELAY), "-Y", 'iscsi_doctor.finding == "nagle_hold"').stdout
    assert out.strip() == ""


@needs_nagle
@pytest.mark.parametrize("prefs,cli_args", [
    ([], []),
    (["-o", "iscsi_doctor.ports:3261", "-o", "iscsi_doctor.detect_ports:FALSE"], ["--port", "3261", "--no-detect-ports"]),
    (["-o", "iscsi_doctor.delayed_ack_ms:100"], ["--delayed-ack-ms", "100"]),
], ids=["defaults", "other-port", "delayed-ack-100"])
def test_preferences_are_the_cli_options(tshark, prefs, cli_args):
    """Each preference does what the CLI option of the same name does: the findings match."""
    report = cli_report(NAGLE, *cli_args)
    want = sorted((f["frame"], f["kind"]) for f in report["findings"] if f["kind"] != "serialized")
    out = tshark("-2", "-n", "-r", str(NAGLE), *prefs, "-Y", "iscsi_doctor.finding", "-T", "fields",
                 "-E", "occurrence=a", "-E", "aggregator=;", "-e", "frame.number", "-e", "iscsi_doctor.finding").stdout
    got = []
    for line in out.splitlines():
        frame, kinds = line.split("\t")
        got += [(int(frame), k) for k in kinds.split(";") if k and k != "serialized"]
    assert sorted(set(got)) == sorted(set(want))


# Fields only one plugin has, with the reason; every other field has the same name, type and
# meaning under iscsi_doctor. and iscsi_doctor_lua. (dissector/README.md "Using it").
C_ONLY = {
    # one-pass bookkeeping: where a result was decided when its frame had gone by
    "decided_in", "decided_at_end", "command_decided_at_end", "reported", "reported.finding",
    "reported.frame", "reported.round_trips", "reported.status_frame",
    # engine warnings and errors (missing bytes, framing lost): the Lua port reports only commands
    # never answered (a notice at level info; tests/dissector/test_plugin_items.py)
    "expert.notice_warning", "expert.notice_error",
    "related",  # a related frame of a role without its own field (the Lua plugin has none)
}
LUA_ONLY = {"expert.excess_round_trips"}


def test_both_plugins_speak_one_vocabulary(tshark):
    lua = ROOT / "lua" / "iscsi_doctor.lua"
    out = tshark("-G", "fields", "-X", f"lua_script:{lua}").stdout
    c, lu = {}, {}
    for row in out.splitlines():
        f = row.split("\t")
        if len(f) > 3 and f[0] == "F":
            if f[2].startswith("iscsi_doctor_lua."):
                lu[f[2][len("iscsi_doctor_lua."):]] = f[3]
            elif f[2].startswith("iscsi_doctor."):
                c[f[2][len("iscsi_doctor."):]] = f[3]
    assert lu, "the Lua plugin registered no field (not loaded?)"
    assert set(c) - set(lu) == C_ONLY
    assert set(lu) - set(c) == LUA_ONLY
    assert {k: c[k] for k in set(c) & set(lu)} == {k: lu[k] for k in set(c) & set(lu)}
    for kind in ("nagle_hold", "delayed_ack", "r2t_round_trip", "cwnd_limited", "rwnd_limited",
                 "retransmission", "target_think", "serialized"):
        assert "expert." + kind in c and "expert." + kind in lu


@needs_nagle
def test_both_plugins_give_the_same_field_values(tshark):
    """The shared fields carry the same values in both plugins, frame by frame, in two passes (in
    one pass each shows a result decided after its frame went by its own way: the C plugin as
    `reported`, the Lua plugin on the deciding frame)."""
    lua = ROOT / "lua" / "iscsi_doctor.lua"
    shared = ["itt", "op", "first_frame", "status_frame", "command_frame", "round_trips", "ideal_round_trips",
              "excess_round_trips", "bytes", "scsi_status", "finding", "side", "evidence_frame",
              "finding_itt", "command_first_frame", "released_by", "acks", "released", "previous_small",
              "connection.rtt_ms", "connection.vantage", "connection.joined", "connection.mss",
              "connection.window_scale", "connection.keys", "connection.offload_segments"]

    def rows(prefix):
        args = ["-n", "-r", str(NAGLE), "-X", f"lua_script:{lua}", "-Y", f"{prefix}.finding or {prefix}.itt",
                "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;", "-e", "frame.number"]
        for f in shared:
            args += ["-e", f"{prefix}.{f}"]
        return tshark("-2", *args).stdout.splitlines()

    c, lu = rows("iscsi_doctor"), rows("iscsi_doctor_lua")
    assert c and c == lu


JOINED = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k-joined--initiator.pcap.gz"


@pytest.mark.skipif(not JOINED.exists(), reason=f"{JOINED} missing")
def test_both_plugins_say_what_was_inferred(tshark):
    """A capture that joined a running session (the lab started tcpdump after the login: no SYN,
    no login in the file) shows, on every command, the connection's facts as inferred, the same
    words in both plugins as in the CLI's text report."""
    lua = ROOT / "lua" / "iscsi_doctor.lua"
    fields = ["joined", "mss", "window_scale", "keys", "vantage"]

    def rows(prefix):
        args = ["-n", "-r", str(JOINED), "-X", f"lua_script:{lua}", "-Y", f"{prefix}.itt", "-T", "fields",
                "-E", "separator=|"]
        for f in fields:
            args += ["-e", f"{prefix}.connection.{f}"]
        return [r.split("|") for r in tshark("-2", *args).stdout.splitlines()]

    c, lu = rows("iscsi_doctor"), rows("iscsi_doctor_lua")
    assert c and c == lu
    text = cli_text(JOINED)
    for joined, mss, wscale, keys, vantage in c:
        assert joined in ("True", "1")
        assert "(inferred:" in mss and mss in text
        assert wscale.startswith("not in the capture: at least") and wscale in text
        assert "source=default" in keys or "source=inferred" in keys
        assert vantage == "initiator"


TAPEL = ROOT / "captures" / "wireshark-wiki" / "iscsi-tapel.pcap.gz"


@pytest.mark.skipif(not TAPEL.exists(), reason=f"{TAPEL} missing")
def test_both_plugins_say_where_nagle_was_shown_off(tshark):
    """The wiki's tape capture (IET) shows the target's Nagle off: a 48-byte PDU and a 36-byte one
    0.4 ms apart at a 44 ms round trip (frames 36 and 38); the initiator's ACK of the first (frame 37)
    passed the capture point 0.3 ms before the second, far too late to reach the target and the
    second come back. Each command's connection facts say so in both plugins, in the CLI's words,
    with the frame the CLI's JSON gives; the Nagle fixture (its target's Nagle on) shows no such
    field."""
    lua = ROOT / "lua" / "iscsi_doctor.lua"

    def values(path, prefix):
        args = ["-n", "-r", str(path), "-X", f"lua_script:{lua}", "-Y", f"{prefix}.itt", "-T", "fields",
                "-e", f"{prefix}.connection.nagle"]
        return tshark("-2", *args).stdout.splitlines()

    c, lu = values(TAPEL, "iscsi_doctor"), values(TAPEL, "iscsi_doctor_lua")
    assert c and c == lu
    frame = cli_report(TAPEL)["sessions"][0]["connections"][0]["nagle_off_frame"]
    assert frame["initiator"] == 0 and frame["target"] == 38, frame
    words = ("Nagle off on the target (frame 38): a short segment sent while the previous one was "
             "unacknowledged")
    assert set(c) == {words} and words in cli_text(TAPEL)
    for prefix in ("iscsi_doctor", "iscsi_doctor_lua"):
        assert set(values(NAGLE, prefix)) == {""}
