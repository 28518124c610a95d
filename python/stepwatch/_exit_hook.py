# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""How a rank says how it ended when the trainer does not call finish() itself.

An atexit hook, registered when the first Beacon of the process opens, looks at every Beacon this
process opened that is still open and on which no finish() succeeded, and marks it:

- failed, when the main thread ended with an uncaught exception (KeyboardInterrupt included):
  the interpreter stores it in sys.last_value (and sys.last_exc from 3.12) before atexit runs,
  whatever sys.excepthook does;
- otherwise by the process's exit status: the native binding hands the beacon to a glibc
  on_exit handler that marks it finished on status 0 and failed on any other (sys.exit(3),
  sys.exit("message")). Python code cannot see that status, so the ctypes binding marks the
  beacon finished (a SystemExit of any code reads as a clean end there).

Nothing runs, so nothing is written, for a process killed by a signal (SIGKILL; SIGTERM's
default action), after os._exit(), or in a forked child for its parent's beacons (multiprocessing
children end with os._exit; an os.fork() child that exits through the interpreter finds only
beacons of another pid). A beacon closed explicitly is left as it was.
"""

import atexit
import os
import sys
import weakref

_live = weakref.WeakSet()  # Beacons opened by this process (and its forked children, filtered by pid)
_registered = False


def watch(beacon, finish_at_exit):
    """Puts a just-opened Beacon under the exit hook. finish_at_exit is the binding's function
    that leaves the beacon to the exit status (False when it cannot)."""
    global _registered
    beacon._sw_pid = os.getpid()
    beacon._sw_said = False
    _live.add(beacon)
    if not _registered:
        atexit.register(_end_of_process, finish_at_exit)
        _registered = True


def said(beacon):
    """Records that the trainer said how this beacon ended: the hook leaves it alone."""
    beacon._sw_said = True


def forget_in_child():
    """After fork: the child is not the rank; its parent's beacons are not its own."""
    _live.clear()


def uncaught_exception():
    return getattr(sys, "last_exc", None) is not None or getattr(sys, "last_value", None) is not None


def _end_of_process(finish_at_exit):
    pid = os.getpid()
    failed = uncaught_exception()
    for beacon in list(_live):
        if getattr(beacon, "_sw_pid", None) != pid or getattr(beacon, "_sw_said", True) or beacon.closed:
            continue
        try:
            if failed:
                beacon.finish(False)
            elif not finish_at_exit(beacon):
                beacon.finish(True)
        except Exception:  # noqa: BLE001 - never fail the interpreter's exit over a beacon
            pass
