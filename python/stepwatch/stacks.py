# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Stack dumps on a signal: the watchdog's "where is it stuck?" artifact.

install_stack_dump() registers faulthandler for a signal (SIGUSR1 by default). faulthandler's
handler is C code that runs at signal delivery without taking the GIL, so every thread's Python
stack gets written even while the main thread is blocked inside a C call (a gloo or NCCL
collective, a read on a dead socket). faulthandler cannot write a custom header per dump; each
dump starts with faulthandler's own "Thread 0x... (most recent call first):" lines.
"""

import os
import re
import signal

from . import errors

# signum -> (file object, path). The file must stay open for as long as the handler is registered.
_installed = {}

_JOB_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,62}$")


def default_stacks_path():
    """$STEPWATCH_DIR/<job>/rank-<rank>.stacks: next to the default beacon when init() was called,
    else from the same environment variables the C library reads."""
    import stepwatch

    beacon = stepwatch.default_beacon()
    if beacon is not None and not beacon.closed:
        p = beacon.path()
        if p.endswith(".beacon"):
            return p[: -len(".beacon")] + ".stacks"
    job = os.environ.get("STEPWATCH_JOB", "")
    if not job:
        raise errors.StepwatchError(
            "stepwatch.install_stack_dump: no path given and no job id: call stepwatch.init() first, "
            "set STEPWATCH_JOB, or pass path=",
            errors.ENOJOB,
            "install_stack_dump",
        )
    if not _JOB_RE.match(job):
        raise errors.StepwatchError(
            f"stepwatch.install_stack_dump: job id {job!r} is invalid: 1 to 63 characters from "
            "[A-Za-z0-9._-], not starting with '.' or '-'",
            errors.EINVAL,
            "install_stack_dump",
        )
    root = os.environ.get("STEPWATCH_DIR") or "/dev/shm/stepwatch"
    rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"
    if not rank.isdigit():
        raise errors.StepwatchError(
            f"stepwatch.install_stack_dump: rank {rank!r} is not a non-negative integer",
            errors.ENORANK,
            "install_stack_dump",
        )
    return os.path.join(root, job, f"rank-{int(rank)}.stacks")


def install_stack_dump(signum=signal.SIGUSR1, path=None):
    """On `signum`, write every thread's Python stack to `path` (default
    $STEPWATCH_DIR/<job>/rank-<rank>.stacks; directories are created). The file is truncated
    now and each dump is appended. The handler does not chain to a previous handler and the
    process keeps running. Calling it again for the same signal replaces the registration.
    Returns the path."""
    import faulthandler

    if path is None:
        path = default_stacks_path()
    path = os.fspath(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    # A new file each time, never through a link: whatever is at the path (an old dump, or a
    # symlink another user planted to make us truncate their victim's file) is removed, and the
    # file is created exclusively. O_APPEND: a reader that truncates it between dumps gets only
    # the next dump.
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND | os.O_CLOEXEC
    fd = os.open(path, flags, 0o644)
    f = os.fdopen(fd, "w", buffering=1)
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = str(signum)
    f.write(f"# stepwatch stack dumps of pid {os.getpid()} on {name}; each dump lists every thread\n")
    f.flush()
    faulthandler.register(signum, file=f, all_threads=True, chain=False)
    old = _installed.get(signum)
    _installed[signum] = (f, path)
    if old is not None:
        old[0].close()
    return path


def uninstall_stack_dump(signum=signal.SIGUSR1):
    """Restores the previous handler of `signum` and closes the stacks file. Returns whether a
    dump handler was installed."""
    import faulthandler

    entry = _installed.pop(signum, None)
    if entry is None:
        return False
    faulthandler.unregister(signum)
    entry[0].close()
    return True
