# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Errors raised by the stepwatch package, and the C library's return codes.

Both bindings (the C extension and the ctypes fallback) build their exceptions here, so a
failure reads the same whichever binding is loaded.
"""

# Return codes of include/stepwatch/stepwatch.h.
OK = 0
EINVAL = -1
ENOJOB = -2
ENORANK = -3
EIO = -4
ENULL = -5
EBUSY = -6
ENOMEM = -7
EPHASE = -8
EINTERNAL = -9

CODE_NAMES = {
    OK: "OK",
    EINVAL: "EINVAL",
    ENOJOB: "ENOJOB",
    ENORANK: "ENORANK",
    EIO: "EIO",
    ENULL: "ENULL",
    EBUSY: "EBUSY",
    ENOMEM: "ENOMEM",
    EPHASE: "EPHASE",
    EINTERNAL: "EINTERNAL",
}

# The same texts as stepwatch_strerror(); a test keeps them in step with the library.
STRERROR = {
    OK: "ok",
    EINVAL: "invalid argument",
    ENOJOB: "no job id (set STEPWATCH_JOB)",
    ENORANK: "rank identity missing or inconsistent",
    EIO: "beacon file could not be created or mapped",
    ENULL: "handle is NULL",
    EBUSY: "beacon busy (another thread is updating it)",
    ENOMEM: "out of memory",
    EPHASE: "phase_end without phase_begin, or phases nested too deep",
    EINTERNAL: "internal error",
}

PHASE_DEPTH = 8


class StepwatchError(RuntimeError):
    """A stepwatch call failed. `code` is the C library's return code (None for errors raised by
    the Python layer), `op` the operation ("open", "step", "phase_begin", ...)."""

    def __init__(self, message, code=None, op=None):
        super().__init__(message)
        self.code = code
        self.op = op

    @property
    def code_name(self):
        return CODE_NAMES.get(self.code, str(self.code))


class NotInitializedError(StepwatchError):
    """A module-level call came before stepwatch.init() (or after stepwatch.close())."""


def not_initialized(op):
    return NotInitializedError(
        f"stepwatch.{op}() called before stepwatch.init(): call stepwatch.init() first in this "
        "process (a forked child must call it itself), or use an explicit stepwatch.Beacon",
        None,
        op,
    )


def error_for(op, code, detail=None):
    """The exception for a failed C call. `detail` is what the caller passed (a phase name, a
    step, an (id, step) pair) or, for "open", the text of stepwatch_last_error()."""
    name = CODE_NAMES.get(code, str(code))
    text = STRERROR.get(code, "unknown stepwatch error code")
    if op == "open":
        message = f"stepwatch.init: cannot open the beacon: {detail or text} [{name}]"
    elif code == ENULL:
        message = f"stepwatch.{op}: this beacon is closed"
    elif op == "phase_begin" and code == EINVAL:
        message = (
            f"stepwatch.phase: invalid phase name {detail!r}: use 1 to 31 characters from "
            "[A-Za-z0-9._:/-]"
        )
    elif op == "phase_begin" and code == EPHASE:
        message = f"stepwatch.phase({detail!r}): phases are nested deeper than {PHASE_DEPTH}"
    elif op == "phase_end" and code == EPHASE:
        message = "stepwatch.phase_end: no phase is open (phase_end without a matching phase_begin)"
    elif op in ("step", "step_loss") and code == EINVAL:
        message = f"stepwatch.step: the step must be >= 0, got {detail!r}"
    elif op == "checkpoint_committed" and code == EINVAL:
        ckpt_id, step = detail if isinstance(detail, tuple) else (detail, None)
        message = (
            f"stepwatch.checkpoint_committed: invalid checkpoint {ckpt_id!r} at step {step!r}: the "
            "id is 1 to 63 printable ASCII characters without spaces, quotes or backslashes, "
            "and the step is >= 0"
        )
    else:
        message = f"stepwatch.{op}: {text} [{name}]"
    return StepwatchError(message, code, op)
