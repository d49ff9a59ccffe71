# SPDX-License-Identifier: GPL-2.0-or-later
"""Wireshark's iSCSI and SCSI dissectors as the oracle, PDU by PDU.

`tshark -T fields` flattens a frame's fields into one list per field name, so when a frame holds
several iSCSI PDUs (queue depth > 1, a Data-In and its Response in one segment) the lists of fields
that only some PDUs carry cannot be lined up. PDML keeps the tree in order: every iSCSI PDU is an
`<proto name="iscsi">` followed by the `<proto name="scsi">` elements its dissection produced (the
CDB, the payload, the response), and a PDU reassembled from several segments is preceded by the
`tcp.segments` item listing them. This module streams tshark's PDML (two-pass, default preferences)
and returns one record per SCSI Command PDU with its CDB, its status PDU, its timing and the frames
involved. Nothing here reads iscsi-doctor's output.
"""
import functools
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Optional

# Frames that can hold a SCSI Command PDU or a status-bearing PDU (the SCSI Response, or a
# Data-In with the S bit), and READ CAPACITY data (the block size). Other frames are not needed and
# would only make the PDML bigger.
DISPLAY_FILTER = ("iscsi.opcode == 0x01 || iscsi.opcode == 0x21 || iscsi.scsidata.S == 1"
                  " || scsi_sbc.blocksize")


def _ns(text):
    """'1795313895.652905000' or '0.008278000' -> integer nanoseconds (no float rounding)."""
    whole, _, frac = text.strip().partition(".")
    return int(whole) * 1_000_000_000 + int((frac + "000000000")[:9])


@dataclass
class Pdu:
    frame: int
    frame_ns: int
    opcode: int
    fields: dict                    # iSCSI field name -> first 'show' value
    segments: Optional[list]        # frames of a PDU reassembled from several segments
    scsi: list = field(default_factory=list)   # [(showname, {field -> show})] in tree order
    stream: Optional[int] = None    # tcp.stream, when asked for (pdus(streams=True))

    @property
    def itt(self):
        return int(self.fields["iscsi.initiatortasktag"], 16)

    @property
    def first_frame(self):
        """The frame holding the PDU's first byte (its BHS)."""
        return min(self.segments) if self.segments else self.frame

    def scsi_part(self, prefix):
        for name, f in self.scsi:
            if name.startswith(prefix):
                return name, f
        return None, {}


@dataclass
class Command:
    """A SCSI Command PDU as Wireshark sees it, with its status PDU when Wireshark pairs one."""
    pdu: Pdu
    first_frame: int                # first segment of the PDU (the frame itself when not reassembled)
    request_frame: int              # the frame where the PDU completes (Wireshark's request frame)
    response_frame: Optional[int]
    status_pdu: Optional[Pdu]

    @property
    def itt(self):
        return self.pdu.itt

    @property
    def answered(self):
        return self.status_pdu is not None

    @property
    def edtl(self):
        return int(self.pdu.fields["iscsi.scsicommand.expecteddatatransferlength"])

    @property
    def time_ns(self):
        """iscsi.time of the status PDU: from the request frame to the response frame."""
        if self.status_pdu is None or "iscsi.time" not in self.status_pdu.fields:
            return None
        return _ns(self.status_pdu.fields["iscsi.time"])

    def cdb(self):
        """(CDB item name without 'SCSI CDB ', {field: show}) of the command."""
        name, f = self.pdu.scsi_part("SCSI CDB ")
        return (name[len("SCSI CDB "):] if name else None), f

    def status(self):
        """SCSI status byte from the iSCSI header of the status PDU, and from the SCSI layer."""
        if self.status_pdu is None:
            return None, None
        iscsi = self.status_pdu.fields.get("iscsi.scsiresponse.status")
        _, resp = self.status_pdu.scsi_part("SCSI Response")
        scsi = resp.get("scsi.status")
        return (int(iscsi, 16) if iscsi else None), (int(scsi, 16) if scsi else None)

    def sense_key(self):
        if self.status_pdu is None:
            return None
        for _, f in self.status_pdu.scsi:
            if "scsi.sns.key" in f:
                return int(f["scsi.sns.key"], 16) if f["scsi.sns.key"].startswith("0x") else int(f["scsi.sns.key"])
        return None

    def residual(self):
        """True when the status PDU says the transfer was shorter or longer than expected."""
        if self.status_pdu is None:
            return None
        f = self.status_pdu.fields
        # O (0x04) and U (0x02) sit at the same place in a SCSI Response and a Data-In. PDML puts
        # the flag bits of some PDUs outside the iscsi item, where -J filters them: use the byte.
        flags = int(f.get("iscsi.flags", "0"), 16)
        count = f.get("iscsi.scsiresponse.residualcount") or f.get("iscsi.scsidata.readresidualcount") or "0"
        return bool(flags & 0x06) or int(count) != 0


_SEGMENTS = re.compile(r"#(\d+)\(")


def _first_shows(elem, into):
    """Every descendant <field name=... show=...> of elem, first occurrence of each name."""
    for f in elem.iter("field"):
        name = f.get("name")
        if name and name not in into and f.get("show") is not None:
            into[name] = f.get("show")


def _tshark_path():
    tshark = shutil.which("tshark")
    if tshark is None:
        raise RuntimeError("tshark is required (Wireshark is the oracle of these tests)")
    return tshark


@functools.lru_cache(maxsize=None)
def pdus(path, streams=False, damaged_ok=False):
    """All iSCSI PDUs of the frames DISPLAY_FILTER selects, in capture and tree order.
    streams: also each PDU's tcp.stream (its connection). damaged_ok: a capture tshark can read only
    in part (cut short, a corrupt record) gives the PDUs of the part it read."""
    err = tempfile.TemporaryFile()  # not a pipe: tshark must never block on a full stderr
    proc = subprocess.Popen([_tshark_path(), "-2", "-r", str(path), "-Y", DISPLAY_FILTER, "-T", "pdml",
                             "-J", "frame tcp iscsi scsi" if streams else "frame iscsi scsi"],
                            stdout=subprocess.PIPE, stderr=err)
    out = []
    frame = frame_ns = stream = None
    pending_segments = None
    depth = 0
    parse_error = None
    try:
        for event, elem in ET.iterparse(proc.stdout, events=("start", "end")):
            if event == "start":
                depth += 1
                continue
            depth -= 1
            # only act on the children of <packet> (depth 2 once closed: pdml > packet > proto)
            if elem.tag == "packet":
                frame = frame_ns = stream = None
                pending_segments = None
                elem.clear()
                continue
            if elem.tag != "proto" or depth != 2:
                continue
            name = elem.get("name")
            if name == "geninfo":
                for f in elem.iter("field"):
                    if f.get("name") == "num":
                        frame = int(f.get("show"))
                    elif f.get("name") == "timestamp":
                        frame_ns = _ns(f.get("value"))
            elif name == "tcp":
                for f in elem.iter("field"):
                    if f.get("name") == "tcp.stream":
                        stream = int(f.get("show"))
                        break
            elif name == "fake-field-wrapper":
                for f in elem.iter("field"):
                    if f.get("name") == "tcp.segments":
                        pending_segments = [int(x) for x in _SEGMENTS.findall(f.get("showname", ""))]
                    elif (f.get("name") or "").startswith("iscsi.") and out and out[-1].frame == frame:
                        # fields Wireshark hung outside the iscsi item (seen for the command's flags)
                        if f.get("show") is not None:
                            out[-1].fields.setdefault(f.get("name"), f.get("show"))
            elif name == "iscsi":
                fields = {}
                _first_shows(elem, fields)
                if "iscsi.opcode" in fields:
                    out.append(Pdu(frame, frame_ns, int(fields["iscsi.opcode"], 16), fields, pending_segments,
                                   stream=stream))
                pending_segments = None
            elif name == "scsi":
                if out and out[-1].frame == frame:
                    fields = {}
                    _first_shows(elem, fields)
                    out[-1].scsi.append((elem.get("showname", ""), fields))
    except ET.ParseError as e:  # no PDML at all: tshark could not read the file (said below)
        parse_error = e
    proc.stdout.close()
    rc = proc.wait()
    err.seek(0)
    message = err.read().decode(errors="replace")
    err.close()
    damaged = rc == 2 and ("cut short" in message or "appears to be damaged or corrupt" in message)
    if rc != 0 and not (damaged_ok and damaged):
        raise RuntimeError(f"tshark failed on {path}: exit {rc}: {message[-2000:]}")
    if parse_error is not None:
        raise RuntimeError(f"tshark on {path}: {parse_error}")
    return tuple(out)


@functools.lru_cache(maxsize=None)
def commands(path, streams=False, damaged_ok=False):
    """Every SCSI Command PDU Wireshark sees, with its status PDU where it pairs one (options as
    pdus(); with streams, a status PDU is taken from the command's own connection only)."""
    all_pdus = pdus(path, streams, damaged_ok)
    status_at = {}
    all_pdus = [p for p in all_pdus if "iscsi.initiatortasktag" in p.fields]  # cut short: no ITT
    for p in all_pdus:
        if p.opcode == 0x21 or (p.opcode == 0x25 and "iscsi.scsiresponse.status" in p.fields):
            status_at.setdefault((p.stream, p.frame, p.itt), []).append(p)
    out = []
    for p in all_pdus:
        if p.opcode != 0x01:
            continue
        resp = p.fields.get("iscsi.response_frame")
        resp = int(resp) if resp else None
        status = None
        if resp is not None:
            cands = [s for s in status_at.get((p.stream, resp, p.itt), [])
                     if s.fields.get("iscsi.request_frame") in (None, str(p.frame))]
            # the SCSI Response when there is one, else the status-bearing Data-In
            cands.sort(key=lambda s: s.opcode != 0x21)
            status = cands[0] if cands else None
        first = min(p.segments) if p.segments else p.frame
        out.append(Command(p, first, p.frame, resp, status))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def frame_times(path):
    """frame number -> capture time in nanoseconds, for every frame (tshark's frame.time_epoch)."""
    out = subprocess.run([_tshark_path(), "-r", str(path), "-T", "fields", "-e", "frame.number",
                          "-e", "frame.time_epoch"], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"tshark failed on {path}: {out.stderr[-2000:]}")
    times = {}
    for line in out.stdout.splitlines():
        num, t = line.split("\t")
        times[int(num)] = _ns(t)
    return times
