# SPDX-License-Identifier: GPL-2.0-or-later
"""Differential fuzzing of the Lua port against the engine (run by hand, not by ctest).

Mutates small captures (bytes of headers and payload, login text, dropped, duplicated, swapped,
snapped and re-timed packets, a join mid-session, a second capture merged in from another
address) and compares the Lua core with `iscsi-doctor --format json` as test_lua_engine_diff.py
does. A capture that differs is kept, and its seed printed; the same seed gives the same capture.
A capture on which the Lua core equals the CLI without its memory budget (`--memory-budget 0`; the
plugin has none) is not counted as differing: that difference is the budget's early finishing
(docs/cli.md), not the port's; it is said on a line of its own.

    ISCSI_DOCTOR=build/cli/iscsi-doctor python3 tests/lua/fuzz_lua_diff.py COUNT [FIRST_SEED] [KEEP_DIR]

LUA=lua5.1 (etc.) picks the interpreter.
"""
import gzip
import random
import struct
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_lua_engine_diff as diff  # noqa: E402

ROOT = diff.ROOT
SEEDS = [  # little-endian microsecond pcaps of a few hundred frames
    "fixtures/scripted-nagle-read-1k--initiator", "fixtures/initiator-nagle-write-1k--target",
    "fixtures/target-nagle-read-batch2--initiator", "fixtures/scripted-nodelay-read-1k--target",
    "fixtures/test-cu--initiator", "fixtures/target-nagle-write-batch2--target",
    "fixtures/stock-header-digest--initiator", "fixtures/initiator-nagle-write-8k--initiator",
    "fixtures/scripted-think-read--target",
    # no TCP timestamps: pure ACKs that may be delayed, Nagle releases
    "fixtures/scripted-nagle-slow-read-nots--initiator", "fixtures/scripted-nagle-slow-read-nots--target",
    "wireshark-wiki/scsi-osd-example-001",
    "wireshark-wiki/iscsi-tapel", "wireshark-wiki/iscsi-scsi-data-cdrom",
]
MERGEABLE = 11  # the lab fixtures (initiator 10.77.0.1)


def records(name, limit):
    data = gzip.decompress((ROOT / "captures" / f"{name}.pcap.gz").read_bytes())
    assert data[:4] == b"\xd4\xc3\xb2\xa1", name
    pos, out = 24, []
    while pos + 16 <= len(data) and len(out) < limit:
        s, f, n, o = struct.unpack("<IIII", data[pos:pos + 16])
        out.append([s, f, data[pos + 16:pos + 16 + n], o])
        pos += 16 + n
    return data[:24], out


def build(hdr, recs):
    b = bytearray(hdr)
    for s, f, p, o in recs:
        b += struct.pack("<IIII", s, f, len(p), max(o, len(p))) + p
    return bytes(b)


def merge(rng, recs):
    """Another fixture, its initiator moved to another address (and port), shifted in time."""
    _, other = records(SEEDS[rng.randrange(MERGEABLE)], 300)
    if not other or not recs:
        return recs
    ip = (bytes([10, 77, 0, rng.choice([0, 1, 3, 200])]) if rng.random() < 0.7
          else bytes(rng.randrange(256) for _ in range(4)))
    port = rng.choice([None, 1, 65535, rng.randrange(65536)])
    shift = (recs[0][0] - other[0][0]) * 1000000 + recs[0][1] - other[0][1] + rng.randint(-100000, 2000000)
    out = []
    for s, f, p, o in other:
        p = bytearray(p)
        if len(p) >= 54:
            for off, port_off in ((26, 34), (30, 36)):
                if p[off:off + 4] == bytes([10, 77, 0, 1]):
                    p[off:off + 4] = ip
                    if port is not None:
                        p[port_off:port_off + 2] = port.to_bytes(2, "big")
        us = s * 1000000 + f + shift
        out.append([us // 1000000, us % 1000000, bytes(p), o])
    return [list(r) for r in sorted(recs + out, key=lambda r: (r[0], r[1]))]


def mutate(rng, recs):
    recs = [list(r) for r in recs]
    if rng.random() < 0.25:  # join mid-session
        recs = recs[rng.randint(1, min(150, len(recs) - 1)):]
    if rng.random() < 0.2:  # login and text keys
        for r in recs[:40]:
            p = bytearray(r[2])
            if len(p) > 110 and b"=" in p[102:] and rng.random() < 0.5:
                p[rng.randrange(102, len(p))] = rng.choice(
                    [0, ord("="), ord("0"), ord("9"), ord("x"), ord(","), rng.randrange(256)])
                r[2] = bytes(p)
    for _ in range(rng.choice([1, 3, 10, 30])):
        if not recs:
            break
        k = rng.randrange(len(recs))
        p = bytearray(recs[k][2])
        m = rng.randrange(10)
        if m == 0 and len(p) > 54:  # payload bytes, mostly where a BHS would be
            for _ in range(rng.randint(1, 4)):
                hi = len(p) if rng.random() < 0.3 else min(len(p), 54 + 52)
                p[rng.randrange(54, hi)] = rng.randrange(256)
        elif m == 1 and len(p) > 54:  # IP/TCP header, mostly seq, ack, flags, window
            at = rng.choice([38, 39, 40, 41, 42, 43, 44, 45, 47, 48, 49, rng.randrange(14, 54)])
            p[at] = (p[at] + rng.choice([1, -1, 16, 128, rng.randrange(256)])) % 256
        elif m == 2:
            del recs[k]
            continue
        elif m == 3:
            recs.insert(k, list(recs[k]))
        elif m == 4 and k + 1 < len(recs):
            recs[k], recs[k + 1] = recs[k + 1], recs[k]
        elif m == 5:  # snapped
            recs[k][3] = max(recs[k][3], len(p))
            p = p[:rng.randint(40, max(40, len(p)))]
        elif m == 6 and len(p) > 60:  # an opcode where data was
            p[rng.randrange(54, len(p))] = rng.choice([0x01, 0x05, 0x21, 0x25, 0x31, 0x43, 0x23, 0x04, 0x24])
        elif m == 7:  # re-timed
            recs[k][1] = (recs[k][1] + rng.randint(-200000, 200000)) % 1000000
        elif m == 8:
            del recs[k:k + rng.randint(1, 5)]
            continue
        elif m == 9:
            recs = merge(rng, recs)
            continue
        recs[k][2] = bytes(p)
    return recs


NO_BUDGET = ("--memory-budget", "0")


def same_without_budget(path):
    """Whether the Lua core gives what the CLI gives without its memory budget (the plugin has none):
    then the difference is the budget's (docs/cli.md `--memory-budget`), not the port's."""
    try:
        diff.compare(path, cli_args=NO_BUDGET)
        return True
    except BaseException as e:  # pytest's outcomes are BaseExceptions
        if isinstance(e, KeyboardInterrupt):
            raise
        return False


def budget_note(path):
    """Whether the CLI's memory budget (on by default; the Lua plugin has none) is what differs: the
    CLI without it gives other results than with it."""
    def analysis(*extra):
        rep = diff.cli_json(path, *extra)
        return rep["commands"], rep["findings"], rep["sessions"]
    differs = analysis() != analysis(*NO_BUDGET)
    return " (the CLI's memory budget: --memory-budget 0 differs)" if differs else ""


def main():
    count = int(sys.argv[1])
    first = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    keep = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(tempfile.gettempdir())
    failures = budget_only = 0
    for seed in range(first, first + count):
        rng = random.Random(seed)
        name = SEEDS[seed % len(SEEDS)]
        hdr, recs = records(name, 400)
        data = build(hdr, mutate(rng, recs))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"lua-diff-{seed}.pcap"
            path.write_bytes(data)
            try:
                diff.compare(path)
            except BaseException as e:  # pytest's fail and skip outcomes are BaseExceptions
                if "Skipped" in type(e).__name__:
                    continue
                if isinstance(e, KeyboardInterrupt):
                    raise
                if same_without_budget(path):
                    budget_only += 1
                    print(f"-- seed {seed} ({name}): equal to the CLI without its memory budget "
                          f"(--memory-budget 0); with it: {str(e).splitlines()[0][:200]}", flush=True)
                    continue
                failures += 1
                kept = keep / path.name
                kept.write_bytes(data)
                print(f"== seed {seed} ({name}): {kept}{budget_note(path)}\n{str(e)[:3000]}", flush=True)
    print(f"{count} captures from seed {first}: {failures} differ"
          + (f" ({budget_only} more only by the CLI's memory budget)" if budget_only else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
