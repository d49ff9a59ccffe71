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


TARGET_PORT = 3260


def tcp_frames(path):
    """Every TCP frame of the capture with what tshark's TCP analysis says about it (default preferences)."""
    fields = ["frame.number", "frame.time_epoch", "tcp.stream", "tcp.srcport", "tcp.len", "tcp.seq", "tcp.ack",
              "tcp.window_size", "tcp.analysis.bytes_in_flight", "tcp.analysis.window_full",
              "tcp.analysis.retransmission", "tcp.analysis.fast_retransmission", "tcp.analysis.out_of_order",
              "tcp.analysis.lost_segment", "tcp.flags.syn"]
    out = tshark(["-r", path, "-Y", "tcp", "-T", "fields"] + sum([["-e", f] for f in fields], []))
    frames = []
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) < len(fields) or not f[0]:
            continue
        frames.append({
            "n": int(f[0]), "t": float(f[1]), "stream": int(f[2]), "from_target": int(f[3]) == TARGET_PORT,
            "len": int(f[4] or 0), "seq": int(f[5] or 0), "ack": int(f[6] or 0),
            "win": int(f[7]) if f[7] else None, "in_flight": int(f[8]) if f[8] else None,
            "window_full": bool(f[9]), "retransmission": bool(f[10]) or bool(f[11]), "out_of_order": bool(f[12]),
            "lost_segment": bool(f[13]), "syn": f[14] in ("1", "True")})
    return frames


def tcp_detail(path, cmds, rtt_ms, mss=1448):
    """Per command (queue depth 1 workloads: one command at a time per connection), what TCP did for the
    target's reply, from tshark only:
      flights        segments of NEW reply data per flight; a flight ends where the target's data stops
                     for more than half the round trip (rtt_ms)
      flight_after_ack_ms  for each flight after the first: time from the latest ACK of the initiator seen
                     before the flight's first segment to that segment
      window_full    reply segments tshark flags as filling the initiator's advertised window
      resent         reply segments tshark flags as retransmission / fast retransmission (the original was
                     captured: sender side), or as out-of-order fillers of a hole (receiver side); with
                     resent_index, the position (1-based, in sequence order) of each resent segment among
                     the command's full-sized reply segments
      holes          reply segments tshark flags 'previous segment not captured'
      first_reply_ms time from the frame completing the command PDU to the target's first reply segment
      target_idle_ms time from the target's last data segment before the command to its first frame
      window         the initiator's advertised window (bytes, scaled) in the last ACK before the command"""
    frames = tcp_frames(path)
    by_n = {fr["n"]: i for i, fr in enumerate(frames)}
    gap = rtt_ms / 2000.0
    out = []
    starts = sorted(by_n[c["first_frame"]] for c in cmds if c["first_frame"] in by_n)
    for c in cmds:
        if c.get("status_frame") is None or c["first_frame"] not in by_n or c["status_frame"] not in by_n:
            continue
        i0, i1, ic = by_n[c["first_frame"]], by_n[c["status_frame"]], by_n.get(c["cmd_frame"], by_n[c["first_frame"]])
        stream = frames[i0]["stream"]
        # a retransmission of the reply may follow the status frame (the status left before the resent
        # segment): look up to the next command's first frame, at reply bytes before the status' end
        nxt = [j for j in starts if j > i0 and frames[j]["stream"] == stream]
        iend = (nxt[0] - 1) if nxt else len(frames) - 1
        reply_end = frames[i1]["seq"] + frames[i1]["len"]
        span = [fr for fr in frames[i0:i1 + 1] if fr["stream"] == stream]
        reply = [fr for fr in frames[ic + 1:iend + 1] if fr["stream"] == stream and fr["from_target"] and fr["len"] > 0
                 and (fr["n"] <= c["status_frame"] or fr["seq"] < reply_end)]
        acks = [fr for fr in span if not fr["from_target"]]
        resent = [fr for fr in reply if fr["retransmission"] or fr["out_of_order"]]
        new = [fr for fr in reply if not (fr["retransmission"] or fr["out_of_order"])]
        flights, after_ack = [], []
        last = None
        for fr in new:
            if last is None or fr["t"] - last > gap:
                flights.append(0)
                if last is not None:
                    before = [a for a in acks if a["t"] <= fr["t"]]
                    after_ack.append(round((fr["t"] - before[-1]["t"]) * 1000, 3) if before else None)
            flights[-1] += 1
            last = fr["t"]
        full = sorted({fr["seq"] for fr in reply if fr["len"] >= mss})
        resent_index = [full.index(fr["seq"]) + 1 if fr["seq"] in full else None for fr in resent]
        prev_data = [fr for fr in frames[:i0] if fr["stream"] == stream and fr["from_target"] and fr["len"] > 0]
        prev_ack = [fr for fr in frames[:i0 + 1] if fr["stream"] == stream and not fr["from_target"] and fr["win"]]
        out.append({
            "itt": c["itt"], "op": c["op"], "bytes": c["bytes"], "first_frame": c["first_frame"],
            "status_frame": c["status_frame"], "latency_ms": c["latency_ms"],
            "flights": flights, "flight_after_ack_ms": after_ack,
            "window_full": sum(fr["window_full"] for fr in reply),
            "resent": len(resent), "resent_frames": [fr["n"] for fr in resent], "resent_index": resent_index,
            "holes": sum(fr["lost_segment"] for fr in reply),
            "first_reply_ms": round((reply[0]["t"] - frames[ic]["t"]) * 1000, 3) if reply else None,
            "target_idle_ms": round((frames[i0]["t"] - prev_data[-1]["t"]) * 1000, 3) if prev_data else None,
            "window": prev_ack[-1]["win"] if prev_ack else None,
        })
    return out


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
