# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""stepwatch: report a training job's step progress to the stepwatch watchdog.

    import stepwatch
    stepwatch.init()                      # job from STEPWATCH_JOB, rank from torchrun/Slurm
    stepwatch.install_stack_dump()        # SIGUSR1 -> every thread's stack to rank-<r>.stacks
    for n in range(start, steps):
        train_step()
        stepwatch.step(n, loss=loss)      # one committed optimizer step
        if n % 100 == 0:
            with stepwatch.phase("eval"):
                for batch in val:
                    evaluate(batch)
                    stepwatch.beat()      # still working inside a long phase
    # No finish() needed: at exit the beacon says finished, or failed after an uncaught
    # exception or a non-zero exit status (see stepwatch._exit_hook). finish(ok) says it now.

init() also starts the progress sampler (stepwatch.sampler): a daemon thread that, about once a
second, records where the main thread is and whether it waits in a collective, the device or the
rendezvous store, so the watchdog has a verdict within a minute whatever the step time.
init(sampler=False) or STEPWATCH_SAMPLER=0 turns it off; STEPWATCH_SAMPLER_PERIOD sets its period.

Every call returns True, or False when the beacon was busy (nothing written: the trainer is
never blocked), and raises StepwatchError on a real error. The binding is a C extension
(stepwatch._native); when it is missing, or STEPWATCH_BINDING=ctypes, libstepwatch.so is loaded
through ctypes instead. stepwatch.BINDING says which one is in use; `python -m stepwatch` prints
it with the version and the file it came from.
"""

import functools as _functools
import importlib as _importlib
import os as _os

from . import _exit_hook, errors
from . import sampler as _sampler
from .errors import NotInitializedError, StepwatchError

try:
    from ._version import __version__  # written by setup.py and by the CMake build, never checked in
except ImportError:  # a source tree no build has written into (PYTHONPATH=python, an editable install)
    __version__ = "unknown"

__all__ = [
    "BINDING",
    "Beacon",
    "WAIT_COLLECTIVE",
    "WAIT_DEVICE",
    "WAIT_NONE",
    "WAIT_STORE",
    "NotInitializedError",
    "StepwatchError",
    "beat",
    "checkpoint_committed",
    "close",
    "default_beacon",
    "finish",
    "init",
    "install_stack_dump",
    "is_initialized",
    "loss",
    "path",
    "phase",
    "phase_begin",
    "phase_end",
    "sampler_running",
    "step",
    "uninstall_stack_dump",
]


def _load_binding():
    choice = (_os.environ.get("STEPWATCH_BINDING") or "auto").strip().lower()
    if choice not in ("auto", "native", "ctypes"):
        raise ImportError(f"stepwatch: STEPWATCH_BINDING={choice!r}: use 'native', 'ctypes' or 'auto'")
    native_error = None
    if choice in ("auto", "native"):
        try:
            return _importlib.import_module(__name__ + "._native"), "native"
        except ImportError as e:
            if choice == "native":
                raise ImportError(
                    f"stepwatch: STEPWATCH_BINDING=native but the C extension stepwatch._native cannot be loaded: {e}"
                ) from e
            native_error = e
    try:
        from . import _ctypes_binding
    except ImportError as e:
        if native_error is None:
            raise
        if isinstance(native_error, ModuleNotFoundError) and native_error.name == __name__ + "._native":
            native = "the C extension stepwatch._native is not installed"
        else:
            native = f"the C extension stepwatch._native cannot be loaded ({native_error})"
        ctypes_error = str(e)[len("stepwatch: ") :] if str(e).startswith("stepwatch: ") else str(e)
        # name=: `python -m stepwatch` then prints this one line rather than a traceback.
        raise ImportError(
            f"stepwatch: no binding: {native}, and {ctypes_error}. Fix: install the stepwatch .deb"
            " (libstepwatch.so.1 for the system loader), or set STEPWATCH_LIB to a libstepwatch.so, or"
            " reinstall this package where a C++ compiler and the Python headers are present (it then builds"
            " the extension)",
            name=__name__,
        ) from e
    return _ctypes_binding, "ctypes"


_b, BINDING = _load_binding()

# The module-level calls are the binding's own functions: with the extension, stepwatch.step is
# a METH_FASTCALL builtin with no Python frame in between.
step = _b.step
loss = _b.loss
beat = _b.beat
phase_begin = _b.phase_begin
phase_end = _b.phase_end
checkpoint_committed = _b.checkpoint_committed
path = _b.path
WAIT_NONE = _b.WAIT_NONE
WAIT_COLLECTIVE = _b.WAIT_COLLECTIVE
WAIT_DEVICE = _b.WAIT_DEVICE
WAIT_STORE = _b.WAIT_STORE


class Beacon(_b.Beacon):
    """An explicit handle: Beacon(*, job=None, dir=None, rank=None, local_rank=None,
    world_size=None, incarnation=None). Same calls as the module-level functions, plus
    .phase(name). None means: take it from the environment.

    Like the default beacon, an explicit one that is still open at the interpreter's exit and was
    never finished says how the process ended (finished, or failed after an uncaught exception or
    a non-zero exit status); the hook holds it weakly, so a Beacon garbage-collected earlier is
    closed without a word."""

    def __init__(self, *, job=None, dir=None, rank=None, local_rank=None, world_size=None, incarnation=None):  # noqa: A002
        super().__init__(
            job=job, dir=dir, rank=rank, local_rank=local_rank, world_size=world_size, incarnation=incarnation
        )
        _exit_hook.watch(self, _b.finish_at_exit)

    def finish(self, ok=True):
        """finish(ok=True) -> bool: marks the rank finished (or failed) now. The word is final: the
        exit hook no longer touches this beacon, and the progress sampler stops. False when the
        beacon was busy (nothing written)."""
        done = super().finish(ok)
        if done:
            _exit_hook.said(self)
            _sampler.stop_for(self)
        return done

    def close(self):
        """Stops the progress sampler of this beacon (if init() started one), then unmaps it."""
        _sampler.stop_for(self)
        super().close()

    def __exit__(self, *exc):
        self.close()

    def phase(self, name):
        return phase(name, beacon=self)


def finish(ok=True):
    """finish(ok=True) -> bool: marks the default beacon finished (or failed) now; the exit hook
    then leaves it alone. Without it, the exit hook says it at the interpreter's exit."""
    return _current("finish").finish(ok)


def init(job=None, dir=None, rank=None, local_rank=None, world_size=None, incarnation=None, sampler=None):  # noqa: A002
    """Opens this rank's beacon, makes it the default for the module-level calls, and starts the
    progress sampler on the calling thread (normally the main thread).

    None means: take it from the environment (STEPWATCH_JOB, STEPWATCH_DIR, RANK/LOCAL_RANK/
    WORLD_SIZE or SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS, STEPWATCH_INCARNATION; for sampler,
    STEPWATCH_SAMPLER, on unless 0/off/false). Raises StepwatchError with the library's
    explanation when the job id or rank is missing or bad, and naming the variable when
    STEPWATCH_SAMPLER or STEPWATCH_SAMPLER_PERIOD is bad. Calling init() again replaces (and
    closes) the previous default beacon. Returns the Beacon.
    """
    # Both read before the beacon opens: a bad value leaves nothing half done.
    run_sampler = _sampler.enabled_from(sampler)
    period = _sampler.period_from() if run_sampler else None
    beacon = Beacon(
        job=job, dir=dir, rank=rank, local_rank=local_rank, world_size=world_size, incarnation=incarnation
    )
    old = _b.get_default()
    _b.set_default(beacon)
    if old is not None:
        old.close()
    else:
        _sampler.stop_default()  # one started for a default that a fork or set_default dropped
    if run_sampler:
        _sampler.start_default(beacon, period)
    return beacon


def close():
    """Stops the progress sampler and unmaps the default beacon (the file stays for the
    watchdog). Idempotent. A beacon closed without finish() says nothing at exit: its status stays
    as it was (running, usually), and the watchdog judges the rank from its process's exit."""
    old = _b.get_default()
    _b.set_default(None)
    _sampler.stop_default()
    if old is not None:
        old.close()


def sampler_running():
    """True while init()'s progress sampler thread runs in this process."""
    return _sampler.current() is not None


def is_initialized():
    return _b.get_default() is not None


def default_beacon():
    """The Beacon that init() opened, or None."""
    return _b.get_default()


def _current(op):
    b = _b.get_default()
    if b is None:
        raise errors.not_initialized(op)
    return b


class phase:  # noqa: N801 - used like a function: `with stepwatch.phase("eval"):`
    """A labeled phase: `with stepwatch.phase("eval"): ...` or `@stepwatch.phase("eval")`.

    Phases nest; leaving one returns to the enclosing phase. The beacon is looked up when the
    phase is entered, so a decorator may be applied before init(). An exception inside the block
    still ends the phase, and a failing phase_end never hides that exception.
    """

    __slots__ = ("name", "_beacon", "_open")

    def __init__(self, name, beacon=None):
        if not isinstance(name, str):
            raise TypeError(f"stepwatch.phase: the phase name must be a str, not {type(name).__name__}")
        self.name = name
        self._beacon = beacon
        self._open = []  # (beacon, began) per active entry: the same object may be re-entered

    def __enter__(self):
        b = self._beacon if self._beacon is not None else _current("phase")
        began = b.phase_begin(self.name)
        self._open.append((b, began))
        return self

    def __exit__(self, exc_type, exc, tb):
        b, began = self._open.pop()
        if not began:
            return False  # the begin found the beacon busy and wrote nothing: nothing to end
        try:
            b.phase_end()
        except StepwatchError:
            if exc_type is None:
                raise
        return False

    def __call__(self, fn):
        name, beacon = self.name, self._beacon

        @_functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with phase(name, beacon):
                return fn(*args, **kwargs)

        return wrapper

    def __repr__(self):
        return f"stepwatch.phase({self.name!r})"


def _forget_default_in_child():
    # A forked child (a DataLoader worker, say) is not the rank: it must not write the parent's
    # beacon through the inherited mapping. It may call init() itself.
    try:
        _b.set_default(None)
        _exit_hook.forget_in_child()
    except Exception:  # noqa: BLE001 - never break a fork
        pass


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_forget_default_in_child)

from .stacks import install_stack_dump, uninstall_stack_dump  # noqa: E402
