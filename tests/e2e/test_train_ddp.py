# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""End to end with real PyTorch: two gloo ranks of examples/train_ddp.py, started by
examples/launch.py, watched through the real `stepwatch status` binary while they run.

1. A training run: both ranks appear, the step advances between polls, phases show (train and
   eval), a committed checkpoint appears, and after the run both ranks show finished. A restart
   resumes from the newest committed checkpoint.
2. A stalled collective: rank 1 hangs before a step, rank 0 blocks inside the gradient
   all-reduce; the status shows the step stop, and SIGUSR1 to the PIDs that status names writes
   each rank's stacks (the hung function, and the backward call blocked in gloo).
"""

import os
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

from swtest import HAVE_TORCH, LAUNCH, TRAIN, parse_status, python_env, read_beacon, run_status  # noqa: E402



@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed for this interpreter")
class TrainDDPTest(unittest.TestCase):
    def setUp(self):
        swtest.stepwatch_bin()  # skips when the binary is missing
        self.tmp = tempfile.mkdtemp(prefix="stepwatch-e2e-")
        self.dir = os.path.join(self.tmp, "sw")
        self.ckpt = os.path.join(self.tmp, "ckpt")
        self.procs = []
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.addCleanup(self._kill_all)

    def _kill_all(self):
        for p, log in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            log.close()

    def launch(self, job, train_args, incarnation=0, grace=10):
        env = python_env()
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"):
            env.pop(k, None)
        env.update(STEPWATCH_JOB=job, STEPWATCH_DIR=self.dir, STEPWATCH_INCARNATION=str(incarnation))
        log_path = os.path.join(self.tmp, f"{job}-{incarnation}.log")
        log = open(log_path, "w+")
        cmd = [sys.executable, LAUNCH, "--nproc", "2", "--grace", str(grace), TRAIN, *train_args]
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append((p, log))
        return p, log_path

    def output(self, log_path):
        with open(log_path) as f:
            return f.read()

    def poll_status(self, job):
        out = run_status(self.dir, job)
        if out.returncode != 0:  # before the first beacon exists the job directory is missing
            return {}
        return parse_status(out.stdout)

    def watch(self, proc, job, until=None, deadline_s=60.0, interval=0.12):
        """Polls status until the launcher exits (or `until(rows)` holds); returns the polls."""
        polls = []
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            rows = self.poll_status(job)
            if rows:
                polls.append(rows)
            if until is not None and until(polls):
                return polls
            if proc.poll() is not None:
                return polls
            time.sleep(interval)
        self.fail(f"job {job} still running after {deadline_s}s; last status {polls[-1:] if polls else 'none'}")

    def test_training_progress_checkpoint_finish_and_resume(self):
        job = "e2e-ddp"
        args = ["--steps", "40", "--step-time", "0.12", "--eval-every", "10", "--eval-batches", "5",
                "--ckpt-dir", self.ckpt, "--ckpt-every", "10"]
        proc, log_path = self.launch(job, args)
        polls = self.watch(proc, job)
        self.assertEqual(proc.wait(timeout=30), 0, self.output(log_path))
        running = [rows for rows in polls if any(r.status == "running" for r in rows.values())]
        self.assertGreater(len(running), 5, f"too few polls while running: {polls}")

        # Both ranks appear, with the pids and world size of a real launch.
        self.assertTrue(any(set(rows) == {0, 1} for rows in running), running)
        for rows in running:
            for r in rows.values():
                self.assertEqual(r.source, "beacon")
                self.assertIsNotNone(r.pid)

        # The step advances between two polls, on each rank.
        for rank in (0, 1):
            steps = [rows[rank].step for rows in running if rank in rows and rows[rank].step is not None]
            self.assertTrue(any(b > a for a, b in zip(steps, steps[1:])), f"rank {rank} steps seen: {steps}")
            self.assertEqual(steps, sorted(steps), "a step never goes back within an incarnation")

        # Phases show: training, and the evaluation windows (5 batches x 0.12 s each).
        phases = {r.phase for rows in running for r in rows.values()}
        self.assertIn("train", phases)
        self.assertIn("eval", phases)
        self.assertLessEqual(phases, {"init", "compile", "train", "eval", "checkpoint"})

        # A committed checkpoint appears while the job runs, and its marker is on disk.
        seen = {(r.checkpoint, r.checkpoint_step) for rows in running for r in rows.values() if r.checkpoint}
        self.assertTrue(seen, "no checkpoint seen while running")
        for ckpt_id, step in seen:
            self.assertEqual(ckpt_id, f"step_{step}")
            self.assertTrue(os.path.isfile(os.path.join(self.ckpt, ckpt_id, "COMMITTED")))

        # Finished: both ranks, last step, last checkpoint, a loss.
        final = self.poll_status(job)
        self.assertEqual(set(final), {0, 1})
        for r in final.values():
            self.assertEqual((r.status, r.step, r.checkpoint, r.checkpoint_step), ("finished", 40, "step_40", 40))
            self.assertIsNotNone(r.loss)
        for n in (10, 20, 30, 40):
            self.assertTrue(os.path.isfile(os.path.join(self.ckpt, f"step_{n}", "COMMITTED")))

        # A restart (next incarnation) resumes from the newest committed checkpoint.
        os.makedirs(os.path.join(self.ckpt, "step_45"))  # an uncommitted write is never a resume point
        proc, log_path = self.launch(job, ["--steps", "50", "--step-time", "0.02", "--ckpt-dir", self.ckpt,
                                           "--ckpt-every", "10"], incarnation=1)
        self.watch(proc, job)
        self.assertEqual(proc.wait(timeout=30), 0, self.output(log_path))
        text = self.output(log_path)
        for rank in (0, 1):
            self.assertIn(f"[rank {rank}] resumed from step_40", text)
            self.assertIn(f"[rank {rank}] world 2, steps 41..50", text)
        final = self.poll_status(job)
        for rank, r in final.items():
            self.assertEqual((r.status, r.step, r.checkpoint), ("finished", 50, "step_50"))
            raw = read_beacon(os.path.join(self.dir, job, f"rank-{rank}.beacon"))
            self.assertEqual((raw["incarnation"], raw["step_count"]), (1, 10))

    def test_stalled_collective_stack_dump(self):
        job = "e2e-hang"
        args = ["--steps", "1000", "--step-time", "0.05", "--hang-rank", "1", "--hang-at-step", "5"]
        proc, log_path = self.launch(job, args, grace=3)
        last_change = {}

        def stalled(polls):
            rows = polls[-1] if polls else {}
            if set(rows) != {0, 1} or any(r.step != 4 for r in rows.values()):
                return False
            key = tuple(r.step for r in rows.values())
            last_change.setdefault(key, time.monotonic())
            return time.monotonic() - last_change[key] > 1.5  # the step stopped moving

        polls = self.watch(proc, job, until=stalled, deadline_s=45)
        self.assertIsNone(proc.poll(), self.output(log_path))
        rows = polls[-1]
        self.assertTrue(all(r.status == "running" and r.phase == "train" for r in rows.values()), rows)

        # The watchdog's move: SIGUSR1 to the pids the beacons name.
        for r in rows.values():
            os.kill(r.pid, signal.SIGUSR1)
        stacks = {rank: os.path.join(self.dir, job, f"rank-{rank}.stacks") for rank in (0, 1)}

        def dumped():
            texts = {}
            for rank, path in stacks.items():
                with open(path) as f:
                    texts[rank] = f.read()
            return texts

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            texts = dumped()
            if all("most recent call first" in t for t in texts.values()):
                break
            time.sleep(0.1)
        texts = dumped()
        self.assertIn("in hang_forever", texts[1])
        # Rank 0 is inside the DDP gradient all-reduce, blocked in C++ (gloo) under backward().
        self.assertIn("in backward", texts[0])
        self.assertIn("train_ddp.py", texts[0])
        self.assertNotIn("hang_forever", texts[0])
        self.assertIsNone(proc.poll(), "the dump must not kill the job")

        proc.send_signal(signal.SIGTERM)
        self.assertNotEqual(proc.wait(timeout=30), 0)
        for r in self.poll_status(job).values():
            self.assertNotEqual(r.status, "finished")
            self.assertEqual(r.step, 4)


if __name__ == "__main__":
    unittest.main()
