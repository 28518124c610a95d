# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""examples/launch.py with a tiny rank script (no torch): the env:// variables each rank gets,
and failure propagation (a failed rank stops the others and sets the launcher's exit status)."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import swtest

LAUNCH = os.path.join(swtest.SOURCE_DIR, "examples", "launch.py")

RANK_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    out_dir, mode = sys.argv[1], sys.argv[2]
    rank = int(os.environ["RANK"])
    keys = ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
    path = os.path.join(out_dir, f"rank{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump({k: os.environ.get(k) for k in keys} | {"pid": os.getpid()}, f)
    os.rename(path + ".tmp", path)  # whole or absent: rank 1 waits for rank 0's record
    if mode == "fail" and rank == 1:
        # Fail only once rank 0 has written its record: the test reads rank 0's pid, and a
        # launcher that stops rank 0 before it wrote would leave nothing to read.
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(out_dir, "rank0.json")) and time.monotonic() < deadline:
            time.sleep(0.01)
        sys.exit(3)
    if mode == "fail":
        time.sleep(60)  # must be stopped by the launcher
    """
)


class LaunchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="stepwatch-launch-")
        self.addCleanup(self.tmp.cleanup)
        self.script = os.path.join(self.tmp.name, "rank.py")
        with open(self.script, "w") as f:
            f.write(RANK_SCRIPT)

    def launch(self, mode, nproc):
        cmd = [sys.executable, LAUNCH, "--nproc", str(nproc), "--grace", "2", self.script, self.tmp.name, mode]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    def rank_env(self, rank):
        with open(os.path.join(self.tmp.name, f"rank{rank}.json")) as f:
            return json.load(f)

    def test_env_of_each_rank(self):
        out = self.launch("ok", 3)
        self.assertEqual(out.returncode, 0, out.stderr)
        envs = [self.rank_env(r) for r in range(3)]
        for rank, env in enumerate(envs):
            self.assertEqual((env["RANK"], env["LOCAL_RANK"]), (str(rank), str(rank)))
            self.assertEqual((env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]), ("3", "3"))
            self.assertEqual(env["MASTER_ADDR"], "127.0.0.1")
        self.assertEqual(len({e["MASTER_PORT"] for e in envs}), 1)
        self.assertGreater(int(envs[0]["MASTER_PORT"]), 0)

    def test_a_failed_rank_stops_the_others(self):
        start = time.monotonic()
        out = self.launch("fail", 2)
        self.assertEqual(out.returncode, 3, out.stderr)
        self.assertLess(time.monotonic() - start, 30, "rank 0 was not stopped")
        self.assertIn("rank 1 exited with 3", out.stderr)
        pid0 = self.rank_env(0)["pid"]
        with self.assertRaises(ProcessLookupError):
            os.kill(pid0, 0)


if __name__ == "__main__":
    unittest.main()
