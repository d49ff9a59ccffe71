#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Whole-capture fuzzing of every front-end with structure-aware mutants (capture_mutator.py).

For --seconds, each mutant goes through the CLI (--format json/text/csv, json with --decoder
libtins, --html, `ladder` on one ITT of the JSON's commands, json from standard input, jsonl) and the
Lua plugin's core without Wireshark (lua5.4 run_core.lua);
with --plugins N, N of them (spread over the run) also go through tshark with the C plugin and
with the Lua plugin (two passes with -V, one pass with -V, one pass with -T fields), each timed
against plain tshark on the same file.

A run fails on: a signal, an exit code other than 0/1/2, a sanitizer report, no finish within
--timeout (hang), output that does not parse (JSON, CSV rows, HTML/SVG as XML), an error of the
Lua core; for tshark: a signal, an exit code plain tshark does not have, "Dissector bug",
"Malformed Packet: <our protocol>", a Lua error, a time beyond 10x plain tshark (and --slow-floor).
Each failing input is minimized (packets, then bytes within packets) while it keeps failing the
same way, and kept as tests/fuzz/regressions/captures/<kind>-<hash>.pcap, which
test_capture_regressions.py replays through every front-end.

    tests/fuzz/fuzz_captures.py --cli build-asan/cli/iscsi-doctor --seconds 180
    tests/fuzz/fuzz_captures.py --cli build/cli/iscsi-doctor --seconds 60 --plugins 10
    tests/fuzz/fuzz_captures.py --cli OLD-BINARY --replay tests/fuzz/regressions/captures/*.pcap
"""
import argparse
import csv
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_mutator as cm  # noqa: E402

ROOT = cm.ROOT
REGRESSIONS = ROOT / "tests" / "fuzz" / "regressions" / "captures"
LUA_PLUGIN = LUA_PLUGIN_DEFAULT = ROOT / "lua" / "iscsi_doctor.lua"
RUN_CORE = ROOT / "tests" / "lua" / "run_core.lua"
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1", "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
TSHARK_MARKERS = {"dissector-bug": r"Dissector bug",
                  "malformed": r"Malformed Packet: (ISCSI_DOCTOR|iSCSI Doctor)",
                  "lua-error": r"Lua: Error|\[Lua Error"}
FIELDS = {"c": ["iscsi_doctor.finding", "iscsi_doctor.notice", "iscsi_doctor.itt", "iscsi_doctor.round_trips",
                "iscsi_doctor.reported.frame"],
          "lua": ["iscsi_doctor_lua.finding", "iscsi_doctor_lua.itt", "iscsi_doctor_lua.round_trips",
                  "iscsi_doctor_lua.evidence_frame"]}


class Run:
    def __init__(self, cmd, rc, out, err, secs, timed_out, raw=b""):
        self.cmd, self.rc, self.out, self.err, self.secs, self.timed_out = cmd, rc, out, err, secs, timed_out
        self.raw = raw  # stdout as written: JSON must be valid UTF-8 too


def run(cmd, timeout, env=None, stdin_path=None):
    """Runs cmd in its own process group, killed whole on timeout; stdin_path: a file piped into it."""
    t = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin_path else subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err = p.communicate(Path(stdin_path).read_bytes() if stdin_path else None, timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        timed_out = True
    return Run(cmd, p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
               time.monotonic() - t, timed_out, out)


def tally(counts, what, secs=0.0):
    """counts[what] = (runs, seconds, slowest run's seconds): near-hangs show in the summary."""
    n, t, m = counts.get(what, (0, 0.0, 0.0))
    counts[what] = (n + 1, t + secs, max(m, secs))


class Failure:
    def __init__(self, frontend, kind, detail, r):
        self.frontend, self.kind, self.detail, self.run = frontend, kind, detail, r

    @property
    def signature(self):
        return (self.frontend, self.kind, self.detail)

    def __str__(self):
        what = f"{self.frontend}: {self.kind}" + (f" ({self.detail})" if self.detail else "")
        tail = "\n".join((self.run.err or self.run.out).strip().splitlines()[-12:]) if self.run else ""
        return what + ("\n    " + tail.replace("\n", "\n    ") if tail else "")


def process_failure(frontend, r, ok_codes=(0, 1, 2)):
    """The failure of a finished (or killed) process, from its exit and its standard error."""
    if r.timed_out:
        return Failure(frontend, "hang", "", r)
    m = re.search(r"ERROR: (AddressSanitizer|LeakSanitizer): ([\w-]+)", r.err)
    if m:
        return Failure(frontend, "leak" if m.group(1) == "LeakSanitizer" else "asan", m.group(2), r)
    m = re.search(r"([\w./+-]+:\d+):\d+: runtime error", r.err)
    if m:
        return Failure(frontend, "ubsan", Path(m.group(1)).name, r)
    if r.rc < 0:
        return Failure(frontend, "crash", signal.Signals(-r.rc).name, r)
    if r.rc not in ok_codes:
        return Failure(frontend, "exit", str(r.rc), r)
    return None


def xml_error(path):
    """Why a file is not well-formed XML (without the position, so it serves as a signature)."""
    try:
        ET.parse(path)
        return None
    except ET.ParseError as e:
        return re.sub(r": line \d+, column \d+", "", str(e))
    except OSError as e:
        return e.strerror


# --- front-ends ------------------------------------------------------------------------------
# Each check returns a Failure or None; `only` restricts a run to one front-end (minimization).

CLI_FRONTENDS = ["json", "libtins", "text", "csv", "html", "ladder", "stdin", "jsonl"]


def check_cli(cli, path, work, timeout, counts, only=None, frontends=CLI_FRONTENDS):
    env = dict(os.environ, **{k: os.environ.get(k, v) for k, v in SAN_ENV.items()})
    report = None
    for fe in frontends:
        if only and fe != only and not (fe == "json" and only == "ladder"):
            continue
        out_file = Path(work) / ("report.html" if fe == "html" else "ladder.svg")
        out_file.unlink(missing_ok=True)
        if fe == "ladder":
            cmds = (report or {}).get("commands") or []
            if not cmds:
                continue
            c = cmds[0]
            cmd = [cli, "ladder", "--itt", c["itt"], "--frame", str(c["first_frame"]), "-o", str(out_file), str(path)]
        elif fe == "html":
            cmd = [cli, "--html", str(out_file), str(path)]
        elif fe == "libtins":  # the second packet decoder
            cmd = [cli, "--decoder", "libtins", "--format", "json", str(path)]
        elif fe == "stdin":  # the capture piped in: read as a stream
            cmd = [cli, "--format", "json", "-"]
        else:
            cmd = [cli, "--format", fe, str(path)]
        r = run(cmd, timeout, env, stdin_path=path if fe == "stdin" else None)
        tally(counts, fe, r.secs)
        f = process_failure(fe, r)
        if f:
            return f
        if fe in ("json", "libtins", "stdin"):
            try:
                doc = json.loads(r.raw)
                report = doc if fe == "json" else report  # the ladder draws a command of the default decoder's
            except ValueError as e:
                return Failure(fe, "json", "", Run(cmd, r.rc, r.out, f"unparseable JSON: {e}", r.secs, False))
        elif fe == "jsonl":
            try:
                lines = [json.loads(x) for x in r.out.splitlines()]
                if r.rc in (0, 1) and (not lines or lines[-1].get("type") != "run"):
                    raise ValueError("no closing run record")
            except ValueError as e:
                return Failure(fe, "jsonl", "", Run(cmd, r.rc, r.out, f"unparseable JSON Lines: {e}", r.secs, False))
        elif fe == "csv":
            rows = list(csv.reader(io.StringIO(r.out)))
            if not rows or any(len(row) != len(rows[0]) for row in rows):
                return Failure(fe, "csv", "", Run(cmd, r.rc, r.out, "CSV rows of different widths", r.secs, False))
        elif fe in ("html", "ladder") and (r.rc in (0, 1) or out_file.exists()):
            err = xml_error(out_file)
            if err:
                return Failure(fe, fe, err, Run(cmd, r.rc, r.out, f"{out_file.name} is not well-formed XML: {err}",
                                                r.secs, False))
        if only == fe:
            break
    return None


def check_lua_core(lua, path, timeout, counts):
    """The Lua plugin's analysis core under a plain interpreter. Errors raised by the harness
    (run_core.lua's own packet parsing, which assumes sane packets) are not the plugin's."""
    fe = f"{Path(lua).name}-core"
    r = run([lua, str(RUN_CORE), str(LUA_PLUGIN), str(path)], timeout)
    tally(counts, fe, r.secs)
    if r.timed_out or r.rc < 0:
        return process_failure(fe, r)
    m = re.search(r"([\w./-]+\.lua):(\d+):", r.err)
    if r.rc != 0 and m and Path(m.group(1)).name == LUA_PLUGIN.name:
        return Failure(fe, "lua-error", f"{LUA_PLUGIN.name}:{m.group(2)}", r)
    if r.rc != 0:
        tally(counts, fe + "-harness-error")
    return None


class Tshark:
    """tshark as an unprivileged user (Wireshark loads no plugin from WIRESHARK_PLUGIN_DIR, and no
    Lua, as root), on copies of the inputs in a folder that user can read."""
    MODES = {"2pass": ["-2", "-Y", "frame", "-V"], "1pass": ["-V"], "fields": ["-T", "fields"]}

    def __init__(self, tshark, plugin_dir, timeout, slow_factor=10.0, slow_floor=2.0):
        self.tshark, self.plugin_dir, self.timeout = tshark, plugin_dir, timeout
        self.slow_factor, self.slow_floor = slow_factor, slow_floor
        self.dir = Path(tempfile.mkdtemp(prefix="isd-fuzz-tshark-"))
        self.home = self.dir / "home"
        self.home.mkdir()
        os.chmod(self.dir, 0o755)
        os.chmod(self.home, 0o777)
        self.lua = self.dir / LUA_PLUGIN.name
        shutil.copy(LUA_PLUGIN, self.lua)
        os.chmod(self.lua, 0o644)
        self.priv = []
        if os.geteuid() == 0:
            self.priv = [shutil.which("setpriv") or "setpriv", "--reuid=nobody", "--regid=nogroup",
                         "--clear-groups", "--"]

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def stage(self, path):
        dst = self.dir / "input.pcap"
        shutil.copy(path, dst)
        os.chmod(dst, 0o644)
        return dst

    def command(self, variant, mode, path):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WIRESHARK_", "XDG_"))}
        env["HOME"] = str(self.home)
        cmd = [*self.priv, self.tshark, "-n", "-r", str(path), *self.MODES[mode]]
        if variant == "c":
            env["WIRESHARK_PLUGIN_DIR"] = str(self.plugin_dir)
        elif variant == "lua":
            cmd += ["-X", f"lua_script:{self.lua}"]
        if mode == "fields":
            cmd += ["-e", "frame.number", "-e", "_ws.expert.message"]
            for f in FIELDS.get(variant, []):
                cmd += ["-e", f]
            if variant == "lua":
                cmd += ["-o", "iscsi_doctor_lua.report:TRUE"]  # the end-of-run report too
        return cmd, env

    def check(self, path, variants, counts, only=None):
        staged = self.stage(path)
        for mode in self.MODES:
            plain = None
            for variant in variants:
                fe = f"{variant}-{mode}"
                if only and fe != only:
                    continue
                if plain is None:
                    pcmd, penv = self.command("plain", mode, staged)
                    plain = run(pcmd, self.timeout, penv)
                    tally(counts, f"plain-{mode}", plain.secs)
                cmd, env = self.command(variant, mode, staged)
                r = run(cmd, self.timeout, env)
                tally(counts, fe, r.secs)
                f = self.judge(fe, r, plain)
                if f:
                    return f
        return None

    def judge(self, fe, r, plain):
        if r.timed_out or r.rc < 0:
            f = process_failure(fe, r)
            f.kind = "tshark-" + f.kind
            return f
        if r.rc != plain.rc:
            return Failure(fe, "tshark-exit", f"{r.rc} (plain tshark {plain.rc})", r)
        text, base = r.out + r.err, plain.out + plain.err
        for kind, pat in TSHARK_MARKERS.items():
            if len(re.findall(pat, text, re.I)) > len(re.findall(pat, base, re.I)):
                m = re.search(r".*(" + pat + r").*", text, re.I)
                return Failure(fe, kind, "", Run(r.cmd, r.rc, r.out, m.group(0).strip()[:300], r.secs, False))
        if r.secs > max(self.slow_factor * plain.secs, self.slow_floor):
            return Failure(fe, "slow", "", Run(r.cmd, r.rc, r.out,
                                               f"{r.secs:.2f} s against {plain.secs:.2f} s plain", r.secs, False))
        return None


# --- minimization ----------------------------------------------------------------------------

def ddmin(items, fails, deadline):
    """Delta debugging (complements only): the smallest list found whose `fails` holds."""
    n = 2
    while len(items) >= 2 and time.monotonic() < deadline:
        chunk = -(-len(items) // n)
        for i in range(0, len(items), chunk):
            rest = items[:i] + items[i + chunk:]
            if rest and time.monotonic() < deadline and fails(rest):
                items, n = rest, max(n - 1, 2)
                break
        else:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    return items


def minimize(data, still_fails, seconds):
    """Packets first, then the bytes of each remaining packet (largest first); record headers stay
    consistent (a byte removed from a packet is removed from its wire length too)."""
    deadline = time.monotonic() + seconds
    tmp = Path(tempfile.mkdtemp(prefix="isd-min-")) / "in.pcap"
    tmp.write_bytes(data)
    cap = cm.read_pcap(tmp)
    shutil.rmtree(tmp.parent)

    def build(pkts):
        return cm.write_pcap(cm.Capture(cap.endian, cap.nsec, cap.snaplen, cap.linktype, pkts))

    cap.packets = ddmin(cap.packets, lambda ps: still_fails(build(ps)), deadline)
    for k in sorted(range(len(cap.packets)), key=lambda k: -len(cap.packets[k].data)):
        p = cap.packets[k]

        def with_bytes(bs, k=k, p=p):
            q = cm.Packet(p.sec, p.frac, bytes(bs), p.orig - (len(p.data) - len(bs)))
            return build(cap.packets[:k] + [q] + cap.packets[k + 1:])
        kept = ddmin(list(p.data), lambda bs: still_fails(with_bytes(bs)), deadline)
        if len(kept) < len(p.data):
            cap.packets[k] = cm.Packet(p.sec, p.frac, bytes(kept), p.orig - (len(p.data) - len(kept)))
    return build(cap.packets)


# --- the run ---------------------------------------------------------------------------------

class Fuzzer:
    def __init__(self, a):
        self.a = a
        self.work = Path(tempfile.mkdtemp(prefix="isd-fuzz-"))
        self.counts, self.failures, self.seen, self.known = {}, [], {}, {}
        self.frontends = [x for x in CLI_FRONTENDS if x in a.frontends.split(",")]
        if "ladder" in self.frontends and "json" not in self.frontends:
            self.frontends.insert(0, "json")  # the ladder's ITT comes from the JSON
        self.lua = [x for x in ([] if a.no_lua_core else ["lua5.4"]) if shutil.which(x)]
        self.tshark = None
        if a.plugins:
            ts = shutil.which(a.tshark)
            if not ts:
                raise SystemExit(f"fuzz_captures: --plugins needs tshark ({a.tshark} not found)")
            if not any(Path(a.plugin_dir).glob("*/epan/iscsi_doctor.so")):
                raise SystemExit(f"fuzz_captures: no C plugin under {a.plugin_dir} (--plugin-dir)")
            self.tshark = Tshark(ts, a.plugin_dir, a.tshark_timeout, slow_floor=a.slow_floor)

    def close(self):
        shutil.rmtree(self.work, ignore_errors=True)
        if self.tshark:
            self.tshark.close()

    def check(self, path, plugins, counts, only=None, timeout=None):
        timeout = timeout or self.a.timeout
        f = None
        if not only or only in CLI_FRONTENDS:
            f = check_cli(self.a.cli, path, self.work, timeout, counts, only, self.frontends)
        for lua in self.lua:
            if not f and (not only or only == f"{lua}-core"):
                f = check_lua_core(lua, path, timeout, counts)
        if not f and plugins and self.tshark and (not only or only.startswith(("c-", "lua-"))):
            f = self.tshark.check(path, ["c", "lua"], counts, only)
        return f

    def replay_line(self, path, failure):
        lua = f" --lua-plugin {LUA_PLUGIN}" if LUA_PLUGIN != LUA_PLUGIN_DEFAULT else ""
        plugins = " --plugins 1" if failure.frontend.startswith(("c-", "lua-")) else ""
        return f"tests/fuzz/fuzz_captures.py --cli {self.a.cli}{lua}{plugins} --replay {path}"

    def handle(self, data, origin, failure, mutator=None):
        """Prints a failure, minimizes it (up to --max-per-signature per signature) and keeps it."""
        sig = failure.signature
        self.seen[sig] = self.seen.get(sig, 0) + 1
        if sig in self.known:
            print(f"known: {origin}: {failure.frontend}: {failure.kind}, as {self.known[sig]}", flush=True)
            return
        self.failures.append(failure)
        print(f"FAIL {origin}: {failure}", flush=True)
        if self.seen[sig] > self.a.max_per_signature or self.a.no_minimize:
            print(f"  reproduce: {mutator + ' && ' if mutator else ''}"
                  f"{self.replay_line('m.pcap' if mutator else origin, failure)}", flush=True)
            return
        probe = self.work / "probe.pcap"
        # A hang shows within a few seconds; waiting the full --timeout for each probe is wasted.
        timeout = min(self.a.timeout, self.a.minimize_timeout) if failure.kind.endswith("hang") else self.a.timeout

        def still_fails(candidate):
            probe.write_bytes(candidate)
            f = self.check(probe, True, {}, only=failure.frontend, timeout=timeout)
            return f is not None and f.signature == sig
        t = time.monotonic()
        small = minimize(data, still_fails, self.a.minimize_seconds)
        self.a.regressions.mkdir(parents=True, exist_ok=True)
        out = self.a.regressions / f"{failure.kind}-{hashlib.sha1(small).hexdigest()[:10]}.pcap"
        out.write_bytes(small)
        n = len(cm.read_pcap(out).packets)
        print(f"  minimized in {time.monotonic() - t:.0f} s to {n} packets, {len(small)} bytes: "
              f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}", flush=True)
        cmd = [Path(c).name if str(c).startswith(str(self.work)) else str(c) for c in failure.run.cmd[:-1]]
        print(f"  reproduce: {' '.join(cmd)} {out}" if failure.frontend in CLI_FRONTENDS else
              f"  reproduce: {self.replay_line(out, failure)}", flush=True)

    def replay(self, files):
        for p in files:
            f = self.check(Path(p), self.a.plugins > 0, self.counts)
            if f:
                self.handle(Path(p).read_bytes(), p, f)
            else:
                print(f"ok {p}", flush=True)
        return len(files)

    def fuzz(self):
        # Failures the kept reproducers still show are known (the regression test fails on them):
        # mutants failing the same way are counted but neither fail this run nor are kept again.
        for p in sorted(self.a.regressions.glob("*.pcap*")):
            f = self.check(p, False, {})
            if f:
                self.known.setdefault(f.signature, p.name)
                print(f"known failure, not fixed yet: {p.name}: {f}", flush=True)
        sources = cm.Sources(self.a.source)
        start = time.monotonic()
        budget = self.a.seconds
        plugins_done = i = 0
        mutant = self.work / "mutant.pcap"
        while True:
            elapsed = time.monotonic() - start
            due = self.tshark is not None and plugins_done < self.a.plugins
            if elapsed >= budget and not due:
                break
            # Plugin samples are spread over the budget; any still due run after it.
            plugin = due and elapsed >= min(budget, plugins_done * budget / self.a.plugins)
            plugins_done += plugin
            seed = self.a.seed + i
            i += 1
            data, what = cm.mutate(sources, seed, self.a.min_packets, self.a.max_packets)
            mutant.write_bytes(data)
            f = self.check(mutant, plugin, self.counts)
            if f:
                opts = "".join(f" --source {x}" for x in self.a.source or [])
                opts += f" --min-packets {self.a.min_packets} --max-packets {self.a.max_packets}"
                self.handle(data, f"seed {seed} [{what}]", f,
                            f"tests/fuzz/capture_mutator.py --seed {seed}{opts} -o m.pcap")
        return i


def main():
    global LUA_PLUGIN
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=str(ROOT / "build" / "cli" / "iscsi-doctor"))
    ap.add_argument("--seconds", type=float, default=120, help="time budget for mutants (default 120)")
    ap.add_argument("--seed", type=int, help="first mutant's seed (default: from the clock, printed)")
    ap.add_argument("--timeout", type=float, default=10, help="per-run time bound in seconds (default 10)")
    ap.add_argument("--plugins", type=int, default=0, help="mutants also run through tshark with each plugin")
    ap.add_argument("--plugin-dir", default=os.environ.get("ISCSI_DOCTOR_PLUGIN_DIR",
                                                           str(ROOT / "build" / "dissector" / "plugins")))
    ap.add_argument("--tshark", default=os.environ.get("TSHARK", "tshark"))
    ap.add_argument("--tshark-timeout", type=float, default=60)
    ap.add_argument("--slow-floor", type=float, default=2.0, help="tshark runs under this many seconds are never slow")
    ap.add_argument("--no-lua-core", action="store_true", help="skip the Lua core (lua5.4 run_core.lua)")
    ap.add_argument("--lua-plugin", type=Path, default=LUA_PLUGIN, help="the Lua plugin (default lua/iscsi_doctor.lua)")
    ap.add_argument("--source", action="append", help="source capture (repeatable; default: capture_mutator's)")
    ap.add_argument("--min-packets", type=int, default=4)
    ap.add_argument("--max-packets", type=int, default=400)
    ap.add_argument("--regressions", type=Path, default=REGRESSIONS,
                    help="where failing inputs are kept, and whose failures are known (default %(default)s)")
    ap.add_argument("--frontends", default=",".join(CLI_FRONTENDS), help="CLI front-ends to run (default all)")
    ap.add_argument("--replay", nargs="+", metavar="FILE", help="run these files instead of mutants")
    ap.add_argument("--minimize", action="store_true", help="with --replay: minimize failing files too")
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("--minimize-seconds", type=float, default=120, help="per failure (default 120)")
    ap.add_argument("--minimize-timeout", type=float, default=3, help="hang bound while minimizing (default 3)")
    ap.add_argument("--max-per-signature", type=int, default=2, help="failures minimized per (front-end, kind)")
    a = ap.parse_args()
    LUA_PLUGIN = a.lua_plugin.resolve()
    if not os.access(a.cli, os.X_OK):
        raise SystemExit(f"fuzz_captures: CLI not found: {a.cli} (--cli)")
    if a.seed is None:
        a.seed = int(time.time() * 1000) % 10 ** 9
    if a.replay and not a.minimize:
        a.no_minimize = True
    fz = Fuzzer(a)
    t = time.monotonic()
    try:
        n = fz.replay(a.replay) if a.replay else fz.fuzz()
    finally:
        fz.close()
    secs = time.monotonic() - t
    what = "files" if a.replay else f"mutants (seeds {a.seed}..{a.seed + n - 1})"
    per = ", ".join(f"{k} {runs}" + (f" ({1000 * ts / runs:.0f} ms each, max {1000 * mx:.0f})" if ts else "")
                    for k, (runs, ts, mx) in sorted(fz.counts.items()))
    known = sum(k for sig, k in fz.seen.items() if sig in fz.known)
    print(f"fuzz_captures: {n} {what} in {secs:.0f} s ({n / secs:.1f}/s); runs: {per}; "
          f"failures: {len(fz.failures)}" + (f" (and {known} known, as kept reproducers)" if known else ""))
    for sig, k in sorted(fz.seen.items()):
        print(f"  {' '.join(x for x in sig if x)}: {k}" + (" (known)" if sig in fz.known else ""))
    return 1 if fz.failures else 0


if __name__ == "__main__":
    sys.exit(main())
