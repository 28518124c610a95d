#!/usr/bin/python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""docs/architecture.md's "may use" table, checked against the includes under src/.

Reads the table under "## Who may use whom", collects every `#include "src/<folder>/..."` from
one src/ folder into another, and prints each edge the table does not allow as

    src/coord/orders.h:34: src/coord -> src/runbook (incident.h) not allowed by docs/architecture.md

A row's entry is a module name, optionally followed by a parenthesis. When the parenthesis names
headers ("runbook (ledger.h, preempt.h)"), only those headers of that module may be included;
otherwise it is a remark ("common (contract also `include/`)"). "—" allows nothing, "all"
everything. Exit status: 0 when every edge is allowed, 1 when one is not, 2 when the table cannot
be read (a missing table must never read as "nothing is wrong").

Usage: check_includes.py [--root DIR]   (DIR holds src/ and docs/architecture.md; default: the
repository this file is in)
"""

import argparse
import os
import re
import sys

DOC = "docs/architecture.md"
HEADING = "## Who may use whom"
SOURCE_SUFFIXES = (".h", ".hpp", ".c", ".cc", ".cpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*"src/([A-Za-z0-9_]+)/([^"]+)"')
# One entry of a "may use" cell: a name and an optional parenthesis (which may hold commas).
ENTRY = re.compile(r"\s*([A-Za-z0-9_]+)\s*(?:\(([^)]*)\))?\s*(?:,|$)")
HEADER = re.compile(r"[A-Za-z0-9_/]+\.(?:h|hpp)\b")


class TableError(Exception):
    pass


def strip_code(text):
    return text.replace("`", "").strip()


def parse_uses(cell, where):
    """A "may use" cell: None for "all", else {module: set of headers, or None for any}."""
    cell = strip_code(cell)
    if cell == "all":
        return None
    if cell in ("—", "-", ""):
        return {}
    uses = {}
    pos = 0
    while pos < len(cell):
        m = ENTRY.match(cell, pos)
        if not m or m.end() == pos:
            raise TableError(f"{where}: cannot read the entry at {cell[pos:]!r}")
        name, remark = m.group(1), m.group(2)
        headers = set(HEADER.findall(remark)) if remark else set()
        if name in uses and uses[name] is not None and headers:
            uses[name] |= headers
        else:
            uses[name] = headers or None
        pos = m.end()
    return uses


def read_table(doc_path):
    """{module: uses} from the table under HEADING; raises TableError when there is none."""
    try:
        with open(doc_path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise TableError(f"{doc_path}: {e.strerror}")
    try:
        start = lines.index(HEADING)
    except ValueError:
        raise TableError(f"{doc_path}: no {HEADING!r} section")
    table = {}
    in_table = False
    for no, line in enumerate(lines[start + 1 :], start + 2):
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            if in_table:
                break
            continue
        in_table = True
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2:
            raise TableError(f"{doc_path}:{no}: a row must have two cells, got {len(cells)}")
        if cells[0] == "module" or set(cells[0]) <= set("-: "):
            continue  # the heading row and its rule
        uses = parse_uses(cells[1], f"{doc_path}:{no}")
        for module in strip_code(cells[0]).split(","):
            table[module.strip()] = uses
    if not table:
        raise TableError(f"{doc_path}: the {HEADING!r} section has no table")
    return table


def edges(root):
    """(file, line, from_module, to_module, header) for every include between src/ folders."""
    src = os.path.join(root, "src")
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            module = rel.split(os.sep)[1]
            with open(path, encoding="utf-8", errors="replace") as f:
                for no, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m and m.group(1) != module:
                        yield rel, no, module, m.group(1), m.group(2)


def check(root):
    """The problems (lines to print); raises TableError."""
    table = read_table(os.path.join(root, DOC))
    problems = []
    for rel, no, src_module, dst_module, header in edges(root):
        if src_module not in table:
            problems.append(f"{rel}:{no}: src/{src_module} has no row in {DOC}")
            continue
        uses = table[src_module]
        if uses is None:
            continue
        allowed = dst_module in uses and (uses[dst_module] is None or header in uses[dst_module])
        if not allowed:
            problems.append(
                f"{rel}:{no}: src/{src_module} -> src/{dst_module} ({header}) not allowed by {DOC}"
            )
    return problems


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(here)))
    args = parser.parse_args()
    try:
        problems = check(args.root)
    except TableError as e:
        print(f"check_includes: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) not allowed by {DOC}'s \"may use\" table", file=sys.stderr)
        return 1
    print(f"every include between src/ folders is allowed by {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
