# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""How a rank says how it ended without calling finish(): real trainer processes that open a
beacon in a temporary STEPWATCH_DIR, step, and then end in each way a process can end. The
beacon's status is read back from the file. Every case runs under both bindings."""

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

import swtest  # noqa: F401 - makes the built package importable

from swtest import python_env, read_beacon

RUNNING, FINISHED, FAILED = 0, 1, 2
BINDINGS = ("native", "ctypes")

PRELUDE = """\
import os, signal, sys, threading, time
import stepwatch
from swtest import read_beacon

def status():
    return read_beacon(stepwatch.path())["status"]

stepwatch.init()
stepwatch.step(1, loss=0.5)
"""


class EndingCase(unittest.TestCase):
    job = "ending"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stepwatch-ending-")
        self.dir = os.path.join(self.tmp, "beacons")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, binding):
        env = python_env()
        for k in swtest.IDENTITY_VARS:
            env.pop(k, None)
        env["STEPWATCH_DIR"] = self.dir
        env["STEPWATCH_JOB"] = self.job
        env["STEPWATCH_BINDING"] = binding
        # The child imports swtest (for read_beacon) from this directory.
        here = os.path.dirname(os.path.abspath(__file__))
        env["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + here
        return env

    def beacon(self, rank=0):
        return read_beacon(os.path.join(self.dir, self.job, f"rank-{rank}.beacon"))

    def trainer(self, binding, body):
        """Starts a trainer: PRELUDE (init, one step), then body."""
        script = os.path.join(self.tmp, f"trainer-{binding}.py")
        with open(script, "w") as f:
            f.write(PRELUDE + textwrap.dedent(body))
        return subprocess.Popen(
            [sys.executable, script],
            env=self.env(binding),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run_trainer(self, binding, body, timeout=60):
        p = self.trainer(binding, body)
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err

    def check(self, body, *, rc, status, per_binding=None):
        """Runs body under each binding; expects the exit code and the final beacon status
        (per_binding: {binding: status} where the bindings differ)."""
        for binding in BINDINGS:
            with self.subTest(binding=binding):
                shutil.rmtree(self.dir, ignore_errors=True)
                code, out, err = self.run_trainer(binding, body)
                self.assertEqual(code, rc, f"stdout:\n{out}\nstderr:\n{err}")
                want = (per_binding or {}).get(binding, status)
                raw = self.beacon()
                self.assertEqual(raw["step"], 1)
                self.assertEqual(raw["status"], want, f"stderr:\n{err}")


class NormalEndTest(EndingCase):
    def test_falling_off_the_end_is_finished(self):
        self.check("", rc=0, status=FINISHED)

    def test_sys_exit_zero_and_none_are_finished(self):
        self.check("sys.exit(0)\n", rc=0, status=FINISHED)
        self.check("sys.exit()\n", rc=0, status=FINISHED)

    def test_an_explicit_beacon_is_covered_too(self):
        body = """\
        stepwatch.close()
        b = stepwatch.Beacon(rank=0)
        b.step(1)
        """
        self.check(body, rc=0, status=FINISHED)

    def test_an_explicit_beacon_dropped_before_exit_says_nothing(self):
        # The hook holds Beacons weakly: one the trainer let go of was closed without a word.
        body = """\
        stepwatch.close()
        b = stepwatch.Beacon(rank=0)
        b.step(1)
        del b
        """
        self.check(body, rc=0, status=RUNNING)

    def test_a_beacon_replaced_by_init_is_left_as_it_was(self):
        body = """\
        old = stepwatch.path()
        stepwatch.init(rank=1, world_size=2)  # closes rank 0's beacon: it says nothing more
        """
        for binding in BINDINGS:
            with self.subTest(binding=binding):
                shutil.rmtree(self.dir, ignore_errors=True)
                code, _, err = self.run_trainer(binding, body)
                self.assertEqual(code, 0, err)
                self.assertEqual(self.beacon(0)["status"], RUNNING)
                self.assertEqual(self.beacon(1)["status"], FINISHED)


class FailureTest(EndingCase):
    def test_an_uncaught_exception_is_failed(self):
        self.check("raise RuntimeError('the loss went to NaN')\n", rc=1, status=FAILED)

    def test_a_replaced_excepthook_does_not_hide_the_exception(self):
        body = """\
        sys.excepthook = lambda *exc: None  # a framework's own hook, not chaining ours
        raise RuntimeError("boom")
        """
        self.check(body, rc=1, status=FAILED)

    def test_keyboard_interrupt_from_sigint_is_failed(self):
        # Python 3.8+ ends an unhandled KeyboardInterrupt by killing itself with SIGINT: exit
        # never runs, so the atexit hook must have said it already.
        body = """\
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)
        """
        self.check(body, rc=-signal.SIGINT, status=FAILED)

    def test_non_zero_exit_status(self):
        # The native binding sees the exit status (glibc on_exit); Python code, and so the ctypes
        # binding, cannot: there a SystemExit of any code reads as a clean end.
        differ = {"native": FAILED, "ctypes": FINISHED}
        self.check("sys.exit(3)\n", rc=3, status=None, per_binding=differ)
        self.check("raise SystemExit(4)\n", rc=4, status=None, per_binding=differ)
        self.check("sys.exit('cannot continue')\n", rc=1, status=None, per_binding=differ)


class ExplicitWordTest(EndingCase):
    def test_finish_false_then_a_normal_exit_stays_failed(self):
        self.check("stepwatch.finish(False)\n", rc=0, status=FAILED)

    def test_finish_true_then_an_exception_stays_finished(self):
        self.check("stepwatch.finish()\nraise RuntimeError('after the end')\n", rc=1, status=FINISHED)

    def test_explicit_beacon_finish_is_final(self):
        body = """\
        stepwatch.close()
        b = stepwatch.Beacon()
        b.step(1)
        b.finish(ok=False)
        """
        self.check(body, rc=0, status=FAILED)

    def test_a_closed_beacon_is_left_as_it_was(self):
        self.check("stepwatch.close()\n", rc=0, status=RUNNING)

    def test_finish_in_a_later_atexit_handler_still_counts(self):
        # Registered before stepwatch's hook ran (atexit is last-in, first-out), so it runs after
        # it: the trainer's word must still win over the exit status.
        body = """\
        import atexit
        atexit.unregister(stepwatch._exit_hook._end_of_process)
        atexit.register(lambda: stepwatch.finish(False))
        atexit.register(stepwatch._exit_hook._end_of_process, stepwatch._b.finish_at_exit)
        """
        self.check(body, rc=0, status=FAILED)


class NoExitCodeTest(EndingCase):
    """Processes that end without running exit handlers leave the beacon running: the watchdog
    judges them from the process's exit."""

    def killed(self, sig):
        body = """\
        print("ready", flush=True)
        time.sleep(60)
        """
        for binding in BINDINGS:
            with self.subTest(binding=binding):
                shutil.rmtree(self.dir, ignore_errors=True)
                p = self.trainer(binding, body)
                try:
                    self.assertEqual(p.stdout.readline().strip(), "ready")
                    p.send_signal(sig)
                    p.communicate(timeout=30)
                finally:
                    p.kill()
                    p.wait()
                self.assertEqual(p.returncode, -sig)
                self.assertEqual(self.beacon()["status"], RUNNING)

    def test_sigkill(self):
        self.killed(signal.SIGKILL)

    def test_sigterm_default_action(self):
        self.killed(signal.SIGTERM)

    def test_os_exit(self):
        self.check("os._exit(0)\n", rc=0, status=RUNNING)


class ForkTest(EndingCase):
    """A forked child is not the rank: however it ends, it must not mark its parent's beacon."""

    def in_parent(self, child_body, expect_out=()):
        body = textwrap.dedent(child_body) + 'print("parent sees", status(), flush=True)\nstepwatch.step(2)\n'
        for binding in BINDINGS:
            with self.subTest(binding=binding):
                shutil.rmtree(self.dir, ignore_errors=True)
                code, out, err = self.run_trainer(binding, body)
                self.assertEqual(code, 0, err)
                self.assertIn(f"parent sees {RUNNING}", out, err)
                for text in expect_out:
                    self.assertIn(text, out, err)
                raw = self.beacon()
                self.assertEqual((raw["step"], raw["status"]), (2, FINISHED), err)

    def test_os_fork_child_exits_through_the_interpreter(self):
        self.in_parent(
            """\
            pid = os.fork()
            if pid == 0:
                sys.exit(0)  # runs the inherited atexit hooks in the child
            os.waitpid(pid, 0)
            """
        )

    def test_os_fork_child_dies_of_an_exception(self):
        self.in_parent(
            """\
            pid = os.fork()
            if pid == 0:
                sys.stderr = open(os.devnull, "w")
                raise RuntimeError("in the child")
            _, st = os.waitpid(pid, 0)
            assert os.WEXITSTATUS(st) == 1, st
            """
        )

    def test_os_fork_child_with_an_explicit_parent_beacon(self):
        self.in_parent(
            """\
            extra = stepwatch.Beacon(rank=0, job="ending-extra")
            pid = os.fork()
            if pid == 0:
                sys.exit(0)
            os.waitpid(pid, 0)
            print("extra sees", read_beacon(extra.path())["status"], flush=True)
            """,
            expect_out=[f"extra sees {RUNNING}"],
        )

    def test_multiprocessing_fork_worker(self):
        self.in_parent(
            """\
            import multiprocessing

            def work(q):
                q.put(os.getpid())

            ctx = multiprocessing.get_context("fork")
            q = ctx.Queue()
            w = ctx.Process(target=work, args=(q,))
            w.start()
            q.get(timeout=30)
            w.join(30)
            assert w.exitcode == 0, w.exitcode
            """
        )

    @unittest.skipUnless(importlib.util.find_spec("torch"), "PyTorch is not installed for this python")
    def test_torch_dataloader_workers(self):
        self.in_parent(
            """\
            import torch
            from torch.utils.data import DataLoader, TensorDataset

            loader = DataLoader(TensorDataset(torch.arange(16.0)), batch_size=4, num_workers=2)
            assert sum(len(b[0]) for b in loader) == 16
            del loader
            """
        )

    def test_a_child_that_opens_its_own_beacon_says_its_own_end(self):
        body = """\
        pid = os.fork()
        if pid == 0:
            stepwatch.init(rank=1, world_size=2)
            stepwatch.step(1)
            sys.exit(0)
        os.waitpid(pid, 0)
        print("parent sees", status(), flush=True)
        """
        for binding in BINDINGS:
            with self.subTest(binding=binding):
                shutil.rmtree(self.dir, ignore_errors=True)
                code, out, err = self.run_trainer(binding, body)
                self.assertEqual(code, 0, err)
                self.assertIn(f"parent sees {RUNNING}", out)
                self.assertEqual(self.beacon(1)["status"], FINISHED)
                self.assertEqual(self.beacon(0)["status"], FINISHED)


class ThreadTest(EndingCase):
    def test_an_exception_in_another_thread_does_not_fail_the_rank(self):
        body = """\
        def loader():
            raise OSError("a prefetch thread died")

        t = threading.Thread(target=loader)
        t.start()
        t.join()
        print("after the thread", status(), flush=True)
        stepwatch.step(2)
        """
        for binding in BINDINGS:
            with self.subTest(binding=binding):
                shutil.rmtree(self.dir, ignore_errors=True)
                code, out, err = self.run_trainer(binding, body)
                self.assertEqual(code, 0, err)
                self.assertIn("a prefetch thread died", err)  # threading.excepthook printed it
                self.assertIn(f"after the thread {RUNNING}", out)
                raw = self.beacon()
                self.assertEqual((raw["step"], raw["status"]), (2, FINISHED))


if __name__ == "__main__":
    unittest.main()
