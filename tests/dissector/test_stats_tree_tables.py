# SPDX-License-Identifier: GPL-2.0-or-later
"""The statistics tree's tables (-z iscsi_doctor,tree: "By target", "By initiator", "By LUN") hold
the rows of the CLI's summary.targets, summary.initiators and summary.luns, each counting the same
completed SCSI commands, with their average latency and round trips against the ideal as the CLI's
commands give them; the LUNs and endpoints are the ones Wireshark's own iSCSI dissector reads."""
import collections
import gzip
import re
import struct
import subprocess

import pytest

from conftest import ROOT, TSHARK, cli_report

CAPTURES = [ROOT / "captures" / p for p in (
    "wireshark-wiki/iscsi-tapel.pcap.gz",                # one session, five LUNs
    "wireshark-wiki/iscsi-scsi-10TB-data-device.pcap.gz",  # one session, four LUNs
    "fixtures/test-cu--initiator.pcap.gz",               # 28 sessions on one target
)]
TABLES = {"By target": "targets", "By initiator": "initiators", "By LUN": "luns"}


def parse_tree(text):
    """tshark's -z ...,tree text as nested nodes: name -> {"count", "average", "percent", "children"}
    (columns cut where the header puts them; depth from the indentation)."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Topic / Item"))
    cols = {name: lines[head].index(name)
            for name in ("Count", "Average", "Min Val", "Percent", "Burst Rate")}
    root = {"children": {}}
    stack = [(-1, root)]
    for line in lines[head + 2:]:
        if not line.strip() or line.startswith("="):
            break
        depth = len(line) - len(line.lstrip(" "))
        name = line[:cols["Count"]].strip()
        node = {"count": int(line[cols["Count"]:cols["Average"]]),
                "average": line[cols["Average"]:cols["Min Val"]].strip(),
                "percent": line[cols["Percent"]:cols["Burst Rate"]].strip(),
                "children": {}}
        while stack[-1][0] >= depth:
            stack.pop()
        stack[-1][1]["children"][name] = node
        stack.append((depth, node))
    return root["children"]["iSCSI Doctor"]["children"]


def row_name(table, row):
    """A CLI table row as the tree names it (the text report's words: "target ... LUN n")."""
    if table == "luns":
        return f"{row['target']} LUN {row['lun']}" if row["lun"] is not None else row["target"]
    return row["initiator" if table == "initiators" else "target"]


def command_rows(report):
    """(table, row name) -> the CLI's completed SCSI commands it counts (the JSON's commands list,
    each put under its connection's peers)."""
    peers = {(s["capture"], c["connection"]): (c["initiator"], c["target"])
             for s in report["sessions"] for c in s["connections"]}
    initiators = {r["initiator"] for r in report["summary"]["initiators"]}
    rows = collections.defaultdict(list)
    for c in report["commands"]:
        if c["iscsi_opcode"] != 1 or not c["completed"]:
            continue
        ini, tgt = peers[(c["capture"], c["connection"])]
        addr = ini.rsplit(":", 1)[0]
        addr = addr if addr in initiators else addr.strip("[]")
        rows[("targets", tgt)].append(c)
        rows[("initiators", addr)].append(c)
        rows[("luns", f"{tgt} LUN {c['lun']}")].append(c)
    return rows


def tshark_scsi_commands(path):
    """(target address:port, LUN) -> SCSI Command PDUs as Wireshark's iSCSI dissector reads them,
    one per (TCP stream, ITT, CmdSN) so a retransmitted PDU counts once; and the initiators'
    addresses. Frames whose LUNs do not line up with their Command PDUs are left out (as in
    tests/integration/test_filters.py)."""
    out = subprocess.run([TSHARK, "-n", "-r", str(path), "-Y", "iscsi.opcode == 0x01", "-T", "fields",
                          "-E", "occurrence=a", "-e", "ip.src", "-e", "ip.dst", "-e", "tcp.dstport",
                          "-e", "tcp.stream", "-e", "iscsi.opcode", "-e", "iscsi.initiatortasktag",
                          "-e", "iscsi.cmdsn", "-e", "scsi.lun"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    seen, initiators = {}, set()
    for line in out.splitlines():
        src, dst, port, stream, ops, itts, cmdsns, lun_fields = (line.split("\t") + [""] * 8)[:8]
        op_list = ops.split(",")
        cmds = [(i, n) for op, i, n in zip(op_list, itts.split(","), cmdsns.split(",")) if op == "0x01"]
        luns = [x for x in lun_fields.split(",") if x]
        per = len(luns) // len(cmds) if cmds and len(luns) % len(cmds) == 0 else 0
        chunks = [luns[i * per:(i + 1) * per] for i in range(len(cmds))] if per else []
        if not per or any(len(set(ch)) != 1 for ch in chunks):
            continue
        initiators.add(src.split(",")[-1])
        target = f"{dst.split(',')[-1]}:{port}"
        for (itt, cmdsn), ch in zip(cmds, chunks):
            seen[(stream, itt, cmdsn)] = (target, int(ch[0], 16))
    return collections.Counter(seen.values()), initiators


def check_tables(tree, report):
    summary = report["summary"]
    by_command = command_rows(report)
    for node, table in TABLES.items():
        assert node in tree, f"no {node!r} under the root: {list(tree)}"
        rows = tree[node]["children"]
        want = {row_name(table, r): r for r in summary[table] if r["commands"]}
        # The same rows, counting the same completed SCSI commands.
        assert {n: r["count"] for n, r in rows.items()} == {n: r["commands"] for n, r in want.items()}, node
        assert tree[node]["count"] == sum(r["commands"] for r in want.values()) == summary["completed"] - sum(
            1 for c in report["commands"] if c["completed"] and c["iscsi_opcode"] != 1)
        for name, r in rows.items():
            cmds = by_command[(table, name)]
            assert len(cmds) == r["count"], (node, name)
            kids = r["children"]
            # Averages over the row's commands, as tshark prints them (two decimals).
            assert kids["latency (us)"]["count"] == r["count"]
            assert float(kids["latency (us)"]["average"]) / 1000 == pytest.approx(
                sum(c["latency_ms"] for c in cmds) / len(cmds), abs=0.001), (node, name)
            for kid, key in (("round trips", "round_trips"), ("ideal round trips", "ideal_round_trips")):
                assert kids[kid]["count"] == r["count"]
                assert float(kids[kid]["average"]) == pytest.approx(
                    sum(c[key] for c in cmds) / len(cmds), abs=0.006), (node, name, kid)
            # Excess round trips per command: Count x Average is the CLI's total.
            excess = kids["excess round trips"]
            assert excess["count"] == r["count"]
            assert excess["count"] * float(excess["average"]) == pytest.approx(
                want[name]["excess_round_trips"], abs=0.006 * r["count"]), (node, name)
            assert want[name]["excess_round_trips"] == sum(c["round_trips"] - c["ideal_round_trips"]
                                                          for c in cmds)
            # Percent: the row's share of its table's commands.
            assert float(r["percent"].rstrip("%")) == pytest.approx(100 * r["count"] / tree[node]["count"],
                                                                    abs=0.006), (node, name)


def check_against_wireshark(tree, report, path):
    wire, initiators = tshark_scsi_commands(path)
    assert wire, f"{path}: Wireshark reads no SCSI Command PDU"
    summary = report["summary"]
    # Wireshark's SCSI commands per target and LUN: the CLI's completed and never answered ones.
    assert wire == {(r["target"], r["lun"]): r["commands"] + r["never_answered"]
                    for r in summary["luns"] if r["commands"] + r["never_answered"]}
    assert {f"{t} LUN {lun}" for (t, lun), n in wire.items()} >= set(tree["By LUN"]["children"])
    assert {t for t, _ in wire} >= set(tree["By target"]["children"])
    assert initiators >= set(tree["By initiator"]["children"])


@pytest.mark.parametrize("two_pass", [False, True], ids=["one-pass", "two-pass"])
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name.split(".")[0])
def test_tables_equal_cli(tshark, path, two_pass):
    if not path.exists():
        pytest.skip(f"{path} missing")
    args = ["-n", "-q", "-r", str(path), "-z", "iscsi_doctor,tree"]
    tree = parse_tree(tshark(*(["-2"] if two_pass else []), *args).stdout)
    check_tables(tree, cli_report(path))


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name.split(".")[0])
def test_tables_as_wireshark_reads_the_commands(tshark, path):
    if not path.exists():
        pytest.skip(f"{path} missing")
    tree = parse_tree(tshark("-2", "-n", "-q", "-r", str(path), "-z", "iscsi_doctor,tree").stdout)
    check_against_wireshark(tree, cli_report(path), path)


def two_hosts(src, dst):
    """A capture of two initiators and two targets: src's records, then the same records with every
    IPv4 address's last byte moved by 100, both in time order (pcap over Ethernet)."""
    with gzip.open(src, "rb") as f:
        data = f.read()
    magic = data[:4]
    endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    if struct.unpack(endian + "I", data[20:24])[0] != 1:
        pytest.skip(f"{src}: not Ethernet")
    records, off = [], 24
    while off + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        records.append((sec, frac, data[off:off + 16], data[off + 16:off + 16 + incl]))
        off += 16 + incl

    def moved(frame):
        if len(frame) < 34 or frame[12:14] != b"\x08\x00":
            return frame
        b = bytearray(frame)
        for at in (14 + 15, 14 + 19):  # last byte of source and destination address
            b[at] = (b[at] + 100) % 256
        return bytes(b)  # checksums are left as they were: neither tshark nor the engine checks them

    both = sorted([(s, fr, i, h, p) for i, (s, fr, h, p) in enumerate(records)] +
                  [(s, fr, len(records) + i, h, moved(p)) for i, (s, fr, h, p) in enumerate(records)])
    with open(dst, "wb") as f:
        f.write(data[:24])
        for _, _, _, h, p in both:
            f.write(h + p)
    dst.chmod(0o644)
    return dst


def test_tables_two_initiators_two_targets(tshark, ws_home):
    src = ROOT / "captures" / "fixtures" / "stock-qd8-read--initiator.pcap.gz"
    if not src.exists():
        pytest.skip(f"{src} missing")
    path = two_hosts(src, ws_home / "two-hosts.pcap")
    report = cli_report(path)
    assert len(report["summary"]["targets"]) == 2 and len(report["summary"]["initiators"]) == 2
    for two_pass in (False, True):
        tree = parse_tree(tshark(*(["-2"] if two_pass else []), "-n", "-q", "-r", str(path),
                                 "-z", "iscsi_doctor,tree").stdout)
        check_tables(tree, report)
        assert len(tree["By target"]["children"]) == len(tree["By initiator"]["children"]) == 2
    check_against_wireshark(tree, report, path)


def tree_rows(text):
    """Every row of tshark's -z ...,tree text: (path of names, Count, Average, Min Val, Max Val)."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Topic / Item"))
    names = ("Count", "Average", "Min Val", "Max Val", "Rate (ms)")
    cols = [lines[head].index(n) for n in names]
    rows, path = [], []
    for line in lines[head + 2:]:
        if not line.strip() or line.startswith("="):
            break
        depth = len(line) - len(line.lstrip(" "))
        path = path[:depth] + [line[:cols[0]].strip()]
        cells = [line[a:b].strip() for a, b in zip(cols, cols[1:])]
        rows.append((tuple(path), int(cells[0]), *cells[1:]))
    return rows


@pytest.mark.parametrize("path", [ROOT / "captures" / "fixtures" /
                                  "scripted-nagle-read-1k--initiator.pcap.gz", CAPTURES[0]],
                         ids=lambda p: p.name.split(".")[0])
def test_columns_mean_their_headings(tshark, path):
    """Count counts (commands in one tree, findings in the other, so that Percent compares like
    with like and stays within 100%), never a time; no parent at Count 0; times are values of
    average nodes, in whole microseconds (no float noise); a kind's "time lost" is the CLI's time
    lost (each millisecond counted once, findings[].time_lost_ms summed), its touched time is
    named touched."""
    if not path.exists():
        pytest.skip(f"{path} missing")
    report = cli_report(path)
    rows = tree_rows(tshark("-2", "-n", "-q", "-r", str(path), "-z", "iscsi_doctor,tree").stdout)
    by_path = {r[0]: r for r in rows}
    for p, count, avg, lo, hi in rows:
        assert count > 0, f"{' / '.join(p)}: Count 0"
        if len(p) > 1:
            assert count <= by_path[p[:-1]][1], f"{' / '.join(p)}: more than its parent"
        for v in (avg, lo, hi):
            assert not re.search(r"\.\d{3,}", v), f"{' / '.join(p)}: float noise {v}"
        is_value = p[-1].endswith("(us)") or p[-1].endswith("round trips")
        assert bool(avg) == is_value, f"{' / '.join(p)}: Average {avg!r}"
        assert "(ms" not in p[-1] and "total" not in p[-1], p
    completed = sum(1 for c in report["commands"] if c["completed"] and c.get("status_frame"))
    assert by_path[("iSCSI Doctor",)][1] == completed
    assert by_path[("iSCSI Doctor", "All sessions")][1] == completed
    kinds = collections.defaultdict(list)
    for f in report["findings"]:
        kinds[f["kind"]].append(f)
    assert kinds
    findings = ("iSCSI Doctor findings", "All sessions")
    assert by_path[("iSCSI Doctor findings",)][1] == len(report["findings"])
    assert by_path[findings][1] == len(report["findings"])
    for kind, fs in kinds.items():
        assert by_path[findings + (kind,)][1] == len(fs)
        _, n, avg, _, _ = by_path[findings + (kind, "touched per finding (us)")]
        assert n == len(fs)
        assert n * float(avg) / 1000 == pytest.approx(sum(f["touched_ms"] for f in fs),
                                                     abs=0.001 * n + 0.01)
        lost = sum(f["time_lost_ms"] for f in fs)
        row = by_path.get(findings + (kind, "commands delayed", "time lost (us)"))
        if row is None:  # a connection-level kind (serialized): no command's time is its own
            assert lost == 0, kind
            continue
        _, n, avg, _, _ = row
        assert n * float(avg) / 1000 == pytest.approx(lost, abs=0.001 * n + 0.01), kind
