# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""stepwatch under a real Slurm (tests/e2e/slurm_support.py: slurmctld and two `slurmd -N` on this
machine, auth/none), with the spec's runbook.resume_owner = "slurm" (docs/slurm.md):

1. StallRequeue: an `sbatch --requeue` job runs the real 2-rank PyTorch trainer (gloo, CPU) under
   `stepwatch run`; rank 1 hangs in its data fetch in incarnation 0. stepwatch pages once,
   collects, preempts, and requeues the job with `scontrol requeue` (Restarts 0 -> 1); the rerun
   sees SLURM_RESTART_COUNT=1 as its incarnation, resumes from the last committed checkpoint and
   the job ends COMPLETED. Nothing pages twice.
2. NodeFailure: the job runs on n2; n2's slurmd is SIGKILLed. Slurm requeues the job onto n1
   while incarnation 0 (its `stepwatch run` and trainer) keeps running on the dead "node". The
   next incarnation's restart hygiene finds the orphaned trainer by the pids and start times
   incarnation 0 recorded (proven, not by name) and ends it before its own trainer binds the
   same MASTER_PORT; the orphaned `stepwatch run` then sees its job's restart count moved and
   stands down: no incident, no page, no second requeue (the restart-count fence).

3. Restarts stepwatch did not order (issue 30): an operator's `scontrol requeue` of a healthy job,
   and one after a stall, a stepwatch requeue and more committed steps. The trainer resumes only
   from what stepwatch names; every rank must resume from the newest committed checkpoint, never
   from the one the last preempt saved. `stepwatch doctor` inside the job, with a spec that names
   no job, finds slurm-<SLURM_JOB_ID> as `stepwatch run` does.

Times are printed. The job's output (both incarnations, --open-mode=append) is shown on failure.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import swtest  # noqa: E402
from agent_support import Receiver, free_port  # noqa: E402
from slurm_support import SlurmCluster  # noqa: E402
from swtest import HAVE_TORCH, LAUNCH, TRAIN, alive, python_env, stepwatch_bin, wait_until  # noqa: E402



@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed for this interpreter")
class SlurmTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = SlurmCluster(cpus_per_node=2)
        cls.cluster.start()
        print(f"\nslurm: two nodes idle in {cls.cluster.start_seconds:.2f} s", flush=True)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stepwatch-slurm-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.dir = os.path.join(self.tmp, "beacons")
        self.state = os.path.join(self.tmp, "state")
        self.ckpt = os.path.join(self.tmp, "ckpt")
        self.receiver = Receiver()
        self.addCleanup(self.receiver.close)
        self.bin = stepwatch_bin()

    def spec(self, job, extra="", runbook="", named=True):
        """The job's spec; named=False leaves `job` out (the job id is then slurm-<SLURM_JOB_ID>)."""
        path = os.path.join(self.tmp, f"{job}.toml")
        name = f'job = "{job}"' if named else "# job: not set"
        with open(path, "w") as f:
            f.write(f'''{name}
expected_interval = "1s"
grace_intervals = 3
poll_interval = "250ms"
[phases]
init = "90s"
data = "4s"
checkpoint = "30s"
[checkpoint]
dir = "{self.ckpt}"
[runbook]
resume_owner = "slurm"
{runbook}
ack_timeout = "1s"
preempt_grace = "3s"
[runbook.collect]
time_limit = "20s"
native_stacks = false
[[runbook.pager]]
url = "{self.receiver.url}"
timeout = "2s"
retries = 1
{extra}
''')
        return path

    def submit(self, job, train_args, *sbatch_args, master_port, extra="", runbook="", named=True):
        spec = self.spec(job, extra, runbook, named)
        script = f'''#!/bin/bash
echo "batch on $SLURMD_NODENAME: restart count ${{SLURM_RESTART_COUNT:-unset}}, stepwatch pid $$"
export MASTER_PORT={master_port}
{self.bin} doctor --spec {spec} --dir {self.dir} --state-dir {self.state}
echo "doctor exited $?"
exec {self.bin} run --spec {spec} --dir {self.dir} --state-dir {self.state} -- \\
    /usr/bin/python3 {LAUNCH} --nproc 2 --grace 3 --master-port {master_port} \\
    {TRAIN} --ckpt-dir {self.ckpt} {" ".join(train_args)}
'''
        env = python_env()
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT", "STEPWATCH_JOB", "STEPWATCH_DIR",
                  "STEPWATCH_INCARNATION"):
            env.pop(k, None)
        os.environ.update({k: v for k, v in env.items() if k in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")})
        job_id = self.cluster.sbatch(script, "--requeue", "--open-mode=append", "-N1", "-n1", "-c2",
                                     *sbatch_args)
        self.addCleanup(self._cancel, job_id)
        return job_id

    def _cancel(self, job_id):
        self.cluster.run("scancel", job_id, check=False)

    def output(self, job_id):
        return self.cluster.job_output(job_id)

    def incidents(self, job):
        out = subprocess.run([self.bin, "incidents", job, "--state-dir", self.state, "--json"],
                             stdout=subprocess.PIPE, text=True, check=True).stdout
        doc = json.loads(out)
        return doc["incidents"] if isinstance(doc, dict) else doc

    def test_a_stall_is_paged_once_requeued_once_and_resumed_to_completion(self):
        # [node_fault] drain with a hair trigger (one culprit incarnation makes a suspect): the
        # node of incarnation 0 is drained before the requeue, so Slurm runs the rerun elsewhere.
        t0 = time.monotonic()
        drain = "[node_fault]\nsuspect_of_last = 1\nsuspect_culprit_min = 1\ndrain = true\n"
        job_id = self.submit("slurm-hang", ["--steps", "60", "--step-time", "0.05", "--ckpt-every", "10",
                                            "--hang-rank", "1", "--hang-at-step", "25", "--hang-incarnation",
                                            "0", "--label-data"], master_port=free_port(), extra=drain)
        for node in ("n1", "n2"):  # undrained for the next test (RESUME of an idle node fails: fine)
            self.addCleanup(self.cluster.run, "scontrol", "update", f"NodeName={node}", "State=RESUME",
                            check=False)
        rec = self.cluster.wait_job(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=180)
        took = time.monotonic() - t0
        out = self.output(job_id)
        print(f"slurm: stall -> requeue -> COMPLETED in {took:.1f} s", flush=True)
        self.assertEqual(rec["JobState"], "COMPLETED", out)
        self.assertEqual(rec["Restarts"], "1", out)  # one requeue, by stepwatch
        self.assertIn("restart count unset", out)
        self.assertIn("restart count 1", out)
        self.assertIn(f"job slurm-hang incarnation 1 (Slurm job {job_id}, restarts owned by slurm)", out)
        self.assertIn(f"requeued Slurm job {job_id} (Restarts 0 -> 1); next incarnation from step_20 (step 20)",
                      out)
        self.assertIn("job slurm-hang finished", out)
        # stepwatch doctor, run by the batch script before stepwatch run, checked what the runbook
        # needs of Slurm.
        self.assertIn(f"Slurm job {job_id}: what the runbook will ask of Slurm", out)
        self.assertIn(f"ok: uid 0 is root, and may act on job {job_id}: it may requeue and cancel it", out)
        self.assertIn("ok: Requeue=1: Slurm may requeue the job", out)
        self.assertIn("ok: node_fault.drain: root may drain nodes", out)
        # The suspect node was drained, with stepwatch's reason, and the rerun ran on the other.
        first, second = re.findall(r"batch on (n\d)", out)
        self.assertNotEqual(first, second, out)
        self.assertIn(f"drained Slurm node {first} (stepwatch slurm-hang: ", out)
        node = self.cluster.show_node(first)
        self.assertIn("DRAIN", node["State"], node)
        self.assertIn("stepwatch slurm-hang", node.get("Reason", ""), node)
        # Paged once, for incarnation 0, naming the hanging rank.
        self.assertEqual(len(self.receiver.pages), 1, self.receiver.pages)
        page = self.receiver.pages[0]
        self.assertEqual((page["state"], page["cause"], page["incarnation"]), ("stalled", "collective", 0))
        self.assertEqual([c["rank"] for c in page["culprits"]], [1])
        # The rerun resumed from the checkpoint: incarnation 1 started at step 20, not 0.
        self.assertRegex(out, r"resum\w* from .*step_20")
        beacon = swtest.read_beacon(os.path.join(self.dir, "slurm-hang", "rank-0.beacon"))
        self.assertEqual((beacon["step"], beacon["incarnation"]), (60, 1))
        [inc] = self.incidents("slurm-hang")
        kinds = [(a["kind"], a["ok"]) for a in inc["actions"]]
        for step in ("page", "collect", "preempt", "resume"):
            self.assertIn((step, True), kinds, kinds)
        self.assertIn(f"requeued Slurm job {job_id}", inc["resolution"])

    def test_resume_off_cancels_the_job_so_slurm_never_requeues_it(self):
        t0 = time.monotonic()
        job_id = self.submit("slurm-stop", ["--steps", "60", "--step-time", "0.05", "--ckpt-every", "10",
                                            "--hang-rank", "1", "--hang-at-step", "15", "--label-data"],
                             master_port=free_port(), runbook="resume = false")
        rec = self.cluster.wait_job(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=120)
        out = self.output(job_id)
        print(f"slurm: stall -> scancel -> CANCELLED in {time.monotonic() - t0:.1f} s", flush=True)
        self.assertEqual((rec["JobState"], rec["Restarts"]), ("CANCELLED", "0"), out)
        self.assertIn(f"resume is off: cancelling Slurm job {job_id} so it is not requeued", out)
        self.assertEqual(len(self.receiver.pages), 1, self.receiver.pages)

    def test_a_dead_node_leaves_an_orphan_that_the_next_incarnation_cleans(self):
        c = self.cluster
        port = free_port()
        c.drain("n1", "stepwatch test: start on n2")
        try:
            job_id = self.submit("slurm-node", ["--steps", "2000", "--step-time", "0.1", "--ckpt-every", "10"],
                                 master_port=port)
            rec = c.wait_job(job_id, {"RUNNING"}, timeout=30)
            self.assertEqual(rec["NodeList"], "n2")
        finally:
            c.resume("n1")
        beacons = os.path.join(self.dir, "slurm-node")
        # Incarnation 0 trains and has committed a checkpoint: its pids are the orphans-to-be.
        self.assertTrue(wait_until(lambda: os.path.isdir(os.path.join(self.ckpt, "step_20")), 60), self.output(job_id))
        old = [swtest.read_beacon(os.path.join(beacons, f"rank-{r}.beacon")) for r in (0, 1)]
        old_pids = [b["pid"] for b in old]
        self.assertEqual({b["incarnation"] for b in old}, {0})
        first_line = [l for l in self.output(job_id).splitlines() if "stepwatch pid" in l][0]
        old_stepwatch = int(first_line.rsplit(" ", 1)[1])
        t0 = time.monotonic()
        c.kill_slurmd("n2")
        self.addCleanup(c.restart_slurmd, "n2")
        rec = c.wait_job(job_id, {"RUNNING"}, timeout=90, until=lambda r: r.get("Restarts") == "1"
                         and r.get("JobState") == "RUNNING")
        requeued = time.monotonic() - t0
        self.assertEqual(rec["NodeList"], "n1")
        # The orphans kept running on the dead node until the new incarnation's hygiene.
        new = wait_until(lambda: self._beacon_of_incarnation(beacons, 1), 60)
        out = self.output(job_id)
        self.assertTrue(new, out)
        cleaned = time.monotonic() - t0
        print(f"slurm: slurmd n2 killed -> requeued on n1 in {requeued:.1f} s; incarnation 1 stepping "
              f"{cleaned:.1f} s after the kill", flush=True)
        self.assertIn("restart count 1", out)
        for pid in old_pids:
            self.assertFalse(alive(pid), f"rank pid {pid} of incarnation 0 survived:\n{out}")
            self.assertRegex(out, rf"leftover before incarnation 1: process still alive: pid {pid} \(", out)
            self.assertRegex(out, rf"cleanup: pid {pid} \(.* of incarnation 0, .*\): exited after SIGTERM")
        self.assertNotIn("(not provably this job's: left alone)", out.split("leftover before incarnation 1")[1]
                         if "leftover before incarnation 1" in out else out)
        # The orphaned `stepwatch run` stands down: its job's restart count moved (the fence).
        self.assertTrue(wait_until(lambda: not alive(old_stepwatch), 30), out)
        out = self.output(job_id)
        self.assertIn(f"Slurm job {job_id} was requeued since this incarnation started (Restarts 0 -> 1)", out)
        self.assertEqual(self.receiver.pages, [])
        self.assertEqual(c.show_job(job_id)["Restarts"], "1")
        # The new trainer bound the same rendezvous port and trains on from the checkpoint.
        b = wait_until(lambda: self._beacon_of_incarnation(beacons, 1, min_step=25), 60)
        self.assertTrue(b, self.output(job_id))

    # Issue 30: a restart stepwatch did not order resumes from the newest committed checkpoint.
    # The trainer resumes only from what stepwatch names (--resume-from-env, as a trainer whose
    # resume_command passes {checkpoint_id} does), and every rank says where it resumed from.

    def committed(self):
        """The steps of ckpt/step_<N>/COMMITTED, ascending."""
        steps = []
        for name in os.listdir(self.ckpt) if os.path.isdir(self.ckpt) else []:
            m = re.fullmatch(r"step_(\d+)", name)
            if m and os.path.isfile(os.path.join(self.ckpt, name, "COMMITTED")):
                steps.append(int(m.group(1)))
        return sorted(steps)

    def resumed(self, out, incarnation_text):
        """{rank: step} each rank resumed from after the batch line `incarnation_text`."""
        part = out.split(incarnation_text, 1)[1]
        part = part.split("batch on ", 1)[0]  # up to the next incarnation, if any
        return {int(r): int(n) for r, n in re.findall(r"\[rank (\d)\] resumed from step_(\d+) ", part)}

    def operator_requeue(self, job_id, restarts):
        """`scontrol requeue` by hand, as an operator would, then waits for the rerun to run."""
        self.cluster.run("scontrol", "requeue", job_id)
        return self.cluster.wait_job(job_id, {"RUNNING"}, timeout=90,
                                     until=lambda r: r.get("Restarts") == str(restarts))

    def test_an_operators_requeue_of_a_healthy_job_resumes_from_the_newest_committed_checkpoint(self):
        # The spec names no job: the job id is slurm-<id>, and doctor inside the job finds it too.
        t0 = time.monotonic()
        job_id = self.submit("slurm-requeue", ["--steps", "70", "--step-time", "0.1", "--ckpt-every", "10",
                                               "--resume-from-env"], master_port=free_port(), named=False)
        self.assertTrue(wait_until(lambda: 20 in self.committed(), 90), self.output(job_id))
        self.operator_requeue(job_id, 1)
        rec = self.cluster.wait_job(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=180)
        out = self.output(job_id)
        print(f"slurm: healthy -> operator requeue -> COMPLETED in {time.monotonic() - t0:.1f} s", flush=True)
        self.assertEqual((rec["JobState"], rec["Restarts"]), ("COMPLETED", "1"), out)
        job = f"slurm-{job_id}"
        first = out.split("restart count 1", 1)[0]
        self.assertIn(f"stepwatch doctor: job {job}, current incarnation 0", first)
        self.assertIn("doctor exited 0", first)
        m = re.search(r"resuming from step_(\d+) \(step \d+\), the newest committed checkpoint in ", out)
        self.assertTrue(m, out)
        step = int(m.group(1))
        self.assertGreaterEqual(step, 20, out)
        self.assertEqual(self.resumed(out, "restart count 1"), {0: step, 1: step}, out)
        self.assertEqual(self.resumed(out, "restart count unset"), {}, out)
        print(f"slurm: operator requeue after step_20: every rank resumed from step_{step}", flush=True)
        beacon = swtest.read_beacon(os.path.join(self.dir, job, "rank-0.beacon"))
        self.assertEqual((beacon["step"], beacon["incarnation"]), (70, 1))

    def test_a_stall_then_more_commits_then_an_operators_requeue_resumes_from_the_newest(self):
        # Incarnation 0 hangs before step 15: stepwatch saves step_10 and requeues. Incarnation 1
        # runs on and commits up to step_40; then an operator requeues: incarnation 2 must not go
        # back to step_10.
        t0 = time.monotonic()
        job_id = self.submit("slurm-again", ["--steps", "200", "--step-time", "0.1", "--ckpt-every", "10",
                                             "--hang-rank", "1", "--hang-at-step", "15", "--hang-incarnation", "0",
                                             "--label-data", "--resume-from-env"], master_port=free_port())
        self.cluster.wait_job(job_id, {"RUNNING"}, timeout=120, until=lambda r: r.get("Restarts") == "1")
        self.assertTrue(wait_until(lambda: 40 in self.committed(), 120), self.output(job_id))
        self.operator_requeue(job_id, 2)
        self.assertTrue(wait_until(lambda: self.resumed(self.output(job_id), "restart count 2")
                                   .keys() == {0, 1}, 90), self.output(job_id))
        out = self.output(job_id)
        print(f"slurm: stall -> requeue -> step_40 -> operator requeue -> resumed in {time.monotonic() - t0:.1f} s",
              flush=True)
        self.assertEqual(self.resumed(out, "restart count 1"), {0: 10, 1: 10}, out)
        m = re.search(r"resuming from step_(\d+) \(step \d+\), the newest committed checkpoint, not step_10 "
                      r"\(step 10\) that the last preempt saved", out)
        self.assertTrue(m, out)
        step = int(m.group(1))
        self.assertGreaterEqual(step, 40, out)
        self.assertEqual(self.resumed(out, "restart count 2"), {0: step, 1: step}, out)
        print(f"slurm: stall (step_10 saved), then step_40, then an operator requeue: every rank resumed "
              f"from step_{step}", flush=True)
        self.assertEqual(len(self.receiver.pages), 1, self.receiver.pages)

    def _beacon_of_incarnation(self, beacons, incarnation, min_step=1):
        try:
            b = swtest.read_beacon(os.path.join(beacons, "rank-0.beacon"))
        except (OSError, ValueError):
            return None
        return b if b["incarnation"] == incarnation and b["step"] >= min_step else None


if __name__ == "__main__":
    unittest.main()
