# SPDX-License-Identifier: GPL-2.0-or-later
"""Every capture in captures/MANIFEST.json exists, opens in tshark, and Wireshark's iSCSI dissector
sees exactly the PDUs the manifest says (its 'tshark' block)."""

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab import CAPTURES, load_manifest, tshark_pdus  # noqa: E402

MANIFEST = load_manifest()
ENTRIES = MANIFEST["captures"]
IDS = [e["file"] for e in ENTRIES]
VANTAGES = {"initiator", "target", "midpath"}
KINDS = {"nagle_hold", "delayed_ack", "r2t_round_trip", "cwnd_limited", "rwnd_limited", "retransmission",
         "target_think", "serialized", "link_limited", "think_or_network", "think_or_hold"}
SIDES = {"initiator", "target", "network"}
SETS = {"noisy", "link", "nots"}     # an entry without "set" belongs to the first lab fixtures

needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")


def test_manifest_shape():
    assert MANIFEST["schema"] == 1
    assert len(ENTRIES) >= 20
    files = [e["file"] for e in ENTRIES]
    assert len(files) == len(set(files)), "duplicate files in the manifest"
    for e in ENTRIES:
        for k in ("file", "scenario", "made", "measured", "expect", "tshark"):
            assert k in e, (e["file"], k)
        assert e.get("set", "noisy") in SETS, e["file"]
        assert set(e["tshark"]) >= {"scsi_commands", "pdus_by_opcode"}
        if e["made"].get("lab", True):
            m = e["made"]
            for k in ("target", "initiator", "one_way_delay_ms", "mtu", "mss", "nagle", "vantage", "workload",
                      "queue_depth", "digests", "starts_mid_session"):
                assert k in m, (e["file"], k)
            assert m["vantage"] in VANTAGES
            assert e["file"] == "fixtures/%s--%s.pcap.gz" % (e["scenario"], m["vantage"])
            # unknown only where the manifest says why the capture cannot tell its place
            assert e["session"]["vantage"] == m["vantage"] or (
                e["session"]["vantage"] == "unknown" and e["session"].get("vantage_why")), e["file"]
        for x in e["expect"]:
            assert x["select"]["op"] in ("read", "write", "other")
            assert 0 < x["min_fraction"] <= 1
            if x["min_fraction"] < 0.8:
                assert x.get("why"), "min_fraction below 0.8 needs a reason"
            assert set(x.get("findings", {})) <= KINDS
            assert set(x.get("findings", {}).values()) <= SIDES
            assert set(x.get("absent", [])) <= KINDS
            assert not set(x.get("findings", {})) & set(x.get("absent", []))


def test_scenarios_cover_the_issue():
    lab = [e for e in ENTRIES if e["made"].get("lab", True)]
    by_scn = {}
    for e in lab:
        by_scn.setdefault(e["scenario"], set()).add(e["made"]["vantage"])
    for scn, vs in by_scn.items():
        assert {"initiator", "target"} <= vs, scn
    assert any("midpath" in vs for vs in by_scn.values())
    made = [e["made"] for e in lab]
    assert any(m["nagle"]["target"] and "tgtd" in m["target"] for m in made)
    assert any(m["nagle"]["initiator"] for m in made)
    assert any(m["nagle"]["target"] and "scripted" in m["target"] for m in made)
    assert any(not m["nagle"]["target"] and "scripted" in m["target"] for m in made)
    assert {m["one_way_delay_ms"] for m in made} >= {4, 1}
    assert any(m["queue_depth"] > 1 for m in made)
    assert any(m["starts_mid_session"] for m in made)
    assert any(m["digests"]["header"] for m in made)
    assert any("test-cu" in m["initiator"] for m in made)
    # causes set by configuration (captures/lab/lab.py section 10): the window, loss and think findings
    # are each required by some expectation, on a capture whose cause is configured
    required = {k for e in lab for x in e["expect"] for k in x.get("findings", {})}
    assert {"cwnd_limited", "rwnd_limited", "retransmission", "target_think"} <= required, required
    conf = [m.get("configured", {}) for m in made]
    assert any("wire_loss" in c for c in conf)
    assert any("initiator_so_rcvbuf" in c for c in conf)
    assert any("target_think_ms_by_read_bytes" in c for c in conf)
    assert any(c.get("sysctls_both_peers", {}).get("net.ipv4.tcp_slow_start_after_idle") == "1" for c in conf)
    size = sum(p.stat().st_size for p in CAPTURES.rglob("*") if p.is_file())
    assert size < 30 * 1024 * 1024, "captures/ is %d bytes" % size


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_fixture_exists_and_is_gzip_pcap(entry):
    p = CAPTURES / entry["file"]
    assert p.is_file(), p
    if p.suffix == ".gz":
        with gzip.open(p) as f:
            magic = f.read(4)
        assert magic in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
                         b"\x0a\x0d\x0d\x0a"), magic


@needs_tshark
@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_tshark_sees_the_expected_pdus(entry):
    p = CAPTURES / entry["file"]
    r = subprocess.run(["capinfos", "-c", "-M", str(p)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    pdus = tshark_pdus(p)
    assert pdus == entry["tshark"]["pdus_by_opcode"]
    assert pdus.get("0x01", 0) == entry["tshark"]["scsi_commands"]
    if entry["made"].get("lab", True):
        assert entry["tshark"]["scsi_commands"] > 0
        if not entry["made"]["starts_mid_session"]:
            assert pdus.get("0x03", 0) >= 1 and pdus.get("0x23", 0) >= 1, "every lab capture holds its login"
        else:
            assert pdus.get("0x03", 0) == 0, "the mid-session capture must not hold a login"


def test_noisy_set_is_late_start_with_jitter_on_every_frame():
    """Issue 26's lab: late-start captures (tcpdump started after the login) at both vantages and mid-path,
    on a wire that spreads every frame or whose consecutive frames share a queueing delay, bounded at 40% of
    the one-way delay."""
    noisy = [e for e in ENTRIES if e.get("set") == "noisy"]
    assert noisy
    by_scn = {}
    for e in noisy:
        m = e["made"]
        by_scn.setdefault(e["scenario"], set()).add(m["vantage"])
        assert m["capture_joins"] and m["starts_mid_session"], e["file"]
        jit, queue = m.get("jitter"), m.get("queue_jitter")
        assert bool(jit) != bool(queue), e["file"]
        bound = (jit or queue)["max_us"]
        assert abs(bound - 400 * m["one_way_delay_ms"]) <= 1, (e["file"], bound)
        if jit:
            assert jit["percent"] == 100, e["file"]
        else:
            assert queue["step_us"] >= queue["max_us"], e["file"]
    for scn, vs in by_scn.items():
        assert vs == VANTAGES, scn
    # every Nagle, delayed-ACK and window scenario, and a think one, with both kinds of jitter
    bases = {e["made"]["base_scenario"] for e in noisy}
    assert {"scripted-nagle-read-1k", "scripted-nagle-read-8k", "initiator-nagle-write-1k", "initiator-nagle-write-8k",
            "target-nagle-read-batch2", "initiator-rcvbuf-read", "stock-idle-read", "scripted-think-read"} <= bases
    assert any(e["made"].get("jitter") for e in noisy) and any(e["made"].get("queue_jitter") for e in noisy)
    # one data centre, 4 ms, a metro link
    delays = {e["made"]["one_way_delay_ms"] for e in noisy}
    assert any(d <= 0.5 for d in delays) and 4.0 in delays and any(25 <= d <= 50 for d in delays), delays


def test_link_set_covers_the_issue():
    """Issue 32's lab: 100 Mbit/s and 1 Gbit/s wires at 1 and 25 ms one way, 64 KiB-1 MiB reads and writes,
    two sessions sharing a 100 Mbit/s wire; link_limited (side network) where the configuration makes the
    link the limit, and no link_limited where it does not."""
    link = [e for e in ENTRIES if e.get("set") == "link"]
    assert link
    made = [e["made"] for e in link]
    assert {(m["link_mbit_s"], m["one_way_delay_ms"]) for m in made} >= {(100, 1.0), (100, 25.0), (1000, 1.0),
                                                                        (1000, 25.0)}
    assert any(m.get("sessions", 1) == 2 and m["link_mbit_s"] == 100 for m in made)
    for e in link:
        assert {e["made"]["vantage"]} <= {"initiator", "target"}
    exps = [x for e in link for x in e["expect"]]
    bound = [x for x in exps if x["findings"].get("link_limited") == "network"]
    free = [x for x in exps if "link_limited" in x.get("absent", [])]
    assert bound and free
    for x in bound:
        assert {"cwnd_limited", "rwnd_limited", "delayed_ack", "target_think"} <= set(x["absent"]), x["select"]
    sizes = {(x["select"]["op"], x["select"]["bytes"]) for x in bound}
    assert {("read", 65536), ("write", 65536), ("read", 1048576), ("write", 1048576)} <= sizes
    # elsewhere no expectation names the new kind
    assert not any("link_limited" in x.get("findings", {}) for e in ENTRIES if e.get("set") != "link"
                   for x in e["expect"])
