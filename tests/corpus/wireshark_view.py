# SPDX-License-Identifier: GPL-2.0-or-later
"""What Wireshark sees in a capture: every iSCSI PDU tshark dissects (two-pass, default
preferences), and every SCSI Command PDU with the status PDU Wireshark pairs it with.

tshark is the project's oracle for framing and pairing; the corpus test states its count
expectations from this view of the corpus file or of the undamaged fixture it was made from, never
from iscsi-doctor's output. tshark's PDML keeps the dissection tree in order (several PDUs per
frame, each after the `tcp.segments` item of a PDU reassembled from several segments), which
`-T fields` cannot line up.
"""
import functools
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Optional

# SCSI Command PDUs and the PDUs that can carry a SCSI status; nothing else is needed
DISPLAY_FILTER = "iscsi.opcode == 0x01 || iscsi.opcode == 0x21 || iscsi.opcode == 0x25"


@dataclass(frozen=True)
class Pdu:
    frame: int                  # the frame where the PDU completes (Wireshark shows it there)
    first_frame: int            # the frame holding its first byte (its BHS)
    stream: int                 # tcp.stream: the connection
    opcode: int
    itt: int
    status: bool                # a SCSI Response, or a Data-In with the S bit (carries the status)
    response_frame: Optional[int]
    request_frame: Optional[int]


@dataclass(frozen=True)
class Command:
    """A SCSI Command PDU, with the status PDU Wireshark pairs it with (None: not answered)."""
    pdu: Pdu
    status: Optional[Pdu]

    @property
    def answered(self):
        return self.status is not None


def _tshark():
    path = shutil.which("tshark")
    if path is None:
        raise RuntimeError("tshark is required: Wireshark is the oracle of the corpus counts")
    return path


def _int(text):
    return int(text, 0) if text.startswith("0x") else int(text)


@functools.lru_cache(maxsize=None)
def pdus(path):
    """Every SCSI Command, SCSI Response and Data-In PDU tshark dissects in path, in capture and
    tree order. A capture tshark can only read in part (cut short, a corrupt record) gives the
    PDUs of the part it read, as the project's own reader must."""
    err = tempfile.TemporaryFile()  # not a pipe: tshark must never block on a full stderr
    proc = subprocess.Popen([_tshark(), "-2", "-r", str(path), "-Y", DISPLAY_FILTER, "-T", "pdml",
                             "-J", "frame tcp iscsi"], stdout=subprocess.PIPE, stderr=err)
    out, frame, stream, segments, depth = [], None, None, None, 0
    try:
        for event, elem in ET.iterparse(proc.stdout, events=("start", "end")):
            if event == "start":
                depth += 1
                continue
            depth -= 1
            if elem.tag == "packet":
                frame = stream = segments = None
                elem.clear()
                continue
            if elem.tag != "proto" or depth != 2:
                continue
            name = elem.get("name")
            fields = {}
            for f in elem.iter("field"):
                if f.get("name") and f.get("show") is not None:
                    fields.setdefault(f.get("name"), f.get("show"))
            if name == "geninfo":
                frame = int(fields["num"])
            elif name == "tcp":
                stream = int(fields["tcp.stream"])
            elif name == "fake-field-wrapper":
                # the segments of the PDU reassembled in this frame: the next iscsi item
                segs = [int(f.get("show")) for f in elem.iter("field") if f.get("name") == "tcp.segment"]
                segments = segs or None
            elif name == "iscsi":
                if "iscsi.opcode" in fields and "iscsi.initiatortasktag" in fields:  # a BHS cut short has no ITT
                    op = _int(fields["iscsi.opcode"]) & 0x3f
                    status = op == 0x21 or (op == 0x25 and "iscsi.scsiresponse.status" in fields)
                    rsp, req = fields.get("iscsi.response_frame"), fields.get("iscsi.request_frame")
                    out.append(Pdu(frame, min(segments) if segments else frame, stream, op,
                                   _int(fields["iscsi.initiatortasktag"]), status,
                                   int(rsp) if rsp else None, int(req) if req else None))
                segments = None
    except ET.ParseError as e:  # no PDML at all: tshark could not read the file (said below)
        parse_error = e
    else:
        parse_error = None
    proc.stdout.close()
    rc = proc.wait()
    err.seek(0)
    message = err.read().decode(errors="replace")
    err.close()
    # a capture cut short or with a corrupt record: tshark exits 2 after the frames it could read
    if rc != 0 and not (rc == 2 and ("cut short" in message or "appears to be damaged or corrupt" in message)):
        raise RuntimeError("tshark on %s: exit %d: %s" % (path, rc, message[-2000:]))
    if parse_error is not None:
        raise RuntimeError("tshark on %s: %s" % (path, parse_error))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def commands(path):
    """Every SCSI Command PDU tshark sees in path, with the status PDU Wireshark pairs it with
    (iscsi.response_frame on the command, iscsi.request_frame back on the status PDU, same
    connection and ITT; the SCSI Response before a Data-In when a frame holds both)."""
    all_pdus = pdus(path)
    status_at = {}
    for p in all_pdus:
        if p.status:
            status_at.setdefault((p.stream, p.frame, p.itt), []).append(p)
    out = []
    for p in all_pdus:
        if p.opcode != 0x01:
            continue
        status = None
        if p.response_frame is not None:
            cands = [s for s in status_at.get((p.stream, p.response_frame, p.itt), [])
                     if s.request_frame in (None, p.frame)]
            cands.sort(key=lambda s: s.opcode != 0x21)
            status = cands[0] if cands else None
        out.append(Command(p, status))
    return tuple(out)
