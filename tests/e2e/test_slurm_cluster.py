"""The real two-node Slurm of slurm_support.py (slurmctld + `slurmd -N n1|n2`, auth/none, Debian's
slurmctld/slurmd/slurm-client) does what the stepwatch Slurm tests rely on:

- `scontrol requeue` of a running --requeue batch job: same job id, the rerun sees
  SLURM_RESTART_COUNT=1, Restarts=1, COMPLETED;
- a batch script exiting 75 is requeued by RequeueExit=75 and its rerun completes;
- SIGKILL of the slurmd of the node running a job: the node goes down, the job is requeued and
  runs again on the other node, while its task on the dead node keeps running (the orphan
  stepwatch must clean up: this test kills it by the pid the task recorded itself).

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

    def test_3_node_failure(self):
        c = self.c
        mark = "swtask-" + uuid.uuid4().hex[:12]  # in the task's argv: ps shows which process it is
        # The first run starts its task through srun (as a trainer's ranks are) and waits in it;
        # the task records its own pid. The rerun only records where it ran.
        job_script = f"""#!/bin/bash
echo "${{SLURM_RESTART_COUNT:-0}} $SLURMD_NODENAME $(date +%s.%N)" >> {self.path('nodefail.runs')}
if [ -z "$SLURM_RESTART_COUNT" ]; then
  srun bash -c 'echo $$ > {self.path('task.pid')}; exec -a {mark} sleep 300'
fi
"""
        c.drain("n1", "node failure test")  # the job must land on n2
        try:
            job = c.sbatch(job_script, "--requeue")
            rec = c.wait_job(job, "RUNNING", timeout=20)
        finally:
            c.resume("n1")
        self.assertEqual(rec["BatchHost"], "n2", rec)
        pid = int(self.wait_file("task.pid"))
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            self.assertEqual(f.read().split(b"\0")[0], mark.encode())

        t0, t0_wall = time.monotonic(), time.time()
        c.kill_slurmd("n2", signal.SIGKILL)
        c.wait_node("n2", ("down*",), timeout=40)
        t_down = time.monotonic() - t0
        rec = c.wait_job(job, ("PENDING", "RUNNING", "COMPLETED"), timeout=20, until=lambda r: r["Restarts"] == "1")
        t_requeued = time.monotonic() - t0
        rec = c.wait_job(job, "COMPLETED", timeout=30)
        t_done = time.monotonic() - t0
        runs = [line.split() for line in self.read("nodefail.runs").splitlines()]
        self.assertEqual([r[:2] for r in runs], [["0", "n2"], ["1", "n1"]], runs)
        self.assertEqual(rec["Restarts"], "1", rec)
        self.assertEqual(rec["BatchHost"], "n1", rec)
        self.assertEqual(rec["NodeList"], "n1", rec)

        # The task of the first run outlived its slurmd and the requeue: an orphan on "n2".
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            self.assertEqual(f.read().split(b"\0")[0], mark.encode(), "the orphaned task is gone")
        log(f"slurmd n2 SIGKILLed -> n2 down*: {t_down:.2f} s, job requeued (Restarts=1): {t_requeued:.2f} s, "
            f"rerun started on n1: {float(runs[1][2]) - t0_wall:.2f} s, completed: {t_done:.2f} s; "
            f"the task (pid {pid}) on n2 still runs")
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}") and not _zombie(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(not os.path.exists(f"/proc/{pid}") or _zombie(pid), f"task {pid} survived SIGKILL")

        t1 = time.monotonic()
        state = c.restart_slurmd("n2")
        log(f"slurmd n2 restarted, node {state} after {time.monotonic() - t1:.2f} s")
        self.assertIn(state, ("idle", "mix", "alloc"))
        out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        self.assertNotIn(mark, out)


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


if __name__ == "__main__":
    unittest.main()
