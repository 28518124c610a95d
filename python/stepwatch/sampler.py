# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""The progress sampler: where the rank's main thread is, about once a second.

A daemon thread looks at the main thread's stack (the thread that called stepwatch.init()) and
writes three things to the beacon's sampler block (docs/contract.md, "Progress sampler"):

  hash   a 64-bit digest of the top frames (file, function, line). It changes while the main
         thread runs Python code and stays while it is blocked in one call. The same code gives
         the same digest on every rank: it depends on file and function names, not on the run.
  wait   what it waits in, from the innermost frame outwards, first match wins (RULES below):
         a collective, the device, the rendezvous store, or none of those.
  where  "<function> (<file>:<line>)" of the frame that matched, else of the innermost frame.

The beacon records when hash or wait last changed, so the watchdog can tell "busy in Python",
"blocked in all_reduce for 40 s" and "no sample for 40 s" (a C extension holding the GIL, or a
process that no longer runs Python) apart, whatever the step time.

The thread never raises into the trainer and never blocks it: a sample holds the GIL for tens
of microseconds and uses the beacon's own sampler lock (a sample never makes step() busy). A
closed beacon stops it quietly; an unexpected error stops it with one line on stderr. After a
fork the child has no sampler (a DataLoader worker is not the rank).

Knobs: STEPWATCH_SAMPLER=0|off|false disables it (1|on|true enables; stepwatch.init(sampler=)
overrides the variable), STEPWATCH_SAMPLER_PERIOD is the period in seconds (default 1.0,
0.01 to 60).
"""

import os
import sys
import threading
import time
from hashlib import blake2b

from .errors import ENULL, StepwatchError

# sample_wait values (include/stepwatch/beacon_v1.h). The bindings export the same numbers.
WAIT_NONE = 0
WAIT_COLLECTIVE = 1
WAIT_DEVICE = 2
WAIT_STORE = 3
WAIT_NAMES = {WAIT_NONE: "none", WAIT_COLLECTIVE: "collective", WAIT_DEVICE: "device", WAIT_STORE: "store"}

DEFAULT_PERIOD = 1.0
MIN_PERIOD = 0.01
MAX_PERIOD = 60.0
HASH_FRAMES = 8  # frames that make the digest
WALK_FRAMES = 64  # frames searched for a wait, innermost first
WHERE_MAX = 63  # bytes of sample_where before its NUL

_C10D = "torch/distributed/distributed_c10d.py"
_C10D_COLLECTIVES = frozenset(
    {
        "all_reduce", "all_reduce_multigpu", "all_reduce_coalesced",
        "all_gather", "all_gather_multigpu", "all_gather_into_tensor", "_all_gather_base",
        "all_gather_coalesced", "all_gather_object",
        "broadcast", "broadcast_multigpu", "broadcast_object_list",
        "reduce", "reduce_multigpu",
        "reduce_scatter", "reduce_scatter_multigpu", "reduce_scatter_tensor", "_reduce_scatter_base",
        "all_to_all", "all_to_all_single",
        "barrier", "monitored_barrier",
        "gather", "gather_object", "scatter", "scatter_object_list",
        "send", "recv", "batch_isend_irecv",
    }
)
_BACKWARD = "backward"  # a rule result: COLLECTIVE while torch.distributed is initialized

# (path suffix, function names or None for any, wait). A suffix ending in "/" matches any file
# under that directory. Names from torch 1.13's sources; a torch that renames them only loses
# the classification (NONE), never the sample.
RULES = (
    (_C10D, _C10D_COLLECTIVES, WAIT_COLLECTIVE),
    (_C10D, frozenset({"init_process_group", "_store_based_barrier", "new_group"}), WAIT_STORE),
    # DDP's gradient all-reduce runs inside backward: a rank waiting for a peer sits there.
    ("torch/autograd/__init__.py", frozenset({"backward"}), _BACKWARD),
    ("torch/_tensor.py", frozenset({"backward"}), _BACKWARD),
    # Only the calls that block the host: wait_event, wait_stream, Event.wait and query do not.
    ("torch/cuda/__init__.py", frozenset({"synchronize"}), WAIT_DEVICE),
    ("torch/cuda/streams.py", frozenset({"synchronize"}), WAIT_DEVICE),
    ("torch/distributed/rendezvous.py", None, WAIT_STORE),
    ("torch/distributed/elastic/rendezvous/", None, WAIT_STORE),
    ("torch/distributed/elastic/utils/store.py", None, WAIT_STORE),
)

_NO_MATCH = None
_CACHE_MAX = 4096  # code objects remembered; cleared when full (exec'd code can be unbounded)


def _classify_code(filename, name):
    path = filename.replace(os.sep, "/") if os.sep != "/" else filename
    for suffix, names, wait in RULES:
        if names is not None and name not in names:
            continue
        if suffix.endswith("/"):
            if "/" + suffix in path or path.startswith(suffix):
                return wait
        elif path.endswith(suffix) and (len(path) == len(suffix) or path[-len(suffix) - 1] == "/"):
            return wait
    return _NO_MATCH


def _distributed_initialized():
    """torch.distributed.is_initialized(), without importing torch."""
    dist = sys.modules.get("torch.distributed")
    fn = getattr(dist, "is_initialized", None)
    if fn is None:
        return False
    try:
        return bool(fn())
    except Exception:  # noqa: BLE001 - a half-imported torch: no evidence
        return False


class _Code:
    """What the sampler needs of one code object, computed once."""

    __slots__ = ("digest", "wait", "name", "base")

    def __init__(self, code):
        key = f"{code.co_filename}\0{code.co_name}".encode("utf-8", "surrogateescape")
        self.digest = int.from_bytes(blake2b(key, digest_size=8).digest(), "little")
        self.wait = _classify_code(code.co_filename, code.co_name)
        self.name = code.co_name
        self.base = os.path.basename(code.co_filename)


_codes = {}


def _info(code):
    info = _codes.get(code)
    if info is None:
        if len(_codes) >= _CACHE_MAX:
            _codes.clear()
        info = _codes[code] = _Code(code)
    return info


_M64 = (1 << 64) - 1
_MUL = 0x100000001B3  # FNV-1a's 64-bit prime


def where_label(name, base, line):
    """'<name> (<base>:<line>)', ASCII, at most WHERE_MAX bytes (a long name is cut first)."""
    tail = f" ({base}:{line})"
    text = name + tail
    if len(text) > WHERE_MAX:
        keep = WHERE_MAX - len(tail)
        text = name[:keep] + tail if keep >= 8 else text[:WHERE_MAX]
    return text.encode("ascii", "replace")[:WHERE_MAX].decode("ascii")


def describe(frame):
    """(hash, wait, where) for a stack whose innermost frame is `frame`."""
    h = 0xCBF29CE484222325  # FNV offset basis
    f = frame
    depth = 0
    while f is not None and depth < HASH_FRAMES:
        h = ((h ^ _info(f.f_code).digest ^ (f.f_lineno or 0)) * _MUL) & _M64
        f = f.f_back
        depth += 1
    if h == 0:
        h = 1  # 0 means "unknown" in the beacon
    f = frame
    depth = 0
    while f is not None and depth < WALK_FRAMES:
        info = _info(f.f_code)
        wait = info.wait
        if wait == _BACKWARD:
            wait = WAIT_COLLECTIVE if _distributed_initialized() else _NO_MATCH
        if wait is not _NO_MATCH:
            return h, wait, where_label(info.name, info.base, f.f_lineno or 0)
        f = f.f_back
        depth += 1
    info = _info(frame.f_code)
    return h, WAIT_NONE, where_label(info.name, info.base, frame.f_lineno or 0)


# ---- configuration (read and validated in one place) ----

_ON = ("1", "on", "true", "yes")
_OFF = ("0", "off", "false", "no")


def enabled_from(arg, environ=None):
    """Whether init() starts the sampler: `arg` (init's sampler=) if not None, else
    STEPWATCH_SAMPLER (default on). StepwatchError for a value that is neither."""
    if arg is not None:
        if not isinstance(arg, bool):
            raise TypeError(f"stepwatch.init: sampler must be True, False or None, not {type(arg).__name__}")
        return arg
    raw = (environ if environ is not None else os.environ).get("STEPWATCH_SAMPLER")
    if raw is None or raw.strip() == "":
        return True
    value = raw.strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise StepwatchError(
        f"stepwatch.init: STEPWATCH_SAMPLER={raw!r} is not understood: use 1/on/true to run the progress"
        " sampler or 0/off/false to turn it off (unset: on)",
        None,
        "init",
    )


def period_from(environ=None):
    """STEPWATCH_SAMPLER_PERIOD in seconds (default 1.0); StepwatchError when it is not a number
    from MIN_PERIOD to MAX_PERIOD."""
    raw = (environ if environ is not None else os.environ).get("STEPWATCH_SAMPLER_PERIOD")
    if raw is None or raw.strip() == "":
        return DEFAULT_PERIOD
    try:
        period = float(raw)
    except ValueError:
        period = None
    if period is None or not (MIN_PERIOD <= period <= MAX_PERIOD):  # also rejects nan and inf
        raise StepwatchError(
            f"stepwatch.init: STEPWATCH_SAMPLER_PERIOD={raw!r} must be a number of seconds from"
            f" {MIN_PERIOD} to {MAX_PERIOD:g} (default {DEFAULT_PERIOD})",
            None,
            "init",
        )
    return period


# ---- the thread ----


class Sampler:
    """Samples thread `ident`'s stack (default: the calling thread) into `beacon` every `period`
    seconds from a daemon thread. start() once; stop() is idempotent and safe from any thread.

    stepwatch.init() runs one for the default beacon; a trainer with an explicit Beacon may run
    its own: Sampler(beacon).start()."""

    def __init__(self, beacon, period=None, ident=None):
        self.beacon = beacon
        self.period = period_from() if period is None else float(period)
        if not (MIN_PERIOD <= self.period <= MAX_PERIOD):
            raise ValueError(f"stepwatch.Sampler: period must be from {MIN_PERIOD} to {MAX_PERIOD:g} s, got {period!r}")
        self.ident = threading.get_ident() if ident is None else ident
        self._target = next((t for t in threading.enumerate() if t.ident == self.ident), None)
        self._stop = threading.Event()
        self._thread = None
        self._pid = os.getpid()
        self.samples = 0  # samples written (busy ones not counted)
        self.cpu_s = 0.0  # the sampler thread's own CPU time so far (time.thread_time)

    def start(self):
        if self._thread is not None:
            raise RuntimeError("stepwatch.Sampler: already started")
        self._thread = threading.Thread(target=self._run, name="stepwatch-sampler", daemon=True)
        self._thread.start()
        return self

    @property
    def running(self):
        return self._thread is not None and self._pid == os.getpid() and self._thread.is_alive()

    def stop(self, timeout=1.0):
        """Stops the thread and waits up to `timeout` s for it to end (it wakes at once)."""
        self._stop.set()
        t = self._thread
        if t is not None and self._pid == os.getpid() and t is not threading.current_thread() and t.is_alive():
            t.join(timeout)

    def sample_once(self):
        """Takes one sample now. False when the target thread runs no Python code (it has
        ended, or the interpreter is finalizing) or the block was busy."""
        frame = sys._current_frames().get(self.ident)
        if frame is None:
            return False
        try:
            h, wait, where = describe(frame)
        finally:
            del frame  # frames hold locals alive: drop them before the beacon call
        if not self.beacon.sample(h, wait, where):
            return False
        self.samples += 1
        return True

    def _run(self):
        try:
            while not self._stop.is_set():
                if self.sample_once() is False and self._target_ended():
                    return
                self.cpu_s = time.thread_time()
                self._stop.wait(self.period)
        except StepwatchError as e:
            if e.code != ENULL:  # ENULL: the beacon was closed, the trainer is done with it
                _say_stopped(e)
        except Exception as e:  # noqa: BLE001 - never into the trainer; say it once
            _say_stopped(e)

    def _target_ended(self):
        t = self._target
        return t is not None and not t.is_alive()


def _say_stopped(e, what="stopped"):
    try:
        sys.stderr.write(f"stepwatch: progress sampler {what}: {type(e).__name__}: {e}\n")
    except Exception:  # noqa: BLE001 - stderr closed: nothing left to tell
        pass


# The sampler of the default beacon (stepwatch.init), or None.
_current = None


def start_default(beacon, period=None):
    """Starts the default beacon's sampler; None (and one line on stderr) when no thread can be
    started: the trainer runs on without it, and the beacon says "no sampler"."""
    global _current
    stop_default()
    try:
        _current = Sampler(beacon, period).start()
    except RuntimeError as e:  # "can't start new thread"
        _say_stopped(e, "not started")
        _current = None
    return _current


def stop_default():
    global _current
    s, _current = _current, None
    if s is not None:
        s.stop()


def stop_for(beacon):
    """Stops the default sampler if it samples into `beacon` (closed or finished)."""
    s = _current
    if s is not None and s.beacon is beacon:
        stop_default()


def current():
    s = _current
    return s if s is not None and s.running else None


def _forget_in_child():
    # The thread did not survive the fork; its object must not be stopped or joined here.
    global _current
    _current = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
