#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Write captures/MANIFEST.json: how each fixture was made, what tshark sees in it, and what
iscsi-doctor must find in it.

Expectations come from the configuration of each scenario (EXPECT below) and are CHECKED here
against timings measured with tshark at the initiator vantage (never against iscsi-doctor):
a command "takes k round trips" when its latency from the first segment of the command PDU to
the status frame is about k x RTT; a delayed ACK adds ~40 ms on top.  A scenario whose measured
timings do not support its expectations makes this script fail, so a regenerated manifest never
states what the captures do not show.

  manifest.py --made RAW/made.json --captures captures/ [--only a,b]   (after a lab run)
  manifest.py --captures captures/              (rebuild from the fixtures present, 'made' from lab.py)
  manifest.py --captures captures/ --check      (re-measure the committed fixtures, check only)
"""

import argparse
import concurrent.futures
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402
import lab  # noqa: E402

NO_HOLDS = ["nagle_hold", "delayed_ack", "r2t_round_trip", "retransmission"]


def one_rt(op, nbytes, frac=0.9, why=None):
    e = {"select": {"op": op, "bytes": nbytes}, "min_fraction": frac, "round_trips": 1, "ideal_round_trips": 1,
         "findings": {}, "absent": list(NO_HOLDS)}
    if why:
        e["why"] = why
    return e


# Scenario -> list of expectations (vantage-independent: a round trip is a round trip wherever it is
# observed) and the session-level findings.  "serialized" is stated only for queue-depth-1 workloads
# (qemu-io runs its -c commands one after the other), "absent" for the queue-depth-8 ones.
EXPECT = {
    "stock-read": {
        "commands": [one_rt("read", 1024), one_rt("read", 8192),
                     one_rt("read", 65536, 0.8, "the first 64 KiB reads of the connection may still be in slow start")],
        "session": {"findings": ["serialized"]}},
    "stock-write": {
        "commands": [one_rt("write", 1024), one_rt("write", 8192),
                     {"select": {"op": "write", "bytes": 65536}, "min_fraction": 0.8,
                      "round_trips": 2, "ideal_round_trips": 2,
                      "findings": {"r2t_round_trip": "target"},
                      "absent": ["nagle_hold", "delayed_ack"],
                      "why": "InitialR2T=Yes (tgtd default) and MaxRecvDataSegmentLength 8192: 8 KiB go as immediate "
                             "data, the other 56 KiB wait for an R2T; with InitialR2T=No they would have gone unsolicited "
                             "(FirstBurstLength 65536). ideal_round_trips counts what the NEGOTIATED keys need (2). "
                             "min_fraction 0.8: the first writes may be slow-start limited."}],
        "session": {"findings": ["serialized"]}},
    "stock-write-64k-unsolicited": {
        "commands": [one_rt("write", 65536, 0.8, "InitialR2T=No, FirstBurstLength 65536: immediate + unsolicited "
                                                  "Data-Out, no R2T; the first writes may be slow-start limited")],
        "session": {"findings": ["serialized"]}},
    "stock-1m": {
        "commands": [{"select": {"op": "read", "bytes": 1048576}, "min_fraction": 1.0,
                      "absent": ["nagle_hold", "delayed_ack", "r2t_round_trip"]},
                     {"select": {"op": "write", "bytes": 1048576}, "min_fraction": 1.0,
                      "absent": ["nagle_hold", "delayed_ack"],
                      "why": "1 MiB writes need several R2T cycles (MaxBurstLength 256 KiB) whatever the keys; "
                             "round trips depend on the congestion window, so none are stated"}],
        "session": {"findings": ["serialized"]}},
    "target-nagle-read-batch2": {
        "commands": [],   # filled in below once measured shape is known
        "session": {}},
    "target-nagle-write-batch2": {
        "commands": [one_rt("write", 4096, 0.9, "first of each batch: its SCSI Response leaves at once"),
                     {"select": {"op": "write", "bytes": 2048}, "min_fraction": 0.9, "round_trips": 2,
                      "ideal_round_trips": 1,
                      "findings": {"nagle_hold": "target", "delayed_ack": "initiator"},
                      "absent": ["r2t_round_trip"],
                      "why": "second of each batch: its 48-byte SCSI Response is held by tgtd's Nagle until the "
                             "initiator's delayed ACK of the first Response (~40 ms)"}],
        "session": {}},
    "initiator-nagle-write-1k": {
        "commands": [{"select": {"op": "write", "bytes": 1024}, "min_fraction": 0.9, "round_trips": 2,
                      "ideal_round_trips": 1,
                      "findings": {"nagle_hold": "initiator", "delayed_ack": "target"},
                      "absent": ["r2t_round_trip"],
                      "why": "libiscsi writes the 48-byte header and the 1 KiB immediate data separately; "
                             "the data waits for tgtd's delayed ACK of the header"}],
        "session": {"findings": ["serialized"]}},
    "initiator-nagle-write-8k": {
        "commands": [{"select": {"op": "write", "bytes": 8192}, "min_fraction": 0.9, "round_trips": 2,
                      "ideal_round_trips": 1,
                      "findings": {"nagle_hold": "initiator"},
                      "absent": ["r2t_round_trip", "delayed_ack"],
                      "why": "the full-sized segments of the immediate data leave at once, the sub-MSS tail waits for "
                             "the ACK of the 48-byte header, which tgtd sends at once (it received >= 2 full segments)"}],
        "session": {"findings": ["serialized"]}},
    "scripted-nagle-read-8k": {
        "commands": [],
        "session": {"findings": ["serialized"]}},
    "scripted-nagle-read-8k-1ms": {
        "commands": [],
        "session": {"findings": ["serialized"]}},
    "scripted-nagle-read-1k": {
        "commands": [{"select": {"op": "read", "bytes": 1024}, "min_fraction": 0.9, "round_trips": 2,
                      "ideal_round_trips": 1,
                      "findings": {"nagle_hold": "target", "delayed_ack": "initiator"},
                      "absent": ["r2t_round_trip"],
                      "why": "the Data-In is one sub-MSS segment, the initiator delays its ACK (~40 ms), the 48-byte "
                             "SCSI Response waits for it (the study's delayed-ACK case)"}],
        "session": {"findings": ["serialized"]}},
    "scripted-nodelay-read-8k": {"commands": [one_rt("read", 8192)], "session": {"findings": ["serialized"]}},
    "scripted-nodelay-read-1k": {"commands": [one_rt("read", 1024)], "session": {"findings": ["serialized"]}},
    "scripted-nagle-coalesced-read-8k": {
        "commands": [one_rt("read", 8192, 0.9, "Nagle is on but Data-In and Response leave in one send(): "
                                               "nothing small is ever left waiting")],
        "session": {"findings": ["serialized"]}},
    "stock-rw-1ms": {"commands": [one_rt("read", 8192), one_rt("write", 8192)],
                     "session": {"findings": ["serialized"]}},
    "stock-qd8-read": {"commands": [one_rt("read", 4096)], "session": {"absent": ["serialized"]}},
    "stock-qd8-write": {"commands": [one_rt("write", 4096)], "session": {"absent": ["serialized"]}},
    "stock-read-midsession": {"commands": [one_rt("read", 8192)], "session": {"findings": ["serialized"]}},
    "stock-header-digest": {"commands": [one_rt("read", 8192), one_rt("write", 8192)],
                            "session": {"findings": ["serialized"]}},
    "test-cu": {"commands": [], "session": {}},
}

# the study's 2-round-trip case: Nagle hold released by an immediate ACK
_STUDY_8K = {"select": {"op": "read", "bytes": 8192}, "min_fraction": 0.9, "round_trips": 2, "ideal_round_trips": 1,
             "findings": {"nagle_hold": "target"}, "absent": ["delayed_ack", "r2t_round_trip"],
             "why": "Data-In of 8 KiB = 5 full segments + a 1000-byte tail; the initiator ACKs the tail at once "
                    "(two segments unacknowledged) and the held 48-byte SCSI Response leaves when that ACK arrives"}
EXPECT["scripted-nagle-read-8k"]["commands"] = [_STUDY_8K]
EXPECT["scripted-nagle-read-8k-1ms"]["commands"] = [
    {"select": {"op": "read", "bytes": 8192}, "min_fraction": 0.9, "round_trips": 2, "ideal_round_trips": 1,
     "findings": {"nagle_hold": "target"}, "absent": ["r2t_round_trip"],
     "why": "at 1 ms one way the initiator sometimes ACKs the Data-In tail at once (2 round trips, ~4.5 ms) and more "
            "often only after its delayed-ACK timer (~40 ms more): whether it does depends on whether qemu has read "
            "the earlier segments when the tail arrives. Either way the Response is held by Nagle until that ACK; "
            "delayed_ack is therefore neither required nor excluded here"}]
EXPECT["target-nagle-read-batch2"]["commands"] = [
    one_rt("read", 1024, 0.9, "first of each batch: its Data-In (with status) leaves at once"),
    {"select": {"op": "read", "bytes": 512}, "min_fraction": 0.9, "round_trips": 2, "ideal_round_trips": 1,
     "findings": {"nagle_hold": "target", "delayed_ack": "initiator"}, "absent": ["r2t_round_trip"],
     "why": "second of each batch: its sub-MSS Data-In is held by tgtd's Nagle until the initiator's delayed ACK "
            "of the first"}]


def check_expectations(scenario, m, delay_ms):
    """Check each expectation against per-command latencies measured at the initiator vantage."""
    rtt = m["rtt_ms"] or (2 * delay_ms + 0.2)   # no handshake (mid-session): the configured RTT
    problems = []
    checks = []
    for e in EXPECT.get(scenario, {}).get("commands", []):
        sel = [c for c in m["per_command"] if c["op"] == e["select"]["op"]
               and ("bytes" not in e["select"] or c["bytes"] == e["select"]["bytes"])
               and c["latency_ms"] is not None]
        if not sel:
            problems.append("%s: no commands match %s" % (scenario, e["select"]))
            continue
        if "round_trips" not in e:
            continue
        k = e["round_trips"]
        delayed = "delayed_ack" in e.get("findings", {})
        no_delay = "delayed_ack" in e.get("absent", [])
        ok = 0
        for c in sel:
            lat = c["latency_ms"]
            with_delack = lat >= (k - 1) * rtt + 25          # a ~40 ms delayed ACK on top
            plain = (k - 0.5) * rtt <= lat <= (k + 0.5) * rtt
            if delayed:
                good = with_delack
            elif no_delay:
                good = plain
            else:                # delayed ACK not stated either way: at least k round trips
                good = lat >= (k - 0.5) * rtt
            ok += good
        frac = ok / len(sel)
        checks.append({"select": e["select"], "round_trips": k, "fraction_ok": round(frac, 3), "n": len(sel)})
        if frac < e["min_fraction"]:
            problems.append("%s: %s expected %d round trip(s)%s for %.0f%%, measured %.0f%% of %d (median %.1f ms, "
                            "RTT %.1f ms)" % (scenario, e["select"], k, " + delayed ACK" if delayed else "",
                                              100 * e["min_fraction"], 100 * frac, len(sel),
                                              statistics.median(c["latency_ms"] for c in sel), rtt))
    return problems, checks


def wiki_entries(captures, old):
    """Entries for the public captures; re-measured only when the file changed (the 10 TB one takes long)."""
    cached = {c["file"]: c for c in old.get("captures", []) if not c["made"].get("lab", True)}
    d = os.path.join(captures, "wireshark-wiki")
    notes = {
        "iscsi-scsi-10TB-data-device": "MS iSCSI Initiator (Windows 2003) <-> Linux IET, 10 TB LUN",
        "iscsi-scsi-data-cdrom": "MS iSCSI initiator <-> IET exporting a SCSI CD-ROM",
        "iscsi-tapel": "open-iscsi <-> IET, EXABYTE EXB480 tape library (mtx)",
        "scsi-osd-example-001": "IBM osd_initiator <-> ibm-osd-sim (OSD over iSCSI)",
    }
    out = []
    if not os.path.isdir(d):
        return out
    for fn in sorted(os.listdir(d)):
        if not (fn.endswith(".pcap") or fn.endswith(".pcap.gz")):
            continue
        base = fn.split(".pcap")[0]
        size = os.path.getsize(os.path.join(d, fn))
        prev = cached.get("wireshark-wiki/" + fn)
        if prev and prev.get("file_bytes") == size:
            out.append(prev)
            continue
        m = measure.measure(os.path.join(d, fn), per_command=(os.path.getsize(os.path.join(d, fn)) < 1000000))
        out.append({
            "file": "wireshark-wiki/" + fn,
            "file_bytes": size,
            "scenario": "wireshark-wiki-" + base,
            "made": {"source": "Wireshark wiki SampleCaptures (via the ajbanjara/Wireshark GitHub mirror, commit "
                               "638000d57b7990b73c5aee0e79325057aaa56883); see wireshark-wiki/SOURCES.txt",
                     "license": "GNU GPL (Wireshark wiki content)",
                     "peers": notes.get(base, "?"),
                     "vantage": "unknown", "one_way_delay_ms": None, "lab": False},
            "measured": {"rtt_ms": m["rtt_ms"], "commands": m["tshark"]["scsi_commands"],
                         "median_latency_ms": m["median_latency_ms"] or None},
            "expect": [],
            "tshark": m["tshark"],
        })
    return out


def readme_table(cap, doc):
    """Rewrite the fixture table of captures/README.md (between the markers) from the manifest."""
    path = os.path.join(cap, "README.md")
    if not os.path.exists(path):
        return
    text = open(path).read()
    begin, end = "<!-- fixtures:begin (generated by lab/manifest.py) -->", "<!-- fixtures:end -->"
    if begin not in text or end not in text:
        return
    import lab as labmod
    rows = ["| file | KiB | RTT ms | cmds | median latency ms (first segment -> status) | expect |",
            "|---|---:|---:|---:|---|---|"]
    last = None
    for c in doc["captures"]:
        if c["scenario"] != last and c["made"].get("lab", True):
            sc = labmod.SCENARIOS.get(c["scenario"], {})
            rows.append("| **%s** — %s | | | | | |" % (c["scenario"], sc.get("doc", "")))
        last = c["scenario"]
        med = ", ".join("%s: %s" % (k, v) for k, v in sorted((c["measured"].get("median_latency_ms") or {}).items(),
                                                              key=lambda kv: (kv[0].split()[0], int(kv[0].split()[1])))
                        ) if len(c["measured"].get("median_latency_ms") or {}) <= 6 else "(%d sizes)" % len(
            c["measured"]["median_latency_ms"])
        exp = "; ".join("%s %s: %s RT%s%s" % (
            e["select"]["op"], e["select"].get("bytes", "all"), e.get("round_trips", "-"),
            "".join(", %s(%s)" % (k, v) for k, v in e.get("findings", {}).items()),
            "" if not e.get("absent") else ", no " + "/".join(a for a in e["absent"] if a != "retransmission"))
            for e in c["expect"])
        rows.append("| %s | %d | %s | %d | %s | %s |" % (
            c["file"], round(c.get("file_bytes", 0) / 1024), c["measured"].get("rtt_ms") or "-",
            c["measured"].get("commands") or 0, med or "-", exp or "-"))
    a = text.index(begin) + len(begin)
    b = text.index(end)
    with open(path, "w") as f:
        f.write(text[:a] + "\n" + "\n".join(rows) + "\n" + text[b:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--made")
    ap.add_argument("--captures", required=True)
    ap.add_argument("--only")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    cap = os.path.abspath(args.captures)
    mpath = os.path.join(cap, "MANIFEST.json")
    old = json.load(open(mpath)) if os.path.exists(mpath) else {"schema": 1, "captures": []}

    if args.check:
        made = [{"scenario": c["scenario"], "vantage": c["made"]["vantage"], "file": c["file"], "made": c["made"]}
                for c in old["captures"] if c["made"].get("lab", True)]
    elif args.made:
        made = json.load(open(args.made))
        for m in made:
            m["file"] = "fixtures/%s--%s.pcap.gz" % (m["scenario"], m["vantage"])
    else:
        vers = lab.versions()
        made = []
        for fn in sorted(os.listdir(os.path.join(cap, "fixtures"))):
            if not fn.endswith(".pcap.gz"):
                continue
            sc, v = fn[:-len(".pcap.gz")].rsplit("--", 1)
            made.append({"scenario": sc, "vantage": v, "file": "fixtures/" + fn,
                         "made": lab.made_block(lab.SCENARIOS[sc], v, vers)})

    entries = []
    problems = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        measured = list(pool.map(lambda m: measure.measure(os.path.join(cap, m["file"])), made))
    for m, meas in zip(made, measured):
        path = os.path.join(cap, m["file"])
        sc = m["scenario"]
        exp = json.loads(json.dumps(EXPECT.get(sc, {"commands": [], "session": {}})))
        checks = None
        if m["vantage"] == "initiator":
            pr, checks = check_expectations(sc, meas, m["made"]["one_way_delay_ms"])
            problems += pr
        session = dict(exp["session"])
        session["vantage"] = m["vantage"]
        made_block = dict(m["made"])
        made_block["lab"] = True
        measured_block = {"rtt_ms": meas["rtt_ms"], "commands": meas["commands"],
                          "median_latency_ms": meas["median_latency_ms"],
                          "commands_by_kind": meas["count_by_kind"],
                          "latency_definition": "first segment of the SCSI Command PDU -> frame completing the "
                                                "status (tshark), milliseconds"}
        if checks:
            measured_block["expectation_checks"] = checks
        entries.append({
            "file": m["file"],
            "file_bytes": os.path.getsize(path),
            "scenario": sc,
            "made": made_block,
            "measured": measured_block,
            "expect": exp["commands"],
            "session": session,
            "tshark": meas["tshark"],
        })
        print("%-55s rtt %-6s cmds %-4d %s" % (m["file"], meas["rtt_ms"], meas["commands"],
                                               meas["median_latency_ms"]), file=sys.stderr)

    for p in problems:
        print("EXPECTATION NOT MET: " + p, file=sys.stderr)
    if args.check:
        return 1 if problems else 0
    if problems:
        print("manifest.py: not writing MANIFEST.json: measured timings contradict the expectations above",
              file=sys.stderr)
        return 1

    keep = []
    if args.only:
        names = set(args.only.split(","))
        keep = [c for c in old["captures"] if c["made"].get("lab", True) and c["scenario"] not in names]
    order = {n: i for i, n in enumerate(lab.SCENARIOS)}
    vorder = {"initiator": 0, "target": 1, "midpath": 2}
    allc = sorted(keep + entries, key=lambda c: (order.get(c["scenario"], 999), vorder.get(c["made"]["vantage"], 9))
                  ) + wiki_entries(cap, old)
    doc = {"schema": 1,
           "about": "Fixtures of the iscsi-doctor capture lab (captures/lab/, see captures/README.md) and four public "
                    "captures. 'made' says how each was made, 'measured' what tshark measured, 'expect' what iscsi-doctor "
                    "must find per command (select.op by CDB: read/write/other; select.bytes = expected data transfer "
                    "length; min_fraction of the selected commands must satisfy round_trips/ideal_round_trips/"
                    "findings (kind -> side)/absent), 'session' what the session-level report must say, 'tshark' what "
                    "Wireshark's iSCSI dissector sees (default preferences).",
           "captures": allc}
    with open(mpath, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("manifest.py: wrote %s (%d captures)" % (mpath, len(allc)), file=sys.stderr)
    readme_table(cap, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
