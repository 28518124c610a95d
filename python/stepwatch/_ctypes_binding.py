# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""ctypes binding of libstepwatch.so: the fallback when the C extension is not built.

Same surface as stepwatch._native (Beacon, the module-level calls on a default handle,
get_default/set_default, strerror, abi_version). The library is loaded with ctypes.PyDLL so
calls keep the GIL: like the extension, Python threads are serialised on a handle, and close()
cannot race a step() of another thread.

Library lookup: $STEPWATCH_LIB (only it, when set), else libstepwatch.so next to this package,
else the system loader (libstepwatch.so.1, as the .deb installs it). LIBRARY_PATH is the file
that was loaded.
"""

import ctypes
import operator
import os

from . import errors as _errors

ABI_VERSION = 1

# sample_wait values (include/stepwatch/beacon_v1.h, STEPWATCH_WAIT_*).
WAIT_NONE = 0
WAIT_COLLECTIVE = 1
WAIT_DEVICE = 2
WAIT_STORE = 3

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


class _Options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("dir", ctypes.c_char_p),
        ("job", ctypes.c_char_p),
        ("rank", ctypes.c_int32),
        ("local_rank", ctypes.c_int32),
        ("world_size", ctypes.c_int32),
        ("incarnation", ctypes.c_int64),
    ]


def _candidates():
    """(what to dlopen, where it comes from). STEPWATCH_LIB, when set, is the only one."""
    env = os.environ.get("STEPWATCH_LIB")
    if env:
        return [(env, "STEPWATCH_LIB")]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libstepwatch.so")
    return [(here, "the package directory"), ("libstepwatch.so.1", "the system loader"),
            ("libstepwatch.so", "the system loader")]


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _loaded_from(fn, name):
    """The file the system loader took `name` from (dladdr on one of its functions), or name."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        info = _DlInfo()
        if dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    except (AttributeError, OSError):
        pass
    return name


def _load():
    tried = []
    for path, source in _candidates():
        try:
            lib = ctypes.PyDLL(path)
        except OSError as e:  # dlerror()'s text names the file
            tried.append(f"{e} ({source})")
            continue
        version = lib.stepwatch_abi_version()
        if version != ABI_VERSION:
            raise ImportError(f"stepwatch: {path} has ABI version {version}, this package needs {ABI_VERSION}")
        return lib, _loaded_from(lib.stepwatch_abi_version, path)
    raise ImportError("stepwatch: cannot load libstepwatch.so (set STEPWATCH_LIB to its path); tried: " + "; ".join(tried))


_lib, LIBRARY_PATH = _load()

_P = ctypes.c_void_p
for _name, _args in [
    ("stepwatch_options_init", [ctypes.POINTER(_Options)]),
    ("stepwatch_open", [ctypes.POINTER(_Options), ctypes.POINTER(ctypes.c_void_p)]),
    ("stepwatch_step", [_P, ctypes.c_int64]),
    ("stepwatch_step_loss", [_P, ctypes.c_int64, ctypes.c_double]),
    ("stepwatch_loss", [_P, ctypes.c_double]),
    ("stepwatch_beat", [_P]),
    ("stepwatch_phase_begin", [_P, ctypes.c_char_p]),
    ("stepwatch_phase_end", [_P]),
    ("stepwatch_checkpoint_committed", [_P, ctypes.c_char_p, ctypes.c_int64]),
    ("stepwatch_sample", [_P, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]),
    ("stepwatch_finish", [_P, ctypes.c_int]),
    ("stepwatch_close", [_P]),
    ("stepwatch_path", [_P]),
    ("stepwatch_strerror", [ctypes.c_int]),
    ("stepwatch_last_error", []),
    ("stepwatch_abi_version", []),
]:
    _fn = getattr(_lib, _name)
    _fn.argtypes = _args
    _fn.restype = ctypes.c_int
_lib.stepwatch_options_init.restype = None
_lib.stepwatch_close.restype = None
_lib.stepwatch_path.restype = ctypes.c_char_p
_lib.stepwatch_strerror.restype = ctypes.c_char_p
_lib.stepwatch_last_error.restype = ctypes.c_char_p

_step = _lib.stepwatch_step
_step_loss = _lib.stepwatch_step_loss
_loss = _lib.stepwatch_loss
_beat = _lib.stepwatch_beat
_EBUSY = _errors.EBUSY


def _result(rc, op, detail=None):
    if rc == 0:
        return True
    if rc == _EBUSY:
        return False
    raise _errors.error_for(op, rc, detail)


def _float(x):
    """float(x) as PyFloat_AsDouble does it: numbers and objects with __float__, never str."""
    if x.__class__ is float:
        return x
    if isinstance(x, (str, bytes, bytearray)):
        raise TypeError(f"stepwatch: the loss must be a number, not {type(x).__name__}")
    return float(x)


def _name(value, op, what, detail):
    if not isinstance(value, str):
        raise TypeError(f"stepwatch.{op}: {what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise _errors.error_for(op, _errors.EINVAL, detail)
    return value.encode("utf-8", "surrogateescape")


def _str_option(value, what):
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"stepwatch: {what} must be a str or None, not {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"stepwatch: {what} contains a NUL character")
    return os.fsencode(value)


def _int_option(value, what, top):
    if value is None:
        return -1
    value = operator.index(value)
    if value < 0 or value > top:
        raise ValueError(f"stepwatch: {what} must be between 0 and {top}, got {value}")
    return value


class Beacon:
    """Beacon(*, job=None, dir=None, rank=None, local_rank=None, world_size=None, incarnation=None)

    One rank's beacon. None means: take it from the environment (STEPWATCH_JOB, STEPWATCH_DIR,
    RANK/LOCAL_RANK/WORLD_SIZE or SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS, STEPWATCH_INCARNATION).
    """

    def __init__(self, *, job=None, dir=None, rank=None, local_rank=None, world_size=None, incarnation=None):
        opts = _Options()
        _lib.stepwatch_options_init(ctypes.byref(opts))
        opts.job = _str_option(job, "job")
        opts.dir = _str_option(dir, "dir")
        opts.rank = _int_option(rank, "rank", 2**31 - 1)
        opts.local_rank = _int_option(local_rank, "local_rank", 2**31 - 1)
        opts.world_size = _int_option(world_size, "world_size", 2**31 - 1)
        opts.incarnation = _int_option(incarnation, "incarnation", 2**32 - 1)
        handle = ctypes.c_void_p()
        rc = _lib.stepwatch_open(ctypes.byref(opts), ctypes.byref(handle))
        if rc != 0:
            detail = _lib.stepwatch_last_error().decode("utf-8", "replace")
            raise _errors.error_for("open", rc, detail)
        old = getattr(self, "_h", None)
        if old is not None:
            _lib.stepwatch_close(old)
        self._h = handle.value

    def step(self, n, loss=None):
        try:
            if loss is None:
                rc = _step(self._h, n)
            else:
                rc = _step_loss(self._h, n, _float(loss))
        except ctypes.ArgumentError:
            raise TypeError(f"stepwatch.step: the step must be an int, not {type(n).__name__}") from None
        if rc == 0:
            return True
        return _result(rc, "step", n)

    def loss(self, x):
        return _result(_loss(self._h, _float(x)), "loss", x)

    def beat(self):
        return _result(_beat(self._h), "beat")

    def phase_begin(self, name):
        raw = _name(name, "phase_begin", "the phase name", name)
        return _result(_lib.stepwatch_phase_begin(self._h, raw), "phase_begin", name)

    def phase_end(self):
        return _result(_lib.stepwatch_phase_end(self._h), "phase_end")

    def checkpoint_committed(self, id, step):  # noqa: A002 - mirrors the C name
        detail = (id, step)
        raw = _name(id, "checkpoint_committed", "the checkpoint id", detail)
        return _result(_lib.stepwatch_checkpoint_committed(self._h, raw, operator.index(step)), "checkpoint_committed", detail)

    def sample(self, hash, wait, where=None):  # noqa: A002 - mirrors the C name
        """sample(hash, wait, where=None) -> bool: one progress-sampler record. Has its own lock:
        never makes step() busy. False when another thread was sampling."""
        h = operator.index(hash)
        if h < 0 or h > 2**64 - 1:
            raise OverflowError("stepwatch.sample: the hash must be between 0 and 2**64-1")
        w = operator.index(wait)
        if w < _INT_MIN or w > _INT_MAX:
            w = -1  # out of 0..WAIT_STORE as well: the library answers EINVAL
        raw = None if where is None else _name(where, "sample", "where", where)
        return _result(_lib.stepwatch_sample(self._h, h, w, raw), "sample", wait)

    def finish(self, ok=True):
        return _result(_lib.stepwatch_finish(self._h, 1 if ok else 0), "finish")

    def path(self):
        if self._h is None:
            raise _errors.error_for("path", _errors.ENULL)
        return os.fsdecode(_lib.stepwatch_path(self._h))

    def close(self):
        h, self._h = getattr(self, "_h", None), None
        if h is not None:
            _lib.stepwatch_close(h)

    @property
    def closed(self):
        return self._h is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self, _close=_lib.stepwatch_close):
        # Module globals may already be gone at interpreter exit: use the bound default.
        h, self._h = getattr(self, "_h", None), None
        if h is not None:
            _close(h)

    def __repr__(self):
        if self._h is None:
            return f"<{type(self).__module__}.{type(self).__qualname__} closed>"
        return f"<{type(self).__module__}.{type(self).__qualname__} {self.path()}>"


_default = None


def get_default():
    return _default


def set_default(beacon):
    global _default
    if beacon is not None and not isinstance(beacon, Beacon):
        raise TypeError(f"set_default needs a Beacon or None, not {type(beacon).__name__}")
    _default = beacon


def step(n, loss=None):
    """step(n, loss=None) -> bool: records committed optimizer step n on the default beacon."""
    b = _default  # inline, not _default_for(): this is the per-step call
    if b is None:
        raise _errors.not_initialized("step")
    return b.step(n, loss)


def _default_for(what):
    b = _default
    if b is None:
        raise _errors.not_initialized(what)
    return b


def loss(x):
    return _default_for("loss").loss(x)


def beat():
    return _default_for("beat").beat()


def phase_begin(name):
    return _default_for("phase_begin").phase_begin(name)


def phase_end():
    return _default_for("phase_end").phase_end()


def checkpoint_committed(id, step):  # noqa: A002
    return _default_for("checkpoint_committed").checkpoint_committed(id, step)


def finish(ok=True):
    return _default_for("finish").finish(ok)


def path():
    return _default_for("path").path()


def finish_at_exit(beacon):
    """Python cannot see the process's exit status: the caller marks the beacon itself."""
    return False


def strerror(code):
    return _lib.stepwatch_strerror(code).decode()


def abi_version():
    return _lib.stepwatch_abi_version()
