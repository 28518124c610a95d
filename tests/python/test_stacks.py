# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""install_stack_dump: a real child process with its main thread and a worker thread blocked in
C calls gets SIGUSR1; the per-rank stacks file must name the functions both are blocked in, and
the child must keep running."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest

import swtest  # noqa: F401 - makes the built package importable

import stepwatch
from swtest import IsolatedCase, python_env

CHILD = textwrap.dedent(
    """
    import os, select, sys, threading
    import stepwatch

    stepwatch.init()
    path = stepwatch.install_stack_dump()
    main_r, _main_w = os.pipe()
    worker_r, _worker_w = os.pipe()

    def worker_blocked_in_select():
        select.select([worker_r], [], [])

    def main_blocked_in_read():
        os.read(main_r, 1)

    threading.Thread(target=worker_blocked_in_select, name="worker", daemon=True).start()
    print(path, flush=True)
    main_blocked_in_read()
    """
)


def _all_threads_sleeping(pid):
    """True when every thread of pid is in interruptible sleep (blocked in a syscall)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
        if len(tids) < 2:
            return False
        for tid in tids:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state != "S":
                return False
        return True
    except OSError:
        return False


def _read(path):
    with open(path) as f:
        return f.read()


def _wait_for(predicate, timeout=15.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


class StackDumpChildTest(IsolatedCase):
    job = "stacks-job"

    def setUp(self):
        super().setUp()
        env = python_env()
        env.update(RANK="1", WORLD_SIZE="2")
        self.child = subprocess.Popen(
            [sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.addCleanup(self._stop_child)

    def _stop_child(self):
        if self.child.poll() is None:
            self.child.kill()
        self.child.communicate(timeout=10)

    def read_stacks(self):
        try:
            return _read(self.path)
        except FileNotFoundError:
            return ""

    def test_sigusr1_dumps_every_thread_while_blocked(self):
        line = self.child.stdout.readline().strip()
        self.assertTrue(line, f"child failed to start: {self.child.stderr.read() if self.child.poll() is not None else ''}")
        self.path = line
        self.assertEqual(self.path, os.path.join(self.dir, self.job, "rank-1.stacks"))
        self.assertTrue(_wait_for(lambda: _all_threads_sleeping(self.child.pid)), "child threads never blocked")
        before = self.read_stacks()
        self.assertTrue(before.startswith("# stepwatch stack dumps of pid"), before)
        self.assertNotIn("most recent call first", before)

        os.kill(self.child.pid, signal.SIGUSR1)
        both = lambda: all(f in self.read_stacks() for f in ("main_blocked_in_read", "worker_blocked_in_select"))
        self.assertTrue(_wait_for(both), f"stacks file:\n{self.read_stacks()}")
        text = self.read_stacks()
        # Three threads (main, the worker, init()'s progress sampler), one dump.
        self.assertEqual(text.count("most recent call first"), 3, text)
        self.assertIn("stepwatch/sampler.py", text)
        self.assertIsNone(self.child.poll(), "the signal must not kill the trainer (chain=False)")

        os.kill(self.child.pid, signal.SIGUSR1)
        self.assertTrue(_wait_for(lambda: self.read_stacks().count("main_blocked_in_read") == 2), self.read_stacks())
        self.assertIsNone(self.child.poll())


class StackDumpInProcessTest(IsolatedCase):
    def tearDown(self):
        stepwatch.uninstall_stack_dump(signal.SIGUSR1)
        stepwatch.uninstall_stack_dump(signal.SIGUSR2)
        super().tearDown()

    def test_default_path_from_the_environment_before_init(self):
        os.environ["RANK"] = "3"
        path = stepwatch.install_stack_dump()
        self.assertEqual(path, os.path.join(self.dir, self.job, "rank-3.stacks"))
        self.assertTrue(os.path.isfile(path), "the directories and file are created")

    def test_default_path_follows_the_beacon(self):
        stepwatch.init(job="other-job", rank=0)
        self.assertEqual(stepwatch.install_stack_dump(), os.path.join(self.dir, "other-job", "rank-0.stacks"))

    def test_a_symlink_planted_at_the_stacks_path_is_never_followed(self):
        # D7: another user's symlink in place of rank-0.stacks once made the trainer truncate
        # the file it pointed to. The link is replaced by a file of our own.
        os.makedirs(self.dir, exist_ok=True)
        victim = os.path.join(self.dir, "victim.txt")
        with open(victim, "w") as f:
            f.write("precious\n")
        path = os.path.join(self.dir, self.job, "rank-0.stacks")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(victim, path)
        self.assertEqual(stepwatch.install_stack_dump(path=path), path)
        self.assertFalse(os.path.islink(path))
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")
        with open(path) as f:
            self.assertTrue(f.read().startswith("# stepwatch stack dumps of pid"))

    def test_no_job_is_a_clear_error(self):
        del os.environ["STEPWATCH_JOB"]
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            stepwatch.install_stack_dump()
        self.assertIn("no job id", str(cm.exception))
        os.environ["STEPWATCH_JOB"] = "../up"
        with self.assertRaises(stepwatch.StepwatchError):
            stepwatch.install_stack_dump()

    def test_explicit_path_and_signal_and_uninstall(self):
        path = os.path.join(self.tmp, "deep", "dir", "my.stacks")

        def function_that_signals_itself():
            os.kill(os.getpid(), signal.SIGUSR2)

        self.assertEqual(stepwatch.install_stack_dump(signal.SIGUSR2, path=path), path)
        function_that_signals_itself()
        self.assertTrue(_wait_for(lambda: "function_that_signals_itself" in _read(path), timeout=5))
        # Installing again truncates the file and replaces the registration.
        stepwatch.install_stack_dump(signal.SIGUSR2, path=path)
        self.assertNotIn("function_that_signals_itself", _read(path))
        self.assertTrue(stepwatch.uninstall_stack_dump(signal.SIGUSR2))
        self.assertFalse(stepwatch.uninstall_stack_dump(signal.SIGUSR2))


if __name__ == "__main__":
    unittest.main()
