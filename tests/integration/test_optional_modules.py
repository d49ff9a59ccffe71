# SPDX-License-Identifier: GPL-2.0-or-later
"""The libraries a run loads only when it needs them (cli/input/optional_module.hpp): libwiretap
(files libpcap cannot read), libtins (link types the fast decoder does not know, --decoder
libtins) and libiscsi (`probe`), each behind a module next to the binary.

- a pcap run loads none of them, nor what they pull in (the dynamic loader's own list, LD_DEBUG);
- each is loaded by what needs it: a snoop file (made by editcap) libwiretap, --decoder libtins
  libtins, `probe` libiscsi;
- the binary alone, without its modules, still reads what libpcap reads, with the same report,
  and says which part is missing where one is needed (the snoop file, --decoder libtins, probe);
- ISCSI_DOCTOR_MODULE_DIR, and the installed layout (bin/ and lib/iscsi-doctor/, DESTDIR), find them;
- without /proc the binary still finds its own, and never loads one from the working directory.
"""
import gzip
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
BIN = Path(os.environ.get("ISCSI_DOCTOR", ROOT / "build" / "cli" / "iscsi-doctor")).resolve()
FIXTURE = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"
# What each module's library pulls in that nothing else does (libtins: OpenSSL's libcrypto;
# libwiretap: glib and gnutls; libiscsi: librdmacm).
PULLED = {"wiretap": ("libwiretap", "libglib-2.0", "libgnutls"), "tins": ("libtins", "libcrypto"),
          "libiscsi": ("libiscsi", "librdmacm")}


def loaded(stderr):
    """The libraries the dynamic loader loaded, by file name (LD_DEBUG=files)."""
    return {Path(m).name for m in re.findall(r"file=(\S+) \[", stderr)}


def run(binary, *args, env=None, check=True):
    e = dict(os.environ, LD_DEBUG="files", **(env or {}))
    p = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=120, env=e)
    if check:
        assert p.returncode == 0, p.stderr[-2000:]
    return p


def json_of(p):
    return json.loads(p.stdout)


def pulled(libs, module):
    return [n for n in libs if n.startswith(PULLED[module])]


@pytest.fixture(scope="module")
def pcap(tmp_path_factory):
    path = tmp_path_factory.mktemp("pcap") / "capture.pcap"
    path.write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    return path


@pytest.fixture(scope="module")
def snoop(pcap):
    if not shutil.which("editcap"):
        pytest.fail("editcap is required (it writes the snoop file that only wiretap reads)")
    path = pcap.parent / "capture.snoop"
    subprocess.run(["editcap", "-F", "snoop", str(pcap), str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """The binary copied into a folder of its own, without its modules."""
    path = tmp_path_factory.mktemp("alone") / "iscsi-doctor"
    shutil.copy2(BIN, path)
    return path


def test_a_pcap_run_loads_none_of_them(pcap):
    for args in (["--format", "json", pcap], ["--version"]):
        libs = loaded(run(BIN, *args).stderr)
        assert "libpcap.so.0.8" in libs  # the check sees what the loader loads
        for module in PULLED:
            assert pulled(libs, module) == [], (args, module)


def test_each_is_loaded_by_what_needs_it(pcap, snoop):
    want = json_of(run(BIN, "--format", "json", pcap))["commands"]
    assert len(want) > 10
    p = run(BIN, "--format", "json", snoop)
    assert json_of(p)["captures"][0]["reader"] == "wiretap"
    assert pulled(loaded(p.stderr), "wiretap") and not pulled(loaded(p.stderr), "tins")
    assert [c["itt"] for c in json_of(p)["commands"]] == [c["itt"] for c in want]

    p = run(BIN, "--format", "json", "--decoder", "libtins", pcap)
    assert json_of(p)["captures"][0]["decoder"] == "libtins"
    assert pulled(loaded(p.stderr), "tins") and not pulled(loaded(p.stderr), "wiretap")
    assert json_of(p)["commands"] == want

    # probe loads libiscsi before anything else can fail (nothing listens on port 1)
    p = run(BIN, "probe", "-q", "iscsi://127.0.0.1:1/iqn.2026-11.org.example:none/0", check=False)
    assert p.returncode == 2
    assert pulled(loaded(p.stderr), "libiscsi")
    assert "libiscsi not available" not in p.stderr


def test_without_its_modules_the_rest_works_and_says_what_is_missing(pcap, snoop, alone):
    want = run(BIN, "--format", "json", pcap).stdout
    got = run(alone, "--format", "json", pcap)
    assert json.loads(got.stdout) == json.loads(want)

    p = run(alone, "--format", "json", snoop, check=False)
    assert p.returncode != 0
    assert "libwiretap not available: iscsi-doctor-wiretap.so not found" in p.stderr
    assert f"{snoop}" in p.stderr and not pulled(loaded(p.stderr), "wiretap")

    p = run(alone, "--format", "json", "--decoder", "libtins", pcap)
    assert "libtins not available: iscsi-doctor-tins.so not found" in p.stderr
    assert json_of(p)["captures"][0]["decoder"] == "fast"  # the other decoder stands in
    assert json_of(p)["commands"] == json.loads(want)["commands"]

    p = run(alone, "probe", "iscsi://127.0.0.1:1/iqn.2026-11.org.example:none/0", check=False)
    assert p.returncode == 2
    assert "libiscsi not available: iscsi-doctor-libiscsi.so not found" in p.stderr


def test_the_module_dir_and_the_installed_layout_find_them(snoop, alone, tmp_path):
    p = run(alone, "--format", "json", snoop, env={"ISCSI_DOCTOR_MODULE_DIR": str(BIN.parent)})
    assert json_of(p)["captures"][0]["reader"] == "wiretap"

    build = BIN.parent.parent
    # The cli component alone: a build of only the binary's targets (the sanitizer run's) has no man page.
    subprocess.run(["cmake", "--install", str(build), "--component", "cli"], check=True, capture_output=True, timeout=300,
                   env=dict(os.environ, DESTDIR=str(tmp_path)))
    installed = [b for b in tmp_path.rglob("bin/iscsi-doctor")]
    assert len(installed) == 1
    modules = sorted(m.name for m in tmp_path.rglob("iscsi-doctor/iscsi-doctor-*.so"))
    assert modules == ["iscsi-doctor-libiscsi.so", "iscsi-doctor-tins.so", "iscsi-doctor-wiretap.so"]
    p = run(installed[0], "--format", "json", snoop)
    assert json_of(p)["captures"][0]["reader"] == "wiretap"


def test_without_proc_the_binary_still_finds_its_own_and_never_the_working_directorys(pcap, alone, tmp_path):
    # No /proc (a chroot without it): the path the binary was started by names its folder. A
    # module in the working directory is never loaded (a module is code): here one that cannot load.
    (tmp_path / "iscsi-doctor-tins.so").write_bytes(b"not a module")
    if b"AddressSanitizer" in BIN.read_bytes():
        pytest.skip("the sanitizer build: ASan's own runtime cannot run without /proc (the plain build runs this)")
    script = 'mount -t tmpfs none /proc && exec "$@"'
    for binary, decoder in ((BIN, "libtins"), (alone, "fast")):
        p = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", str(binary), "--format", "json",
                            "--decoder", "libtins", str(pcap)], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-2000:]
        assert json.loads(p.stdout)["captures"][0]["decoder"] == decoder
        assert str(tmp_path) not in p.stderr
