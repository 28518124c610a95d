# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""The public `stepwatch` API with the binding STEPWATCH_BINDING selects (ctest runs this file
once per binding). Every beacon written here is read back through the real `stepwatch status`
binary or the raw record."""

import math
import mmap
import os
import struct
import unittest

import swtest  # noqa: F401 - makes the built package importable

import stepwatch
from stepwatch import errors
from swtest import SEQ_OFFSET, IsolatedCase, read_beacon


class BindingSelectionTest(unittest.TestCase):
    def test_binding_is_the_requested_one(self):
        wanted = os.environ.get("STEPWATCH_BINDING")
        if wanted:
            self.assertEqual(stepwatch.BINDING, wanted)
        else:
            self.assertIn(stepwatch.BINDING, ("native", "ctypes"))

    def test_native_step_is_a_builtin(self):
        if stepwatch.BINDING != "native":
            self.skipTest("ctypes binding")
        self.assertEqual(type(stepwatch.step).__name__, "builtin_function_or_method")

    def test_error_texts_match_the_library(self):
        for code, text in errors.STRERROR.items():
            self.assertEqual(stepwatch._b.strerror(code), text, f"code {code}")
        self.assertEqual(stepwatch._b.abi_version(), 1)


class BeforeInitTest(IsolatedCase):
    def test_every_call_raises_a_clear_error(self):
        calls = {
            "step": lambda: stepwatch.step(1),
            "loss": lambda: stepwatch.loss(1.0),
            "beat": stepwatch.beat,
            "phase_begin": lambda: stepwatch.phase_begin("eval"),
            "phase_end": stepwatch.phase_end,
            "checkpoint_committed": lambda: stepwatch.checkpoint_committed("c", 1),
            "finish": stepwatch.finish,
            "path": stepwatch.path,
        }
        for op, call in calls.items():
            with self.subTest(op=op):
                with self.assertRaises(stepwatch.NotInitializedError) as cm:
                    call()
                self.assertIsInstance(cm.exception, stepwatch.StepwatchError)
                self.assertIn(f"stepwatch.{op}()", str(cm.exception))
                self.assertIn("stepwatch.init()", str(cm.exception))
        with self.assertRaises(stepwatch.NotInitializedError):
            with stepwatch.phase("eval"):
                pass
        self.assertFalse(stepwatch.is_initialized())
        self.assertFalse(os.path.exists(self.dir), "nothing may be written before init()")


class InitTest(IsolatedCase):
    def test_missing_job_id(self):
        del os.environ["STEPWATCH_JOB"]
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            stepwatch.init()
        e = cm.exception
        self.assertEqual(e.code, errors.ENOJOB)
        self.assertEqual(e.op, "open")
        # The C library's stepwatch_last_error() text, naming the variable to set.
        self.assertIn("no job id: set STEPWATCH_JOB (or pass job= explicitly)", str(e))
        self.assertFalse(stepwatch.is_initialized())

    def test_malformed_rank_names_the_variable(self):
        os.environ["RANK"] = "x1"
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            stepwatch.init()
        self.assertEqual(cm.exception.code, errors.ENORANK)
        self.assertIn('RANK="x1" is not an integer', str(cm.exception))

    def test_rank_outside_world(self):
        os.environ.update(RANK="2", WORLD_SIZE="2")
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            stepwatch.init()
        self.assertEqual(cm.exception.code, errors.ENORANK)
        self.assertIn("RANK=2 is not below WORLD_SIZE=2", str(cm.exception))

    def test_invalid_job_id(self):
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            stepwatch.init(job="../escape")
        self.assertEqual(cm.exception.code, errors.EINVAL)
        self.assertIn("job id", str(cm.exception))

    def test_argument_types(self):
        with self.assertRaises(ValueError):
            stepwatch.init(rank=-1)
        with self.assertRaises(TypeError):
            stepwatch.init(job=5)
        with self.assertRaises(TypeError):
            stepwatch.init(rank="1")

    def test_torchrun_environment(self):
        os.environ.update(RANK="1", LOCAL_RANK="0", WORLD_SIZE="2", STEPWATCH_INCARNATION="3")
        b = stepwatch.init()
        self.assertIs(stepwatch.default_beacon(), b)
        self.assertEqual(stepwatch.path(), os.path.join(self.dir, self.job, "rank-1.beacon"))
        raw = read_beacon(stepwatch.path())
        self.assertEqual((raw["rank"], raw["local_rank"], raw["world_size"]), (1, 0, 2))
        self.assertEqual(raw["incarnation"], 3)
        self.assertEqual(raw["pid"], os.getpid())
        self.assertEqual(raw["phase"], "init")

    def test_slurm_environment(self):
        os.environ.update(SLURM_PROCID="3", SLURM_LOCALID="1", SLURM_NTASKS="4")
        stepwatch.init()
        raw = read_beacon(stepwatch.path())
        self.assertEqual((raw["rank"], raw["local_rank"], raw["world_size"]), (3, 1, 4))

    def test_explicit_arguments_override_the_environment(self):
        os.environ.update(RANK="0", WORLD_SIZE="1")
        other = os.path.join(self.tmp, "other")
        stepwatch.init(job="explicit", dir=other, rank=2, local_rank=0, world_size=4, incarnation=7)
        self.assertEqual(stepwatch.path(), os.path.join(other, "explicit", "rank-2.beacon"))
        raw = read_beacon(stepwatch.path())
        self.assertEqual((raw["job"], raw["rank"], raw["world_size"], raw["incarnation"]), ("explicit", 2, 4, 7))

    def test_init_again_replaces_the_default(self):
        first = stepwatch.init()
        stepwatch.step(5)
        second = stepwatch.init()
        self.assertTrue(first.closed)
        self.assertIs(stepwatch.default_beacon(), second)
        self.assertEqual(self.status()[0].step, None, "the new incarnation starts without steps")
        stepwatch.step(6)
        self.assertEqual(self.status()[0].step, 6)

    def test_close(self):
        b = stepwatch.init()
        stepwatch.close()
        stepwatch.close()  # idempotent
        self.assertTrue(b.closed)
        with self.assertRaises(stepwatch.NotInitializedError):
            stepwatch.step(1)
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            b.step(1)
        self.assertEqual(cm.exception.code, errors.ENULL)
        self.assertIn("closed", str(cm.exception))
        self.assertTrue(os.path.exists(os.path.join(self.dir, self.job, "rank-0.beacon")), "the file stays")


class ProgressTest(IsolatedCase):
    def setUp(self):
        super().setUp()
        stepwatch.init()

    def test_status_shows_step_phase_checkpoint_loss(self):
        self.assertTrue(stepwatch.step(1))
        self.assertTrue(stepwatch.step(7, loss=0.25))
        with stepwatch.phase("eval"):
            self.assertTrue(stepwatch.beat())
            row = self.status()[0]
            self.assertEqual(row.phase, "eval")
            self.assertNotEqual(row.beat_age, "n/a")
        self.assertTrue(stepwatch.checkpoint_committed("ckpt-7", 7))
        row = self.status()[0]
        self.assertEqual(row.step, 7)
        self.assertEqual(row.phase, "train")
        self.assertEqual((row.checkpoint, row.checkpoint_step), ("ckpt-7", 7))
        self.assertAlmostEqual(row.loss, 0.25)
        self.assertEqual(row.status, "running")
        self.assertEqual(row.pid, os.getpid())
        self.assertEqual(row.source, "beacon")
        raw = read_beacon(stepwatch.path())
        self.assertEqual((raw["step_count"], raw["beat_count"]), (2, 1))

    def test_loss_alone_and_nan(self):
        stepwatch.step(1)
        self.assertTrue(stepwatch.loss(3.5))
        self.assertAlmostEqual(self.status()[0].loss, 3.5)
        stepwatch.step(2, loss=float("nan"))
        self.assertTrue(math.isnan(self.status()[0].loss))

    def test_loss_accepts_objects_with_float(self):
        class Scalar:
            def __float__(self):
                return 1.25

        stepwatch.step(1, loss=Scalar())
        self.assertAlmostEqual(self.status()[0].loss, 1.25)
        with self.assertRaises(TypeError):
            stepwatch.loss("high")

    def test_step_arguments(self):
        self.assertTrue(stepwatch.step(n=3, loss=1.0))
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            stepwatch.step(-1)
        self.assertEqual(cm.exception.code, errors.EINVAL)
        self.assertIn("must be >= 0", str(cm.exception))
        with self.assertRaises(TypeError):
            stepwatch.step(1.5)
        with self.assertRaises(TypeError):
            stepwatch.step(1, lost=1.0)
        self.assertEqual(self.status()[0].step, 3)

    def test_finish_ok(self):
        stepwatch.step(1)
        self.assertTrue(stepwatch.finish())
        self.assertEqual(self.status()[0].status, "finished")

    def test_finish_failed(self):
        self.assertTrue(stepwatch.finish(ok=False))
        self.assertEqual(self.status()[0].status, "failed")
        self.assertEqual(read_beacon(stepwatch.path())["status"], 2)

    def test_checkpoint_errors(self):
        for ckpt_id, step in [("has space", 1), ("", 1), ('q"uote', 1), ("x" * 64, 1), ("ok", -1)]:
            with self.subTest(id=ckpt_id, step=step):
                with self.assertRaises(stepwatch.StepwatchError) as cm:
                    stepwatch.checkpoint_committed(ckpt_id, step)
                self.assertEqual(cm.exception.code, errors.EINVAL)
                self.assertIn("invalid checkpoint", str(cm.exception))
        with self.assertRaises(TypeError):
            stepwatch.checkpoint_committed(b"bytes", 1)
        self.assertIsNone(self.status()[0].checkpoint)

    def test_busy_beacon_returns_false_and_writes_nothing(self):
        # Another writer inside an update (odd seq): every call must give up at once.
        stepwatch.step(1)
        with open(stepwatch.path(), "r+b") as f, mmap.mmap(f.fileno(), 1024) as m:
            seq = struct.unpack_from("<Q", m, SEQ_OFFSET)[0]
            struct.pack_into("<Q", m, SEQ_OFFSET, seq + 1)
            try:
                self.assertIs(stepwatch.step(2), False)
                self.assertIs(stepwatch.loss(1.0), False)
                self.assertIs(stepwatch.beat(), False)
                self.assertIs(stepwatch.checkpoint_committed("c", 2), False)
                self.assertIs(stepwatch.finish(), False)
                with stepwatch.phase("eval"):  # begin was refused, so the exit must not end anything
                    pass
            finally:
                struct.pack_into("<Q", m, SEQ_OFFSET, seq)
        raw = read_beacon(stepwatch.path())
        self.assertEqual((raw["step"], raw["step_count"], raw["beat_count"], raw["status"]), (1, 1, 0, 0))
        self.assertEqual(raw["phase"], "train")
        with self.assertRaises(stepwatch.StepwatchError):
            stepwatch.phase_end()  # no phase was left open by the refused begin

    def test_fork_child_does_not_write_the_parent_beacon(self):
        stepwatch.step(1)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                stepwatch.step(99)
            except stepwatch.NotInitializedError:
                code = 0
            except BaseException:  # noqa: BLE001
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertEqual(self.status()[0].step, 1)
        self.assertTrue(stepwatch.step(2), "the parent keeps its beacon")


class PhaseTest(IsolatedCase):
    def setUp(self):
        super().setUp()
        stepwatch.init()

    def phase_now(self):
        return self.status()[0].phase

    def test_nesting_restores_the_enclosing_phase(self):
        self.assertEqual(self.phase_now(), "init")
        with stepwatch.phase("compile"):
            stepwatch.step(1)  # a step inside a phase keeps the label
            self.assertEqual(self.phase_now(), "compile")
        self.assertEqual(self.phase_now(), "train", "a step happened: init is over")
        with stepwatch.phase("eval"):
            with stepwatch.phase("data/load"):
                self.assertEqual(self.phase_now(), "data/load")
            self.assertEqual(self.phase_now(), "eval")
        self.assertEqual(self.phase_now(), "train")
        self.assertGreaterEqual(read_beacon(stepwatch.path())["phase_count"], 6)

    def test_phase_without_steps_returns_to_init(self):
        with stepwatch.phase("data"):
            pass
        self.assertEqual(self.phase_now(), "init")

    def test_exception_ends_the_phase_and_propagates(self):
        stepwatch.step(1)
        with self.assertRaises(KeyError):
            with stepwatch.phase("checkpoint"):
                raise KeyError("boom")
        self.assertEqual(self.phase_now(), "train")
        with self.assertRaises(stepwatch.StepwatchError):
            stepwatch.phase_end()

    def test_a_failing_phase_end_does_not_hide_the_body_error(self):
        with self.assertRaises(KeyError):
            with stepwatch.phase("eval"):
                stepwatch.phase_end()  # the user ended it by hand: the exit's end fails
                raise KeyError("the real error")

    def test_phase_end_without_begin(self):
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            stepwatch.phase_end()
        self.assertEqual(cm.exception.code, errors.EPHASE)
        self.assertIn("no phase is open", str(cm.exception))

    def test_bad_phase_names(self):
        for name in ["", "has space", "x" * 32, "caf\u00e9", "a\0b", "semi;colon"]:
            with self.subTest(name=name):
                with self.assertRaises(stepwatch.StepwatchError) as cm:
                    stepwatch.phase_begin(name)
                self.assertEqual(cm.exception.code, errors.EINVAL)
                self.assertIn("invalid phase name", str(cm.exception))
                with self.assertRaises(stepwatch.StepwatchError):
                    with stepwatch.phase(name):
                        self.fail("the body must not run")
        with self.assertRaises(TypeError):
            stepwatch.phase_begin(None)
        with self.assertRaises(TypeError):
            stepwatch.phase(3)
        self.assertTrue(stepwatch.phase_begin("x" * 31))
        self.assertTrue(stepwatch.phase_begin("A.b_c-d:e/f"))
        self.assertEqual(self.phase_now(), "A.b_c-d:e/f")

    def test_nesting_limit(self):
        for i in range(8):
            self.assertTrue(stepwatch.phase_begin(f"p{i}"))
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            stepwatch.phase_begin("p8")
        self.assertEqual(cm.exception.code, errors.EPHASE)
        self.assertIn("nested deeper than 8", str(cm.exception))
        self.assertEqual(self.phase_now(), "p7")
        for _ in range(8):
            self.assertTrue(stepwatch.phase_end())
        self.assertEqual(self.phase_now(), "init")

    def test_decorator(self):
        seen = []

        @stepwatch.phase("eval")
        def evaluate(depth):
            seen.append(self.phase_now())
            if depth:
                evaluate(depth - 1)  # re-entrant: each call has its own begin/end
            return depth

        self.assertEqual(evaluate.__name__, "evaluate")
        self.assertEqual(evaluate(2), 2)
        self.assertEqual(seen, ["eval", "eval", "eval"])
        self.assertEqual(self.phase_now(), "init")

    def test_decorator_applied_before_init(self):
        stepwatch.close()

        @stepwatch.phase("eval")
        def evaluate():
            return self.phase_now()

        with self.assertRaises(stepwatch.NotInitializedError):
            evaluate()
        stepwatch.init()
        self.assertEqual(evaluate(), "eval")

    def test_same_phase_object_reentered(self):
        p = stepwatch.phase("eval")
        with p:
            with p:
                self.assertEqual(self.phase_now(), "eval")
            self.assertEqual(self.phase_now(), "eval")
        self.assertEqual(self.phase_now(), "init")


class ExplicitBeaconTest(IsolatedCase):
    def test_two_ranks_in_one_process(self):
        with stepwatch.Beacon(rank=0, world_size=2) as r0, stepwatch.Beacon(rank=1, world_size=2) as r1:
            self.assertFalse(stepwatch.is_initialized(), "explicit handles do not touch the default")
            r0.step(10, loss=1.0)
            r1.step(9)
            with r1.phase("eval"):
                r1.beat()
                rows = self.status()
                self.assertEqual((rows[0].step, rows[0].phase), (10, "train"))
                self.assertEqual((rows[1].step, rows[1].phase), (9, "eval"))
            r0.checkpoint_committed("c10", 10)
            r0.finish()
            r1.finish(False)
            self.assertIn("rank-1.beacon", repr(r1))
        self.assertTrue(r0.closed and r1.closed)
        rows = self.status()
        self.assertEqual((rows[0].status, rows[1].status), ("finished", "failed"))
        self.assertEqual(rows[0].checkpoint, "c10")
        self.assertIn("closed", repr(r0))


if __name__ == "__main__":
    unittest.main()
