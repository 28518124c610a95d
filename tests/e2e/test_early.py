# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""End to end, the early rule (issue 27) with real PyTorch: two gloo ranks of
examples/train_ddp.py whose steps take 15 s of real compute, under `stepwatch run` with a real
HTTP receiver for pages. The step-time rule would wait grace x interval = 2 minutes.

1. Rank 1 hangs in its data fetch early in step 4; rank 0 computes its step and blocks in the
   gradient all-reduce inside backward. The progress sampler shows rank 1's main thread still
   in `hang_forever` and rank 0 waiting in a collective: paged once, within 60 s of the hang,
   culprit rank 1, named where it hangs.
2. The same job without the hang: never paged.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import swtest  # noqa: E402
from swtest import HAVE_TORCH, LAUNCH, TRAIN, python_env  # noqa: E402
from test_run import Receiver  # noqa: E402

STEP_S = 15
GRACE = 8


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed for this interpreter")
class EarlyRule(unittest.TestCase):
    def setUp(self):
        self.bin = swtest.stepwatch_bin()
        self.tmp = tempfile.mkdtemp(prefix="stepwatch-early-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.receiver = Receiver()
        self.addCleanup(self.receiver.close)

    def spec(self, job):
        # No quiet_budget: the early rule learns it (twice the longest quiet stretch of the
        # healthy steps, at least the 30 s floor).
        text = f'''job = "{job}"
expected_interval = "{STEP_S}s"
grace_intervals = {GRACE}
poll_interval = "500ms"
[phases]
init = "90s"
compile = "90s"
compile_warm = "60s"
[runbook]
ack_timeout = "1s"
preempt_grace = "3s"
restart_budget = 0
[runbook.collect]
time_limit = "20s"
native_stacks = false
[[runbook.pager]]
url = "{self.receiver.url}"
timeout = "2s"
retries = 1
'''
        path = os.path.join(self.tmp, f"{job}.toml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_job(self, job, *train_args, timeout):
        env = python_env()
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT", "STEPWATCH_JOB", "STEPWATCH_SAMPLER"):
            env.pop(k, None)
        cmd = ["/usr/bin/python3", LAUNCH, "--nproc", "2", "--grace", "3", TRAIN, "--compute", str(STEP_S), *train_args]
        args = [self.bin, "run", "--spec", self.spec(job), "--dir", os.path.join(self.tmp, "beacons"), "--state-dir",
                os.path.join(self.tmp, "state"), "--", *cmd]
        p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return p.returncode, p.stdout

    def test_a_hang_inside_a_long_step_is_paged_within_a_minute(self):
        rc, out = self.run_job("early", "--steps", "6", "--hang-rank", "1", "--hang-at-step", "4", timeout=400)
        m = re.search(r"hanging before batch 4 \(--hang-rank\) at (\d+\.\d+)", out)
        self.assertIsNotNone(m, out)
        hung_at = float(m.group(1))
        self.assertEqual(len(self.receiver.pages), 1, out)
        _, page = self.receiver.pages[0]
        latency = self.receiver.times[0] - hung_at
        print(f"\nearly rule: paged {latency:.1f} s after the hang (step time alone: "
              f"{GRACE * STEP_S} s after the last step); culprit: {page['culprits'][0]['reason']}",
              file=sys.stderr)
        self.assertLessEqual(latency, 60, out)
        self.assertEqual(page["state"], "stalled")
        self.assertEqual(page["cause"], "collective")
        self.assertEqual(page["last_step"], 3)
        self.assertEqual([c["rank"] for c in page["culprits"]], [1], page)
        reason = page["culprits"][0]["reason"]
        self.assertIn("hang_forever", reason)  # where its main thread is, from its sampler
        self.assertIn("unchanged", reason)
        self.assertRegex(reason, r"rank 0 in `[^`]*` for")  # and where the other one waits
        self.assertIn("stalled/collective", out)

    def test_the_same_job_healthy_is_never_paged(self):
        rc, out = self.run_job("healthy", "--steps", "4", timeout=300)
        self.assertEqual(rc, 0, out)
        self.assertNotIn("stalled", out)
        self.assertEqual(self.receiver.pages, [])
        self.assertIn("job healthy finished", out)


if __name__ == "__main__":
    unittest.main()
