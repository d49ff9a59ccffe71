# SPDX-License-Identifier: GPL-2.0-or-later
"""The real Wireshark GUI with the plugin, under Xvfb: it starts on the Nagle fixture, loads the
plugin (its log line at --log-level info; Wireshark 4.0 logs no plugin names itself), runs the
engine over the file with the CLI's counts, shows the Expert Information dialog and Statistics >
iSCSI Doctor from the menus, and exits with status 0 on Ctrl+Q. wsgui.py also makes the
screenshots in docs/images/."""
import re
import subprocess
import time

import pytest

import wsgui
from conftest import PLUGIN_ROOT, ROOT, cli_report

pytestmark = [
    pytest.mark.skipif(bool(wsgui.missing_tools()),
                       reason=f"GUI test needs {', '.join(wsgui.missing_tools())} "
                              "(Debian: wireshark-qt xvfb xauth xdotool imagemagick)"),
    pytest.mark.skipif(not wsgui.NAGLE.exists(), reason=f"{wsgui.NAGLE} missing"),
    pytest.mark.skipif(not any(PLUGIN_ROOT.glob("*/epan/iscsi_doctor.so")),
                       reason=f"plugin not built under {PLUGIN_ROOT}"),
]


def test_gui_loads_plugin_shows_dialogs_and_exits(tmp_path):
    report = cli_report(wsgui.NAGLE)
    completed = sum(1 for c in report["commands"] if c["completed"] and c.get("status_frame"))
    with wsgui.Gui(wsgui.NAGLE, ["-Y", wsgui.FILTER]) as g:
        g.wait_log(r"\[iscsi_doctor INFO\] -- plugin \S+ registered")
        m = g.wait_log(r"\[iscsi_doctor INFO\] -- first pass done: (\d+) commands completed, "
                       r"(\d+) findings")
        assert (int(m.group(1)), int(m.group(2))) == (completed, len(report["findings"])), \
            m.group(0)
        main = g.window(f"^{re.escape(wsgui.NAGLE.name)}$")

        wsgui.open_menu_item_last(g, main, "alt+a")
        expert = g.window("Expert Information")
        g.screenshot(expert, tmp_path / "expert.png")
        g.key(expert, "Escape")

        wsgui.open_menu_item_last(g, main, "alt+s")
        stats = g.window(r"iSCSI Doctor")
        g.key(stats, "Escape")

        g.screenshot(main, tmp_path / "main.png")
        assert g.quit(main) == 0, g.log_text()[-3000:]
        log = g.log_text()
    # The filter compiled (the field exists in the GUI), nothing went wrong on the way.
    assert "Compiled display filter: iscsi_doctor.finding" in log
    bad = [l for l in log.splitlines()
           if re.search(r"CRITICAL|ERROR|Couldn't load plugin|iscsi_doctor (WARNING|ERROR)", l)]
    assert not bad, bad
    for p in ("expert.png", "main.png"):
        assert (tmp_path / p).stat().st_size > 10000, f"{p}: blank screenshot?"


TAPE = ROOT / "captures" / "wireshark-wiki" / "iscsi-tapel.pcap.gz"


@pytest.mark.parametrize("capture", [wsgui.NAGLE, TAPE], ids=lambda p: p.name)
def test_filter_given_at_start_shows_every_frame_with_findings(tshark, ws_home, capture):
    """Opened with -Y iscsi_doctor.finding, the packet list shows, once the file is read and
    without the user applying the filter again, every frame tshark -2 selects with it: also those
    whose findings were decided on later frames or at the end of the capture."""
    if not capture.exists():
        pytest.skip(f"{capture} missing")
    two = tshark("-r", str(capture), "-2", "-Y", wsgui.FILTER, "-T", "fields", "-e",
                 "frame.number").stdout.split()
    one = tshark("-r", str(capture), "-Y", wsgui.FILTER, "-T", "fields", "-e",
                 "frame.number").stdout.split()
    assert len(two) > len(one), "the capture must have findings decided after their frame"
    want = len(two)
    with wsgui.Gui(capture, ["-Y", wsgui.FILTER]) as g:
        g.wait_log(r"\[iscsi_doctor INFO\] -- first pass done")
        main = g.window(f"^{re.escape(capture.name)}$")
        time.sleep(2)  # a refiltering pass after the read
        shown = wsgui.export_displayed(g, main)
        assert g.quit(main) == 0, g.log_text()[-3000:]
    assert shown == want, f"the packet list shows {shown} rows, tshark -2 selects {want}"
