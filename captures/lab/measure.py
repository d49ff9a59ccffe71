#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Measure a capture with tshark only (never with iscsi-doctor).

  measure.py CAPTURE...   -> JSON on stdout: per capture the tshark block (PDUs by opcode,
                             SCSI commands) and timings (handshake RTT, per-command latency).

Definitions
- pdus_by_opcode: every iSCSI PDU Wireshark's dissector reports (field iscsi.opcode, all
  occurrences per frame, default preferences: TCP reassembly on), keyed "0x%02x".
- scsi_commands: the number of SCSI Command PDUs (opcode 0x01).
- rtt_ms: for each TCP connection with a full handshake, (SYN/ACK - SYN) + (ACK - SYN/ACK) as
  seen at the capture point; the median over connections.  At the initiator that is the
  initiator->target->initiator round trip, at the target the same plus nothing, mid-path the
  two halves.  None when no handshake was captured.
- per command: latency = time of the frame that completes the status (SCSI Response, or Data-In
  with the S bit; Wireshark's iscsi.request_frame pairing) - time of the FIRST segment of the
  SCSI Command PDU (from Wireshark's tcp.segments of the reassembled PDU).  Wireshark's own
  iscsi.time counts from the frame that completes the command PDU instead; it is kept as
  wireshark_time_ms (it differs when the header and immediate data travel separately).
  op = read/write/other from the CDB opcode (READ/WRITE 6/10/12/16).
"""

import json
import statistics
import subprocess
import sys

READ_OPS = {0x08, 0x28, 0xA8, 0x88}
WRITE_OPS = {0x0A, 0x2A, 0xAA, 0x8A}


def tshark(args):
    r = subprocess.run(["tshark"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("tshark %s: %s" % (" ".join(args), r.stderr))
    return r.stdout


def fields_pass(path):
    """One -T fields pass over every frame: times, PDU opcodes, handshake flags, PDU segments."""
    out = tshark(["-r", path, "-T", "fields", "-e", "frame.number", "-e", "frame.time_epoch", "-e", "tcp.stream",
                  "-e", "tcp.flags.syn", "-e", "tcp.flags.ack", "-e", "tcp.seq", "-e", "tcp.ack", "-e", "tcp.len",
                  "-e", "iscsi.opcode", "-e", "tcp.segment"])
    times, counts, segmap, st = {}, {}, {}, {}
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) < 10 or not f[0]:
            continue
        num, t = int(f[0]), float(f[1])
        times[num] = t
        ops = [o for o in f[8].split(",") if o]
        for op in ops:
            key = "0x%02x" % int(op, 16)
            counts[key] = counts.get(key, 0) + 1
        if f[9] and "0x01" in ["0x%02x" % int(o, 16) for o in ops]:
            segmap[num] = [int(x) for x in f[9].split(",") if x]
        if not f[2]:
            continue
        syn, ack = f[3] in ("1", "True"), f[4] in ("1", "True")
        d = st.setdefault(int(f[2]), {})
        if syn and not ack:
            d.setdefault("syn", t)
        elif syn and ack:
            d.setdefault("synack", t)
        elif "synack" in d and "ack" not in d and f[5] == "1" and f[6] == "1" and f[7] == "0":
            d["ack"] = t
    rtts = [(d["synack"] - d["syn"]) + (d["ack"] - d["synack"]) for d in st.values()
            if {"syn", "synack", "ack"} <= d.keys()]
    return times, dict(sorted(counts.items())), segmap, rtts


def pdu_counts(path):
    return fields_pass(path)[1]


def as_list(x):
    if x is None:
        return []
    return x if isinstance(x, list) else [x]


def commands(path, times=None, segmap=None):
    """Per SCSI command: itt, op, cdb opcode, bytes, first/last frame of the command PDU, status
    frame, latency from the command's first segment and Wireshark's iscsi.time (from the frame
    that completes the command PDU)."""
    if times is None:
        times, _, segmap, _ = fields_pass(path)
    out = tshark(["-r", path, "-Y", "iscsi", "-T", "json", "--no-duplicate-keys", "-j", "frame iscsi scsi"])
    frames = json.loads(out) if out.strip() else []
    cmds = {}        # (cmd frame, itt) -> dict
    done = []
    for fr in frames:
        L = fr["_source"]["layers"]
        num = int(L["frame"]["frame.number"]) if isinstance(L["frame"], dict) else int(L["frame"][0]["frame.number"])
        t = float(L["frame"]["frame.time_epoch"])
        isc = as_list(L.get("iscsi"))
        scs = [s for s in as_list(L.get("scsi")) if isinstance(s, dict)]
        # the SCSI layers of command PDUs are those without scsi.request_frame
        cdb_layers = [s for s in scs if "scsi.request_frame" not in s]
        seg_frames = segmap.get(num, [])
        ci = 0
        for pi, p in enumerate(isc):
            if not isinstance(p, dict):
                continue
            op = int(p.get("iscsi.opcode", "0"), 16)
            itt = p.get("iscsi.initiatortasktag")
            if op == 0x01:
                cdb_op = None
                if ci < len(cdb_layers):
                    s = cdb_layers[ci]
                    for k in ("scsi_sbc.opcode", "scsi.spc.opcode", "scsi_ssc.opcode", "scsi_mmc.opcode",
                              "scsi_smc.opcode", "scsi_osd.opcode"):
                        if k in s:
                            cdb_op = int(s[k], 16)
                            break
                ci += 1
                # the command PDU started in an earlier segment when it is the first PDU of a
                # reassembled frame (e.g. header and immediate data written separately)
                first = min(seg_frames) if (pi == 0 and seg_frames) else num
                cmds[(num, itt)] = {"itt": itt, "cdb": cdb_op,
                                    "bytes": int(p.get("iscsi.scsicommand.expecteddatatransferlength", "0")),
                                    "cmd_frame": num, "first_frame": first, "t0": times.get(first, t)}
            if "iscsi.time" in p and "iscsi.request_frame" in p and op in (0x21, 0x25):
                key = (int(p["iscsi.request_frame"]), itt)
                c = cmds.get(key)
                if c is not None and "status_frame" not in c:
                    c["status_frame"] = num
                    c["ws_time"] = float(p["iscsi.time"])
                    c["latency"] = t - c["t0"]
                    done.append(c)
    res = []
    for c in cmds.values():
        op = "read" if c["cdb"] in READ_OPS else "write" if c["cdb"] in WRITE_OPS else "other"
        res.append({"itt": c["itt"], "op": op, "cdb": c["cdb"], "bytes": c["bytes"],
                    "first_frame": c["first_frame"], "cmd_frame": c["cmd_frame"],
                    "status_frame": c.get("status_frame"),
                    "latency_ms": round(c["latency"] * 1000, 3) if "latency" in c else None,
                    "wireshark_time_ms": round(c["ws_time"] * 1000, 3) if "ws_time" in c else None})
    res.sort(key=lambda c: c["cmd_frame"])
    return res


def measure(path, per_command=True):
    times, pdus, segmap, rtts = fields_pass(path)
    cmds = commands(path, times, segmap) if per_command else []
    groups = {}
    for c in cmds:
        if c["latency_ms"] is None or c["op"] == "other":
            continue
        groups.setdefault("%s %d" % (c["op"], c["bytes"]), []).append(c["latency_ms"])
    return {
        "tshark": {"scsi_commands": pdus.get("0x01", 0), "pdus_by_opcode": pdus},
        "rtt_ms": round(statistics.median(rtts) * 1000, 2) if rtts else None,
        "connections_with_handshake": len(rtts),
        "commands": len(cmds),
        "median_latency_ms": {k: round(statistics.median(v), 2) for k, v in sorted(groups.items())},
        "count_by_kind": {k: len(v) for k, v in sorted(groups.items())},
        "per_command": cmds,
    }


def main():
    out = {}
    brief = "--brief" in sys.argv
    for p in [a for a in sys.argv[1:] if not a.startswith("--")]:
        m = measure(p)
        if brief:
            del m["per_command"]
        out[p] = m
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
