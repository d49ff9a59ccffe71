# SPDX-License-Identifier: GPL-2.0-or-later
"""The documents against the software, so that they stay true (issue #31):

- every option of `iscsi-doctor --help` is in docs/cli.md's Options table, every option of each
  subcommand's --help (ladder, diff, probe: those cli/main.cpp dispatches) in that subcommand's
  section, and every option docs/cli.md's tables name exists in some --help;
- every JSON key `--format json` and `--format jsonl` write for the bundled captures
  (captures/fixtures, captures/wireshark-wiki, tests/corpus) is in docs/json-schema.md, and every
  key its tables name is written for at least one of them;
- every field `tshark -G fields` lists for the C plugin (`iscsi_doctor.`) is in
  dissector/README.md, and for the Lua plugin (`iscsi_doctor_lua.`) in lua/README.md;
- every relative link of every Markdown file resolves: the file exists, and a #fragment is a
  heading of it in GitHub's anchor style;
- every measured figure in the READMEs (a percentage, "N of M", an "Nx" ratio, or an amount of
  ms, s, kB, MB, MiB or GB) has, in its paragraph, list item or table or else in its section
  (heading to next heading), the path of a script or test of the repository that computes it.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("ISCSI_DOCTOR_ROOT", Path(__file__).resolve().parents[2]))
CLI = os.environ.get("ISCSI_DOCTOR", str(ROOT / "build" / "cli" / "iscsi-doctor"))
CLI_MD = ROOT / "docs" / "cli.md"
SCHEMA_MD = ROOT / "docs" / "json-schema.md"


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The plugin tests' own ways of running tshark: the C plugin from the build folder, the Lua
# plugin with -X lua_script, as nobody when root. Their fixtures are used as they are.
ws = _load("dissector_conftest", ROOT / "tests" / "dissector" / "conftest.py")
sys.path.insert(0, str(ROOT / "tests" / "lua"))
import lua_compare  # noqa: E402

ws_home, tshark = ws.ws_home, ws.tshark


def need_cli():
    if not Path(CLI).exists():
        pytest.skip(f"CLI not built: {CLI} (set ISCSI_DOCTOR)")


def run_cli(*args, ok=(0, 1, 2)):
    out = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert out.returncode in ok, f"iscsi-doctor {args}: exit {out.returncode}: {out.stderr[-2000:]}"
    return out.stdout


# ---- Markdown ------------------------------------------------------------------------------------

FENCE = re.compile(r"^(```|~~~)")


def md_lines(text):
    """(line, in a code block) for each line: fenced blocks, and indented ones (after a blank line
    or more code)."""
    out, fenced, prev_blank, indented = [], False, True, False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            code = True
        else:
            code = fenced or (line.startswith("    ") and (prev_blank or indented)
                              and not line.lstrip().startswith(("-", "|", "*")))
            indented = code and not fenced
            prev_blank = not line.strip()
        out.append((line, code))
    return out


HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def sections(text):
    """[(level, heading, body lines)] in order; the text before the first heading has level 0."""
    out = [(0, "", [])]
    for line, code in md_lines(text):
        m = None if code else HEADING.match(line)
        if m:
            out.append((len(m.group(1)), m.group(2), []))
        else:
            out[-1][2].append((line, code))
    return out


def with_subsections(secs, i):
    """Section i's body lines and those of its subsections (their headings as text lines)."""
    lines = list(secs[i][2])
    for level, head, body in secs[i + 1:]:
        if level <= secs[i][0]:
            break
        lines += [(head, False)] + body
    return lines


CELL_SPLIT = re.compile(r"(?<!\\)\|")


def tables(lines):
    """Tables in a list of (line, code) pairs: each a list of rows, each a list of cells (header
    first, the --- row dropped)."""
    out, cur = [], None
    for line, code in lines:
        s = line.strip()
        if not code and s.startswith("|"):
            cells = [c.strip().replace("\\|", "|") for c in CELL_SPLIT.split(s.strip("|"))]
            if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
                continue
            if cur is None:
                cur = []
                out.append(cur)
            cur.append(cells)
        else:
            cur = None
    return out


def code_spans(text):
    return re.findall(r"`([^`]+)`", text)


# ---- 1. options ------------------------------------------------------------------------------------

def help_options(*sub):
    """The options of an --help output as (short name or "", long name) (positionals left out)."""
    text = run_cli(*sub, "--help", ok=(0,))
    opts = set()
    in_pos = False
    for line in text.splitlines():
        if line.startswith("Positionals:"):
            in_pos = True
        elif re.match(r"^\S.*:$", line):
            in_pos = False
        m = re.match(r"^  (-\w,)?(--[\w-]+)", line)
        if m and not in_pos:
            opts.add(((m.group(1) or "").rstrip(","), m.group(2)))
    assert opts, f"no option found in iscsi-doctor {' '.join(sub)} --help"
    return opts


def subcommands():
    """The subcommands `iscsi-doctor --help` lists (CLI11's "Subcommands:" section)."""
    need_cli()
    out = subprocess.run([str(CLI), "--help"], capture_output=True, text=True, check=True).stdout
    assert "\nSubcommands:\n" in out, "iscsi-doctor --help lists no subcommand"
    block = out.split("\nSubcommands:\n", 1)[1].split("\n\n", 1)[0]
    subs = re.findall(r"^  (\w+) ", block, re.M)
    assert subs, "no subcommand found in iscsi-doctor --help"
    return subs


def mentions(text, opt):
    return re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", text) is not None


def options_table():
    secs = sections(CLI_MD.read_text())
    i = next((i for i, (_, head, _) in enumerate(secs) if head == "Options"), None)
    assert i is not None, "docs/cli.md has no Options section"
    rows = [r for t in tables(with_subsections(secs, i)) for r in t[1:]]
    assert rows, "docs/cli.md has no Options table"
    return rows


def options_named(cell):
    """The options a table cell names in code: `-c, --count N` gives -c and --count (but
    `mergecap -a`, another tool's, none)."""
    return [o for span in code_spans(cell) if span.startswith("-")
            for o in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", span)]


def test_every_option_of_the_help_in_cli_md():
    need_cli()
    table = "\n".join(r[0] for r in options_table())
    missing = [f"iscsi-doctor {o}" for pair in help_options() for o in pair
               if o and o != "-h" and not mentions(table, o)]
    secs = sections(CLI_MD.read_text())
    for sub in subcommands():
        # The subcommand's section: the one its heading names, else the one naming it most.
        tag = f"iscsi-doctor {sub}"
        named = [i for i, (_, head, _) in enumerate(secs) if tag in head]
        i = named[0] if named else max(range(len(secs)), key=lambda i: "\n".join(
            l for l, _ in with_subsections(secs, i)).count(tag))
        body = "\n".join([secs[i][1]] + [l for l, _ in with_subsections(secs, i)])
        assert tag in body, f"docs/cli.md has no section about {tag}"
        # In prose one name of an option is enough (`-o FILE`); the Options table gives both.
        missing += [f"{tag} {l} (section '{secs[i][1]}')" for s, l in help_options(sub)
                    if l != "--help" and not any(o and mentions(body, o) for o in (s, l))]
    assert not missing, "options of --help not in docs/cli.md: " + ", ".join(missing)


def test_every_option_cli_md_tables_name_exists():
    need_cli()
    main = {o for pair in help_options() for o in pair if o}
    every = set(main)
    for sub in subcommands():
        every |= {o for pair in help_options(sub) for o in pair if o}
    options = options_table()
    wrong = [f"Options table: {o}" for row in options for o in options_named(row[0]) if o not in main]
    wrong += [f"'{t[0][0]}' table: {o}" for t in tables(md_lines(CLI_MD.read_text())) if t[1:] != options
              for row in t[1:] for o in options_named(row[0]) if o not in every]
    assert not wrong, "options docs/cli.md names that no --help has: " + ", ".join(sorted(set(wrong)))


# ---- 2. JSON keys ----------------------------------------------------------------------------------

CAPTURES = (sorted((ROOT / "captures" / "fixtures").glob("*.pcap*"))
            + sorted((ROOT / "captures" / "wireshark-wiki").glob("*.pcap*"))
            + sorted((ROOT / "tests" / "corpus").glob("*.pcap*")))
NAGLE = ROOT / "captures" / "fixtures" / "scripted-nagle-read-1k--initiator.pcap.gz"
IDENT = r"[A-Za-z]\w*(?:\((?:initiator|target)\))?"


def key_paths(value, prefix, out):
    """Every key path under value: `a.b`, with `[]` after an array's name (`commands[].itt`)."""
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{prefix}.{k}" if prefix else k
            out.add(p)
            key_paths(v, p, out)
    elif isinstance(value, list):
        for v in value:
            key_paths(v, prefix + "[]", out)
    return out


@pytest.fixture(scope="module")
def written():
    """(key paths of --format json, key paths of each --format jsonl record type)."""
    need_cli()
    assert len(CAPTURES) > 100
    js = set()
    # The bundled captures; a command filter, for captures[].filter's members; a gate.
    for args in ([*CAPTURES], ["--op", "read", "--lun", "1", NAGLE],
                 ["--fail-on", "nagle_hold", "--max-excess-round-trips", "0", NAGLE]):
        key_paths(json.loads(run_cli("-q", "--format", "json", *args)), "", js)
    jl = set()
    for args in ([*CAPTURES], ["--interval", "0.5", NAGLE]):
        for line in run_cli("-q", "--format", "jsonl", *args).splitlines():
            rec = json.loads(line)
            key_paths(rec, rec["type"], jl)
    return js, jl


def schema_doc():
    """docs/json-schema.md as {row path: meaning text}, with object rows' type, the finding kinds
    of its Conventions, and the JSON Lines table as {record type: members text}."""
    text = SCHEMA_MD.read_text()
    rows, types, jsonl = {}, {}, {}
    kinds = None
    for level, head, body in sections(text):
        if "jsonl" in head:
            intro = " ".join(l for l, c in body if not l.startswith("|"))
            for t in tables(body):
                for row in t[1:]:
                    jsonl[code_spans(row[0])[0]] = row[2] + " " + intro
            continue
        if head == "Top level":
            prefix = ""
        elif re.fullmatch(r"`[\w\[\]]+`", head):
            prefix = head.strip("`")
        else:
            m = re.search(r"Finding kinds: (.*?)\(", " ".join(l for l, _ in body))
            if m:
                kinds = set(code_spans(m.group(1)))
            continue
        for t in tables(body):
            assert [c.lower() for c in t[0]] == ["key", "type", "meaning"], t[0]
            for key_cell, typ, meaning in t[1:]:
                for k in code_spans(key_cell):
                    p = f"{prefix}.{k}" if prefix else k
                    rows[p], types[p] = meaning, typ
    assert rows and jsonl and kinds, "docs/json-schema.md: tables or finding kinds not found"
    return rows, types, jsonl, kinds


# Maps keyed by data, not by a fixed name: their keys are finding kinds (the document says "kind
# → number"), checked against the Conventions' list of kinds instead of a table.
KIND_MAPS = {"summary.finding_counts", "interval.findings"}
# captures[].summary has "the same keys as the top-level summary": documented once, there.
ALIAS = ("captures[].summary.", "summary.")


def normal(path):
    """The path as the document names it: captures[].summary as summary, no trailing []."""
    path = path.removesuffix("[]")
    if path == ALIAS[0][:-1]:
        return ALIAS[1][:-1]
    return ALIAS[1] + path[len(ALIAS[0]):] if path.startswith(ALIAS[0]) else path


def parts(path):
    return [p.removesuffix("[]") for p in path.split(".")]


def names_in(row, rows):
    """The names a row's meaning gives; "the same figures as `luns`" gives those of `luns` too."""
    names = set(code_spans(rows[row]))
    if re.search(r"\bsame (?:figures|keys)\b", rows[row]):
        parent = row.rsplit(".", 1)[0] + "." if "." in row else ""
        for n in list(names):
            if parent + n in rows and parent + n != row:
                names |= set(code_spans(rows[parent + n]))
    return names


def documented(path, rows, kinds):
    """Whether a written key path is in the schema: a row of its own, or a name in the meaning of
    its nearest ancestor row (each level below that row named there)."""
    path = normal(path)
    if path in rows:
        return True
    comps = path.split(".")
    for i in range(len(comps) - 1, 0, -1):
        anc = normal(".".join(comps[:i]))
        rest = parts(".".join(comps[i:]))
        if anc in KIND_MAPS:
            return all(c in kinds for c in rest)
        if anc not in rows:
            continue
        names = names_in(anc, rows)
        if all(c in names for c in rest):
            return True
        # A member named here whose members a row of the same name gives: a connection's `keys`
        # and `mss` are as the session's (sessions[].keys).
        same = [r for r in rows if r.rsplit(".", 1)[-1] == rest[0] and r != f"{anc}.{rest[0]}"]
        return rest[0] in names and any(all(c in names_in(r, rows) for c in rest[1:]) for r in same)
    return False


def test_every_json_key_written_is_documented(written):
    js, _ = written
    rows, _, _, kinds = schema_doc()
    missing = sorted(p for p in js if not documented(p, rows, kinds))
    assert not missing, "keys written by --format json, not in docs/json-schema.md: " + ", ".join(missing)


def test_every_jsonl_key_written_is_documented(written):
    _, jl = written
    rows, _, jsonl, kinds = schema_doc()
    missing = []
    for path in sorted(jl):
        rtype, _, rest = path.partition(".")
        if not rest:
            continue
        members = jsonl.get(rtype)
        if members is None:
            missing.append(f"record type {rtype}")
            continue
        names = set(code_spans(members))
        # "every member of a `commands[]` element": the record is that element, plus its own.
        elements = [s for s in names if s.endswith("[]")]
        comps = rest.split(".")
        if f"{rtype}.{comps[0]}" in KIND_MAPS:
            ok = comps[0] in names and all(c in kinds for c in parts(".".join(comps[1:])) if c)
        elif all(c in names for c in parts(rest)):
            ok = True
        else:
            # Members that are the JSON document's own: an element's, or the top level's
            # (`tool`, `summary`, and `gate`, which the document has under `summary`).
            ok = any(documented(f"{e}.{rest}", rows, kinds) for e in elements) or (
                comps[0] in names and (documented(rest, rows, kinds)
                                       or documented(f"summary.{rest}", rows, kinds)))
        if not ok:
            missing.append(path)
    assert not missing, "keys written by --format jsonl, not in docs/json-schema.md: " + ", ".join(missing)


def test_every_documented_json_key_is_written(written):
    js, jl = written
    rows, types, jsonl, kinds = schema_doc()
    have = {normal(p) for p in js}
    below = {"": set()}  # row path -> every name written below it
    for p in have:
        comps = parts(p)
        below[""].update(comps)
        for i in range(1, len(comps)):
            below.setdefault(".".join(comps[:i]), set()).update(comps[i:])
    never = [p for p in rows if normal(p) not in have]
    # The names an object's meaning gives are keys written below it; or, cross-references, keys
    # below its parent (`luns` in the meaning of `classes`) or its own path's names; or the finding
    # kinds, which are values.
    # Other values are written quoted (`"handshake"`), so they are not taken for names.
    for p, meaning in rows.items():
        if normal(p) in KIND_MAPS or not ("object" in types[p] or types[p] == "array"):
            continue
        comps = parts(normal(p))
        known = (below.get(".".join(comps), set()) | below.get(".".join(comps[:-1]), set()) | kinds
                 | set(comps))
        for name in code_spans(meaning):
            if re.fullmatch(IDENT, name) and name not in known:
                never.append(f"{p}: {name}")
    jl_below = {}
    for p in jl:
        rtype, _, rest = p.partition(".")
        jl_below.setdefault(rtype, set()).update(parts(rest) if rest else ())
    for rtype, members in jsonl.items():
        if rtype not in jl_below:
            never.append(f"jsonl record {rtype}")
            continue
        for name in code_spans(members):
            if re.fullmatch(IDENT, name) and name not in jl_below[rtype]:
                never.append(f"jsonl {rtype}: {name}")
    assert not never, ("keys docs/json-schema.md names, written for none of the bundled captures: "
                       + ", ".join(sorted(never)))


# ---- 3. plugin fields ------------------------------------------------------------------------------

def registered(out, prefix):
    names = {row.split("\t")[2] for row in out.splitlines() if row.startswith("F\t")}
    return {n for n in names if n.startswith(prefix)}


def readme_fields(path, prefix, kinds):
    """Field names a README gives, `a.{b,c}_ms` and `a.<kind>` expanded."""
    names = set()
    for span in code_spans(path.read_text()):
        if not span.startswith(prefix):
            continue
        todo = [span]
        while todo:
            s = todo.pop()
            m = re.search(r"\{([^{}]*)\}", s)
            if m:
                todo += [s[:m.start()] + alt + s[m.end():] for alt in m.group(1).split(",")]
            elif "<kind>" in s:
                todo += [s.replace("<kind>", k) for k in kinds]
            else:
                names.add(s)
    return names


def test_c_plugin_fields_documented(tshark):
    fields = registered(tshark("-G", "fields").stdout, "iscsi_doctor.")
    assert len(fields) > 30
    kinds = schema_doc()[3]
    doc = readme_fields(ROOT / "dissector" / "README.md", "iscsi_doctor.", kinds)
    missing = sorted(fields - doc)
    assert not missing, "C plugin fields not in dissector/README.md: " + ", ".join(missing)


def test_lua_plugin_fields_documented():
    if not lua_compare.shutil.which(lua_compare.TSHARK):
        pytest.skip("tshark not installed")
    out = lua_compare.run_tshark(["-G", "fields", "-X", f"lua_script:{lua_compare.PLUGIN}"])
    assert out.returncode == 0, out.stderr[-2000:]
    fields = registered(out.stdout, "iscsi_doctor_lua.")
    assert len(fields) > 30, out.stderr[-2000:]
    kinds = schema_doc()[3]
    doc = readme_fields(ROOT / "lua" / "README.md", "iscsi_doctor_lua.", kinds)
    missing = sorted(fields - doc)
    assert not missing, "Lua plugin fields not in lua/README.md: " + ", ".join(missing)


# ---- 4. links --------------------------------------------------------------------------------------

def markdown_files():
    out = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True)
    files = [ROOT / f for f in out.stdout.split()] if out.returncode == 0 else []
    return files or sorted(p for p in ROOT.rglob("*.md") if "build" not in p.relative_to(ROOT).parts)


def slug(heading):
    """GitHub's anchor of a heading: its text lowercased, code marks and punctuation other than
    - and _ dropped, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for level, head, _ in sections(path.read_text())[1:]:
        s = slug(head)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    out |= set(re.findall(r'<a (?:name|id)="([^"]+)"', path.read_text()))
    return out


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_relative_links_resolve():
    bad = []
    for md in markdown_files():
        # Code blocks and code spans blanked (same length, so offsets keep their line); a link's
        # text may wrap.
        text = "\n".join("" if code else line for line, code in md_lines(md.read_text()))
        text = re.sub(r"`[^`]*`", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z][\w+.-]*:", target):  # http:, https:, mailto:
                continue
            file, _, frag = target.partition("#")
            dest = (md.parent / file).resolve() if file else md
            where = f"{md.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {target}"
            if not dest.exists():
                bad.append(f"{where} (no such file)")
            elif frag and dest.suffix == ".md" and frag not in anchors(dest):
                bad.append(f"{where} (no such heading)")
    assert not bad, "links that do not resolve:\n" + "\n".join(bad)


# ---- 5. figures name what computes them -----------------------------------------------------------

READMES = [ROOT / "README.md", ROOT / "captures" / "README.md", ROOT / "dissector" / "README.md",
           ROOT / "lua" / "README.md"]
NUM = r"\d[\d,]*(?:\.\d+)?"
FIGURE = re.compile(
    rf"{NUM}\s?%"                                   # a percentage
    rf"|\b{NUM} of (?:the )?{NUM}\b"                 # N of M
    rf"|\b{NUM}(?:\s?[-–]\s?{NUM})?[x×](?![\w])"  # a ratio: 41x, 1.7-1.8×
    rf"|\b{NUM}(?:\s?[-–]\s?{NUM})?\s?(?:ms|s|kB|MB|MiB|GB)\b")  # a time or an amount measured
# Where the scripts and tests are: a path there, to a file or a test folder that exists, names
# what computes a figure.
SCRIPT_PATH = re.compile(r"(?<![\w/.-])((?:tests|bench|scripts|scale|captures/lab|lab)/[\w./-]*[\w/])")


def blocks(lines):
    """Paragraphs, list items and tables of a section body (code blocks left out): lists of lines."""
    out, cur, table = [], [], False
    for line, code in lines:
        s = line.strip()
        if code or not s:
            cur = []
            continue
        is_table = s.startswith("|")
        if not cur or is_table != table or re.match(r"^([-*]|\d+\.)\s", s):
            cur = [line]
            out.append(cur)
            table = is_table
        else:
            cur.append(line)
    return out


def names_script(text, md):
    for m in SCRIPT_PATH.finditer(text):
        p = m.group(1).split("::")[0].rstrip("/.")
        for base in (ROOT, md.parent):
            f = base / p
            if f.is_file() or (f.is_dir() and f.resolve().is_relative_to(ROOT / "tests")):
                return True
    return False


def test_readme_figures_name_what_computes_them():
    bad = []
    for md in READMES:
        for _, head, body in sections(md.read_text()):
            named = names_script(head + "\n" + "\n".join(l for l, c in body if not c), md)
            for block in blocks(body):
                text = "\n".join(block)
                if named or names_script(text, md):
                    continue
                figures = FIGURE.findall(re.sub(r"`[^`]*`", "", text))  # not in code: commands, paths
                if figures:
                    bad.append(f"{md.relative_to(ROOT)} [{head or 'top'}]: {', '.join(figures[:4])}: "
                               f"{text.strip()[:100]}...")
    assert not bad, ("figures without the script or test that computes them (name its path in the "
                     "paragraph, list item or table, or in its section):\n" + "\n".join(bad))
