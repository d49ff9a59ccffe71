# SPDX-License-Identifier: GPL-2.0-or-later
"""Drives the real Wireshark GUI under Xvfb with the built plugin: used by test_gui.py and, run as a
script, to make the screenshots in docs/images/:

    ISCSI_DOCTOR_BUILD=BUILD python3 tests/dissector/wsgui.py [--out docs/images]

Xvfb runs with a cookie (no open display); Wireshark runs with its own empty HOME (no personal
preferences or plugins) and, as root, as nobody, since Wireshark ignores WIRESHARK_PLUGIN_DIR for
root. Windows are found with xdotool by title, keys go through XTEST after focusing the window
(there is no window manager), pictures are taken with ImageMagick's import."""
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import conftest  # noqa: E402  (paths and the unprivileged prefix, shared with the tshark tests)

NAGLE = conftest.ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"
FILTER = "iscsi_doctor.finding"
SIZE = (1280, 1024)
# Packet details start below the packet list (gui.geometry_main_upper_pane, in "recent"); rows are
# 17 px with the default font.
UPPER_PANE = 250
DETAILS_TOP = 95 + UPPER_PANE
ROW = 17
TOOLS = ["Xvfb", "xauth", "xdotool", "import", "wireshark", "capinfos"]

# Columns of the packet list: a few standard ones, then iscsi_doctor fields (custom columns).
COLUMNS = [("No.", "%m"), ("Time", "%t"), ("Source", "%s"), ("Destination", "%d"),
           ("Info", "%i"),
           ("Finding", "%Cus:iscsi_doctor.finding:0:R"), ("Side", "%Cus:iscsi_doctor.side:0:R"),
           ("Released by", "%Cus:iscsi_doctor.released_by:0:R"),
           ("Lost ms", "%Cus:iscsi_doctor.lost_ms:0:R"),
           ("RT", "%Cus:iscsi_doctor.round_trips:0:R"),
           ("Ideal", "%Cus:iscsi_doctor.ideal_round_trips:0:R")]
PREFS = {
    "gui.column.format": ", ".join(f'"{t}", "{f}"' for t, f in COLUMNS),
    # Packet list over packet details, no bytes pane: the details show the iscsi_doctor tree.
    "gui.layout_content_3": "NONE",
    "gui.update.enabled": "FALSE",
    "gui.ask_unsaved": "FALSE",
}


# Pane split and column widths (pixels; -1 = fit contents) kept in the profile's "recent" file.
WIDTHS = {"%m": 45, "%t": 80, "%s": 90, "%d": 90, "%i": 400, "%Cus:iscsi_doctor.finding": 95, "%Cus:iscsi_doctor.side": 70,
          "%Cus:iscsi_doctor.lost_ms": 80, "%Cus:iscsi_doctor.round_trips": 35,
          "%Cus:iscsi_doctor.ideal_round_trips": 45,
          "%Cus:iscsi_doctor.released_by": 85}
RECENT = (f"gui.geometry_main_upper_pane: {UPPER_PANE}\n"
          "column.width:\n" + ",\n".join(
              f'\t"{f.rsplit(":", 2)[0]}", {WIDTHS.get(f.rsplit(":", 2)[0], -1)}'
              if f.startswith("%Cus") else f"\t{f}, {WIDTHS.get(f, -1)}" for _, f in COLUMNS) + "\n")


def missing_tools():
    return [t for t in TOOLS if not shutil.which(t)]


# The first display number tried. Each Debian root of scripts/test-wireshark-versions.sh has a /tmp
# of its own but shares the X servers' abstract sockets, so the roots that run at once start apart.
DISPLAY_BASE = int(os.environ.get("ISCSI_DOCTOR_DISPLAY_BASE", "90"))


def free_display(start=DISPLAY_BASE):
    for n in range(start, start + 300):
        if not (Path(f"/tmp/.X{n}-lock").exists() or Path(f"/tmp/.X11-unix/X{n}").exists()):
            return n
    raise RuntimeError("no free X display number")


class Gui:
    """Xvfb + one Wireshark; use as a context manager."""

    def __init__(self, capture, args=(), size=SIZE):
        self.capture, self.args, self.size = Path(capture), list(args), size
        self.home = Path(tempfile.mkdtemp(prefix="iscsi-doctor-gui-"))
        self.home.chmod(0o777)  # Wireshark may run as nobody
        self.xvfb = self.ws = None
        self.log_path = self.home / "wireshark.log"

    # -- X server
    def start_x(self):
        start = DISPLAY_BASE
        for attempt in range(3):  # another X server may hold the number (one this /tmp cannot see)
            try:
                return self._start_x(start)
            except RuntimeError:
                if self.xvfb and self.xvfb.poll() is None:
                    self.xvfb.terminate()
                    self.xvfb.wait()
                if attempt == 2:
                    raise
                start = self.display + 1

    def _start_x(self, start):
        self.display = free_display(start)
        auth = self.home / "Xauthority"
        subprocess.run(["xauth", "-f", str(auth), "add", f":{self.display}", ".",
                        secrets.token_hex(16)], check=True, capture_output=True)
        auth.chmod(0o644)
        self.env = {**conftest.plugin_env(self.home), "DISPLAY": f":{self.display}",
                    "XAUTHORITY": str(auth), "XDG_RUNTIME_DIR": str(self.home / "run")}
        (self.home / "run").mkdir(mode=0o777, exist_ok=True)
        (self.home / "run").chmod(0o777)
        w, h = self.size
        self.xvfb = subprocess.Popen(
            ["Xvfb", f":{self.display}", "-screen", "0", f"{w}x{h}x24", "-nolisten", "tcp",
             "-auth", str(auth)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.xvfb.poll() is not None:
                raise RuntimeError(f"Xvfb exited with {self.xvfb.returncode}")
            if subprocess.run(["xdotool", "getmouselocation"], env=self.env,
                              capture_output=True).returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError("Xvfb did not come up")

    # -- Wireshark
    def start_wireshark(self):
        conf = self.home / ".config" / "wireshark"
        conf.mkdir(parents=True)
        (conf / "preferences").write_text("".join(f"{k}: {v}\n" for k, v in PREFS.items()))
        (conf / "recent").write_text(RECENT)
        w, h = self.size
        (conf / "recent_common").write_text(
            f"gui.geometry_main_x: 0\ngui.geometry_main_y: 0\ngui.geometry_main_width: {w}\n"
            f"gui.geometry_main_height: {h}\ngui.geometry_main_maximized: FALSE\n"
            "privs.warn_if_elevated: FALSE\nsys.warn_if_no_capture: FALSE\n")
        for p in [self.home / ".config", conf, *conf.iterdir()]:
            p.chmod(0o777 if p.is_dir() else 0o666)
        cmd = [*conftest.unprivileged(), "wireshark", "--log-level", "info", *self.args,
               "-r", str(self.capture)]
        self.log = open(self.log_path, "w")
        self.ws = subprocess.Popen(cmd, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
                                   cwd=self.home)

    def log_text(self):
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_log(self, pattern, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.log_text(), re.M)
            if m:
                return m
            if self.ws.poll() is not None:
                break
            time.sleep(0.3)
        raise AssertionError(f"Wireshark log never matched {pattern!r}:\n{self.log_text()[-3000:]}")

    def xdo(self, *args, check=True):
        out = subprocess.run(["xdotool", *args], env=self.env, capture_output=True, text=True,
                             timeout=30)
        if check and out.returncode != 0:
            raise RuntimeError(f"xdotool {args}: {out.stderr}")
        return out.stdout.strip()

    def window(self, title_regex, timeout=60):
        """Id of the visible window whose title matches."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            ids = self.xdo("search", "--onlyvisible", "--name", title_regex, check=False).split()
            if ids:
                return ids[-1]
            if self.ws.poll() is not None:
                break
            time.sleep(0.3)
        raise AssertionError(f"no window titled /{title_regex}/; titles: {self.titles()}")

    def titles(self):
        ids = self.xdo("search", "--onlyvisible", "--name", ".", check=False).split()
        return [self.xdo("getwindowname", i, check=False) for i in ids]

    def key(self, win, *keys):
        self.xdo("windowfocus", "--sync", win)
        for k in keys:
            self.xdo("key", "--clearmodifiers", k)
            time.sleep(0.3)

    def screenshot(self, win, path):
        time.sleep(1.5)  # let Qt paint
        subprocess.run(["import", "-window", win, str(path)], env=self.env, check=True,
                       capture_output=True, timeout=60)

    def quit(self, win, timeout=30):
        """Ctrl+Q in the main window; returns Wireshark's exit status."""
        self.key(win, "ctrl+q")
        try:
            return self.ws.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def __enter__(self):
        self.start_x()
        self.start_wireshark()
        return self

    def __exit__(self, *exc):
        for p in (self.ws, self.xvfb):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if self.ws:
            self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)


def optimize_png(path):
    """256-colour palette PNG: screenshots of a GUI lose nothing visible and shrink several-fold."""
    subprocess.run(["convert", str(path), "-strip", "-colors", "256", "-define",
                    "png:compression-level=9", f"PNG8:{path}"], check=True)


def first_nagle_frame():
    return min(f["frame"] for f in conftest.cli_report(NAGLE)["findings"]
               if f["kind"] == "nagle_hold")


def row_y(i):
    """y of the i-th line (from 0) of the packet details pane."""
    return DETAILS_TOP + i * ROW + ROW // 2


def click(g, win, x, y):
    g.xdo("mousemove", "--window", win, str(x), str(y), "click", "1")
    time.sleep(0.3)


def export_displayed(g, main):
    """The number of rows the packet list shows: Edit > Mark All Displayed, then File > Export
    Specified Packets of the marked packets only (its "Displayed" range would add the frames the
    displayed ones depend on, such as the earlier segments of a reassembled PDU), into a file of
    the profile's home, counted by capinfos. Marks stay: a later call counts the frames marked
    before too, where they are still displayed. The item is found by its dialog's title (menus differ a little
    between Wireshark versions; it is the 8th item of 4.0's File menu)."""
    n = len(list(g.home.glob("displayed-*")))  # a new file each time: no "overwrite?" question
    out = g.home / f"displayed-{n}.pcap"
    g.key(main, "ctrl+shift+m")  # Edit > Mark All Displayed
    time.sleep(1)
    for downs in (7, 8, 6, 9):
        g.key(main, "alt+f", *(["Down"] * downs), "Return")
        time.sleep(1.5)
        ids = g.xdo("search", "--onlyvisible", "--name", "Export Specified Packets", check=False).split()
        if ids:
            break
        others = [t for t in g.titles() if t != g.capture.name]
        for t in others:  # another dialog opened: close it
            g.key(g.window(re.escape(t)), "Escape")
        if not others:  # a submenu opened
            g.key(main, "Escape", "Escape")
    else:
        raise AssertionError(f"File > Export Specified Packets not found; titles: {g.titles()}")
    dlg = ids[-1]
    # A gzipped capture is exported gzipped by default, which fails as nobody ("permission"):
    # 4.0's "Compress with gzip" box is unticked with Alt+Z, later versions' "Compression options"
    # set to "Uncompressed" with Alt+U. Alt+M: "Marked packets only", Alt+N: the file name.
    # Since 4.2 the range counts the frames the marked ones depend on unless "Include depended
    # upon packets" (Alt+D, enabled once "Marked packets only" is chosen) is unticked.
    new = wireshark_version() >= (4, 2)
    g.key(dlg, *([("alt+u" if new else "alt+z")] if g.capture.suffix == ".gz" else []), "alt+m",
          *(["alt+d"] if new else []), "alt+n")
    g.xdo("type", str(out))
    g.key(dlg, "Return")
    deadline = time.time() + 30
    while time.time() < deadline:
        written = sorted(g.home.glob(f"{out.name}*"))
        if written and not g.xdo("search", "--onlyvisible", "--name", "Export Specified Packets",
                                 check=False):
            time.sleep(1)
            return packets_in(written[0])
        time.sleep(0.3)
    raise AssertionError(f"no export written; titles: {g.titles()}")


def wireshark_version():
    out = subprocess.run(["wireshark", "--version"], capture_output=True, text=True,
                         env={**os.environ, "QT_QPA_PLATFORM": "offscreen"}).stdout
    m = re.search(r"Wireshark (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (4, 0)


def packets_in(path):
    out = subprocess.run(["capinfos", "-c", "-M", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return int(re.search(r"Number of packets:\s+(\d+)", out).group(1))


def open_menu_item_last(g, main, menu_key):
    """Opens the last item of a menu: Analyze > Expert Information, Statistics > iSCSI Doctor."""
    g.key(main, menu_key, "Up", "Return")


def make_screenshots(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    frame = first_nagle_frame()
    with Gui(NAGLE, ["-Y", FILTER, "-g", str(frame)]) as g:
        g.wait_log(r"\[iscsi_doctor INFO\].*first pass done")
        main = g.window(f"^{re.escape(NAGLE.name)}$")
        g.xdo("windowmove", main, "0", "0")
        g.xdo("windowsize", "--sync", main, str(SIZE[0]), str(SIZE[1]))
        time.sleep(2)  # the plugin applies the filter again after the first pass
        # Expand the iscsi_doctor subtree of the selected packet (the 8th top-level line of the
        # details: frame, eth, ip, tcp, iscsi, flags, scsi, iscsi_doctor), then fold the command's
        # latency breakdown (line 24) and connection facts (then line 25), so that the finding
        # fits, and the expert item under the finding's kind (then line 28).
        click(g, main, 200, row_y(7))
        g.key(main, "shift+Right")
        for line in (24, 25, 28):
            click(g, main, 200, row_y(line))
            g.key(main, "Left")
        g.xdo("mousemove", "--window", main, str(SIZE[0] - 5), str(SIZE[1] - 5))
        g.screenshot(main, out / "wireshark-packet-list.png")

        open_menu_item_last(g, main, "alt+a")
        expert = g.window("Expert Information")
        w, h = 1280, 360
        g.xdo("windowmove", expert, "0", "0")
        g.xdo("windowsize", "--sync", expert, str(w), str(h))
        time.sleep(0.5)
        # Untick "Group by summary": one line per message, i.e. per kind and side with its fix.
        click(g, expert, 205, h - 55)
        for y in (58, 41):  # expand Note, then Warning above it
            click(g, expert, 300, y)
            g.key(expert, "Right")
        # Widen the Summary column: drag its right edge in the header.
        g.xdo("mousemove", "--window", expert, "541", "22", "mousedown", "1")
        g.xdo("mousemove", "--window", expert, "900", "22")
        g.xdo("mousemove", "--window", expert, "1000", "22", "mouseup", "1")
        g.xdo("mousemove", "--window", expert, str(w - 5), str(h - 5))
        g.screenshot(expert, out / "wireshark-expert-info.png")
        g.key(expert, "Escape")

        open_menu_item_last(g, main, "alt+s")
        stats = g.window("iSCSI Doctor")
        g.xdo("windowmove", stats, "0", "0")
        g.xdo("windowsize", "--sync", stats, "1280", "760")
        g.screenshot(stats, out / "wireshark-stats-tree.png")
        g.key(stats, "Escape")
        rc = g.quit(main)
        assert rc == 0, f"Wireshark exit status {rc}"
    for p in ["wireshark-packet-list.png", "wireshark-expert-info.png", "wireshark-stats-tree.png"]:
        optimize_png(out / p)
        print(out / p, (out / p).stat().st_size)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(conftest.ROOT / "docs" / "images"))
    a = ap.parse_args()
    if missing_tools():
        sys.exit(f"missing: {' '.join(missing_tools())}")
    make_screenshots(a.out)
