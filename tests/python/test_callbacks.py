# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""The Lightning and transformers callbacks, driven through their hooks with stand-in framework
modules injected into sys.modules (neither framework is installed here). The beacon is read back
after each hook; the end of a run is also checked in real trainer processes, where the exit
hook has the last word."""

import math
import os
import subprocess
import sys
import textwrap
import types
import unittest
import warnings
from unittest import mock

import swtest  # noqa: F401 - makes the built package importable

import stepwatch
import stepwatch.callbacks as callbacks
from swtest import IsolatedCase, python_env, read_beacon


class FakeTensor:
    """Enough of a torch scalar tensor: detach() and float()."""

    def __init__(self, value):
        self.value = value
        self.detached = False

    def detach(self):
        self.detached = True
        return self

    def __float__(self):
        return float(self.value)


def _stand_in_lightning():
    module = types.ModuleType("pytorch_lightning")

    class Callback:  # the real base defines every hook as a no-op
        pass

    module.Callback = Callback
    return module


def _stand_in_transformers():
    module = types.ModuleType("transformers")

    class TrainerCallback:
        pass

    module.TrainerCallback = TrainerCallback
    return module


class _FrameworkCase(IsolatedCase):
    modules = {}

    def setUp(self):
        super().setUp()
        # A real framework on this machine must not be picked up instead of the stand-in.
        blocked = {"lightning": None, "lightning.pytorch": None, "pytorch_lightning": None, "transformers": None}
        blocked.update(self.modules)
        patcher = mock.patch.dict(sys.modules, blocked)
        patcher.start()
        self.addCleanup(patcher.stop)
        callbacks._built.clear()
        self.addCleanup(callbacks._built.clear)

    def beacon(self):
        return read_beacon(stepwatch.path())


class MissingFrameworkTest(_FrameworkCase):
    def test_lightning_missing(self):
        with self.assertRaises(ImportError) as cm:
            from stepwatch.callbacks import StepwatchLightningCallback  # noqa: F401
        self.assertIn("needs PyTorch Lightning", str(cm.exception))

    def test_transformers_missing(self):
        with self.assertRaises(ImportError) as cm:
            callbacks.StepwatchHFCallback  # noqa: B018
        self.assertIn("needs Hugging Face transformers", str(cm.exception))

    def test_unknown_name(self):
        with self.assertRaises(AttributeError):
            callbacks.NoSuchCallback  # noqa: B018


class Trainer:
    def __init__(self, **kw):
        self.global_step = 0
        self.global_rank = 1
        self.local_rank = 0
        self.world_size = 2
        self.checkpoint_callback = None
        self.__dict__.update(kw)


class LightningCallbackTest(_FrameworkCase):
    modules = {"pytorch_lightning": _stand_in_lightning()}

    def make(self, **kw):
        from stepwatch.callbacks import StepwatchLightningCallback

        self.assertTrue(issubclass(StepwatchLightningCallback, sys.modules["pytorch_lightning"].Callback))
        return StepwatchLightningCallback(**kw)

    def test_training_run(self):
        cb = self.make()
        trainer = Trainer()
        cb.setup(trainer, None, "fit")
        self.assertTrue(stepwatch.is_initialized(), "setup() opens the beacon lazily")
        raw = self.beacon()
        self.assertEqual((raw["rank"], raw["local_rank"], raw["world_size"]), (1, 0, 2))

        trainer.global_step = 1
        loss = FakeTensor(0.5)
        cb.on_train_batch_end(trainer, None, {"loss": loss}, None, 0)
        raw = self.beacon()
        self.assertEqual((raw["step"], raw["step_count"], raw["loss"], raw["phase"]), (1, 1, 0.5, "train"))
        self.assertTrue(loss.detached)

        # Gradient accumulation: a micro-batch without an optimizer step beats, never steps.
        cb.on_train_batch_end(trainer, None, FakeTensor(0.4), None, 1)
        raw = self.beacon()
        self.assertEqual((raw["step_count"], raw["beat_count"], raw["loss"]), (1, 1, 0.5))

        trainer.global_step = 2
        cb.on_train_batch_end(trainer, None, None, None, 2, 0)  # Lightning 1.x passes dataloader_idx
        self.assertEqual(self.beacon()["step"], 2)

        cb.on_validation_start(trainer, None)
        self.assertEqual(self.beacon()["phase"], "eval")
        cb.on_validation_batch_end(trainer, None, None, None, 0)
        cb.on_validation_batch_end(trainer, None, None, None, 1)
        self.assertEqual(self.beacon()["beat_count"], 3)
        cb.on_validation_end(trainer, None)
        self.assertEqual(self.beacon()["phase"], "train")

        # The checkpoint counts only once the file exists (Lightning has no after-write hook).
        ckpt = os.path.join(self.tmp, "epoch=0-step=2.ckpt")
        trainer.checkpoint_callback = types.SimpleNamespace(last_model_path=ckpt, best_model_path="")
        cb.on_save_checkpoint(trainer, None, {})
        trainer.global_step = 3
        cb.on_train_batch_end(trainer, None, None, None, 3)
        self.assertEqual(self.beacon()["ckpt_step"], -1)
        with open(ckpt, "w"):
            pass
        trainer.global_step = 4
        cb.on_train_batch_end(trainer, None, None, None, 4)
        raw = self.beacon()
        self.assertEqual((raw["ckpt_id"], raw["ckpt_step"], raw["step"]), ("epoch=0-step=2.ckpt", 2, 4))

        cb.on_fit_end(trainer, None)
        # The end of fit() is not the end of the process: the exit hook says how that ends.
        self.assertEqual(self.beacon()["status"], 0)

    def test_finish_on_end(self):
        cb = self.make(finish_on_end=True)
        trainer = Trainer(global_step=1)
        cb.setup(trainer, None)
        cb.on_train_batch_end(trainer, None, None, None, 0)
        cb.on_fit_end(trainer, None)
        self.assertEqual(self.beacon()["status"], 1)

    def test_test_and_predict_are_labeled(self):
        cb = self.make()
        trainer = Trainer(global_step=1)
        cb.setup(trainer, None, "test")
        cb.on_train_batch_end(trainer, None, None, None, 0)
        for start, batch, end in (
            (cb.on_test_start, cb.on_test_batch_end, cb.on_test_end),
            (cb.on_predict_start, cb.on_predict_batch_end, cb.on_predict_end),
        ):
            beats = self.beacon()["beat_count"]
            start(trainer, None)
            self.assertEqual(self.beacon()["phase"], "eval")
            batch(trainer, None, None, None, 0)
            batch(trainer, None, None, None, 1, 0)
            self.assertEqual(self.beacon()["beat_count"], beats + 2)
            end(trainer, None)
            self.assertEqual(self.beacon()["phase"], "train")
        self.assertEqual(self.beacon()["status"], 0)

    def test_exception_left_to_the_exit_hook(self):
        cb = self.make(fail_on_exception=False)
        trainer = Trainer()
        cb.setup(trainer, None)
        cb.on_validation_start(trainer, None)
        cb.on_exception(trainer, None, RuntimeError("boom"))
        raw = self.beacon()
        self.assertEqual((raw["status"], raw["phase"]), (0, "init"))

    def test_checkpoint_without_a_checkpoint_callback(self):
        cb = self.make()
        trainer = Trainer(global_step=5)
        cb.setup(trainer, None)
        cb.on_save_checkpoint(trainer, None, {})
        cb.on_train_epoch_end(trainer, None)
        raw = self.beacon()
        self.assertEqual((raw["ckpt_id"], raw["ckpt_step"]), ("step-5", 5))

    def test_report_loss_off_and_unusable_outputs(self):
        cb = self.make(report_loss=False)
        trainer = Trainer(global_step=1)
        cb.setup(trainer, None)
        cb.on_train_batch_end(trainer, None, FakeTensor(2.0), None, 0)
        self.assertTrue(math.isnan(self.beacon()["loss"]))
        cb2 = self.make()
        trainer.global_step = 2
        cb2.on_train_batch_end(trainer, None, {"loss": "not a number"}, None, 0)
        raw = self.beacon()
        self.assertEqual(raw["step"], 2)
        self.assertTrue(math.isnan(raw["loss"]))

    def test_exception_marks_failed(self):
        cb = self.make()
        trainer = Trainer()
        cb.setup(trainer, None)
        cb.on_validation_start(trainer, None)
        cb.on_exception(trainer, None, RuntimeError("boom"))
        raw = self.beacon()
        self.assertEqual((raw["status"], raw["phase"]), (2, "init"))

    def test_existing_beacon_is_kept(self):
        b = stepwatch.init(rank=0)
        cb = self.make()
        cb.setup(Trainer(), None)
        self.assertIs(stepwatch.default_beacon(), b)

    def test_without_job_the_callback_warns_once_and_stands_aside(self):
        del os.environ["STEPWATCH_JOB"]
        cb = self.make()
        trainer = Trainer(global_step=1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cb.setup(trainer, None)
            cb.on_train_batch_end(trainer, None, None, None, 0)
            cb.on_validation_start(trainer, None)
            cb.on_fit_end(trainer, None)
        self.assertEqual(len(caught), 1, [str(w.message) for w in caught])
        self.assertIn("STEPWATCH_JOB", str(caught[0].message))
        self.assertFalse(stepwatch.is_initialized())

    def test_strict_raises(self):
        del os.environ["STEPWATCH_JOB"]
        cb = self.make(strict=True)
        with self.assertRaises(stepwatch.StepwatchError):
            cb.setup(Trainer(), None)

    def test_errors_in_hooks_warn_once(self):
        cb = self.make()
        trainer = Trainer()
        cb.setup(trainer, None)
        stepwatch.default_beacon().close()  # every call now fails with "closed"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for step in (1, 2, 3):
                trainer.global_step = step
                cb.on_train_batch_end(trainer, None, None, None, step)
        self.assertEqual(len(caught), 1)
        self.assertIn("closed", str(caught[0].message))

    def test_explicit_package_choice(self):
        cls = callbacks.lightning_callback_class("pytorch_lightning")
        self.assertTrue(issubclass(cls, sys.modules["pytorch_lightning"].Callback))
        with self.assertRaises(ImportError):
            callbacks.lightning_callback_class("lightning.pytorch")


class HFCallbackTest(_FrameworkCase):
    modules = {"transformers": _stand_in_transformers()}

    def setUp(self):
        super().setUp()
        from stepwatch.callbacks import StepwatchHFCallback

        self.assertTrue(issubclass(StepwatchHFCallback, sys.modules["transformers"].TrainerCallback))
        self.cb = StepwatchHFCallback()
        self.args = types.SimpleNamespace(process_index=1, local_process_index=1, world_size=2)
        self.state = types.SimpleNamespace(global_step=0)
        self.control = object()

    def hook(self, name, **kw):
        getattr(self.cb, name)(self.args, self.state, self.control, **kw)

    def test_training_run(self):
        self.hook("on_init_end")
        raw = self.beacon()
        self.assertEqual((raw["rank"], raw["local_rank"], raw["world_size"], raw["phase"]), (1, 1, 2, "init"))
        self.hook("on_train_begin")

        self.hook("on_substep_end")
        self.state.global_step = 1
        self.hook("on_step_end")
        self.hook("on_log", logs={"loss": 0.75, "learning_rate": 1e-4, "epoch": 0.1})
        raw = self.beacon()
        self.assertEqual((raw["step"], raw["loss"], raw["beat_count"], raw["phase"]), (1, 0.75, 1, "train"))

        # Evaluation: the phase begins lazily at the first prediction step.
        self.hook("on_prediction_step")
        self.assertEqual(self.beacon()["phase"], "eval")
        self.hook("on_prediction_step")
        self.hook("on_log", logs={"eval_loss": 9.0})
        raw = self.beacon()
        self.assertEqual((raw["phase"], raw["beat_count"], raw["loss"]), ("eval", 3, 0.75))
        self.hook("on_evaluate", metrics={"eval_loss": 9.0})
        self.assertEqual(self.beacon()["phase"], "train")
        self.hook("on_evaluate", metrics={})  # no phase open: nothing to end, no error

        self.state.global_step = 2
        self.hook("on_step_end")
        self.hook("on_save")
        raw = self.beacon()
        self.assertEqual((raw["ckpt_id"], raw["ckpt_step"], raw["step"]), ("checkpoint-2", 2, 2))

        self.hook("on_prediction_step")
        self.hook("on_predict", metrics={})
        self.assertEqual(self.beacon()["phase"], "train")

        self.hook("on_prediction_step")  # an evaluation cut short by the end of training
        self.hook("on_train_end")
        raw = self.beacon()
        self.assertEqual((raw["status"], raw["phase"]), (0, "train"), "the exit hook says how the process ends")

    def test_finish_on_end(self):
        from stepwatch.callbacks import StepwatchHFCallback

        cb = StepwatchHFCallback(finish_on_end=True, init_kwargs={"job": "from-kwargs"})
        cb.on_train_begin(self.args, self.state, self.control)
        self.assertEqual(self.beacon()["job"], "from-kwargs")
        cb.on_train_end(self.args, self.state, self.control)
        self.assertEqual(self.beacon()["status"], 1)


# A trainer process: stand-in frameworks, the callbacks' end-of-training hooks, then BODY.
_PROCESS = """\
import sys, types
lightning = types.ModuleType("pytorch_lightning")
lightning.Callback = type("Callback", (), {})
transformers = types.ModuleType("transformers")
transformers.TrainerCallback = type("TrainerCallback", (), {})
sys.modules.update({"lightning": None, "lightning.pytorch": None,
                    "pytorch_lightning": lightning, "transformers": transformers})
import stepwatch
from stepwatch.callbacks import StepwatchHFCallback, StepwatchLightningCallback
trainer = types.SimpleNamespace(global_step=1, global_rank=0, local_rank=0, world_size=1,
                                checkpoint_callback=None)
args = types.SimpleNamespace(process_index=0, local_process_index=0, world_size=1)
state = types.SimpleNamespace(global_step=1)
"""


class EndOfProcessTest(IsolatedCase):
    """The callbacks and the exit hook together, in real processes."""

    def run_trainer(self, body):
        env = python_env()
        script = os.path.join(self.tmp, "trainer.py")
        with open(script, "w") as f:
            f.write(_PROCESS + textwrap.dedent(body))
        p = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=60)
        raw = read_beacon(os.path.join(self.dir, self.job, "rank-0.beacon"))
        self.assertEqual(raw["step"], 1, p.stderr)
        return p.returncode, raw["status"]

    def test_lightning_fit_then_a_clean_exit_is_finished(self):
        body = """\
        cb = StepwatchLightningCallback()
        cb.setup(trainer, None, "fit")
        cb.on_train_batch_end(trainer, None, None, None, 0)
        cb.on_fit_end(trainer, None)
        """
        self.assertEqual(self.run_trainer(body), (0, 1))

    def test_lightning_fit_then_a_crash_after_it_is_failed(self):
        body = """\
        cb = StepwatchLightningCallback()
        cb.setup(trainer, None, "fit")
        cb.on_train_batch_end(trainer, None, None, None, 0)
        cb.on_fit_end(trainer, None)
        raise RuntimeError("the upload after training failed")
        """
        self.assertEqual(self.run_trainer(body), (1, 2))

    def test_lightning_exception_then_a_clean_exit_stays_failed(self):
        body = """\
        cb = StepwatchLightningCallback()
        cb.setup(trainer, None, "fit")
        cb.on_train_batch_end(trainer, None, None, None, 0)
        cb.on_exception(trainer, None, RuntimeError("boom"))  # the script catches it and exits 0
        """
        self.assertEqual(self.run_trainer(body), (0, 2))

    def test_lightning_finish_on_end_is_final(self):
        body = """\
        cb = StepwatchLightningCallback(finish_on_end=True)
        cb.setup(trainer, None, "fit")
        cb.on_train_batch_end(trainer, None, None, None, 0)
        cb.on_fit_end(trainer, None)
        raise RuntimeError("after fit")
        """
        self.assertEqual(self.run_trainer(body), (1, 1))

    def test_hf_train_then_a_clean_exit_is_finished(self):
        body = """\
        cb = StepwatchHFCallback()
        cb.on_train_begin(args, state, None)
        cb.on_step_end(args, state, None)
        cb.on_train_end(args, state, None)
        """
        self.assertEqual(self.run_trainer(body), (0, 1))

    def test_hf_an_exception_in_training_is_failed(self):
        body = """\
        cb = StepwatchHFCallback()
        cb.on_train_begin(args, state, None)
        cb.on_step_end(args, state, None)
        raise RuntimeError("CUDA error: an illegal memory access")  # no hook in transformers
        """
        self.assertEqual(self.run_trainer(body), (1, 2))


if __name__ == "__main__":
    unittest.main()
