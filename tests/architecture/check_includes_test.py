#!/usr/bin/python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""check_includes.py against small fixture trees: it passes a tree the table allows, and fails
one with a forbidden edge, naming file:line (so the architecture test can fail)."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_includes.py")

TABLE = textwrap.dedent(
    """\
    # How it is built

    ## Who may use whom

    | module | may use |
    | --- | --- |
    | base | — |
    | mid, side | base (side also `include/`) |
    | top | base, mid (`api.h`, `types.h`) |
    | app | all |

    ## Next section
    """
)


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class CheckIncludesTest(unittest.TestCase):
    def tree(self, files, table=TABLE):
        root = tempfile.mkdtemp(prefix="sw-arch-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", root], check=False))
        if table is not None:
            write(root, "docs/architecture.md", table)
        for rel, text in files.items():
            write(root, rel, text)
        return root

    def run_checker(self, root):
        return subprocess.run(
            [sys.executable, CHECKER, "--root", root], capture_output=True, text=True, check=False
        )

    def test_allowed_tree_passes(self):
        root = self.tree(
            {
                "src/base/a.h": "#pragma once\n",
                "src/mid/api.h": '#include "src/base/a.h"\n',
                "src/mid/types.h": "#pragma once\n",
                "src/top/t.cpp": '#include "src/top/t.h"\n#include "src/mid/api.h"\n'
                '#include "src/mid/types.h"\n#include "src/base/a.h"\n',
                "src/app/main.cpp": '#include "src/top/t.h"\n#include "src/mid/impl.h"\n',
            }
        )
        r = self.run_checker(root)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_forbidden_edge_fails_and_names_file_and_line(self):
        root = self.tree(
            {
                "src/base/a.h": "#pragma once\n",
                "src/mid/m.cpp": '// a comment\n#include <vector>\n\n#include "src/top/t.h"\n',
            }
        )
        r = self.run_checker(root)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(
            "src/mid/m.cpp:4: src/mid -> src/top (t.h) not allowed by docs/architecture.md",
            r.stdout,
        )
        self.assertEqual(len(r.stdout.splitlines()), 1, r.stdout)

    def test_qualified_entry_allows_only_its_headers(self):
        root = self.tree({"src/top/t.h": '#pragma once\n#include "src/mid/impl.h"\n'})
        r = self.run_checker(root)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("src/top/t.h:2: src/top -> src/mid (impl.h) not allowed", r.stdout)

    def test_nothing_allowed_for_a_dash(self):
        root = self.tree({"src/base/b.cpp": '#include "src/mid/api.h"\n'})
        r = self.run_checker(root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("src/base/b.cpp:1: src/base -> src/mid (api.h)", r.stdout)

    def test_a_folder_without_a_row_fails(self):
        root = self.tree({"src/extra/e.cpp": '#include "src/base/a.h"\n'})
        r = self.run_checker(root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("src/extra/e.cpp:1: src/extra has no row in docs/architecture.md", r.stdout)

    def test_a_missing_table_is_an_error_not_a_pass(self):
        root = self.tree({"src/base/a.h": "#pragma once\n"}, table="# No table here\n")
        r = self.run_checker(root)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("Who may use whom", r.stderr)


if __name__ == "__main__":
    unittest.main()
