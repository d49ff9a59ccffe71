# SPDX-License-Identifier: GPL-2.0-or-later
"""The HTML report (--html) and the ladder subcommand.

- The report of a Nagle fixture is well-formed (it is written as polyglot XHTML, so an XML parser
  reads it), and headless Chromium renders it without console errors, with every element id of the
  file in its DOM; a screenshot is saved ($ISCSI_DOCTOR_ARTIFACTS, and docs/images/html-report.png
  when $ISCSI_DOCTOR_UPDATE_SCREENSHOT=1).
- Each drawn ladder of a command with a nagle_hold finding marks the held segment
  (data-role="held") and its releasing ACK (data-role="release") at the frames the JSON findings give.
- `iscsi-doctor ladder` writes a well-formed SVG with the same marks.
- On every fixture and wiki capture, every ladder (in the HTML report, and drawn alone) shows each
  evidence and related frame of its command's findings, and its title gives the JSON's round trips.
- The report of the largest capture at hand stays under a few MB; its time against the JSON run is
  printed (not asserted: shared machines make timings noisy).
- Laid out by headless Chromium (all four wiki captures and a sample of the fixtures; geometry.js
  measures the page): every ladder at most LADDER_MAX_PX high, no two of its texts overlapping, its
  legend naming every colour and mark it uses, each command drawn once per capture; every table
  within its container; every chart axis with at least two tick labels. Screenshots of the OSD and
  10TB reports are saved ($ISCSI_DOCTOR_ARTIFACTS).

$ISCSI_DOCTOR is the binary, $ISCSI_DOCTOR_ROOT the repository; $ISCSI_DOCTOR_BIG_CAPTURE names a
larger capture for the size test (default: the largest capture in the repository).
"""
import json
import os
import re
import shutil
import struct
import subprocess
import time
import xml.etree.ElementTree as ET
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor"))
ARTIFACTS = Path(os.environ.get("ISCSI_DOCTOR_ARTIFACTS", "/tmp/iscsi-doctor-report-test"))
NAGLE = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"
MAX_REPORT_BYTES = 5_000_000


def run(*args, check=True):
    p = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    if check and p.returncode != 0:
        raise AssertionError(f"iscsi-doctor {args} exited {p.returncode}: {p.stderr}")
    return p


def local(tag):
    return tag.rsplit("}", 1)[-1]


def findings(capture):
    return json.loads(run("--format", "json", capture).stdout)["findings"]


def held_pairs(capture):
    """{itt: [(held frame, releasing ACK frame)]} from the JSON nagle_hold findings."""
    pairs = {}
    for f in findings(capture):
        if f["kind"] == "nagle_hold" and f.get("itt"):
            pairs.setdefault(int(f["itt"], 16), []).append((f["frame"], f["related"]["released_by"]))
    return pairs


def check_ladder(svg_el, pairs):
    """The ladder's held and releasing segments are the JSON finding's frames."""
    itt = int(svg_el.get("data-itt"), 16)
    roles = {}
    for el in svg_el.iter():
        if el.get("data-frame") and el.get("data-role"):
            roles[int(el.get("data-frame"))] = el.get("data-role")
    for held, release in pairs[itt]:
        assert roles.get(held) == "held", (hex(itt), held, roles)
        assert roles.get(release) == "release", (hex(itt), release, roles)
    return roles


@pytest.fixture(scope="module")
def nagle_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "report.html"
    run("--html", out, NAGLE.relative_to(ROOT))  # relative: the page shows the path as given
    return out


def test_report_is_well_formed_and_self_contained(nagle_report):
    text = nagle_report.read_text()
    root = ET.fromstring(text.split("\n", 1)[1])  # after <!DOCTYPE html>
    assert local(root.tag) == "html"
    # Nothing fetched: no scripts, stylesheets, images or fonts from elsewhere.
    assert not re.search(r"<(script|link|img|iframe)\b", text)
    assert not re.search(r"(src|href)=\"(https?:)?//", text)
    assert re.sub(r"xmlns=\"http://www.w3.org/[^\"]*\"", "", text).count("http") == 0
    # The text report's content: findings with their fixes.
    for f in ("nagle_hold", "delayed_ack", "TCP_NODELAY", "TCP_QUICKACK"):
        assert f in text
    kinds = {el.get("class") for el in root.iter() if local(el.tag) == "svg"}
    assert {"ladder", "latency-chart", "breakdown-chart", "timeline-chart", "gap-chart", "lba-chart"} <= kinds


def test_ladders_mark_held_segment_and_releasing_ack(nagle_report):
    pairs = held_pairs(NAGLE)
    assert pairs, "the Nagle fixture has nagle_hold findings"
    root = ET.fromstring(nagle_report.read_text().split("\n", 1)[1])
    ladders = [el for el in root.iter() if local(el.tag) == "svg" and el.get("class") == "ladder"]
    held = [el for el in ladders if int(el.get("data-itt"), 16) in pairs]
    assert held, "a ladder of a held command"
    for el in held:
        check_ladder(el, pairs)
        roles = [g.get("data-role") for g in el.iter()]
        assert "delayed-ack-wait" in roles and "vantage" in roles and "round-trip" in roles
    ids = [el.get("id") for el in root.iter() if el.get("id")]
    assert len(ids) == len(set(ids)), "element ids are unique"


class DomIds(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.held = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if a.get("data-role") in ("held", "release"):
            self.held.append((a["data-role"], int(a["data-frame"])))


def chromium():
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.fail("chromium is not installed (scripts/install-deps.sh installs it)")


def png_info(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    return width, height, zlib.decompress(idat)


def test_chromium_renders_report(nagle_report):
    browser = chromium()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    flags = ["--headless", "--no-sandbox", "--disable-background-networking", "--disable-gpu",
             "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]
    url = nagle_report.resolve().as_uri()
    dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [l for l in dom.stderr.splitlines() if ":CONSOLE" in l or "Uncaught" in l]
    assert not console, console
    parsed = DomIds()
    parsed.feed(dom.stdout)
    source = set(re.findall(r' id="([^"]+)"', nagle_report.read_text()))
    assert source == parsed.ids, "the browser's DOM holds every element of the file"
    pairs = held_pairs(NAGLE)
    frames = {f for pl in pairs.values() for pair in pl for f in pair}
    assert {f for role, f in parsed.held} & frames
    shot = ARTIFACTS / "html-report.png"
    shot.unlink(missing_ok=True)
    p = subprocess.run([browser, *flags, "--window-size=1024,1280", f"--screenshot={shot}", url],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and shot.exists(), p.stderr[-2000:]
    width, height, pixels = png_info(shot)
    assert (width, height) == (1024, 1280)
    assert len(set(pixels[::97])) > 20, "the screenshot is not blank"
    print(f"\nscreenshot: {shot}")
    if os.environ.get("ISCSI_DOCTOR_UPDATE_SCREENSHOT") == "1":
        shutil.copy(shot, ROOT / "docs" / "images" / "html-report.png")


def test_ladder_subcommand_svg(tmp_path):
    pairs = held_pairs(NAGLE)
    itt = sorted(pairs)[0]
    out = tmp_path / "one.svg"
    run("ladder", "--itt", f"0x{itt:08x}", NAGLE, "-o", out)
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("class") == "ladder"
    assert int(root.get("data-itt"), 16) == itt
    check_ladder(root, {itt: pairs[itt]})
    assert root.get("id") == f"ladder-{itt:08x}"
    assert root.find(f".//*[@id='ladder-{itt:08x}-f{pairs[itt][0][0]}']") is not None
    # --frame picks the command spanning that frame; standard output without -o.
    held = pairs[itt][0][0]
    svg = run("ladder", "--itt", f"0x{itt:08x}", "--frame", held, NAGLE).stdout
    assert ET.fromstring(svg.split("\n", 1)[1]).get("data-itt") == f"0x{itt:08x}"
    # An ITT that is not there, and a frame the command does not span: usage errors.
    assert run("ladder", "--itt", "0xdeadbeef", NAGLE, check=False).returncode == 2
    assert run("ladder", "--itt", f"0x{itt:08x}", "--frame", 1, NAGLE, check=False).returncode == 2
    assert run("ladder", "--itt", "zz", NAGLE, check=False).returncode == 2


EVIDENCE_CAPTURES = sorted((ROOT / "captures" / "fixtures").glob("*.pcap*")) + sorted(
    (ROOT / "captures" / "wireshark-wiki").glob("*.pcap*"))


def evidence_frames(finding):
    """The frames a finding names: its own and its related ones (a name may map to a list)."""
    frames = {finding["frame"]}
    for v in finding["related"].values():
        frames.update(v if isinstance(v, list) else [v])
    return frames


LADDER_EVIDENCE_FINDINGS = 6  # cli/commands/ladder.hpp kLadderEvidenceFindings


def check_ladder_against_json(svg_el, command, findings, where):
    drawn = {int(el.get("data-frame")) for el in svg_el.iter() if el.get("data-frame")}
    # The first findings' evidence is drawn; past them (a transfer held flight after flight) the
    # ladder says how many more the report has.
    for f in findings[:LADDER_EVIDENCE_FINDINGS]:
        missing = evidence_frames(f) - drawn
        assert not missing, f"{where}: {f['kind']} at frame {f['frame']}: frames {sorted(missing)} not drawn"
    said = [int(el.get("data-findings")) for el in svg_el.iter() if el.get("data-role") == "evidence-elided"]
    assert said == ([len(findings) - LADDER_EVIDENCE_FINDINGS] if len(findings) > LADDER_EVIDENCE_FINDINGS else []), \
        f"{where}: {len(findings)} findings, the ladder says {said}"
    title = [el.text or "" for el in svg_el.iter() if local(el.tag) == "text" and el.get("y") == "42"][0]
    if command["completed"]:
        m = re.search(r"(\d+) round trips? \(ideal (\d+)\)", title)
        assert m, f"{where}: title {title!r}"
        assert (int(m.group(1)), int(m.group(2))) == (command["round_trips"], command["ideal_round_trips"]), where
        # The round-trip markers count up to the JSON's round trips (the engine's half trips).
        marks = [int(el.get("data-rt")) for el in svg_el.iter() if el.get("data-rt")]
        assert marks == sorted(set(marks)) and marks and marks[-1] == command["round_trips"], \
            f"{where}: round-trip marks {marks}, command {command['round_trips']}"


def segment_labels(svg_el):
    """{frame: label} of the drawn segments (the label ends the arrow's tooltip)."""
    out = {}
    for g in svg_el.iter():
        if g.get("data-frame"):
            tip = "".join(t.text or "" for t in g.iter() if local(t.tag) == "title")
            out[int(g.get("data-frame"))] = tip.rsplit(", ", 1)[-1]
    return out


# Captures whose framing is not plain: header digests, OSD commands with AHS, joined mid-session,
# TSO/GRO aggregates, loss.
LABEL_CAPTURES = [ROOT / "captures" / "fixtures" / f"{n}.pcap.gz" for n in (
    "stock-header-digest--initiator", "scripted-nagle-read-1k-joined--target", "scripted-nagle-read-8k-tso--target",
    "stock-loss-read--initiator")] + [ROOT / "captures" / "wireshark-wiki" / "scsi-osd-example-001.pcap.gz"]


@pytest.mark.parametrize("capture", LABEL_CAPTURES, ids=lambda p: p.name.split(".")[0])
def test_ladder_labels_follow_wiresharks_framing(capture, tmp_path):
    """Each drawn segment in which Wireshark's iSCSI dissector finds a SCSI Command or Response
    header is labelled with it, and no other segment is."""
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    import tshark_oracle
    starts = {}
    for p in tshark_oracle.pdus(str(capture)):
        if p.opcode in (0x01, 0x21):
            starts.setdefault(p.first_frame, set()).add({0x01: "SCSI Cmd", 0x21: "SCSI Rsp"}[p.opcode])
    out = tmp_path / "r.html"
    run("--html", out, "-q", capture)
    root = ET.fromstring(out.read_text().split("\n", 1)[1])
    checked = 0
    for el in (el for el in root.iter() if local(el.tag) == "svg" and el.get("class") == "ladder"):
        for frame, label in segment_labels(el).items():
            if label == "retransmission":
                continue
            names = {n.replace(" (status)", "") for n in label.split(" + ")} & {"SCSI Cmd", "SCSI Rsp"}
            assert names == starts.get(frame, set()), f"{capture.name} {el.get('id')} frame {frame}: {label!r}"
            checked += bool(names)
    assert checked, "some SCSI Command or Response drawn"


@pytest.mark.parametrize("capture", EVIDENCE_CAPTURES, ids=lambda p: p.name.split(".")[0])
def test_ladders_draw_every_evidence_frame(capture, tmp_path):
    doc = json.loads(run("--format", "json", "-q", capture).stdout)
    commands = {(c["connection"], c["first_frame"]): c for c in doc["commands"]}
    by_command = {}
    for f in doc["findings"]:
        if f["itt"]:
            by_command.setdefault((f["connection"], f["command_first_frame"]), []).append(f)
    # The HTML report's ladders.
    out = tmp_path / "r.html"
    run("--html", out, "-q", capture)
    root = ET.fromstring(out.read_text().split("\n", 1)[1])
    ladders = [el for el in root.iter() if local(el.tag) == "svg" and el.get("class") == "ladder"]
    for el in ladders:
        key = (int(el.get("data-connection")), int(el.get("data-first-frame")))
        check_ladder_against_json(el, commands[key], by_command.get(key, []), f"{capture.name} {el.get('id')}")
    # Drawn alone: the commands whose evidence lies furthest outside their own frames.
    def reach(key):
        c = commands[key]
        end = c["status_frame"] or c["first_frame"]
        return max(max(0, c["first_frame"] - min(fs), max(fs) - end)
                   for fs in (evidence_frames(f) for f in by_command[key]))
    for key in sorted((k for k in by_command if k in commands), key=reach, reverse=True)[:2]:
        c = commands[key]
        svg = run("ladder", "--itt", c["itt"], "--frame", c["first_frame"], "-q", capture).stdout
        check_ladder_against_json(ET.fromstring(svg.split("\n", 1)[1]), c, by_command[key],
                                  f"{capture.name} ladder {c['itt']}")


def test_resent_segment_drawn_after_the_status():
    # The case that showed the ladder missing its evidence: the resent segment (1069) comes after the
    # command's status (1060) on the target side.
    capture = ROOT / "captures" / "fixtures" / "stock-loss-read--target.pcap.gz"
    svg = ET.fromstring(run("ladder", "--itt", "0x5d9e8bc8", "-q", capture).stdout.split("\n", 1)[1])
    roles = {int(el.get("data-frame")): el.get("data-role") for el in svg.iter() if el.get("data-frame")}
    assert roles.get(1069) == "retransmission" and roles.get(1044) == "original", roles


def test_html_gate_and_usage(tmp_path):
    out = tmp_path / "r.html"
    p = run("--html", out, "--fail-on", "nagle_hold", NAGLE, check=False)
    assert p.returncode == 1 and "Gate: TRIPPED" in out.read_text()
    assert run("--html", out, "-o", tmp_path / "x", NAGLE, check=False).returncode == 2
    assert run("--html", out, "--format", "json", NAGLE, check=False).returncode == 2
    # Several captures: a section each, and one for all of them.
    other = ROOT / "captures" / "fixtures" / "stock-write--initiator.pcap.gz"
    run("--html", out, NAGLE, other)
    root = ET.fromstring(out.read_text().split("\n", 1)[1])
    sections = [el.get("id") for el in root.iter() if local(el.tag) == "section"]
    assert sections == ["all", "c0", "c1"]
    # An unusable input is reported in the page and exits 2.
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture")
    assert run("--html", out, NAGLE, bad, check=False).returncode == 2
    assert "unusable" in out.read_text()


def largest_capture():
    env = os.environ.get("ISCSI_DOCTOR_BIG_CAPTURE")
    if env:
        return Path(env)
    files = [p for p in (ROOT / "captures").rglob("*") if p.is_file() and re.search(r"\.pcap(ng)?(\.gz)?$", p.name)]
    return max(files, key=lambda p: p.stat().st_size)


def timed(*args):
    t = time.monotonic()
    run(*args)
    return time.monotonic() - t


def test_large_capture_report_stays_small(tmp_path):
    big = largest_capture()
    out = tmp_path / "big.html"
    json_s = min(timed("-q", "--format", "json", "-o", tmp_path / "big.json", big) for _ in range(2))
    html_s = min(timed("-q", "--html", out, big) for _ in range(2))
    size = out.stat().st_size
    elements = out.read_text().count("<")
    print(f"\n{big.name} ({big.stat().st_size:,} bytes): json {json_s:.2f} s, html {html_s:.2f} s "
          f"({html_s / json_s:.2f}x), report {size:,} bytes, {elements:,} elements")
    assert size < MAX_REPORT_BYTES
    assert elements < 60_000
    ET.fromstring(out.read_text().split("\n", 1)[1])


# ---- Layout, as Chromium draws it ----------------------------------------------------------------

LADDER_MAX_PX = 1400  # the ladder's bound: idle time is cut short and long transfers elided
# The colours and marks a ladder's legend must name when drawn (data-role of arrows, waits, marks).
LEGEND_ROLES = {"held", "release", "small", "retransmission", "original", "command", "other", "ack",
                "delayed-ack-wait", "hold-wait", "think", "loss-wait", "vantage", "round-trip"}
WIKI = sorted((ROOT / "captures" / "wireshark-wiki").glob("*.pcap*"))
FIXTURES = sorted((ROOT / "captures" / "fixtures").glob("*.pcap*"))
# Every wiki capture; of the fixtures, the densest ladders (receive window, idle, loss, 1 MB) and every
# fourth of the others (TSO, joined, jumbo, jitter, Nagle variants come round in turn).
DENSE = {"initiator-rcvbuf-read--initiator", "initiator-rcvbuf-read--target", "stock-idle-read--target",
         "stock-1m--initiator", "stock-loss-read--target", "initiator-rcvbuf-read-joined--target"}
LAYOUT_CAPTURES = WIKI + [p for i, p in enumerate(FIXTURES) if p.name.split(".")[0] in DENSE or i % 4 == 0]
SHOTS = {"scsi-osd-example-001", "iscsi-scsi-10TB-data-device"}


def chromium_flags(width, height=1000):
    return ["--headless", "--no-sandbox", "--disable-background-networking", "--disable-gpu",
            "--hide-scrollbars", f"--window-size={width},{height}"]


def measure(page, width=1024):
    """The report laid out by Chromium at `width` px: geometry.js's figures."""
    script = (Path(__file__).parent / "geometry.js").read_text()
    probe = page.with_name(page.stem + "-geom.html")
    probe.write_text(page.read_text().replace("</body>", f"<script>//<![CDATA[\n{script}\n//]]></script></body>"))
    p = subprocess.run([chromium(), *chromium_flags(width), "--dump-dom", probe.resolve().as_uri()],
                       capture_output=True, text=True, timeout=120)
    m = re.findall(r'<pre id="geom">(\{.*?)</pre>', p.stdout, re.S)
    assert m, f"geometry.js wrote nothing: {p.stderr[-2000:]}"
    import html
    return json.loads(html.unescape(m[-1]))


@pytest.mark.parametrize("capture", LAYOUT_CAPTURES, ids=lambda p: p.name.split(".")[0])
def test_layout(capture, tmp_path):
    name = capture.name.split(".")[0]
    page = tmp_path / f"{name}.html"
    run("--html", page, "-q", capture)
    root = ET.fromstring(page.read_text().split("\n", 1)[1])
    ladders = [el for el in root.iter() if local(el.tag) == "svg" and el.get("class") == "ladder"]
    keys = [(el.get("data-connection"), el.get("data-first-frame")) for el in ladders]
    assert len(keys) == len(set(keys)), f"a command drawn twice: {sorted(keys)}"
    g = measure(page)
    assert len(g["ladders"]) == len(ladders)
    problems = []
    for lad in g["ladders"]:
        if lad["height"] > LADDER_MAX_PX:
            problems.append(f"{lad['id']}: {lad['height']:.0f} px high")
        if lad["overlaps"]:
            problems.append(f"{lad['id']}: {len(lad['overlaps'])} overlapping labels, e.g. {lad['overlaps'][:3]}")
        unnamed = (set(lad["roles"]) & LEGEND_ROLES) - set(lad["legend"])
        if unnamed:
            problems.append(f"{lad['id']}: legend lacks {sorted(unnamed)}")
    for t in g["tables"]:
        if t["width"] > t["room"] + 1:
            problems.append(f"table.{t['cls']}: {t['width']:.0f} px in {t['room']:.0f}")
    for c in g["charts"]:
        if len(c["xticks"]) < 2 or len(c["yticks"]) < 2:
            problems.append(f"{c['id']}: ticks {c['xticks']} / {c['yticks']}")
    heights = [lad["height"] for lad in g["ladders"]]
    print(f"\n{name}: {len(heights)} ladders, max {max(heights, default=0):.0f} px, "
          f"{sum(lad['texts'] for lad in g['ladders'])} ladder texts, {len(g['tables'])} tables, "
          f"{len(g['charts'])} charts")
    assert not problems, "\n".join(problems)
    if name in SHOTS:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / f"{name}.png"
        p = subprocess.run([chromium(), *chromium_flags(1280, 6000), f"--screenshot={shot}", page.resolve().as_uri()],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and shot.exists(), p.stderr[-2000:]
        print(f"screenshot: {shot}")
