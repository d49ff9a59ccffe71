#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The C plugin's cost in tshark (dissector/README.md "Cost"): tshark with and without the built
plugin on a capture, in the runs of that table, and the engine alone (`iscsi-doctor --format
json`) on the same file. Prints the table.

    bench/c-plugin.py [--capture F] [--runs 3] [--build DIR]

The default capture is the largest bundled one, captures/wireshark-wiki/iscsi-scsi-10TB-data-
device.pcap.gz, unpacked to a temporary file first. Times are CPU seconds of the process tree,
the best of --runs runs, with and without the plugin interleaved (on a shared machine read them
to about 10%). "With" loads <build>/dissector/plugins (WIRESHARK_PLUGIN_DIR); "without" a copy of
that folder's links to the system's plugins, less ours. As root, tshark runs as nobody: Wireshark
loads no plugin from WIRESHARK_PLUGIN_DIR for root."""
import argparse
import gzip
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIKI_10TB = ROOT / "captures" / "wireshark-wiki" / "iscsi-scsi-10TB-data-device.pcap.gz"

# (row of the README's table, tshark arguments after -r F, with the plugin only)
RUNS = [
    ("one pass, packet summaries", [], False),
    ("two passes (`-2`)", ["-2"], False),
    ("`-q -z io,stat,0` (dissection, no output)", ["-q", "-z", "io,stat,0"], False),
    ("`-q -z iscsi_doctor,tree`", ["-q", "-z", "iscsi_doctor,tree"], True),
    ("one pass, `--disable-protocol iscsi_doctor`", ["--disable-protocol", "iscsi_doctor"], True),
]


def cpu_seconds(cmd, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def plugin_folder_without_ours(plugins, into):
    """The build's plugin folder (links to the system's plugins, and ours) without ours."""
    for p in plugins.rglob("*.so"):
        if p.name == "iscsi_doctor.so":
            continue
        dest = into / p.relative_to(plugins)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(p.resolve())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capture", type=Path, default=WIKI_10TB)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    a = ap.parse_args()
    plugins = a.build / "dissector" / "plugins"
    if not any(plugins.glob("*/epan/iscsi_doctor.so")):
        sys.exit(f"no plugin built under {plugins}")
    tmp = Path(tempfile.mkdtemp(prefix="iscsi-doctor-c-bench-"))
    try:
        tmp.chmod(0o755)
        capture = a.capture
        if capture.suffix == ".gz":  # tshark would unpack it on every run
            capture = tmp / capture.stem
            with gzip.open(a.capture) as src, open(capture, "wb") as dst:
                shutil.copyfileobj(src, dst)
            capture.chmod(0o644)
        without = tmp / "plugins"
        plugin_folder_without_ours(plugins, without)
        home = tmp / "home"
        home.mkdir(mode=0o777)
        home.chmod(0o777)
        env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "WIRESHARK_CONFIG_DIR")}
        env["HOME"] = str(home)  # no personal plugins or preferences
        envs = {"with": dict(env, WIRESHARK_PLUGIN_DIR=str(plugins)),
                "without": dict(env, WIRESHARK_PLUGIN_DIR=str(without))}
        nobody = (["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
                  if os.geteuid() == 0 else [])
        check = subprocess.run([*nobody, "tshark", "-G", "plugins"], env=envs["with"], capture_output=True,
                               text=True, check=True).stdout
        if "iscsi_doctor.so" not in check:
            sys.exit("tshark did not load the plugin from the build folder")
        best = {}
        for row, args, plugin_only in RUNS:
            for _ in range(a.runs):
                for which in ("without", "with"):
                    if which == "without" and plugin_only:
                        continue
                    cmd = [*nobody, "tshark", "-n", "-r", str(capture), *args]
                    t = cpu_seconds(cmd, envs[which])
                    best[row, which] = min(t, best.get((row, which), t))
        cli = os.environ.get("ISCSI_DOCTOR", str(a.build / "cli" / "iscsi-doctor"))
        engine = min(cpu_seconds([cli, "-q", "--format", "json", "-o", os.devnull, str(capture)], env)
                     for _ in range(a.runs))
        size = capture.stat().st_size
        print(f"{a.capture.name}: {size / 1e6:.0f} MB unpacked; CPU seconds, best of {a.runs}")
        print("| run | without | with the plugin |\n|---|---|---|")
        for row, _, plugin_only in RUNS:
            plain = "—" if plugin_only else f"{best[row, 'without']:.2f} s"
            ratio = "" if plugin_only else f" ({best[row, 'with'] / best[row, 'without']:.2f}x)"
            print(f"| {row} | {plain} | {best[row, 'with']:.2f} s{ratio} |")
        print(f"engine alone (iscsi-doctor --format json): {engine:.2f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
