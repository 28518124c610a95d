# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Framework callbacks: PyTorch Lightning and Hugging Face transformers.

    from stepwatch.callbacks import StepwatchLightningCallback   # Trainer(callbacks=[...])
    from stepwatch.callbacks import StepwatchHFCallback          # Trainer(callbacks=[...])

Importing stepwatch (or this module) never imports either framework: each class is built on
first access, and accessing it without the framework raises ImportError.

Both callbacks open the default beacon lazily (rank identity from the trainer) when init() was
not called. A stepwatch failure inside a hook never stops training: it is reported once as a
warning and the callback carries on (strict=True raises instead).

How the rank ended follows the package's rule (see stepwatch._exit_hook): the end of fit()/train()
is not the end of the process (a test run, a save, an upload, a second fit() may follow), so by
default the callbacks do not say "finished" there; the exit hook says it when the interpreter
exits cleanly, and "failed" after an uncaught exception or a non-zero exit status. A training
exception that Lightning reports (on_exception) marks the rank failed at once (fail_on_exception),
and that word is final. finish_on_end=True restores "finished at the end of training" for
scripts that end there: the watchdog then stops judging the rank at that point, and what comes
after (an exception included) is no longer seen.
"""

import os
import warnings

import stepwatch

# The two callback classes are resolved lazily by __getattr__ and kept out of __all__, so that
# `from stepwatch.callbacks import *` works without either framework.
__all__ = ["lightning_callback_class", "hf_callback_class"]


class _Reporter:
    """The framework-independent part: lazy init, error policy, eval phase and checkpoint
    bookkeeping. Framework classes mix it in."""

    def _sw_setup(self, strict, finish_on_end, report_loss, init_kwargs, fail_on_exception=True):
        self.strict = strict
        self.finish_on_end = finish_on_end
        self.fail_on_exception = fail_on_exception
        self.report_loss = report_loss
        self.init_kwargs = dict(init_kwargs or {})
        self._sw_disabled = False
        self._sw_warned = set()
        self._sw_eval_open = False
        self._sw_last_step = None

    def _sw_call(self, fn, *args):
        """Calls a stepwatch function; failures warn once per kind (or raise when strict)."""
        if self._sw_disabled:
            return False
        try:
            return fn(*args)
        except stepwatch.StepwatchError as e:
            if self.strict:
                raise
            key = (e.op, e.code)
            if key not in self._sw_warned:
                self._sw_warned.add(key)
                warnings.warn(f"stepwatch callback: {e}", RuntimeWarning, stacklevel=3)
            return False

    def _sw_ensure_init(self, **identity):
        if self._sw_disabled or stepwatch.is_initialized():
            return
        kwargs = {k: v for k, v in identity.items() if v is not None}
        kwargs.update(self.init_kwargs)
        try:
            stepwatch.init(**kwargs)
        except stepwatch.StepwatchError as e:
            if self.strict:
                raise
            self._sw_disabled = True
            warnings.warn(f"stepwatch callback disabled: {e}", RuntimeWarning, stacklevel=3)

    def _sw_step(self, n, loss=None):
        if n is None:
            return
        n = int(n)
        if n == self._sw_last_step:
            # Gradient accumulation: a micro-batch ended but no optimizer step committed.
            self._sw_call(stepwatch.beat)
            return
        self._sw_last_step = n
        self._sw_call(stepwatch.step, n, loss)

    def _sw_eval_begin(self):
        if not self._sw_eval_open and self._sw_call(stepwatch.phase_begin, "eval"):
            self._sw_eval_open = True

    def _sw_eval_end(self):
        if self._sw_eval_open:
            self._sw_eval_open = False
            self._sw_call(stepwatch.phase_end)

    def _sw_train_end(self):
        """The end of fit()/train(): not the end of the process, so "finished" only when asked."""
        self._sw_eval_end()
        if self.finish_on_end:
            self._sw_call(stepwatch.finish, True)

    def _sw_exception(self):
        """Training raised: failed now (it will not complete), unless told to leave it to exit."""
        self._sw_eval_end()
        if self.fail_on_exception:
            self._sw_call(stepwatch.finish, False)


def _loss_value(outputs):
    """A float from a Lightning training_step output (a tensor, a dict with "loss", a number),
    or None."""
    if outputs is None:
        return None
    if isinstance(outputs, dict):
        outputs = outputs.get("loss")
        if outputs is None:
            return None
    try:
        if hasattr(outputs, "detach"):
            outputs = outputs.detach()
        return float(outputs)
    except (TypeError, ValueError, RuntimeError):
        return None


def _import_lightning_callback(package):
    if package is not None:
        names = [package]
    else:
        names = ["lightning.pytorch", "pytorch_lightning"]
    errors = []
    for name in names:
        try:
            module = __import__(name, fromlist=["Callback"])
            return module.Callback
        except (ImportError, AttributeError) as e:
            errors.append(f"{name}: {e}")
    raise ImportError(
        "stepwatch.callbacks.StepwatchLightningCallback needs PyTorch Lightning "
        "(`lightning` or `pytorch_lightning`), which cannot be imported: " + "; ".join(errors)
    )


def lightning_callback_class(package=None):
    """The Lightning callback class built on `package`.Callback ("lightning.pytorch" or
    "pytorch_lightning"; default: whichever imports first). A Trainer only accepts callbacks of
    its own package, so pass it when both are installed."""
    base = _import_lightning_callback(package)

    class StepwatchLightningCallback(_Reporter, base):
        """Reports Lightning progress to stepwatch.

        on_train_batch_end -> step(trainer.global_step, loss) when an optimizer step completed
        (beat otherwise); validation -> phase "eval" with a beat per batch; a checkpoint is
        reported as committed at the next hook after on_save_checkpoint, once the file the
        ModelCheckpoint callback names exists (Lightning has no hook after the write); test and
        predict -> phase "eval" with a beat per batch; fit end -> nothing (the exit hook says
        finished at a clean exit; finish_on_end=True: finish(True) here); an exception ->
        finish(False) (fail_on_exception=False: left to the exit hook).
        """

        def __init__(
            self, *, strict=False, finish_on_end=False, fail_on_exception=True, report_loss=True, init_kwargs=None
        ):
            super().__init__()
            self._sw_setup(strict, finish_on_end, report_loss, init_kwargs, fail_on_exception)
            self._sw_pending_ckpt = None

        def setup(self, trainer, pl_module, stage=None):
            self._sw_ensure_init(
                rank=getattr(trainer, "global_rank", None),
                local_rank=getattr(trainer, "local_rank", None),
                world_size=getattr(trainer, "world_size", None),
            )

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
            self._sw_flush_checkpoint(trainer)
            loss = _loss_value(outputs) if self.report_loss else None
            self._sw_step(getattr(trainer, "global_step", None), loss)

        def on_validation_start(self, trainer, pl_module):
            self._sw_eval_begin()

        def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
            self._sw_call(stepwatch.beat)

        def on_validation_end(self, trainer, pl_module):
            self._sw_eval_end()
            self._sw_flush_checkpoint(trainer)

        # trainer.test() / trainer.predict(), often after fit(): labeled, so a long one is judged
        # by the eval budget rather than as a training stall.
        def on_test_start(self, trainer, pl_module):
            self._sw_eval_begin()

        def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
            self._sw_call(stepwatch.beat)

        def on_test_end(self, trainer, pl_module):
            self._sw_eval_end()

        def on_predict_start(self, trainer, pl_module):
            self._sw_eval_begin()

        def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
            self._sw_call(stepwatch.beat)

        def on_predict_end(self, trainer, pl_module):
            self._sw_eval_end()

        def on_save_checkpoint(self, trainer, pl_module, checkpoint):
            # Called while the checkpoint dict is built, before the file is written.
            self._sw_pending_ckpt = int(getattr(trainer, "global_step", 0) or 0)

        def on_train_epoch_end(self, trainer, pl_module):
            self._sw_flush_checkpoint(trainer)

        def on_train_end(self, trainer, pl_module):
            self._sw_flush_checkpoint(trainer)

        def on_fit_end(self, trainer, pl_module):
            self._sw_flush_checkpoint(trainer)
            self._sw_train_end()

        def on_exception(self, trainer, pl_module, exception):
            self._sw_exception()

        def _sw_flush_checkpoint(self, trainer):
            if self._sw_pending_ckpt is None:
                return
            step = self._sw_pending_ckpt
            cb = getattr(trainer, "checkpoint_callback", None)
            path = None
            for attr in ("_last_checkpoint_saved", "last_model_path", "best_model_path"):
                candidate = getattr(cb, attr, None) if cb is not None else None
                if candidate:
                    path = str(candidate)
                    break
            if path is not None and not os.path.exists(path):
                return  # not written yet (asynchronous checkpoint I/O): try again at the next hook
            self._sw_pending_ckpt = None
            ckpt_id = os.path.basename(path) if path else f"step-{step}"
            self._sw_call(stepwatch.checkpoint_committed, _safe_id(ckpt_id), step)

    return StepwatchLightningCallback


def hf_callback_class():
    """The transformers TrainerCallback subclass; ImportError without transformers."""
    try:
        from transformers import TrainerCallback
    except ImportError as e:
        raise ImportError(
            "stepwatch.callbacks.StepwatchHFCallback needs Hugging Face transformers, which cannot be "
            f"imported: {e}"
        ) from e

    class StepwatchHFCallback(_Reporter, TrainerCallback):
        """Reports transformers.Trainer progress to stepwatch.

        on_step_end -> step(state.global_step); on_substep_end (gradient accumulation) -> beat;
        on_log with "loss" -> loss; evaluation: the first on_prediction_step begins phase "eval"
        and beats, on_evaluate / on_predict end it; on_save -> checkpoint_committed(
        "checkpoint-<step>", step) (the Trainer's directory name); on_train_end -> nothing (the
        exit hook says finished at a clean exit, failed after an uncaught exception: transformers
        has no exception hook; finish_on_end=True: finish(True) here).
        """

        def __init__(self, *, strict=False, finish_on_end=False, report_loss=True, init_kwargs=None):
            super().__init__()
            self._sw_setup(strict, finish_on_end, report_loss, init_kwargs)

        def _sw_init_from(self, args):
            self._sw_ensure_init(
                rank=getattr(args, "process_index", None),
                local_rank=_non_negative(getattr(args, "local_process_index", None)),
                world_size=getattr(args, "world_size", None),
            )

        def on_init_end(self, args, state, control, **kwargs):
            self._sw_init_from(args)

        def on_train_begin(self, args, state, control, **kwargs):
            self._sw_init_from(args)

        def on_step_end(self, args, state, control, **kwargs):
            self._sw_step(state.global_step)

        def on_substep_end(self, args, state, control, **kwargs):
            self._sw_call(stepwatch.beat)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if self.report_loss and logs and "loss" in logs:
                try:
                    value = float(logs["loss"])
                except (TypeError, ValueError):
                    return
                self._sw_call(stepwatch.loss, value)

        def on_prediction_step(self, args, state, control, **kwargs):
            self._sw_eval_begin()
            self._sw_call(stepwatch.beat)

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            self._sw_eval_end()

        def on_predict(self, args, state, control, metrics=None, **kwargs):
            self._sw_eval_end()

        def on_save(self, args, state, control, **kwargs):
            step = int(state.global_step)
            self._sw_call(stepwatch.checkpoint_committed, f"checkpoint-{step}", step)

        def on_train_end(self, args, state, control, **kwargs):
            self._sw_train_end()

    return StepwatchHFCallback


def _non_negative(v):
    return v if isinstance(v, int) and v >= 0 else None


def _safe_id(text):
    """A checkpoint id the beacon accepts: printable ASCII without spaces, quotes or
    backslashes, at most 63 bytes (the tail is kept: it holds the step)."""
    out = "".join(c if 0x20 < ord(c) < 0x7F and c not in "\"'\\" else "_" for c in text)
    return (out[-63:] if len(out) > 63 else out) or "checkpoint"


_FACTORIES = {
    "StepwatchLightningCallback": lightning_callback_class,
    "StepwatchHFCallback": hf_callback_class,
}
_built = {}


def __getattr__(name):
    factory = _FACTORIES.get(name)
    if factory is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _built:
        _built[name] = factory()
    return _built[name]


def __dir__():
    return sorted(set(globals()) | set(_FACTORIES))
