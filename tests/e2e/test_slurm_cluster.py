# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""The real two-node Slurm of slurm_support.py (slurmctld + `slurmd -N n1|n2`, auth/none, Debian's
slurmctld/slurmd/slurm-client) does what the stepwatch Slurm tests rely on:

- `scontrol requeue` of a running --requeue batch job: same job id, the rerun sees
  SLURM_RESTART_COUNT=1, Restarts=1, COMPLETED;
- a batch script exiting 75 is requeued by RequeueExit=75 and its rerun completes;
- the command lines stepwatch runs (src/runbook/slurm.cpp) put "--" before the command: scontrol
  and scancel then take an operand that looks like an option ("--state=RUNNING") as a job id and
  refuse it, also under POSIXLY_CORRECT (where "--" after the command would reach scontrol as a
  job id, and `scontrol show job -o ID` fails);

A SIGKILLed slurmd (the job requeued onto the other node while its task keeps running on the
dead one) is exercised with stepwatch in test_slurm.py.

One cluster for the class; a requeued job waits cred_expire + 1 = 11 s before it can start again,
so each requeue costs about 12 s. Measured times are printed. Missing Slurm programs fail the
test (scripts/setup-deps.sh installs them), they do not skip it.
"""

import os
import signal
import subprocess
import sys
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from slurm_support import SlurmCluster  # noqa: E402


def log(msg):
    print(f"[slurm] {msg}", file=sys.stderr, flush=True)


class SlurmClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = SlurmCluster()
        cls.c.start()
        log(f"cluster {cls.c.cluster_name} started in {cls.c.start_seconds:.2f} s (both nodes idle)")

    @classmethod
    def tearDownClass(cls):
        cls.c.stop()
        left = [p for p in cls.c.tied_pids()]
        assert not left, f"processes of the cluster left after stop(): {left}"

    def path(self, name):
        return os.path.join(self.c.dir, "jobs", name)

    def read(self, name):
        with open(self.path(name)) as f:
            return f.read()

    def wait_file(self, name, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(self.path(name)) and self.read(name).strip():
                return self.read(name)
            time.sleep(0.05)
        self.fail(f"{name} not written in {timeout} s\n{self.c.log_tail()}")

    def test_1_scontrol_requeue(self):
        # Each run appends its SLURM_RESTART_COUNT and start time; the first waits to be requeued.
        job = self.c.sbatch(f"""#!/bin/bash
echo "${{SLURM_RESTART_COUNT:-unset}} $(date +%s.%N)" >> {self.path('requeue.runs')}
[ -n "$SLURM_RESTART_COUNT" ] || sleep 60
""", "--requeue")
        self.c.wait_job(job, "RUNNING", timeout=20)
        self.wait_file("requeue.runs")
        t0 = time.time()
        self.c.run("scontrol", "requeue", job)
        rec = self.c.wait_job(job, "COMPLETED", timeout=40)
        runs = [line.split() for line in self.read("requeue.runs").splitlines()]
        self.assertEqual([r[0] for r in runs], ["unset", "1"], runs)
        self.assertEqual(rec["Restarts"], "1", rec)
        self.assertEqual(rec["Requeue"], "1", rec)
        self.assertEqual(rec["ExitCode"], "0:0", rec)
        log(f"scontrol requeue -> rerun started: {float(runs[1][1]) - t0:.2f} s")

    def test_2_requeue_exit(self):
        marker = self.path("exit75.marker")
        job = self.c.sbatch(f"""#!/bin/bash
echo "${{SLURM_RESTART_COUNT:-unset}} $(date +%s.%N)" >> {self.path('exit75.runs')}
[ -e {marker} ] && exit 0
touch {marker}
exit 75
""")
        rec = self.c.wait_job(job, "COMPLETED", timeout=40)
        runs = [line.split() for line in self.read("exit75.runs").splitlines()]
        self.assertEqual([r[0] for r in runs], ["unset", "1"], runs)
        self.assertEqual(rec["Restarts"], "1", rec)
        self.assertEqual(rec["ExitCode"], "0:0", rec)
        log(f"exit 75 -> rerun started: {float(runs[1][1]) - float(runs[0][1]):.2f} s")

    def test_3_options_end_before_the_command(self):
        job = self.c.sbatch("#!/bin/bash\nsleep 120\n", "--requeue")
        self.addCleanup(self.c.run, "scancel", job, check=False)
        self.c.wait_job(job, "RUNNING", timeout=20)

        def run(*argv, **env):
            return subprocess.run([self.c.bins.get(argv[0], argv[0]), *argv[1:]], env=self.c.env(**env),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=self.c.dir,
                                  timeout=20)

        for env in ({}, {"POSIXLY_CORRECT": "1"}):
            shown = run("scontrol", "-o", "--", "show", "job", job, **env)
            self.assertEqual(shown.returncode, 0, shown.stderr)
            self.assertTrue(shown.stdout.startswith(f"JobId={job} "), shown.stdout)
            for argv in (("scontrol", "--", "requeue"), ("scancel", "--")):
                for operand in ("--state=RUNNING", "--user=root"):
                    r = run(*argv, operand, **env)
                    self.assertNotEqual(r.returncode, 0, (argv, operand, env))
                    self.assertIn("Invalid job id", r.stderr, (argv, operand, env))
            rec = self.c.show_job(job)
            self.assertEqual((rec["JobState"], rec["Restarts"]), ("RUNNING", "0"), rec)
        # What POSIXLY_CORRECT does to options after the command: why "--" goes before it.
        late = run("scontrol", "show", "job", "-o", job, POSIXLY_CORRECT="1")
        self.assertNotEqual(late.returncode, 0, late.stdout)
        self.assertIn("too many arguments for keyword:show", late.stderr)

        drained = run("scontrol", "--", "update", "NodeName=n2", "State=DRAIN", "Reason=stepwatch test: --")
        self.assertEqual(drained.returncode, 0, drained.stderr)
        self.assertIn(self.c.node_state("n2"), ("drain", "drng"))
        self.c.resume("n2")
        requeued = run("scontrol", "--", "requeue", job, POSIXLY_CORRECT="1")
        self.assertEqual(requeued.returncode, 0, requeued.stderr)
        self.assertEqual(self.c.show_job(job)["Restarts"], "1")
        cancelled = run("scancel", "--", job)
        self.assertEqual(cancelled.returncode, 0, cancelled.stderr)
        self.assertEqual(self.c.wait_job(job, "CANCELLED", timeout=20)["JobState"], "CANCELLED")


if __name__ == "__main__":
    unittest.main()
