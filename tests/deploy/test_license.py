# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""The license, as a platform team checks it before a rollout: LICENSE is the Apache License 2.0,
every source file says so in an SPDX header, Debian's copyright file is DEP-5 with the same
license, and the Python package's metadata names it. (The .deb and `make install` are checked by
tests/package/deb_test.sh and tests/install/install_test.sh.)
Run: cd tests/deploy && STEPWATCH_SOURCE_DIR=../.. /usr/bin/python3 -m unittest -v test_license
"""

import os
import re
import subprocess
import tomllib
import unittest

SRC = os.environ.get("STEPWATCH_SOURCE_DIR",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SPDX = "SPDX-License-Identifier: Apache-2.0"
# Source files: code, build files and scripts. Test data, docs and configuration examples are not.
SOURCE = re.compile(r"(\.(cpp|h|hpp|c|py|sh|cmake|in)|(^|/)CMakeLists\.txt|^Makefile)$")


def source_files():
    """The tracked files (git ls-files) when this is a checkout, else every file under the tree."""
    try:
        out = subprocess.run(["git", "-C", SRC, "ls-files"], capture_output=True, text=True, check=True,
                             timeout=30).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        out = [os.path.relpath(os.path.join(d, f), SRC) for d, _, fs in os.walk(SRC)
               if "/build" not in d and "/.git" not in d for f in fs]
    return sorted(f for f in out if SOURCE.search(f) and not f.startswith("tests/probe/data/"))


class License(unittest.TestCase):
    def test_the_license_file_is_apache_2_0(self):
        with open(os.path.join(SRC, "LICENSE")) as f:
            text = f.read()
        self.assertIn("Apache License\n                           Version 2.0, January 2004", text)
        self.assertIn("END OF TERMS AND CONDITIONS", text)  # the whole text, not a stub

    def test_every_source_file_carries_the_spdx_header(self):
        files = source_files()
        self.assertGreater(len(files), 400, "the tree was not found")
        missing = []
        for f in files:
            with open(os.path.join(SRC, f), errors="replace") as fh:
                head = "".join(fh.readline() for _ in range(4))
            if SPDX not in head:
                missing.append(f)
        self.assertEqual(missing, [], f"no `{SPDX}` in the first lines")

    def test_debian_copyright_is_dep5_with_the_same_license(self):
        with open(os.path.join(SRC, "deploy", "debian", "copyright")) as f:
            text = f.read()
        paragraphs = [p for p in text.split("\n\n") if p.strip()]
        self.assertTrue(paragraphs[0].startswith(
            "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"))
        files = [p for p in paragraphs if p.startswith("Files: *")]
        self.assertEqual(len(files), 1)
        self.assertIn("\nLicense: Apache-2.0", files[0])
        standalone = [p for p in paragraphs if p.startswith("License: Apache-2.0\n")]
        self.assertEqual(len(standalone), 1)
        self.assertIn('/usr/share/common-licenses/Apache-2.0', standalone[0])
        self.assertNotIn("none-stated", text)

    def test_the_python_package_names_it(self):
        with open(os.path.join(SRC, "python", "pyproject.toml"), "rb") as f:
            project = tomllib.load(f)["project"]
        self.assertEqual(project["license"], {"text": "Apache-2.0"})
        self.assertIn("License :: OSI Approved :: Apache Software License", project["classifiers"])

    def test_a_file_without_the_header_is_found(self):
        # The check bites: the pattern picks the files a new contributor adds.
        for f in ("src/x/new.cpp", "python/stepwatch/new.py", "tests/e2e/CMakeLists.txt", "scripts/new.sh"):
            self.assertTrue(SOURCE.search(f), f)
        for f in ("docs/new.md", "deploy/agent.toml", "tests/probe/data/plain.txt"):
            self.assertFalse(SOURCE.search(f) and not f.startswith("tests/probe/data/"), f)


if __name__ == "__main__":
    unittest.main()
