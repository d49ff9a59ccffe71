#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The C plugin's cost in tshark (dissector/README.md "Cost"): tshark with and without the built
plugin, on this machine's Wireshark and in each Debian root given, on each capture shape. Prints a
table per Wireshark and capture.

    bench/c-plugin.py [--capture F ...] [--runs 5] [--rows two-pass|all] [--build DIR]
                      [--root DIR ...] [--root-build PATH] [--instructions]

The captures are, by default, the two shapes of the README's table: small-block traffic (a
119,000-packet cut of bench/make-small-block.py, cached in bench/cache/) and the largest bundled
capture, captures/wireshark-wiki/iscsi-scsi-10TB-data-device.pcap.gz (large I/O), unpacked first.
Times are CPU seconds of the process tree, the best of --runs runs, with and without the plugin
interleaved (on a shared machine read them to about 10%); --instructions counts instructions with
callgrind instead, once each (valgrind must be installed where tshark runs; about 50x slower).
"With" loads the build's plugin folder (WIRESHARK_PLUGIN_DIR), "without" a copy of that folder's
links to the system's plugins, less ours. tshark runs as nobody: Wireshark loads no plugin from
WIRESHARK_PLUGIN_DIR for root. On this machine the plugin is <build>/dissector/plugins; in a root
(chroot, so run as root) it is <root>/<root-build>/dissector/plugins, /build by default, where
scripts/test-wireshark-versions.sh builds the project."""
import argparse
import gzip
import os
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIKI_10TB = ROOT / "captures" / "wireshark-wiki" / "iscsi-scsi-10TB-data-device.pcap.gz"
SMALL_BLOCK = ROOT / "bench" / "cache" / "small-block-119k.pcap"
SMALL_BLOCK_PACKETS = 119000
WORK = "tmp/iscsi-doctor-c-bench"  # inside each root, readable by nobody

# (row of the README's table, tshark arguments after -r F, with the plugin only)
RUNS = [
    ("one pass, packet summaries", [], False),
    ("two passes (`-2`)", ["-2"], False),
    ("`-q -z io,stat,0` (dissection, no output)", ["-q", "-z", "io,stat,0"], False),
    ("`-q -z iscsi_doctor,tree`", ["-q", "-z", "iscsi_doctor,tree"], True),
    ("one pass, `--disable-protocol iscsi_doctor`", ["--disable-protocol", "iscsi_doctor"], True),
]


def as_nobody(root, env):
    """The prefix that runs a command as nobody with `env`, in `root` unless it is "/"."""
    assign = [f"{k}={v}" for k, v in env.items()]
    if root == "/":
        user = (["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
                if os.geteuid() == 0 else [])
        return user + ["env", "-u", "XDG_CONFIG_HOME", "-u", "WIRESHARK_CONFIG_DIR", *assign]
    return ["chroot", "--userspec=nobody:nogroup", root, "env", "-i", "PATH=/usr/bin:/bin", *assign]


def with_proc(root, cmd):
    """valgrind reads /proc: in a root, mounted in a mount namespace of its own."""
    if root == "/":
        return cmd
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount -t proc proc "$0/proc" && exec "$@"', root] + cmd


def measure(root, env, args, instructions):
    cmd = ["tshark", "-n", *args]
    if instructions:
        out = Path(root) / WORK / "callgrind.out"
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file=/{WORK}/callgrind.out", *cmd]
        subprocess.run(with_proc(root, as_nobody(root, env) + cmd), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        n = int(re.search(r"^summary: (\d+)", out.read_text(), re.M).group(1))
        out.unlink()
        return n
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(as_nobody(root, env) + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def plugin_folder_without_ours(plugins, into):
    """The build's plugin folder (links to the system's plugins, and ours) without ours."""
    for p in plugins.rglob("*.so"):
        if p.name == "iscsi_doctor.so":
            continue
        dest = into / p.relative_to(plugins)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.is_symlink():
            dest.symlink_to(os.readlink(p) if p.is_symlink() else p)


def unpacked(capture, work):
    """The capture as tshark reads it fastest: unpacked, in `work`."""
    dest = work / capture.name.removesuffix(".gz")
    if capture.suffix == ".gz":  # tshark would unpack it on every run
        with gzip.open(capture) as src, open(dest, "wb") as dst:
            shutil.copyfileobj(src, dst)
    else:
        shutil.copy(capture, dest)
    dest.chmod(0o644)
    return dest


def bench_root(root, plugins_in_root, captures, a):
    work = Path(root) / WORK
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o777)
    try:
        plugins = Path(root) / plugins_in_root.relative_to("/")
        if not any(plugins.glob("*/epan/iscsi_doctor.so")):
            sys.exit(f"no plugin built under {plugins}")
        without = work / "plugins"
        plugin_folder_without_ours(plugins, without)
        home = work / "home"
        home.mkdir(mode=0o777, exist_ok=True)
        home.chmod(0o777)
        inside = lambda p: "/" + str(Path(p).relative_to(root)) if root != "/" else str(p)  # noqa: E731
        envs = {"with": {"HOME": inside(home), "WIRESHARK_PLUGIN_DIR": str(plugins_in_root)},
                "without": {"HOME": inside(home), "WIRESHARK_PLUGIN_DIR": inside(without)}}
        version = subprocess.run(as_nobody(root, envs["with"]) + ["tshark", "--version"],
                                 capture_output=True, text=True).stdout.split("\n")[0]
        listed = subprocess.run(as_nobody(root, envs["with"]) + ["tshark", "-G", "plugins"],
                                capture_output=True, text=True).stdout
        if "iscsi_doctor.so" not in listed:
            sys.exit(f"{root}: tshark did not load the plugin from {plugins_in_root}")
        rows = RUNS if a.rows == "all" else [r for r in RUNS if r[1] == ["-2"]]
        for capture in captures:
            local = unpacked(capture, work)
            best = {}
            for _ in range(1 if a.instructions else a.runs):
                for row, args, plugin_only in rows:
                    for which in ("without", "with"):
                        if which == "without" and plugin_only:
                            continue
                        v = measure(root, envs[which], ["-r", inside(local), *args], a.instructions)
                        best[row, which] = min(v, best.get((row, which), v))
            unit = "instructions" if a.instructions else f"CPU seconds, best of {a.runs}"
            fmt = (lambda v: f"{v / 1e9:.2f} G") if a.instructions else (lambda v: f"{v:.2f} s")
            print(f"\n{version} ({root}), {capture.name}: {local.stat().st_size / 1e6:.0f} MB; {unit}")
            print("| run | without | with the plugin |\n|---|---|---|")
            for row, _, plugin_only in rows:
                plain = "—" if plugin_only else fmt(best[row, "without"])
                ratio = "" if plugin_only else f" ({best[row, 'with'] / best[row, 'without']:.2f}x)"
                print(f"| {row} | {plain} | {fmt(best[row, 'with'])}{ratio} |")
            if root == "/" and not a.instructions:
                cli = os.environ.get("ISCSI_DOCTOR", str(a.build / "cli" / "iscsi-doctor"))
                if Path(cli).is_file():
                    engine = min(measure_cli(cli, local) for _ in range(a.runs))
                    print(f"engine alone (iscsi-doctor --format json): {engine:.2f} s")
            local.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure_cli(cli, capture):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([cli, "-q", "--format", "json", "-o", os.devnull, str(capture)], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capture", type=Path, action="append", default=[])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rows", choices=("two-pass", "all"), default="all")
    ap.add_argument("--build", type=Path, default=ROOT / "build", help="this machine's build folder")
    ap.add_argument("--root", action="append", default=[], help="a Debian root with tshark (repeatable)")
    ap.add_argument("--root-build", type=Path, default=Path("/build"), help="the build folder inside each root")
    ap.add_argument("--no-host", action="store_true", help="only the roots")
    ap.add_argument("--instructions", action="store_true")
    a = ap.parse_args()
    captures = a.capture
    if not captures:
        if not SMALL_BLOCK.is_file():
            SMALL_BLOCK.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, str(ROOT / "bench" / "make-small-block.py"), str(SMALL_BLOCK),
                            str(SMALL_BLOCK_PACKETS)], check=True, stdout=subprocess.DEVNULL)
        captures = [SMALL_BLOCK, WIKI_10TB]
    if a.root and os.geteuid() != 0:
        sys.exit("--root needs root (chroot)")
    if not a.no_host:
        bench_root("/", (a.build / "dissector" / "plugins").resolve(), captures, a)
    for root in a.root:
        bench_root(root, a.root_build / "dissector" / "plugins", captures, a)


if __name__ == "__main__":
    main()
