#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A minimal scripted iSCSI target (RFC 7143) for the iscsi-doctor capture lab.

Why it exists: tgtd puts the SCSI status into the final Data-In PDU (S bit)
for good reads, so it never shows the study's case -- a Data-In tail followed
by a *separate* small SCSI Response that Nagle holds back until the
initiator's ACK arrives.  This target speaks just enough iSCSI for libiscsi
(qemu-io, qemu-img, iscsi-inq, ...) to log in and read/write, and sends the
final Data-In (F=1, S=0) and the SCSI Response as two separate send() calls
on an ordinary kernel TCP socket.

Send policies (--status):
  separate   Data-In, then SCSI Response, two send() calls (the study's slow target)
  coalesced  Data-In and SCSI Response in ONE send() call (the study's fix: a
             layer between iSCSI and TCP that coalesces them)
  collapsed  status in the final Data-In (S=1), like tgtd and most targets
Nagle: --nagle (default: the kernel default, Nagle on) or --nodelay (TCP_NODELAY).
Think time: --think-ms MS delays the reply to every READ by MS milliseconds (a slow
back end); --think-ms BYTES:MS,BYTES:MS... only READs of those transfer lengths.
--think-before-read spends it before the command is read from the socket (a busy
target): the kernel then ACKs the command only when its delayed-ACK timer fires or
the read empties the receive queue, never at once.

Storage: an in-memory, zero-filled disk (like the study's memory-mode target);
writes are accepted and kept in a sparse dict of blocks.
Unknown opcodes get CHECK CONDITION / ILLEGAL REQUEST / INVALID COMMAND OPERATION CODE.
Only one LUN is served, under whatever LUN number the initiator addresses.
Header/data digests are refused (negotiated to None).
"""

import argparse
import fcntl
import os
import signal
import socket
import struct
import sys
import threading
import time

BLOCK = 512
SIOCOUTQNSD = 0x894B   # bytes in the socket's send queue not yet sent

# opcodes (initiator -> target, without the I bit)
OP_NOP_OUT, OP_SCSI_CMD, OP_TMF_REQ, OP_LOGIN_REQ, OP_TEXT_REQ, OP_DATA_OUT, OP_LOGOUT_REQ, OP_SNACK = (
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10)
# target -> initiator
OP_NOP_IN, OP_SCSI_RSP, OP_TMF_RSP, OP_LOGIN_RSP, OP_TEXT_RSP, OP_DATA_IN, OP_LOGOUT_RSP, OP_R2T, OP_REJECT = (
    0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x31, 0x3F)

GOOD, CHECK_CONDITION = 0x00, 0x02
ILLEGAL_REQUEST = 0x05


def log(args, msg):
    if args.verbose:
        print("scripted_target: " + msg, file=sys.stderr, flush=True)


def sense_fixed(key, asc, ascq):
    s = bytearray(18)
    s[0] = 0x70
    s[2] = key
    s[7] = 10
    s[12] = asc
    s[13] = ascq
    return bytes(s)


def parse_keys(data):
    out = []
    for item in data.split(b"\0"):
        if not item:
            continue
        k, _, v = item.decode("utf-8", "replace").partition("=")
        out.append((k, v))
    return out


def enc_keys(pairs):
    return b"".join(("%s=%s" % (k, v)).encode() + b"\0" for k, v in pairs)


def pad4(b):
    return b + b"\0" * (-len(b) % 4)


class Conn:
    def __init__(self, sock, args, disk):
        self.s = sock
        self.args = args
        self.disk = disk  # dict lba -> 512 bytes
        self.stat_sn = 0x1000
        self.exp_cmd_sn = 0
        self.peer_mrdsl = 8192          # initiator's MaxRecvDataSegmentLength (Data-In size limit)
        self.my_mrdsl = args.max_recv_dsl
        self.initial_r2t = True
        self.immediate_data = True
        self.first_burst = 65536
        self.max_burst = 262144
        self.session_type = "Normal"
        self.tsih = 0
        self.writes = {}   # itt -> write state
        self.ttt_next = 0x100
        self.closing = False
        self.neg = {}

    # ---- framing --------------------------------------------------------------
    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)

    def think_ms(self, bhs):
        """The configured think time of a SCSI READ command's BHS, else 0."""
        if bhs[0] & 0x3F != OP_SCSI_CMD or bhs[32] not in (0x08, 0x28, 0xA8, 0x88):
            return 0.0
        edtl = struct.unpack(">I", bhs[20:24])[0]
        return self.args.think.get(edtl, self.args.think.get(None, 0.0))

    def recv_pdu(self):
        if self.args.think_before_read:
            # Peeked, the command stays queued: the read that would ACK it waits for the think time.
            peek = self.s.recv(48, socket.MSG_PEEK | socket.MSG_WAITALL)
            if len(peek) == 48 and self.think_ms(peek) > 0:
                time.sleep(self.think_ms(peek) / 1000.0)
        bhs = self.recv_exact(48)
        ahs_len = bhs[4] * 4
        dlen = int.from_bytes(bhs[5:8], "big")
        ahs = self.recv_exact(ahs_len) if ahs_len else b""
        data = self.recv_exact(dlen + (-dlen % 4)) if dlen else b""
        return bhs, ahs, data[:dlen]

    def max_cmd_sn(self):
        return (self.exp_cmd_sn + 63) & 0xFFFFFFFF

    def bhs(self, opcode, flags, itt, data_len=0, lun=b"\0" * 8, word20=0xFFFFFFFF, stat_sn=None,
            rest=b"", b2=0, b3=0):
        """Build a target BHS: opcode, flags, byte2, byte3, dlen, lun, itt, bytes 20-23,
        StatSN, ExpCmdSN, MaxCmdSN, then bytes 36..47 from rest."""
        h = bytearray(48)
        h[0] = opcode
        h[1] = flags
        h[2] = b2
        h[3] = b3
        h[5:8] = data_len.to_bytes(3, "big")
        h[8:16] = lun
        h[16:20] = itt
        h[20:24] = struct.pack(">I", word20)
        h[24:28] = struct.pack(">I", self.stat_sn if stat_sn is None else stat_sn)
        h[28:32] = struct.pack(">I", self.exp_cmd_sn)
        h[32:36] = struct.pack(">I", self.max_cmd_sn())
        h[36:36 + len(rest)] = rest
        return bytes(h)

    def send(self, *pdus):
        """One send() (sendall) call carrying the given PDUs back to back."""
        self.s.sendall(b"".join(pdus))

    def note_cmd_sn(self, bhs):
        immediate = bool(bhs[0] & 0x40)
        cmd_sn = struct.unpack(">I", bhs[24:28])[0]
        if not immediate and ((cmd_sn - self.exp_cmd_sn) & 0xFFFFFFFF) < 0x80000000:
            self.exp_cmd_sn = (cmd_sn + 1) & 0xFFFFFFFF

    # ---- login ----------------------------------------------------------------
    def negotiate(self, keys):
        resp = []
        a = self.args
        for k, v in keys:
            if k in ("InitiatorName", "InitiatorAlias", "TargetName"):
                self.neg[k] = v
                continue
            if k == "SessionType":
                self.session_type = v
                continue
            if k == "AuthMethod":
                resp.append((k, "None" if "None" in v.split(",") else "Reject"))
            elif k in ("HeaderDigest", "DataDigest"):
                resp.append((k, "None" if "None" in v.split(",") else "Reject"))
            elif k == "MaxRecvDataSegmentLength":
                self.peer_mrdsl = int(v)
            elif k == "InitialR2T":
                self.initial_r2t = (v == "Yes") or a.initial_r2t
                resp.append((k, "Yes" if self.initial_r2t else "No"))
            elif k == "ImmediateData":
                self.immediate_data = (v == "Yes") and a.immediate_data
                resp.append((k, "Yes" if self.immediate_data else "No"))
            elif k == "MaxBurstLength":
                self.max_burst = min(int(v), 262144)
                resp.append((k, str(self.max_burst)))
            elif k == "FirstBurstLength":
                self.first_burst = min(int(v), 65536)
                resp.append((k, str(self.first_burst)))
            elif k == "MaxConnections":
                resp.append((k, "1"))
            elif k == "DefaultTime2Wait":
                resp.append((k, v))
            elif k == "DefaultTime2Retain":
                resp.append((k, "0"))
            elif k == "MaxOutstandingR2T":
                resp.append((k, "1"))
            elif k in ("DataPDUInOrder", "DataSequenceInOrder"):
                resp.append((k, "Yes"))
            elif k == "ErrorRecoveryLevel":
                resp.append((k, "0"))
            elif k in ("IFMarker", "OFMarker"):
                resp.append((k, "No"))
            else:
                resp.append((k, "NotUnderstood"))
        return resp

    def handle_login(self, bhs, data):
        flags = bhs[1]
        transit = bool(flags & 0x80)
        csg = (flags >> 2) & 3
        nsg = flags & 3
        isid = bhs[8:14]
        itt = bhs[16:20]
        cmd_sn = struct.unpack(">I", bhs[24:28])[0]
        self.exp_cmd_sn = cmd_sn
        keys = parse_keys(data)
        resp = self.negotiate(keys)
        if csg == 0 and not any(k == "TargetPortalGroupTag" for k, _ in resp):
            resp.append(("TargetPortalGroupTag", "1"))
        if csg == 1 and not getattr(self, "declared_mrdsl", False):
            resp.append(("MaxRecvDataSegmentLength", str(self.my_mrdsl)))
            self.declared_mrdsl = True
        rflags = (0x80 if transit else 0) | (csg << 2) | (nsg if transit else 0)
        if transit and nsg == 3:
            self.tsih = 1
        payload = enc_keys(resp)
        h = bytearray(48)
        h[0] = OP_LOGIN_RSP
        h[1] = rflags
        h[2] = 0x00   # version max
        h[3] = 0x00   # version active
        h[5:8] = len(payload).to_bytes(3, "big")
        h[8:14] = isid
        h[14:16] = struct.pack(">H", self.tsih)
        h[16:20] = itt
        h[24:28] = struct.pack(">I", self.stat_sn)
        h[28:32] = struct.pack(">I", self.exp_cmd_sn)
        h[32:36] = struct.pack(">I", self.max_cmd_sn())
        h[36] = 0  # status class: success
        h[37] = 0
        self.stat_sn += 1
        self.send(bytes(h) + pad4(payload))
        log(self.args, "login csg=%d nsg=%d T=%d keys=%s -> %s" % (csg, nsg, transit, keys, resp))

    # ---- SCSI -----------------------------------------------------------------
    def nblocks(self):
        return self.args.size_mb * 1024 * 1024 // BLOCK

    def inquiry(self, cdb):
        evpd = cdb[1] & 1
        page = cdb[2]
        if not evpd:
            d = bytearray(36 + 60)
            d[0] = 0x00          # direct access block device
            d[2] = 0x06          # SPC-4
            d[3] = 0x02          # response data format 2
            d[4] = len(d) - 5
            d[7] = 0x02          # CmdQue
            d[8:16] = b"ISCSIDOC"
            d[16:32] = b"SCRIPTED TARGET "
            d[32:36] = b"0001"
            return bytes(d), None
        if page == 0x00:
            pages = bytes([0x00, 0x80, 0x83, 0xB0])
            return bytes([0, 0x00, 0, len(pages)]) + pages, None
        if page == 0x80:
            sn = b"ISCSIDOC0001"
            return bytes([0, 0x80, 0, len(sn)]) + sn, None
        if page == 0x83:
            naa = bytes([0x01, 0x03, 0x00, 0x08]) + bytes.fromhex("6001405000000001")
            return bytes([0, 0x83]) + struct.pack(">H", len(naa)) + naa, None
        if page == 0xB0:
            d = bytearray(64)
            d[1] = 0xB0
            d[2:4] = struct.pack(">H", 60)
            d[8:12] = struct.pack(">I", 2048)      # maximum transfer length (blocks) = 1 MiB
            d[12:16] = struct.pack(">I", 8)        # optimal transfer length
            return bytes(d), None
        return None, sense_fixed(ILLEGAL_REQUEST, 0x24, 0x00)   # invalid field in CDB

    def rw_params(self, cdb):
        op = cdb[0]
        if op in (0x08, 0x0A):
            lba = int.from_bytes(cdb[1:4], "big") & 0x1FFFFF
            n = cdb[4] or 256
        elif op in (0x28, 0x2A):
            lba = int.from_bytes(cdb[2:6], "big")
            n = int.from_bytes(cdb[7:9], "big")
        elif op in (0xA8, 0xAA):
            lba = int.from_bytes(cdb[2:6], "big")
            n = int.from_bytes(cdb[6:10], "big")
        else:  # 0x88 / 0x8A
            lba = int.from_bytes(cdb[2:10], "big")
            n = int.from_bytes(cdb[10:14], "big")
        return lba, n

    def read_blocks(self, lba, n):
        if not self.disk:
            return bytes(n * BLOCK)
        out = bytearray(n * BLOCK)
        for i in range(n):
            b = self.disk.get(lba + i)
            if b:
                out[i * BLOCK:(i + 1) * BLOCK] = b
        return bytes(out)

    def scsi_in(self, cdb):
        """Return (data, sense) for a command that may return data."""
        op = cdb[0]
        if op == 0x00:          # TEST UNIT READY
            return b"", None
        if op == 0x12:
            return self.inquiry(cdb)
        if op == 0x25:          # READ CAPACITY (10)
            return struct.pack(">II", min(self.nblocks() - 1, 0xFFFFFFFF), BLOCK), None
        if op == 0x9E and (cdb[1] & 0x1F) == 0x10:   # READ CAPACITY (16)
            return struct.pack(">QI", self.nblocks() - 1, BLOCK) + bytes(20), None
        if op == 0xA0:          # REPORT LUNS
            return struct.pack(">II", 8, 0) + struct.pack(">H", self.args.lun) + bytes(6), None
        if op == 0x1A:          # MODE SENSE (6): header only, no WP, DPOFUA=0
            return bytes([3, 0, 0, 0]), None
        if op == 0x5A:          # MODE SENSE (10)
            return bytes([0, 6, 0, 0, 0, 0, 0, 0]), None
        if op == 0x03:          # REQUEST SENSE
            return sense_fixed(0, 0, 0), None
        if op in (0x35, 0x91, 0x1E, 0x1B):  # SYNC CACHE 10/16, PREVENT ALLOW, START STOP
            return b"", None
        if op in (0x08, 0x28, 0xA8, 0x88):
            lba, n = self.rw_params(cdb)
            if lba + n > self.nblocks():
                return None, sense_fixed(ILLEGAL_REQUEST, 0x21, 0x00)
            return self.read_blocks(lba, n), None
        return None, sense_fixed(ILLEGAL_REQUEST, 0x20, 0x00)

    def scsi_response(self, itt, status, sense=None, residual=0, under=False, exp_data_sn=0):
        data = b""
        if sense:
            data = struct.pack(">H", len(sense)) + sense
        flags = 0x80 | (0x02 if under and residual else 0)
        rest = struct.pack(">III", exp_data_sn, 0, residual if under else 0)
        h = self.bhs(OP_SCSI_RSP, flags, itt, len(data), word20=0, rest=rest, b2=0x00, b3=status)
        self.stat_sn += 1
        return h + pad4(data)

    def data_in_pdus(self, itt, lun, data, edtl, with_status):
        """Split data into Data-In PDUs (<= initiator's MaxRecvDataSegmentLength)."""
        pdus = []
        off = 0
        sn = 0
        chunk = max(512, self.peer_mrdsl)
        residual = edtl - len(data)
        while off < len(data):
            seg = data[off:off + chunk]
            last = off + len(seg) >= len(data)
            flags = 0x80 if last else 0
            stat_sn = 0
            status = 0
            if last and with_status:
                flags |= 0x01
                if residual > 0:
                    flags |= 0x02
                stat_sn = self.stat_sn
                self.stat_sn += 1
            rest = struct.pack(">III", sn, off, residual if (last and with_status and residual > 0) else 0)
            h = self.bhs(OP_DATA_IN, flags, itt, len(seg), lun=lun, word20=0xFFFFFFFF,
                         stat_sn=stat_sn, rest=rest, b3=status)
            pdus.append(h + pad4(seg))
            off += len(seg)
            sn += 1
        return pdus

    def handle_scsi(self, bhs, data):
        flags = bhs[1]
        lun = bhs[8:16]
        itt = bhs[16:20]
        edtl = struct.unpack(">I", bhs[20:24])[0]
        cdb = bhs[32:48]
        op = cdb[0]
        self.note_cmd_sn(bhs)
        if flags & 0x20 and op in (0x0A, 0x2A, 0xAA, 0x8A):       # write
            self.start_write(itt, lun, edtl, cdb, data)
            return
        if flags & 0x20:   # other data-out commands: we accept and drop the data
            self.start_write(itt, lun, edtl, cdb, data)
            return
        payload, sense = self.scsi_in(cdb)
        think = 0.0 if self.args.think_before_read else self.think_ms(bhs)
        if think > 0:
            time.sleep(think / 1000.0)     # the back end's time before the first reply byte
        if sense is not None:
            self.send(self.scsi_response(itt, CHECK_CONDITION, sense))
            return
        payload = payload[:edtl]
        residual = edtl - len(payload)
        if not payload:
            self.send(self.scsi_response(itt, GOOD, residual=residual, under=True))
            return
        mode = self.args.status
        if mode == "collapsed":
            for p in self.data_in_pdus(itt, lun, payload, edtl, with_status=True):
                self.send(p)
            return
        pdus = self.data_in_pdus(itt, lun, payload, edtl, with_status=False)
        rsp = self.scsi_response(itt, GOOD, residual=residual, under=True, exp_data_sn=len(pdus))
        if mode == "coalesced":
            self.send(*pdus, rsp)
        else:   # separate: every PDU its own send() call, the Response last
            for p in pdus:
                self.send(p)
            if self.args.response_after == "sent":
                self.wait_sent()
            self.send(rsp)

    def wait_sent(self, limit_s=0.02):
        """Wait until the kernel has put every byte written so far on the wire (or 20 ms).

        On today's kernels TCP Small Queues keeps the Data-In tail unsent until the
        device has consumed the previous skb (the TAP reader here, a NIC's TX
        completion elsewhere); a Response written within microseconds is then
        appended to that tail and leaves with it.  The study's 2005-era target and
        kernel sent the Response after the data had left; waiting for the send
        queue to drain reproduces that ordering without touching TCP itself."""
        buf = bytearray(4)
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            fcntl.ioctl(self.s.fileno(), SIOCOUTQNSD, buf)
            if int.from_bytes(buf, sys.byteorder) == 0:
                return
            time.sleep(0.00005)

    # writes: immediate data, unsolicited Data-Out (InitialR2T=No), then R2T per burst
    def start_write(self, itt, lun, edtl, cdb, immediate):
        st = {"lun": lun, "edtl": edtl, "cdb": cdb, "got": len(immediate), "r2tsn": 0,
              "burst_left": 0, "ttt": 0xFFFFFFFF}
        self.writes[itt] = st
        if cdb[0] in (0x0A, 0x2A, 0xAA, 0x8A) and immediate:
            self.store(cdb, 0, immediate)
        if st["got"] >= edtl:
            self.finish_write(itt)
            return
        if not self.initial_r2t and st["got"] < min(self.first_burst, edtl):
            st["unsolicited_until"] = min(self.first_burst, edtl)
            return   # wait for unsolicited Data-Out (TTT 0xffffffff) before any R2T
        self.send_r2t(itt)

    def send_r2t(self, itt):
        st = self.writes[itt]
        want = min(self.max_burst, st["edtl"] - st["got"])
        ttt = self.ttt_next
        self.ttt_next += 1
        st["ttt"] = ttt
        st["burst_left"] = want
        rest = struct.pack(">III", st["r2tsn"], st["got"], want)
        st["r2tsn"] += 1
        h = self.bhs(OP_R2T, 0x80, itt, 0, lun=st["lun"], word20=ttt, rest=rest)
        self.send(h)

    def store(self, cdb, offset, data):
        if cdb[0] not in (0x0A, 0x2A, 0xAA, 0x8A) or not self.args.keep_writes:
            return
        lba, _ = self.rw_params(cdb)
        for i in range(0, len(data) - BLOCK + 1, BLOCK):
            self.disk[lba + (offset + i) // BLOCK] = data[i:i + BLOCK]

    def handle_data_out(self, bhs, data):
        itt = bhs[16:20]
        st = self.writes.get(itt)
        if st is None:
            return
        offset = struct.unpack(">I", bhs[40:44])[0]
        self.store(st["cdb"], offset, data)
        st["got"] = max(st["got"], offset + len(data))
        final = bool(bhs[1] & 0x80)
        if not final:
            return
        if st["got"] >= st["edtl"]:
            self.finish_write(itt)
        else:
            self.send_r2t(itt)

    def finish_write(self, itt):
        st = self.writes.pop(itt)
        self.send(self.scsi_response(itt, GOOD))

    # ---- other PDUs -------------------------------------------------------------
    def handle_nop(self, bhs, data):
        itt = bhs[16:20]
        if bhs[0] & 0x40 == 0:
            self.note_cmd_sn(bhs)
        if itt == b"\xff\xff\xff\xff":
            return   # a reply to our NOP-In (we send none) or a ping without reply wanted
        h = self.bhs(OP_NOP_IN, 0x80, itt, len(data), lun=bhs[8:16], word20=0xFFFFFFFF)
        self.stat_sn += 1
        self.send(h + pad4(data))

    def handle_text(self, bhs, data):
        itt = bhs[16:20]
        self.note_cmd_sn(bhs)
        keys = parse_keys(data)
        resp = []
        for k, v in keys:
            if k == "SendTargets":
                resp.append(("TargetName", self.args.target_name))
                addr = self.s.getsockname()
                resp.append(("TargetAddress", "%s:%d,1" % (addr[0], addr[1])))
        payload = enc_keys(resp)
        h = self.bhs(OP_TEXT_RSP, 0x80, itt, len(payload), word20=0xFFFFFFFF)
        self.stat_sn += 1
        self.send(h + pad4(payload))

    def handle_tmf(self, bhs):
        itt = bhs[16:20]
        self.note_cmd_sn(bhs)
        ref = bhs[20:24]
        # ABORT TASK of a task we do not know -> "task does not exist" (1); everything else: complete
        func = bhs[1] & 0x7F
        response = 0
        if func == 1 and ref not in self.writes:
            response = 1
        h = self.bhs(OP_TMF_RSP, 0x80, itt, 0, word20=0, b2=response)
        self.stat_sn += 1
        self.send(h)

    def handle_logout(self, bhs):
        itt = bhs[16:20]
        self.note_cmd_sn(bhs)
        h = self.bhs(OP_LOGOUT_RSP, 0x80, itt, 0, word20=0)
        self.stat_sn += 1
        self.send(h)
        self.closing = True

    def reject(self, bhs, reason=0x04):
        h = self.bhs(OP_REJECT, 0x80, b"\xff\xff\xff\xff", 48, word20=0xFFFFFFFF, b2=reason)
        self.stat_sn += 1
        self.send(h + bhs)

    def serve(self):
        while not self.closing:
            bhs, ahs, data = self.recv_pdu()
            op = bhs[0] & 0x3F
            if op == OP_LOGIN_REQ:
                self.handle_login(bhs, data)
            elif op == OP_SCSI_CMD:
                self.handle_scsi(bhs, data)
            elif op == OP_DATA_OUT:
                self.handle_data_out(bhs, data)
            elif op == OP_NOP_OUT:
                self.handle_nop(bhs, data)
            elif op == OP_TEXT_REQ:
                self.handle_text(bhs, data)
            elif op == OP_TMF_REQ:
                self.handle_tmf(bhs)
            elif op == OP_LOGOUT_REQ:
                self.handle_logout(bhs)
            else:
                self.reject(bhs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bind", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=3260)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--nagle", dest="nodelay", action="store_false", help="keep Nagle on (kernel default)")
    g.add_argument("--nodelay", dest="nodelay", action="store_true", help="set TCP_NODELAY")
    ap.set_defaults(nodelay=False)
    ap.add_argument("--status", choices=["separate", "coalesced", "collapsed"], default="separate")
    ap.add_argument("--response-after", choices=["sent", "immediately"], default="sent",
                    help="status separate: write the Response once the Data-In has left the socket "
                         "(default; the study's ordering) or right after the Data-In write")
    ap.add_argument("--size-mb", type=int, default=64)
    ap.add_argument("--lun", type=int, default=1)
    ap.add_argument("--target-name", default="iqn.2026-11.org.iscsi-doctor:scripted")
    ap.add_argument("--max-recv-dsl", type=int, default=262144)
    ap.add_argument("--initial-r2t", action="store_true", help="insist on InitialR2T=Yes")
    ap.add_argument("--no-immediate-data", dest="immediate_data", action="store_false")
    ap.add_argument("--keep-writes", action="store_true")
    ap.add_argument("--congestion-control", help="TCP congestion control for each connection (e.g. cubic)")
    ap.add_argument("--cc-at-listen", action="store_true",
                    help="also set --congestion-control on the listening socket, so that connections start with it "
                         "(otherwise they start with the namespace default, e.g. bbr, whose init leaves TCP's "
                         "internal pacing on after the switch)")
    ap.add_argument("--think-ms", default="", metavar="MS | BYTES:MS,...",
                    help="delay the reply to READs by MS ms (all READs, or those of the given transfer lengths)")
    ap.add_argument("--think-before-read", action="store_true",
                    help="spend the think time before reading the command from the socket (a busy target)")
    ap.add_argument("--pidfile")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    args.think = {}
    for item in filter(None, args.think_ms.split(",")):
        if ":" in item:
            nbytes, ms = item.split(":", 1)
            args.think[int(nbytes)] = float(ms)
        else:
            args.think[None] = float(item)

    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if args.congestion_control and args.cc_at_listen:
        srv.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, args.congestion_control.encode())
    srv.bind((args.bind, args.port))
    srv.listen(8)
    if args.pidfile:
        with open(args.pidfile, "w") as f:
            f.write("%d\n" % os.getpid())
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    disk = {}
    print("scripted_target: listening on %s:%d (%s, status %s)" % (
        args.bind, args.port, "TCP_NODELAY" if args.nodelay else "Nagle on", args.status),
        file=sys.stderr, flush=True)

    def run(sock):
        if args.congestion_control:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, args.congestion_control.encode())
        if args.nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c = Conn(sock, args, disk)
        try:
            c.serve()
        except (EOFError, ConnectionError):
            pass
        finally:
            sock.close()

    while True:
        sock, _ = srv.accept()
        threading.Thread(target=run, args=(sock,), daemon=True).start()


if __name__ == "__main__":
    main()
