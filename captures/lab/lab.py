#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""iscsi-doctor capture lab: real iSCSI peers, real TCP stacks, known causes.

Topology (one scenario):

    netns <P>i (initiator)            root netns                   netns <P>t (target)
    qemu-io / qemu-img / iscsi-test-cu                               tgtd or scripted_target.py
    10.77.0.1  lab0 (TAP) <== delayfwd: D ms one way each way ==> lab0 (TAP)  10.77.0.2
    tcpdump "initiator"          |  (optional) copy at D/2  |      tcpdump "target"
                                 v
                       netns <P>m: lab0 (TAP), tcpdump "midpath"

Everything is started by this program and stopped by it on exit (also on
SIGINT/SIGTERM): namespaces, forwarder, target, tcpdump.  No sysctl outside the
lab's own namespaces is touched.  Run as root.

  lab.py list
  lab.py run SCENARIO OUTDIR [--build DIR]      -> OUTDIR/SCENARIO--<vantage>.pcap
  lab.py all OUTDIR [--build DIR] [--only A,B]   (used by make-captures.sh)
"""

import argparse
import atexit
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
IP_I, IP_T = "10.77.0.1", "10.77.0.2"
MAC_I, MAC_T, MAC_M = "02:00:0a:4d:00:01", "02:00:0a:4d:00:02", "02:00:0a:4d:00:03"
TGT_IQN = "iqn.2026-11.org.iscsi-doctor:lab"
SCRIPTED_IQN = "iqn.2026-11.org.iscsi-doctor:scripted"
CTRL_PORT = 3261          # tgtd control port (abstract unix socket, scoped to the target netns)
KIB = 1024
MIB = 1024 * 1024


def log(msg):
    print("lab: " + msg, file=sys.stderr, flush=True)


def sh(cmd, check=True, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r


# --------------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------------

def qio_seq(op, size, count, start=0):
    """qemu-io commands: count sequential ops of size bytes starting at byte offset start."""
    return ["%s %d %d" % (op, start + i * size, size) for i in range(count)]


def qio_scattered(op, size, count, seed, span=48 * MIB, base=8 * MIB):
    rnd = random.Random(seed)
    return ["%s %d %d" % (op, base + rnd.randrange(span // size) * size, size) for _ in range(count)]


def qio_pairs(op, sizes, pairs, start=0):
    """Batches issued together: aio op for each size, then aio_flush (waits for the batch)."""
    cmds = []
    off = start
    for _ in range(pairs):
        for sz in sizes:
            cmds.append("aio_%s %d %d" % (op, off, sz))
            off += max(sizes)
        cmds.append("aio_flush")
    return cmds


def qio_cycles(cycles, count):
    """count repetitions of a cycle of qemu-io commands; each element of cycles is a function of the
    repetition index returning a list of commands (so each cycle can read fresh offsets)."""
    cmds = []
    for i in range(count):
        for f in cycles:
            cmds += f(i)
    return cmds


SCENARIOS = {}


def scenario(name, register=True, **kw):
    kw.setdefault("target", "tgtd")
    kw.setdefault("target_nagle", False)
    kw.setdefault("initiator_nagle", False)
    kw.setdefault("delay_ms", 4.0)
    kw.setdefault("vantages", ("initiator", "target"))
    kw.setdefault("tgt_params", {})
    kw.setdefault("scripted_status", "separate")
    kw.setdefault("header_digest", False)
    kw.setdefault("starts_mid_session", False)
    kw.setdefault("ends_open", False)        # the capture ends before the logout: the connection outlives it
    # capture_joins: tcpdump starts once the session is logged in and running (no SYN, no login in
    # the capture), as a field capture does; the workload waits JOIN_PAUSE_MS first.
    kw.setdefault("capture_joins", False)
    kw.setdefault("mtu", 1500)
    kw.setdefault("jitter", None)            # delayfwd -j: {"max_us": M, "percent": P, "seed": S}
    kw.setdefault("queue", None)             # delayfwd -J: {"max_us": M, "step_us": T, "seed": S}
    kw.setdefault("link_mbit", 1000)         # delayfwd -r: the wire's serialisation rate
    kw.setdefault("sessions", 1)             # concurrent qemu-io sessions (each its own connection)
    # set: the manifest's group of the scenario (None: the first lab fixtures). The accuracy test holds
    # its floor per set, so a set of new field conditions can land before the engine handles it.
    kw.setdefault("set", None)
    kw.setdefault("offload", False)          # delayfwd -o: TSO/GRO super-packets between the kernels
    kw.setdefault("base", None)              # a variant: the scenario it varies (manifest expectations)
    kw.setdefault("queue_depth", 1)
    kw.setdefault("short", False)
    kw.setdefault("cc", "cubic")
    kw.setdefault("loss", None)              # delayfwd drops: {"from": "target", "every": N, "first": K, "min_payload": M}
    kw.setdefault("initiator_rcvbuf", None)  # SO_RCVBUF on the initiator's socket (shim, before connect)
    kw.setdefault("think_ms", None)          # scripted target: {transfer length: ms} of think time before READ replies
    kw.setdefault("think_before_read", False)  # scripted target: think before reading the command (a busy target)
    kw.setdefault("require_sysctls", {})     # checked in both peer namespaces, never changed
    kw.setdefault("sysctls", {})             # set in both peer namespaces (the lab's own, never the host's)
    # cc_at_listen: the target sets the congestion control on its listening socket, so its connections
    # never run the namespace default's (bbr's) init, which turns TCP's internal pacing on for good.
    # The scenarios before these causes were made without it (their target sockets are paced).
    kw.setdefault("cc_at_listen", False)
    kw["name"] = name
    if register:
        SCENARIOS[name] = kw
    return kw


JOIN_PAUSE_MS = 2500


def extra_delay_ms(sc):
    """The most the wire adds to the one-way delay (jitter and shared queue), ms."""
    return ((sc.get("jitter") or {}).get("max_us", 0) + (sc.get("queue") or {}).get("max_us", 0)) / 1000


def variant(base, suffix, doc, **changes):
    """A scenario like BASE with CHANGES (a field-capture condition), named BASE-SUFFIX."""
    kw = {k: v for k, v in SCENARIOS[base].items() if k != "name"}
    kw.update(changes)
    kw["doc"] = SCENARIOS[base]["doc"] + " " + doc
    kw["base"] = base
    kw["short"] = False
    if kw.get("capture_joins"):
        kw["starts_mid_session"] = True
        kw["workload"] = [(w, (["sleep %d" % JOIN_PAUSE_MS] + a) if w == "qemu-io" else a) for w, a in kw["workload"]]
        kw["workload_text"] = kw["workload_text"] + "; the capture joins the running session (no SYN, no login)"
    if kw.get("mtu", 1500) != 1500:
        kw["workload_text"] = kw["workload_text"] + "; MTU %d" % kw["mtu"]
    if kw.get("jitter"):
        j = kw["jitter"]
        kw["workload_text"] = kw["workload_text"] + "; jitter: %d%% of frames up to %.1f ms late, order kept" % (
            j["percent"], j["max_us"] / 1000)
    if kw.get("queue"):
        q = kw["queue"]
        kw["workload_text"] = kw["workload_text"] + (
            "; shared queueing delay: 0-%.2f ms, drawn every %.1f ms, linear in between, order kept"
            % (q["max_us"] / 1000, q["step_us"] / 1000))
    if kw.get("offload"):
        kw["workload_text"] = kw["workload_text"] + "; TSO/GRO super-packets on the wire"
    if "delay_ms" in changes:
        kw["workload_text"] = kw["workload_text"] + "; %g ms one way" % kw["delay_ms"]
    return scenario(base + "-" + suffix, **kw)


# 1. stock peers: tgtd + libiscsi, both TCP_NODELAY, tgtd defaults (InitialR2T=Yes, ImmediateData=Yes,
#    MaxRecvDataSegmentLength=8192, FirstBurstLength=65536, MaxBurstLength=262144)
scenario("stock-read",
         doc="tgtd and qemu-io as shipped (both TCP_NODELAY): 40 x READ 1 KiB, 40 x 8 KiB, 40 x 64 KiB, sequential. "
             "The 1-round-trip baseline for reads (tgtd puts status in the final Data-In).",
         workload=[("qemu-io", qio_seq("read", 1 * KIB, 40) + qio_seq("read", 8 * KIB, 40, 1 * MIB)
                    + qio_seq("read", 64 * KIB, 40, 2 * MIB))],
         workload_text="40 x READ 1 KiB, 40 x READ 8 KiB, 40 x READ 64 KiB, sequential",
         vantages=("initiator", "target", "midpath"))
scenario("stock-write",
         doc="tgtd and qemu-io as shipped: 40 x WRITE 1 KiB and 40 x 8 KiB (immediate data, 1 round trip), "
             "40 x WRITE 64 KiB with tgtd's default InitialR2T=Yes: 8 KiB immediate data, then an R2T round trip "
             "for the remaining 56 KiB.",
         workload=[("qemu-io", qio_seq("write", 1 * KIB, 40) + qio_seq("write", 8 * KIB, 40, 1 * MIB)
                    + qio_seq("write", 64 * KIB, 40, 2 * MIB))],
         workload_text="40 x WRITE 1 KiB, 40 x WRITE 8 KiB, 40 x WRITE 64 KiB, sequential; InitialR2T=Yes (tgtd default)")
scenario("stock-write-64k-unsolicited",
         doc="tgtd with InitialR2T=No: 64 KiB writes go as 8 KiB immediate data + 56 KiB unsolicited Data-Out "
             "(FirstBurstLength 65536): 1 round trip, no R2T.",
         tgt_params={"InitialR2T": "No"},
         workload=[("qemu-io", qio_seq("write", 64 * KIB, 40))],
         workload_text="40 x WRITE 64 KiB sequential; InitialR2T=No, ImmediateData=Yes, FirstBurstLength=65536")
scenario("stock-1m",
         doc="tgtd and qemu-io as shipped: 10 x READ 1 MiB then 10 x WRITE 1 MiB (several Data-In PDUs, "
             "R2T cycles of MaxBurstLength 256 KiB for writes).",
         workload=[("qemu-io", qio_seq("read", MIB, 10, 4 * MIB) + qio_seq("write", MIB, 10, 16 * MIB))],
         workload_text="10 x READ 1 MiB, 10 x WRITE 1 MiB, sequential")

# 2. tgtd with Nagle on (shim): commands issued in batches of two
scenario("target-nagle-read-batch2",
         doc="tgtd with Nagle on (LD_PRELOAD shim), qemu-io issues READs in batches of two (aio_read 1 KiB + "
             "aio_read 512 B, then waits for both). The second PDU of the back-to-back pair is held by the target's "
             "Nagle until the initiator's ACK of the first, which the initiator delays.",
         target_nagle=True, queue_depth=2,
         workload=[("qemu-io", qio_pairs("read", [1 * KIB, 512], 40))],
         workload_text="40 batches of {READ 1 KiB, READ 512 B} issued together (aio), sequential")
scenario("target-nagle-write-batch2",
         doc="tgtd with Nagle on (shim), qemu-io issues WRITEs in batches of two (4 KiB + 2 KiB). The second "
             "SCSI Response of the pair is held by the target's Nagle until the initiator's ACK.",
         target_nagle=True, queue_depth=2,
         workload=[("qemu-io", qio_pairs("write", [4 * KIB, 2 * KIB], 40))],
         workload_text="40 batches of {WRITE 4 KiB, WRITE 2 KiB} issued together (aio), sequential")

# 3. initiator with Nagle on (shim on qemu-io)
scenario("initiator-nagle-write-1k",
         doc="qemu-io with Nagle on (shim), tgtd stock: libiscsi writes the 48-byte command header and the 1 KiB "
             "immediate data in two calls; the data waits for the target's (delayed) ACK of the header.",
         initiator_nagle=True,
         workload=[("qemu-io", qio_seq("write", 1 * KIB, 60))],
         workload_text="60 x WRITE 1 KiB sequential")
scenario("initiator-nagle-write-8k",
         doc="qemu-io with Nagle on (shim), tgtd stock: 8 KiB writes; the sub-MSS tail of the immediate data "
             "waits for the target's ACK.",
         initiator_nagle=True,
         workload=[("qemu-io", qio_seq("write", 8 * KIB, 60))],
         workload_text="60 x WRITE 8 KiB sequential")

# 4. scripted non-collapsing target (separate Data-In and SCSI Response writes)
scenario("scripted-nagle-read-8k",
         doc="Scripted target, Nagle on, Data-In and SCSI Response written separately: the study's slow target. "
             "The 48-byte Response is held until the ACK of the Data-In tail arrives.",
         target="scripted", target_nagle=True,
         workload=[("qemu-io", qio_seq("read", 8 * KIB, 100))],
         workload_text="100 x READ 8 KiB sequential", vantages=("initiator", "target", "midpath"), short=True)
scenario("scripted-nagle-read-1k",
         doc="Scripted target, Nagle on: the whole Data-In is one sub-MSS segment, the initiator delays its ACK "
             "(~40 ms) and the Response waits for it: the study's delayed-ACK case.",
         target="scripted", target_nagle=True,
         workload=[("qemu-io", qio_seq("read", 1 * KIB, 40))],
         workload_text="40 x READ 1 KiB sequential")
scenario("scripted-nodelay-read-8k",
         doc="Scripted target with TCP_NODELAY: same two writes, no hold: 1 round trip.",
         target="scripted", target_nagle=False,
         workload=[("qemu-io", qio_seq("read", 8 * KIB, 100))],
         workload_text="100 x READ 8 KiB sequential")
scenario("scripted-nodelay-read-1k",
         doc="Scripted target with TCP_NODELAY, 1 KiB reads: 1 round trip.",
         target="scripted", target_nagle=False,
         workload=[("qemu-io", qio_seq("read", 1 * KIB, 100))],
         workload_text="100 x READ 1 KiB sequential")
scenario("scripted-nagle-coalesced-read-8k",
         doc="Scripted target, Nagle on, but Data-In and Response written with ONE send() (the study's "
             "coalescing fix): 1 round trip although Nagle stays on.",
         target="scripted", target_nagle=True, scripted_status="coalesced",
         workload=[("qemu-io", qio_seq("read", 8 * KIB, 100))],
         workload_text="100 x READ 8 KiB sequential")

# 5. a second delay
scenario("scripted-nagle-read-8k-1ms",
         doc="As scripted-nagle-read-8k at 1 ms one way (2 ms RTT).",
         target="scripted", target_nagle=True, delay_ms=1.0,
         workload=[("qemu-io", qio_seq("read", 8 * KIB, 100))],
         workload_text="100 x READ 8 KiB sequential")
scenario("stock-rw-1ms",
         doc="Stock tgtd and qemu-io at 1 ms one way: 50 x READ 8 KiB, 50 x WRITE 8 KiB, scattered LBAs.",
         delay_ms=1.0,
         workload=[("qemu-io", qio_scattered("read", 8 * KIB, 50, 1) + qio_scattered("write", 8 * KIB, 50, 2))],
         workload_text="50 x READ 8 KiB, 50 x WRITE 8 KiB, scattered LBAs")

# 6. queue depth > 1
scenario("stock-qd8-read",
         doc="Stock peers, qemu-img bench with 8 commands outstanding: 200 x READ 4 KiB sequential.",
         queue_depth=8,
         workload=[("bench", ["-c", "200", "-d", "8", "-s", "4k"])],
         workload_text="qemu-img bench: 200 x READ 4 KiB sequential, queue depth 8")
scenario("stock-qd8-write",
         doc="Stock peers, qemu-img bench with 8 commands outstanding: 200 x WRITE 4 KiB sequential.",
         queue_depth=8,
         workload=[("bench", ["-c", "200", "-d", "8", "-s", "4k", "-w"])],
         workload_text="qemu-img bench: 200 x WRITE 4 KiB sequential, queue depth 8")

# 7. a capture that starts mid-session (login and the first commands cut out with editcap)
scenario("stock-read-midsession",
         doc="Stock peers, 100 x READ 8 KiB; the capture starts in the middle of the session (no SYN, no login: "
             "everything before the 20th READ was cut with editcap).",
         starts_mid_session=True,
         workload=[("qemu-io", qio_seq("read", 8 * KIB, 100))],
         workload_text="100 x READ 8 KiB sequential (the capture holds the last ~80)")

# 8. header digests
scenario("stock-header-digest",
         doc="tgtd and qemu-io with HeaderDigest=CRC32C negotiated (libiscsi 1.19 does not offer DataDigest, "
             "so data digests stay None): 40 x READ 8 KiB, a pause with NOP-Out/NOP-In, 40 x WRITE 8 KiB.",
         header_digest=True, tgt_params={"HeaderDigest": "CRC32C"},
         workload=[("qemu-io", qio_seq("read", 8 * KIB, 40) + ["sleep 5500"] + qio_seq("write", 8 * KIB, 40, 1 * MIB))],
         workload_text="40 x READ 8 KiB, a 5.5 s pause (qemu's iSCSI driver pings with NOP-Out every 5 s), "
                       "40 x WRITE 8 KiB, sequential; HeaderDigest=CRC32C")

# 9. iscsi-test-cu for opcode variety
scenario("test-cu",
         doc="libiscsi's iscsi-test-cu against tgtd, a few short tests (task management: ABORT TASK and LUN RESET; "
             "residual over/underflow with CHECK CONDITION and sense data; TUR, READ CAPACITY 16, INQUIRY, MODE SENSE, "
             "REPORT SUPPORTED OPCODES): opcode variety, errors, one session per test.",
         workload=[("test-cu", ["iSCSI.iSCSITMF", "iSCSI.iSCSIResiduals.Read10Invalid",
                                "iSCSI.iSCSIResiduals.Read10Residuals", "iSCSI.iSCSIResiduals.Write10Residuals",
                                "SCSI.TestUnitReady.Simple", "SCSI.ReadCapacity16.Simple",
                                "SCSI.ReadCapacity16.Alloclen", "SCSI.Read16.ZeroBlocks", "SCSI.Inquiry.Standard",
                                "SCSI.Inquiry.AllocLength", "SCSI.Inquiry.EVPD", "SCSI.ModeSense6.AllPages",
                                "SCSI.ModeSense6.Residuals", "SCSI.ReportSupportedOpcodes.Simple"])],
         workload_text="iscsi-test-cu, one run per test: iSCSI.iSCSITMF, iSCSI.iSCSIResiduals.{Read10Invalid,"
                       "Read10Residuals,Write10Residuals}, SCSI.TestUnitReady.Simple, SCSI.ReadCapacity16.{Simple,"
                       "Alloclen}, SCSI.Read16.ZeroBlocks, SCSI.Inquiry.{Standard,AllocLength,EVPD}, "
                       "SCSI.ModeSense6.{AllPages,Residuals}, SCSI.ReportSupportedOpcodes.Simple")


# 10. causes set by configuration: congestion window, receive window, target think time (also with
#     tail-loss probes of the initiator: spurious retransmissions), loss
scenario("stock-idle-read",
         cc_at_listen=True,
         doc="Stock peers; after two 1 MiB warm-up reads, 20 cycles of: 2 s idle (longer than the RTO; "
             "net.ipv4.tcp_slow_start_after_idle=1, the default, in both namespaces), READ 512 KiB, READ 128 KiB. "
             "After the idle the target restarts from the initial window (10 segments): the 512 KiB read "
             "waits for ACKs to grow the congestion window (slow start, ~6 round trips); the 128 KiB read "
             "right after it fits the grown window (1 round trip).",
         require_sysctls={"net.ipv4.tcp_slow_start_after_idle": "1"},
         workload=[("qemu-io", qio_seq("read", MIB, 2, 0) + qio_cycles(
             [lambda i: ["sleep 2000", "read %d %d" % (4 * MIB + i * 640 * KIB, 512 * KIB),
                         "read %d %d" % (4 * MIB + i * 640 * KIB + 512 * KIB, 128 * KIB)]], 20))],
         workload_text="2 x READ 1 MiB (warm-up), then 20 x {sleep 2000 ms, READ 512 KiB, READ 128 KiB}, sequential; "
                       "net.ipv4.tcp_slow_start_after_idle=1 (default)")
scenario("initiator-rcvbuf-read",
         cc_at_listen=True,
         doc="Stock tgtd; qemu-io's socket has SO_RCVBUF=16384 (set by the shim before connect: a fixed, small "
             "receive buffer, no autotuning): the initiator advertises a small window and the target's Data-In "
             "of each 128 KiB read waits for it to open, one window per round trip. 8 KiB reads fit in "
             "the window (1 round trip).",
         initiator_rcvbuf=16384,
         workload=[("qemu-io", qio_cycles([lambda i: ["read %d %d" % (i * 136 * KIB, 8 * KIB),
                                                      "read %d %d" % (i * 136 * KIB + 8 * KIB, 128 * KIB)]], 40))],
         workload_text="40 x {READ 8 KiB, READ 128 KiB}, sequential; initiator SO_RCVBUF=16384")
scenario("scripted-think-read",
         cc_at_listen=True,
         doc="Scripted target with TCP_NODELAY, status coalesced with the Data-In (one send()), and a slow back "
             "end: it waits 5 ms before answering a 1 KiB READ and 20 ms before answering an 8 KiB READ.",
         target="scripted", target_nagle=False, scripted_status="coalesced", think_ms={1024: 5, 8192: 20},
         workload=[("qemu-io", qio_seq("read", 1 * KIB, 40) + qio_seq("read", 8 * KIB, 40, 1 * MIB))],
         workload_text="40 x READ 1 KiB (target think time 5 ms), 40 x READ 8 KiB (target think time 20 ms), "
                       "sequential")
scenario("scripted-think-read-batch2",
         cc_at_listen=True,
         doc="Scripted target with TCP_NODELAY, status coalesced with the Data-In, and a slow back end: it waits "
             "30 ms before answering each 1 KiB READ; qemu-io issues them in batches of two. The target's kernel "
             "delays its ACK of the two small commands (up to 40 ms), so the initiator's TCP sends a tail-loss "
             "probe of the second command (2 x RTT + 2 ms after it): a spurious retransmission, the original "
             "having arrived (the target's ACK carries a D-SACK).",
         target="scripted", target_nagle=False, scripted_status="coalesced", think_ms={1024: 30}, queue_depth=2,
         workload=[("qemu-io", qio_pairs("read", [1 * KIB, 1 * KIB], 40))],
         workload_text="40 batches of {READ 1 KiB, READ 1 KiB} issued together (aio), sequential; target think "
                       "time 30 ms per READ")
scenario("stock-loss-read",
         cc_at_listen=True,
         doc="Stock peers; the wire (delayfwd) drops frames from the target: of the target's frames carrying new "
             "data with at least 1000 payload bytes it drops the 754th, 821st, 888th ... (every 67th). qemu-io reads "
             "4 x 256 KiB (724 counted frames, none dropped), then alternates "
             "READ 64 KiB (45 full segments + a 424-byte tail) and READ 32 KiB (22 full segments + a 960-byte tail), "
             "67 counted frames per pair: every 64 KiB read loses its 30th segment, which the target retransmits; "
             "no 32 KiB read loses anything. qemu-io's SO_RCVBUF is fixed at 2 MiB (shim), far above any flight, "
             "so that the window it advertises never changes: Wireshark then recognises its duplicate ACKs and "
             "reassembles each Data-In across the retransmission (with a growing window it takes the dup ACKs for "
             "window updates and leaves the PDU unreassembled).",
         loss={"from": "target", "every": 67, "first": 4 * 181 + 30, "min_payload": 1000},
         initiator_rcvbuf=2 * MIB,
         workload=[("qemu-io", qio_seq("read", 256 * KIB, 4, 0) + qio_cycles(
             [lambda i: ["read %d %d" % (MIB + i * 96 * KIB, 64 * KIB),
                         "read %d %d" % (MIB + i * 96 * KIB + 64 * KIB, 32 * KIB)]], 30))],
         workload_text="4 x READ 256 KiB, then 30 x {READ 64 KiB, READ 32 KiB}, sequential; the wire drops every 67th "
                       "new-data frame (>= 1000 payload bytes) from the target, starting with the 754th")


# 11. field conditions (issue: captures people actually take): each a variant of a scenario above,
#     the expectations those of its base unless the manifest states others.
_JOINED = "The capture joins the running session: tcpdump starts after the login, as in the field."
for _b in ("stock-read", "stock-write", "target-nagle-read-batch2", "target-nagle-write-batch2",
           "initiator-nagle-write-1k", "initiator-nagle-write-8k", "scripted-nagle-read-8k",
           "scripted-nagle-read-1k", "scripted-nagle-coalesced-read-8k", "scripted-nodelay-read-8k",
           "initiator-rcvbuf-read", "stock-idle-read", "scripted-think-read"):
    variant(_b, "joined", _JOINED, capture_joins=True,
            vantages=("initiator", "target"))
_JIT = {"max_us": 3000, "percent": 10, "seed": 7}
_JITTER = ("The wire has jitter: 10% of the frames, picked by a seeded generator, up to 3 ms late "
           "(order kept), as behind a busy switch queue or host.")
for _b in ("stock-read", "scripted-nagle-read-8k", "scripted-nagle-read-1k", "initiator-nagle-write-1k",
           "target-nagle-write-batch2"):
    variant(_b, "jitter", _JITTER, jitter=dict(_JIT), capture_joins=True, vantages=("initiator", "target"))
_LONG = "25 ms one way (RTT 50 ms, near the delayed-ACK timer)."
for _b in ("stock-read", "scripted-nagle-read-8k", "scripted-nagle-read-1k", "initiator-nagle-write-1k"):
    variant(_b, "25ms", _LONG, delay_ms=25.0, capture_joins=True, vantages=("initiator", "target"))
_JUMBO = "MTU 9000 (jumbo frames) at both peers and on the wire."
for _b in ("stock-read", "stock-write", "scripted-nagle-read-8k", "scripted-nagle-read-1k"):
    variant(_b, "jumbo", _JUMBO, mtu=9000, capture_joins=True, vantages=("initiator", "target"))
_TSO = ("The TAPs pass TSO/GRO super-packets between the kernels (IFF_VNET_HDR, TUNSETOFFLOAD): the captures "
        "show frames far above the MTU, as on a host whose NIC offloads segmentation.")
for _b in ("stock-read", "stock-write", "scripted-nagle-read-8k", "scripted-nagle-read-1k",
           "initiator-nagle-write-8k", "initiator-rcvbuf-read"):
    variant(_b, "tso", _TSO, offload=True, capture_joins=True, vantages=("initiator", "target"))


# 12. noisy paths (issue #26, set "noisy"): captures that join the running session (tcpdump started after
#     the login), at both vantages and mid-path, on a wire that spreads every frame or that has a queueing
#     delay shared by consecutive frames, both bounded at 40% of the one-way delay: 4 ms one way, one data
#     centre (0.25 ms) and a metro link (25 and 40 ms). Workloads cut to 20-40 commands.
_JALL = ("The wire spreads every frame: each is held a further 0 to %g ms (40%% of the one-way delay; uniform, "
         "drawn per frame by a seeded generator), order kept.")
_JQUEUE = ("The wire has a queueing delay shared by consecutive frames, as at a busy switch port: 0 to %g ms "
           "(40%% of the one-way delay), drawn every %g ms per direction by a seeded generator and linear in "
           "between, so back-to-back frames wait nearly alike; order kept.")


def noisy(base, suffix, mode, delay_ms=4.0, workload=None, workload_text=None):
    bound = int(round(delay_ms * 400))     # 40% of the one-way delay, in us
    changes = {"capture_joins": True, "vantages": ("initiator", "target", "midpath"), "set": "noisy"}
    if mode == "all":
        changes["jitter"] = {"max_us": bound, "percent": 100, "seed": 26}
        doc = _JALL % (bound / 1000)
    else:
        step = max(1000, bound * 5 // 2)   # >= the bound: the delay never falls faster than time passes
        changes["queue"] = {"max_us": bound, "step_us": step, "seed": 26}
        doc = _JQUEUE % (bound / 1000, step / 1000)
    if delay_ms != 4.0:
        changes["delay_ms"] = delay_ms
        doc += " %g ms one way." % delay_ms
    if workload:
        changes["workload"], changes["workload_text"] = workload, workload_text
        doc += " The workload here: %s." % workload_text
    return variant(base, suffix, _JOINED + " " + doc, **changes)


_W_NAGLE_8K = ([("qemu-io", qio_seq("read", 8 * KIB, 30))], "30 x READ 8 KiB sequential")
noisy("scripted-nagle-read-1k", "jitter-all", "all")
noisy("scripted-nagle-read-1k", "jitter-queue", "queue")
noisy("scripted-nagle-read-8k", "jitter-all", "all", workload=_W_NAGLE_8K[0], workload_text=_W_NAGLE_8K[1])
noisy("initiator-nagle-write-1k", "jitter-queue", "queue",
      workload=[("qemu-io", qio_seq("write", 1 * KIB, 30))], workload_text="30 x WRITE 1 KiB sequential")
noisy("initiator-nagle-write-8k", "jitter-all", "all",
      workload=[("qemu-io", qio_seq("write", 8 * KIB, 30))], workload_text="30 x WRITE 8 KiB sequential")
noisy("target-nagle-read-batch2", "jitter-queue", "queue",
      workload=[("qemu-io", qio_pairs("read", [1 * KIB, 512], 20))],
      workload_text="20 batches of {READ 1 KiB, READ 512 B} issued together (aio), sequential")
_W_RCVBUF = lambda n: ([("qemu-io", qio_cycles([lambda i: ["read %d %d" % (i * 136 * KIB, 8 * KIB),  # noqa: E731
                                                           "read %d %d" % (i * 136 * KIB + 8 * KIB, 128 * KIB)]],
                                               n))],
                       "%d x {READ 8 KiB, READ 128 KiB}, sequential; initiator SO_RCVBUF=16384" % n)
noisy("initiator-rcvbuf-read", "jitter-queue", "queue", workload=_W_RCVBUF(16)[0], workload_text=_W_RCVBUF(16)[1])
noisy("stock-idle-read", "jitter-all", "all",
      workload=[("qemu-io", qio_seq("read", MIB, 2, 0) + qio_cycles(
          [lambda i: ["sleep 2000", "read %d %d" % (4 * MIB + i * 640 * KIB, 512 * KIB),
                      "read %d %d" % (4 * MIB + i * 640 * KIB + 512 * KIB, 128 * KIB)]], 10))],
      workload_text="2 x READ 1 MiB (warm-up), then 10 x {sleep 2000 ms, READ 512 KiB, READ 128 KiB}, sequential; "
                    "net.ipv4.tcp_slow_start_after_idle=1 (default)")
_W_THINK = ([("qemu-io", qio_seq("read", 1 * KIB, 20) + qio_seq("read", 8 * KIB, 20, 1 * MIB))],
            "20 x READ 1 KiB (target think time 5 ms), 20 x READ 8 KiB (target think time 20 ms), sequential")
noisy("scripted-think-read", "jitter-queue", "queue", workload=_W_THINK[0], workload_text=_W_THINK[1])
noisy("scripted-nagle-read-1k", "dc-jitter-all", "all", delay_ms=0.25)
noisy("scripted-think-read", "dc-jitter-queue", "queue", delay_ms=0.25, workload=_W_THINK[0],
      workload_text=_W_THINK[1])
noisy("scripted-nagle-read-8k", "metro-jitter-queue", "queue", delay_ms=40.0,
      workload=[("qemu-io", qio_seq("read", 8 * KIB, 20))], workload_text="20 x READ 8 KiB sequential")
noisy("initiator-rcvbuf-read", "metro-jitter-all", "all", delay_ms=25.0, workload=_W_RCVBUF(12)[0],
      workload_text=_W_RCVBUF(12)[1])


# 13. the link as the limit (issue #32, set "link"): tgtd and qemu-io as shipped over a wire serialised at
#     100 Mbit/s or 1 Gbit/s, 1 or 25 ms one way. Warm-up transfers of 1.5 MiB (a size no expectation
#     selects) open the congestion and receive windows first. delayfwd queues without limit: no loss.
def link_workload(reads_1m, writes_1m, small=(), base=0, warm_reads=4, warm_writes=1):
    cmds = qio_seq("read", 1536 * KIB, warm_reads, base) + qio_seq("write", 1536 * KIB, warm_writes, base + 6 * MIB)
    cmds += qio_seq("read", MIB, reads_1m, base + 8 * MIB) + qio_seq("write", MIB, writes_1m, base + 16 * MIB)
    off = base + 24 * MIB
    for op, size, n in small:
        cmds += qio_seq(op, size, n, off)
        off += MIB
    text = "%d x READ 1.5 MiB and %d x WRITE 1.5 MiB (warm-up), then " % (warm_reads, warm_writes) + ", ".join(
        ["%d x %s 1 MiB" % (n, op) for op, n in (("READ", reads_1m), ("WRITE", writes_1m)) if n]
        + ["%d x %s %s" % (n, op.upper(), "%d KiB" % (size // KIB)) for op, size, n in small]) + ", sequential"
    return [("qemu-io", cmds)], text


def link(name, mbit, delay_ms, workload, doc, sessions=1):
    wl, text = workload
    rate = "%d Mbit/s" % mbit if mbit < 1000 else "%g Gbit/s" % (mbit / 1000)
    return scenario(name, set="link", cc_at_listen=True, link_mbit=mbit, delay_ms=delay_ms, sessions=sessions,
                    doc="tgtd and qemu-io as shipped over a wire serialised at %s, %g ms one way. %s" % (
                        rate, delay_ms, doc),
                    workload=wl, workload_text=text + "; the wire serialises at %s" % rate)


link("link-100m-1ms", 100, 1.0, link_workload(6, 6, (("read", 64 * KIB, 12), ("write", 64 * KIB, 12))),
     "Every transfer of 64 KiB or more takes longer on the wire (5.7 ms for 64 KiB, 89 ms for 1 MiB) than the "
     "2 ms round trip: the link is the limit.")
link("link-100m-25ms", 100, 25.0, link_workload(6, 6, (("write", 64 * KIB, 12),)),
     "A 1 MiB read takes 89 ms on the wire against a 50 ms round trip: the link is the limit. 1 MiB writes "
     "wait for four R2Ts (MaxBurstLength 256 KiB) and 64 KiB writes take 5.7 ms on the wire: round trips "
     "dominate.")
link("link-1g-1ms", 1000, 1.0, link_workload(6, 6, (("read", 8 * KIB, 12), ("write", 8 * KIB, 12))),
     "A 1 MiB read takes 8.9 ms on the wire against a 2 ms round trip: the link is the limit; 8 KiB "
     "transfers take 0.07 ms.")
link("link-1g-25ms", 1000, 25.0, link_workload(6, 0, (("read", 64 * KIB, 12), ("write", 64 * KIB, 12))),
     "A 64 KiB transfer takes 0.57 ms on the wire against a 50 ms round trip: the link is not the limit.")
_SHARED = [link_workload(10, 6, (), base=0, warm_reads=2, warm_writes=1),
           link_workload(10, 6, (), base=32 * MIB, warm_reads=2, warm_writes=1)]
link("link-100m-1ms-shared", 100, 1.0, ([w[0][0] for w in _SHARED], "two sessions at once, each: " + _SHARED[0][1]),
     "Two qemu-io sessions (two connections, two initiator names) run at once and share the 100 Mbit/s wire: "
     "while both transfer, each gets about half of it.", sessions=2)


# 14. no TCP timestamps (set "nots"): Windows and ESXi hosts send none by default, so a capture joined
#     mid-session has no echoed timestamps to time a side's round trip by. A target whose back end takes
#     longer than its delayed-ACK timer acknowledges every command with a delayed pure ACK, never at once.
_NOTS = ("net.ipv4.tcp_timestamps=0 in both peers' namespaces: no TCP timestamps, as Windows and ESXi hosts "
         "send by default.")

def slow_nots(name, nagle, doc, quick_acks_doc, open_cut=False, think=60, midsession=True):
    """A busy scripted target without TCP timestamps (think ms per READ before reading the command), and
    its mid-session cut (past the kernel's quick ACKs); open_cut: also that cut ended before the logout."""
    scenario(name, set="nots", cc_at_listen=True, doc=doc + " " + _NOTS,
             target="scripted", target_nagle=nagle, think_ms={1024: think, 8192: think}, think_before_read=True,
             sysctls={"net.ipv4.tcp_timestamps": "0"},
             workload=[("qemu-io", qio_seq("read", 1 * KIB, 30) + qio_seq("read", 8 * KIB, 20, 1 * MIB))],
             workload_text="30 x READ 1 KiB, 20 x READ 8 KiB, sequential; target think time %d ms per READ, "
                           "before reading the command; no TCP timestamps" % think)
    if midsession:
        variant(name, "midsession",
                "The capture starts in the middle of the session (no SYN, no login: everything before the 20th "
                "READ was cut with editcap), after the target's kernel has spent its quick ACKs" + quick_acks_doc,
                starts_mid_session=True, set="nots",
                workload_text=SCENARIOS[name]["workload_text"] + " (the capture holds the last 31)")
    if open_cut:
        variant(name, "open",
                "The capture starts in the middle of the session (from the 20th READ) and ends before the logout "
                "(cut with editcap): "
                "the connection outlives it, as a field capture's does, so the target sends nothing that answers "
                "at once and no segment of the capture times its round trip.",
                starts_mid_session=True, ends_open=True, set="nots",
                workload_text=SCENARIOS[name]["workload_text"] + " (the capture holds the last 31 and ends before "
                                                                 "the logout)")


# After an idle longer than its RTO, or at the start, Linux acknowledges 16 segments at once (quick ACKs):
# a capture joined after an idle would time the target by those. Cut from the 20th READ on, every
# command it holds is acknowledged late.
slow_nots("scripted-nagle-slow-read-nots", True,
          "Scripted target, Nagle on, Data-In and SCSI Response written separately, and a busy back end: it "
          "spends 60 ms on each READ before reading the command from its socket, so its kernel acknowledges "
          "the command only when the delayed-ACK timer fires (40 ms, then longer) or that read empties the "
          "receive queue: a pure ACK of every command, never at once. The Response waits for the initiator's "
          "ACK of the Data-In tail (Nagle), which the initiator delays when the Data-In is one sub-MSS "
          "segment.",
          ": every command the capture holds is acknowledged by a delayed pure ACK (~50 ms) or by the read "
          "that ends the think time.")
slow_nots("scripted-nodelay-slow-read-nots", False,
          "As scripted-nagle-slow-read-nots, but the scripted target sets TCP_NODELAY: the Response leaves "
          "right behind the Data-In, nothing waits for the initiator's ACK; the 60 ms before each command is "
          "read is the target's think.", ".", open_cut=True)
# Under its delayed-ACK timer the target acknowledges each command with its reply: only ACKs on data,
# whose least is the round trip plus the target's think, so a cut without the handshake cannot tell them.
slow_nots("scripted-nodelay-busy-read-nots", False,
          "As scripted-nodelay-slow-read-nots, but the target spends 25 ms on each READ, under its delayed-ACK "
          "timer (40 ms): its reply carries the ACK of the command, and the target sends no pure ACK of one.",
          ".", open_cut=True, think=25, midsession=False)

# --------------------------------------------------------------------------------------------
# The lab
# --------------------------------------------------------------------------------------------

class Lab:
    def __init__(self, build, scenario, workdir):
        self.build = build
        self.sc = scenario
        self.work = workdir
        tag = "%d%02d" % (os.getpid(), len(_LABS))
        self.ns_i, self.ns_t, self.ns_m = "isd%si" % tag, "isd%st" % tag, "isd%sm" % tag
        self.procs = []          # (name, Popen)
        self.namespaces = []
        self.tgtd = None
        self.log_files = []
        _LABS.append(self)

    # ---- plumbing -------------------------------------------------------------------------
    def popen(self, name, cmd, env=None, stdout=None, stderr=None):
        logf = open(os.path.join(self.work, name + ".log"), "w")
        self.log_files.append(logf)
        p = subprocess.Popen(cmd, stdout=stdout or logf, stderr=stderr or logf, env=env,
                             start_new_session=True)
        self.procs.append((name, p))
        return p

    def nsexec(self, ns):
        return ["ip", "netns", "exec", ns]

    def setup(self):
        sc = self.sc
        for ns in (self.ns_i, self.ns_t) + ((self.ns_m,) if "midpath" in sc["vantages"] else ()):
            sh(["ip", "netns", "add", ns])
            self.namespaces.append(ns)
            sh(self.nsexec(ns) + ["ip", "link", "set", "lo", "up"])
            for k in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
                sh(self.nsexec(ns) + ["sysctl", "-qw", k + "=1"], check=False)

        cmd = [os.path.join(self.build, "delayfwd"), "-a", self.ns_i + ":lab0", "-b", self.ns_t + ":lab0",
               "-d", str(int(sc["delay_ms"] * 1000)), "-r", str(sc["link_mbit"]), "-M", str(sc["mtu"])]
        if sc["jitter"]:
            j = sc["jitter"]
            cmd += ["-j", "%d:%d:%d" % (j["max_us"], j["percent"], j.get("seed", 1))]
        if sc["queue"]:
            q = sc["queue"]
            cmd += ["-J", "%d:%d:%d" % (q["max_us"], q["step_us"], q.get("seed", 1))]
        if sc["offload"]:
            cmd += ["-o"]
        if "midpath" in sc["vantages"]:
            cmd += ["-m", self.ns_m + ":lab0"]
        if sc["loss"]:
            l = sc["loss"]
            # -a is the initiator's namespace, -b the target's: -l drops b->a (from the target)
            cmd += ["-l" if l["from"] == "target" else "-L", "%d:%d:%d" % (l["every"], l["first"], l["min_payload"])]
        self.popen("delayfwd", cmd)
        deadline = time.time() + 5
        while True:
            r = sh(["ip", "-n", self.ns_t, "link", "show", "lab0"], check=False)
            r2 = sh(["ip", "-n", self.ns_i, "link", "show", "lab0"], check=False)
            if r.returncode == 0 and r2.returncode == 0:
                break
            if time.time() > deadline:
                raise RuntimeError("delayfwd did not create its TAP devices")
            time.sleep(0.05)
        for ns, ip, mac in ((self.ns_i, IP_I, MAC_I), (self.ns_t, IP_T, MAC_T)):
            sh(["ip", "-n", ns, "link", "set", "lab0", "address", mac, "mtu", str(sc["mtu"])])
            sh(["ip", "-n", ns, "addr", "add", ip + "/24", "dev", "lab0"])
            sh(["ip", "-n", ns, "link", "set", "lab0", "up"])
        sh(["ip", "-n", self.ns_i, "neigh", "replace", IP_T, "lladdr", MAC_T, "dev", "lab0", "nud", "permanent"])
        sh(["ip", "-n", self.ns_t, "neigh", "replace", IP_I, "lladdr", MAC_I, "dev", "lab0", "nud", "permanent"])
        if "midpath" in sc["vantages"]:
            sh(["ip", "-n", self.ns_m, "link", "set", "lab0", "address", MAC_M])
            sh(["ip", "-n", self.ns_m, "link", "set", "lab0", "up"])
        for k, v in sc["sysctls"].items():
            for ns in (self.ns_i, self.ns_t):
                sh(self.nsexec(ns) + ["sysctl", "-qw", "%s=%s" % (k, v)])
        for k, want in sc["require_sysctls"].items():
            for ns in (self.ns_i, self.ns_t):
                got = sh(self.nsexec(ns) + ["sysctl", "-n", k]).stdout.strip()
                if got != want:
                    raise RuntimeError("%s is %s in %s, the scenario needs %s" % (k, got, ns, want))

    def shim_env(self, nagle_on):
        """Every peer runs with the shim: it sets the scenario's congestion control (cubic, Debian's
        default; some hosts default to bbr, whose pacing spreads every burst, and a non-initial
        namespace may not pick cubic as its default) and, for a side with Nagle on, drops TCP_NODELAY."""
        env = dict(os.environ)
        env["LD_PRELOAD"] = os.path.join(self.build, "nodelay_shim.so")
        env["NODELAY_SHIM_LOG"] = "1"
        env["ISD_TCP_CC"] = self.sc["cc"]
        if self.sc["cc_at_listen"]:
            env["ISD_TCP_CC_AT_LISTEN"] = "1"
        if nagle_on:
            env["ISD_NAGLE_ON"] = "1"
        return env

    def initiator_env(self):
        env = self.shim_env(self.sc["initiator_nagle"])
        if self.sc["initiator_rcvbuf"]:
            env["ISD_RCVBUF"] = str(self.sc["initiator_rcvbuf"])
        return env

    # ---- targets --------------------------------------------------------------------------
    def tgtadm(self, *args, check=True):
        return sh(self.nsexec(self.ns_t) + ["tgtadm", "-C", str(CTRL_PORT), "--lld", "iscsi"] + list(args),
                  check=check)

    def start_tgtd(self):
        sc = self.sc
        store = os.path.join(self.work, "disk.img")
        with open(store, "wb") as f:
            f.truncate(64 * MIB)
        self.tgtd = self.popen("tgtd", self.nsexec(self.ns_t) + ["tgtd", "-f", "-C", str(CTRL_PORT)],
                               env=self.shim_env(sc["target_nagle"]))
        deadline = time.time() + 10
        while self.tgtadm("--op", "show", "--mode", "target", check=False).returncode != 0:
            if time.time() > deadline or self.tgtd.poll() is not None:
                raise RuntimeError("tgtd did not come up")
            time.sleep(0.1)
        self.tgtadm("--op", "new", "--mode", "target", "--tid", "1", "-T", TGT_IQN)
        self.tgtadm("--op", "new", "--mode", "logicalunit", "--tid", "1", "--lun", "1", "-b", store)
        self.tgtadm("--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL")
        for k, v in sc["tgt_params"].items():
            self.tgtadm("--op", "update", "--mode", "target", "--tid", "1", "--name", k, "--value", v)
        self.wait_listen()

    def stop_tgtd(self):
        if not self.tgtd or self.tgtd.poll() is not None:
            return
        self.tgtadm("--op", "delete", "--mode", "target", "--tid", "1", "--force", check=False)
        self.tgtadm("--op", "delete", "--mode", "system", check=False)
        try:
            self.tgtd.wait(5)
        except subprocess.TimeoutExpired:
            self.tgtd.kill()
            self.tgtd.wait()

    def start_scripted(self):
        sc = self.sc
        cmd = self.nsexec(self.ns_t) + [sys.executable, os.path.join(HERE, "scripted_target.py"),
                                        "--nagle" if sc["target_nagle"] else "--nodelay",
                                        "--status", sc["scripted_status"], "--target-name", SCRIPTED_IQN,
                                        "--congestion-control", sc["cc"]]
        if sc["cc_at_listen"]:
            cmd += ["--cc-at-listen"]
        if sc["think_ms"]:
            cmd += ["--think-ms", ",".join("%d:%g" % kv for kv in sorted(sc["think_ms"].items()))]
        if sc["think_before_read"]:
            cmd += ["--think-before-read"]
        self.popen("scripted_target", cmd)
        self.wait_listen()

    def start_target(self):
        if self.sc["target"] == "scripted":
            self.start_scripted()
        else:
            self.start_tgtd()

    def wait_listen(self):
        deadline = time.time() + 10
        while True:
            r = sh(self.nsexec(self.ns_t) + ["ss", "-Hltn", "sport = :3260"], check=False)
            if r.stdout.strip():
                return
            if time.time() > deadline:
                raise RuntimeError("target did not listen on 3260")
            time.sleep(0.05)

    def restart_wire_counters(self):
        """delayfwd's counters (lateness above all) from here on cover the captured traffic only."""
        for name, p in self.procs:
            if name == "delayfwd" and p.poll() is None:
                p.send_signal(signal.SIGUSR1)

    # ---- capture --------------------------------------------------------------------------
    def start_captures(self, outdir):
        caps = []
        for v in self.sc["vantages"]:
            ns = {"initiator": self.ns_i, "target": self.ns_t, "midpath": self.ns_m}[v]
            path = os.path.join(outdir, "%s--%s.pcap" % (self.sc["name"], v))
            errpath = os.path.join(self.work, "tcpdump-%s.log" % v)
            errf = open(errpath, "w")
            self.log_files.append(errf)
            p = subprocess.Popen(self.nsexec(ns) + ["tcpdump", "-i", "lab0", "-B", "32768", "-s", "0", "-Z", "root",
                                                    "-n", "-w", path, "tcp port 3260"],
                                 stdout=subprocess.DEVNULL, stderr=errf, start_new_session=True)
            self.procs.append(("tcpdump-" + v, p))
            caps.append((v, path, p, errpath))
        # ISD_LAB_LIVE_DOCTOR=iscsi-doctor: it also captures live at the initiator (-i, -w, JSON report
        # to <name>--initiator.live.pcap / .live.json), stopped with the tcpdumps (tests/captures).
        doctor = os.environ.get("ISD_LAB_LIVE_DOCTOR")
        if doctor and "initiator" in self.sc["vantages"]:
            base = os.path.join(outdir, "%s--initiator.live" % self.sc["name"])
            errpath = os.path.join(self.work, "live-doctor.log")
            errf = open(errpath, "w")
            self.log_files.append(errf)
            p = subprocess.Popen(self.nsexec(self.ns_i) + [doctor, "-i", "lab0", "-w", base + ".pcap", "--format", "json",
                                                         "-o", base + ".json"],
                                 stdout=subprocess.DEVNULL, stderr=errf, start_new_session=True)
            self.procs.append(("live-doctor", p))
            caps.append(("live", base + ".pcap", p, errpath))
        deadline = time.time() + 10
        for v, path, p, errpath in caps:
            while ("capturing on" if v == "live" else "listening on") not in open(errpath).read():
                if time.time() > deadline or p.poll() is not None:
                    raise RuntimeError("tcpdump (%s) did not start: %s" % (v, open(errpath).read()))
                time.sleep(0.05)
        time.sleep(0.3)
        return caps

    def stop_captures(self, caps):
        time.sleep(1.2)   # let the last packets reach the capture buffers
        for v, path, p, errpath in caps:
            p.send_signal(signal.SIGINT)
        for v, path, p, errpath in caps:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            err = open(errpath).read()
            m = re.search(r"(\d+) packets dropped by kernel", err)
            if m and int(m.group(1)) != 0:
                raise RuntimeError("tcpdump (%s) dropped %s packets" % (v, m.group(1)))

    # ---- workloads ------------------------------------------------------------------------
    def url(self):
        iqn = SCRIPTED_IQN if self.sc["target"] == "scripted" else TGT_IQN
        return "iscsi://%s/%s/1" % (IP_T, iqn)

    def image_args(self, session=None):
        iqn = SCRIPTED_IQN if self.sc["target"] == "scripted" else TGT_IQN
        if self.sc["header_digest"]:
            return ["--image-opts", "driver=iscsi,transport=tcp,portal=%s,target=%s,lun=1,header-digest=crc32c"
                    % (IP_T, iqn)]
        if session is not None:   # concurrent sessions: each its own initiator name (its own I_T nexus)
            return ["--image-opts", "driver=iscsi,transport=tcp,portal=%s,target=%s,lun=1,"
                    "initiator-name=iqn.2026-11.org.iscsi-doctor:session%d" % (IP_T, iqn, session)]
        return ["-f", "raw", self.url()]

    def qemu_io_cmd(self, arg, session=None):
        cmd = ["qemu-io", "-t", "none"]
        for c in arg:
            cmd += ["-c", c]
        return cmd + self.image_args(session)

    def run_workload(self):
        env = self.initiator_env()
        if self.sc["sessions"] > 1:
            self.run_sessions(env)
            return
        for kind, arg in self.sc["workload"]:
            if kind == "qemu-io":
                cmd = self.qemu_io_cmd(arg)
            elif kind == "bench":
                cmd = ["qemu-img", "bench", "-t", "none"] + arg + self.image_args()
            elif kind == "test-cu":
                # one invocation per test (each logs in anew): bounded and easy to attribute
                for test in arg:
                    self.run_one(["timeout", "20", "iscsi-test-cu", "-n", "-d", "-t", test, self.url()], env, kind)
                continue
            else:
                raise ValueError(kind)
            self.run_one(cmd, env, kind)

    def run_sessions(self, env):
        """Each qemu-io entry of the workload at the same time, one session each (a shared wire)."""
        errors = []

        def one(i, arg):
            try:
                self.run_one(self.qemu_io_cmd(arg, session=i + 1), env, "qemu-io")
            except BaseException as e:  # re-raised below
                errors.append(e)
        threads = [threading.Thread(target=one, args=(i, arg)) for i, (kind, arg) in enumerate(self.sc["workload"])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def run_workload_catching(self):
        self.workload_error = None
        try:
            self.run_workload()
        except BaseException as e:  # re-raised by the main thread
            self.workload_error = e

    def wait_session(self):
        """Until the initiator's iSCSI connection is established and its login done (a few round trips)."""
        deadline = time.time() + 10
        while True:
            r = sh(self.nsexec(self.ns_i) + ["ss", "-Htn", "state", "established", "dport = :3260"], check=False)
            if r.stdout.strip():
                break
            if time.time() > deadline:
                raise RuntimeError("the initiator did not connect")
            time.sleep(0.02)
        # login: a handful of round trips, each up to the wire's extra delay longer
        time.sleep(0.2 + 20 * (self.sc["delay_ms"] + extra_delay_ms(self.sc)) / 1000)

    def run_one(self, cmd, env, kind):
        t0 = time.time()
        r = subprocess.run(self.nsexec(self.ns_i) + cmd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        with open(os.path.join(self.work, "workload.log"), "a") as f:
            f.write("$ %s\n%s\n" % (" ".join(cmd[:8]) + (" ..." if len(cmd) > 8 else ""), r.stdout))
        if kind != "test-cu" and (r.returncode != 0 or "error" in r.stdout.lower() or "failed" in r.stdout.lower()):
            raise RuntimeError("workload failed (%d): %s" % (r.returncode, r.stdout[-2000:]))
        log("  %s: %.1f s%s" % (kind, time.time() - t0, " " + cmd[-2] if kind == "test-cu" else ""))

    # ---- teardown -------------------------------------------------------------------------
    def teardown(self):
        try:
            if self.tgtd is not None:
                self.stop_tgtd()
        except Exception as e:  # keep tearing down
            log("tgtd stop: %s" % e)
        for name, p in reversed(self.procs):
            if p.poll() is None:
                try:
                    p.terminate()
                    p.wait(3)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                except ProcessLookupError:
                    pass
        self.procs = []
        for ns in self.namespaces:
            sh(["ip", "netns", "del", ns], check=False)
        self.namespaces = []
        for f in self.log_files:
            f.close()
        self.log_files = []


_LABS = []


def _cleanup_all():
    for lab in _LABS:
        lab.teardown()


def _on_signal(signum, frame):
    raise SystemExit(128 + signum)


def versions():
    def first_line(cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout.strip()
        except OSError:
            return ""

    def deb(pkg):
        return first_line(["dpkg-query", "-W", "-f", "${Version}", pkg])

    tgtd = first_line(["tgtd", "-V"]).split()[-1] if first_line(["tgtd", "-V"]) else "?"
    qemu = re.search(r"version (\S+)", first_line(["qemu-io", "-V"]))
    return {
        "tgtd": tgtd,
        "qemu": qemu.group(1) if qemu else "?",
        "libiscsi": deb("libiscsi7").split("-")[0] or "?",
        "python": "%d.%d.%d" % sys.version_info[:3],
        "kernel": os.uname().release,
        "tcpdump": deb("tcpdump"),
    }


def made_block(sc, vantage, vers):
    if sc["target"] == "scripted":
        target = "scripted target (captures/lab/scripted_target.py, Python %s), status %s" % (
            vers["python"], {"separate": "in a separate SCSI Response written after the Data-In",
                             "coalesced": "in a SCSI Response written in the same send() as the Data-In",
                             "collapsed": "in the final Data-In"}[sc["scripted_status"]])
    else:
        target = "tgtd %s (Debian tgt, backing store rdwr on a sparse 64 MiB file)" % vers["tgtd"]
    wl = sc["workload"][0][0]
    initiator = {"qemu-io": "qemu-io %s (libiscsi %s)", "bench": "qemu-img bench %s (libiscsi %s)",
                 "test-cu": "iscsi-test-cu (libiscsi %s)"}[wl]
    initiator = initiator % ((vers["libiscsi"],) if wl == "test-cu" else (vers["qemu"], vers["libiscsi"]))
    made = {
        "target": target,
        "initiator": initiator,
        "one_way_delay_ms": sc["delay_ms"],
        "mtu": sc["mtu"],
        # IPv4 and TCP headers, with timestamps unless the scenario turns them off
        "mss": sc["mtu"] - (40 if sc["sysctls"].get("net.ipv4.tcp_timestamps") == "0" else 52),
        "link_mbit_s": sc["link_mbit"],
        "congestion_control": sc["cc"],
        "nagle": {"initiator": sc["initiator_nagle"], "target": sc["target_nagle"] if sc["target"] == "scripted"
                  else sc["target_nagle"]},
        "vantage": vantage,
        "workload": sc["workload_text"],
        "queue_depth": sc["queue_depth"],
        "digests": {"header": sc["header_digest"], "data": False},
        "starts_mid_session": sc["starts_mid_session"],
        "capture_joins": sc["capture_joins"],
        **({"ends_open": True} if sc["ends_open"] else {}),
        "offload": sc["offload"],
        "jitter": dict(sc["jitter"]) if sc["jitter"] else None,
        "base_scenario": sc["base"],
        "target_params": dict(sc["tgt_params"]),
        "kernel": vers["kernel"],
        "how": sc["doc"],
    }
    # keys of the later scenarios only, so that the blocks of the others stay as they were
    if sc["queue"]:
        made["queue_jitter"] = dict(sc["queue"])
    if sc["sessions"] > 1:
        made["sessions"] = sc["sessions"]
    # the configured cause of the scenarios that set one (absent from the others, whose blocks stay as they were)
    cause = {}
    if sc["cc_at_listen"]:
        cause["target_congestion_control_set"] = "on the listening socket (no bbr init, so no TCP internal pacing)"
    if sc["require_sysctls"] or sc["sysctls"]:
        cause["sysctls_both_peers"] = dict(sc["require_sysctls"], **sc["sysctls"])
    if sc["initiator_rcvbuf"]:
        cause["initiator_so_rcvbuf"] = sc["initiator_rcvbuf"]
    if sc["think_ms"]:
        cause["target_think_ms_by_read_bytes"] = {str(k): v for k, v in sorted(sc["think_ms"].items())}
    if sc["think_before_read"]:
        cause["target_think_before_reading_the_command"] = True
    if sc["loss"]:
        l = sc["loss"]
        cause["wire_loss"] = {"from": l["from"], "every": l["every"], "first": l["first"],
                              "min_payload": l["min_payload"],
                              "what": "frames from the %s carrying new TCP data (>= %d payload bytes) are counted; "
                                      "numbers %d, %d, %d, ... are dropped by delayfwd (never a retransmission)"
                                      % (l["from"], l["min_payload"], l["first"], l["first"] + l["every"],
                                         l["first"] + 2 * l["every"])}
    if cause:
        made["configured"] = cause
    return made


def cut_login(path, work):
    """Keep the capture from the 20th READ command on (drops SYN, login and the first commands)."""
    r = sh(["tshark", "-r", path, "-Y", "iscsi.opcode == 0x01 && scsi_sbc.opcode == 0x28", "-T", "fields",
            "-e", "frame.number"])
    frames = [int(x) for x in r.stdout.split()]
    if len(frames) < 30:
        raise RuntimeError("too few reads to cut: %d" % len(frames))
    first = frames[19]
    tmp = os.path.join(work, "cut.pcap")
    sh(["editcap", "-r", path, tmp, "%d-%d" % (first, 1 << 30)])
    shutil.move(tmp, path)


def cut_logout(path, work):
    """End the capture before the first Logout Request: the connection outlives the capture."""
    r = sh(["tshark", "-r", path, "-Y", "iscsi.opcode == 0x06", "-T", "fields", "-e", "frame.number"])
    frames = [int(x) for x in r.stdout.split()]
    if not frames:
        raise RuntimeError("no logout to cut")
    tmp = os.path.join(work, "cut.pcap")
    sh(["editcap", "-r", path, tmp, "1-%d" % (frames[0] - 1)])
    shutil.move(tmp, path)


def run_scenario(name, outdir, build, workroot=None):
    """Run one scenario; write OUTDIR/<name>--<vantage>.pcap; return [(vantage, path)]."""
    sc = SCENARIOS[name]
    os.makedirs(outdir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="isd-lab-%s-" % name, dir=workroot)
    lab = Lab(build, sc, work)
    t0 = time.time()
    log("scenario %s (work dir %s)" % (name, work))
    try:
        lab.setup()
        lab.start_target()
        if sc["capture_joins"]:
            worker = threading.Thread(target=lab.run_workload_catching)
            worker.start()
            lab.wait_session()
            caps = lab.start_captures(outdir)
            lab.restart_wire_counters()
            worker.join()
            if lab.workload_error:
                raise lab.workload_error
        else:
            caps = lab.start_captures(outdir)
            lab.run_workload()
        lab.stop_captures(caps)
    except BaseException:
        log("scenario %s failed; logs kept in %s" % (name, work))
        for fn in sorted(os.listdir(work)):
            if fn.endswith(".log"):
                sys.stderr.write("---- %s\n%s\n" % (fn, open(os.path.join(work, fn)).read()[-3000:]))
        lab.teardown()
        raise
    lab.teardown()
    fwd = open(os.path.join(work, "delayfwd.log")).read()
    before = 0
    for line in fwd.splitlines():
        if "restarted now" in line:
            before = 2
        elif "frames" in line or "queue:" in line:
            log("  " + ("(before the capture) " if before else "") + line)
            before = max(0, before - 1)
    out = []
    for v, path, p, err in caps:
        if v == "live":
            continue
        if sc["starts_mid_session"] and not sc["capture_joins"]:
            cut_login(path, work)
        if sc["ends_open"]:
            cut_logout(path, work)
        out.append((v, path))
    if not os.environ.get("ISD_LAB_KEEP"):
        shutil.rmtree(work, ignore_errors=True)
    log("scenario %s done in %.1f s" % (name, time.time() - t0))
    return out


# Targets for `iscsi-doctor probe` (lab.py probe): the probe is the initiator and captures itself.
PROBE_TARGETS = {
    "tgtd": scenario("probe-tgtd", register=False, doc="tgtd as shipped (TCP_NODELAY)", workload=[]),
    "tgtd-nagle": scenario("probe-tgtd-nagle", register=False, doc="tgtd with Nagle on (shim)", target_nagle=True,
                           workload=[]),
    "scripted-nagle": scenario("probe-scripted-nagle", register=False, target="scripted", target_nagle=True,
                               doc="the scripted target: Data-In and SCSI Response in two writes, Nagle on",
                               workload=[]),
}


def run_probe(target, outdir, build, doctor, args):
    """Start TARGET in the lab, run `DOCTOR probe URL -i lab0 ARGS` in the initiator's namespace;
    write OUTDIR/probe-TARGET.{pcap,out,err,rc}; return the exit code."""
    sc = PROBE_TARGETS[target]
    os.makedirs(outdir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="isd-lab-probe-%s-" % target)
    lab = Lab(build, sc, work)
    base = os.path.join(outdir, "probe-" + target)
    try:
        lab.setup()
        lab.start_target()
        cmd = lab.nsexec(lab.ns_i) + [doctor, "probe", lab.url(), "-i", "lab0", "-w", base + ".pcap"] + args
        log("probe %s: %s" % (target, " ".join(cmd[4:])))
        with open(base + ".out", "w") as out, open(base + ".err", "w") as err:
            rc = subprocess.run(cmd, stdout=out, stderr=err, timeout=300).returncode
        with open(base + ".rc", "w") as f:
            f.write("%d\n" % rc)
    finally:
        lab.teardown()
        if not os.environ.get("ISD_LAB_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    r = sub.add_parser("run")
    r.add_argument("scenario")
    r.add_argument("outdir")
    r.add_argument("--build", required=True, help="directory holding delayfwd and nodelay_shim.so")
    r.add_argument("--json", action="store_true", help="print the produced files and their 'made' blocks as JSON")
    a = sub.add_parser("all")
    a.add_argument("outdir")
    a.add_argument("--build", required=True)
    a.add_argument("--only", help="comma-separated scenario names")
    pr = sub.add_parser("probe", help="run iscsi-doctor probe against a lab target")
    pr.add_argument("target", choices=sorted(PROBE_TARGETS))
    pr.add_argument("outdir")
    pr.add_argument("--build", required=True)
    pr.add_argument("--doctor", required=True, help="the iscsi-doctor binary")
    pr.add_argument("probe_args", nargs=argparse.REMAINDER, help="after --: options for iscsi-doctor probe")
    args = ap.parse_args()

    if args.cmd == "list":
        for n, sc in SCENARIOS.items():
            print("%-34s %s" % (n, "(short) " if sc["short"] else "") + sc["doc"][:90])
        return 0
    if os.geteuid() != 0:
        print("lab.py: must run as root (network namespaces, TAP devices, tcpdump)", file=sys.stderr)
        return 2
    atexit.register(_cleanup_all)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _on_signal)
    if args.cmd == "probe":
        rest = args.probe_args[1:] if args.probe_args[:1] == ["--"] else args.probe_args
        rc = run_probe(args.target, args.outdir, args.build, os.path.abspath(args.doctor), rest)
        print(os.path.join(args.outdir, "probe-%s" % args.target))
        return 0 if rc in (0, 1) else 3
    vers = versions()
    names = list(SCENARIOS) if args.cmd == "all" else [args.scenario]
    if args.cmd == "all" and args.only:
        names = args.only.split(",")
    for n in names:
        if n not in SCENARIOS:
            print("unknown scenario %s (see: lab.py list)" % n, file=sys.stderr)
            return 2
    made = []
    for n in names:
        for v, path in run_scenario(n, args.outdir, args.build):
            made.append({"scenario": n, "vantage": v, "path": path, "made": made_block(SCENARIOS[n], v, vers)})
    if args.cmd == "all" or args.json:
        with open(os.path.join(args.outdir, "made.json"), "w") as f:
            json.dump(made, f, indent=1)
    if getattr(args, "json", False):
        print(json.dumps(made, indent=1))
    else:
        for m in made:
            print(m["path"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
