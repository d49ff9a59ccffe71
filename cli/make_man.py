#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Writes the man page iscsi-doctor(1) from the two texts that already say everything: the
program's --help (and its subcommands') and docs/cli.md, converted by pandoc, so the page is never
written twice. Usage: make_man.py BINARY docs/cli.md VERSION OUT.1"""
import subprocess
import sys


def main():
    binary, cli_md, version, out = sys.argv[1:5]
    helps = []
    for sub in ([], ["ladder"], ["diff"], ["probe"]):
        text = subprocess.run([binary, *sub, "--help"], capture_output=True, text=True, check=True).stdout
        title = " ".join(["iscsi-doctor", *sub])
        helps.append(f"## {title}\n\n```\n{text.rstrip()}\n```\n")
    body = open(cli_md, encoding="utf-8").read()
    # docs/cli.md's own title and licence comment: the man page has its NAME section instead
    lines = [ln for ln in body.splitlines() if not ln.startswith("<!--")]
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    doc = (f"% ISCSI-DOCTOR(1) iscsi-doctor {version} | iscsi-doctor manual\n\n"
           "# NAME\n\niscsi-doctor - explains, per SCSI command in an iSCSI capture, why it was slow\n\n"
           "# SYNOPSIS\n\n**iscsi-doctor** [*options*] *CAPTURE*...\\\n"
           "**iscsi-doctor ladder** \\--itt *ITT* *CAPTURE* [-o *FILE*]\\\n"
           "**iscsi-doctor diff** *BEFORE* *AFTER*\\\n"
           "**iscsi-doctor probe** iscsi://*HOST*/*IQN*/*LUN* [*options*]\n\n"
           "# OPTIONS (from \\--help)\n\n" + "\n".join(helps) +
           "\n# DESCRIPTION (docs/cli.md)\n\n" + "\n".join(lines).replace("\n## ", "\n# ").replace("\n### ", "\n## ") + "\n")
    roff = subprocess.run(["pandoc", "-s", "-f", "markdown-smart", "-t", "man"], input=doc, capture_output=True,
                          text=True, check=True).stdout
    with open(out, "w", encoding="utf-8") as f:
        f.write(roff)


if __name__ == "__main__":
    main()
