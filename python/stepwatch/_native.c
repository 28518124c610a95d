// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
/* stepwatch._native: the C extension binding of libstepwatch (linked statically).
 *
 * Hot calls (step, loss, beat) use METH_FASTCALL / METH_O and never release the GIL: each is a
 * few stores into the mapped beacon, so holding the GIL is cheaper than releasing it, and it
 * serialises Python threads on one handle (the C handle's phase stack is not thread-safe).
 * Errors are built by stepwatch.errors so both bindings word them the same way.
 *
 * finish_at_exit(beacon) hands the end of a beacon to exit(3): stepwatch's atexit hook calls it
 * when the interpreter ends without an uncaught exception, and the glibc on_exit handler then
 * marks the beacon finished if the process's exit status is 0 and failed otherwise
 * (sys.exit(3), a non-int sys.exit message). Python code cannot see that status.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stepwatch/beacon_v1.h"
#include "stepwatch/stepwatch.h"

typedef struct {
  PyObject_HEAD stepwatch_t* sw;
} BeaconObject;

static PyTypeObject BeaconType;

/* stepwatch.errors.error_for and .not_initialized, fetched at import. */
static PyObject* g_error_for = NULL;
static PyObject* g_not_initialized = NULL;
/* The module-level default handle (a strong reference), or NULL before init. */
static BeaconObject* g_default = NULL;

/* ---- the end of the process (finish_at_exit) ---- */

/* Handles whose status the exit status decides, in the process that armed them. They are never
 * closed by Python once armed (the interpreter may free the objects before exit runs), only by
 * an explicit close(), which disarms them first. */
#define AT_EXIT_MAX 64
static stepwatch_t* g_at_exit[AT_EXIT_MAX];
static pid_t g_at_exit_pid = 0; /* the process that registered the on_exit handler */

static int armed_index(const stepwatch_t* sw) {
  if (sw == NULL || g_at_exit_pid != getpid()) return -1;
  for (int i = 0; i < AT_EXIT_MAX; ++i) {
    if (g_at_exit[i] == sw) return i;
  }
  return -1;
}

static void disarm(const stepwatch_t* sw) {
  int i = armed_index(sw);
  if (i >= 0) g_at_exit[i] = NULL;
}

#ifdef __GLIBC__
static void finish_by_exit_status(int status, void* arg) {
  (void)arg;
  if (g_at_exit_pid != getpid()) return; /* a forked child that inherited the registration */
  for (int i = 0; i < AT_EXIT_MAX; ++i) {
    if (g_at_exit[i] != NULL) stepwatch_finish(g_at_exit[i], status == 0);
    g_at_exit[i] = NULL; /* the process ends: the mapping goes with it */
  }
}

/* True once the handler is registered for this process. */
static int exit_handler_ready(void) {
  if (g_at_exit_pid == getpid()) return 1;
  memset(g_at_exit, 0, sizeof g_at_exit); /* a forked child's copy of its parent's list */
  if (on_exit(finish_by_exit_status, NULL) != 0) return 0;
  g_at_exit_pid = getpid();
  return 1;
}
#else
static int exit_handler_ready(void) {
  return 0; /* no on_exit: the caller marks the beacon itself */
}
#endif

/* ---- errors ---- */

static PyObject* raise_code(const char* op, int code, PyObject* detail) {
  PyObject* exc = PyObject_CallFunction(g_error_for, "siO", op, code, detail ? detail : Py_None);
  if (exc == NULL) return NULL;
  PyErr_SetObject((PyObject*)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}

static PyObject* raise_not_initialized(const char* op) {
  PyObject* exc = PyObject_CallFunction(g_not_initialized, "s", op);
  if (exc == NULL) return NULL;
  PyErr_SetObject((PyObject*)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}

/* True on success, False on EBUSY (never block the trainer), an exception otherwise. */
static inline PyObject* result(int rc, const char* op, PyObject* detail) {
  if (rc == STEPWATCH_OK) Py_RETURN_TRUE;
  if (rc == STEPWATCH_EBUSY) Py_RETURN_FALSE;
  return raise_code(op, rc, detail);
}

/* UTF-8 of a str without embedded NUL; NULL with an exception set otherwise. A NUL makes the
 * C library see a shorter name, so it is reported as the C library would report a bad name. */
static const char* name_arg(PyObject* obj, const char* op, const char* what, PyObject* detail) {
  if (!PyUnicode_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "stepwatch.%s: %s must be a str, not %.100s", op, what,
                 Py_TYPE(obj)->tp_name);
    return NULL;
  }
  Py_ssize_t size = 0;
  const char* s = PyUnicode_AsUTF8AndSize(obj, &size);
  if (s == NULL) return NULL;
  if ((size_t)size != strlen(s)) {
    raise_code(op, STEPWATCH_EINVAL, detail);
    return NULL;
  }
  return s;
}

/* ---- shared implementations (explicit handle and module default) ---- */

static PyObject* do_step(BeaconObject* b, PyObject* const* args, Py_ssize_t nargs,
                         PyObject* kwnames) {
  PyObject* n_obj = nargs > 0 ? args[0] : NULL;
  PyObject* loss_obj = nargs > 1 ? args[1] : NULL;
  if (nargs > 2) {
    PyErr_Format(PyExc_TypeError, "stepwatch.step() takes at most 2 arguments (%zd given)", nargs);
    return NULL;
  }
  if (kwnames != NULL) {
    Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; ++i) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, i);
      PyObject** slot = NULL;
      if (PyUnicode_CompareWithASCIIString(key, "loss") == 0)
        slot = &loss_obj;
      else if (PyUnicode_CompareWithASCIIString(key, "n") == 0)
        slot = &n_obj;
      if (slot == NULL) {
        PyErr_Format(PyExc_TypeError, "stepwatch.step() got an unexpected keyword argument '%U'",
                     key);
        return NULL;
      }
      if (*slot != NULL) {
        PyErr_Format(PyExc_TypeError, "stepwatch.step() got multiple values for argument '%U'",
                     key);
        return NULL;
      }
      *slot = args[nargs + i];
    }
  }
  if (n_obj == NULL) {
    PyErr_SetString(PyExc_TypeError, "stepwatch.step() missing required argument 'n'");
    return NULL;
  }
  long long n = PyLong_AsLongLong(n_obj);
  if (n == -1 && PyErr_Occurred()) return NULL;
  int rc;
  if (loss_obj == NULL || loss_obj == Py_None) {
    rc = stepwatch_step(b->sw, (int64_t)n);
  } else {
    double loss = PyFloat_AsDouble(loss_obj);
    if (loss == -1.0 && PyErr_Occurred()) return NULL;
    rc = stepwatch_step_loss(b->sw, (int64_t)n, loss);
  }
  return result(rc, "step", n_obj);
}

static PyObject* do_loss(BeaconObject* b, PyObject* x) {
  double loss = PyFloat_AsDouble(x);
  if (loss == -1.0 && PyErr_Occurred()) return NULL;
  return result(stepwatch_loss(b->sw, loss), "loss", x);
}

static PyObject* do_beat(BeaconObject* b) {
  return result(stepwatch_beat(b->sw), "beat", NULL);
}

static PyObject* do_phase_begin(BeaconObject* b, PyObject* name) {
  const char* s = name_arg(name, "phase_begin", "the phase name", name);
  if (s == NULL) return NULL;
  return result(stepwatch_phase_begin(b->sw, s), "phase_begin", name);
}

static PyObject* do_phase_end(BeaconObject* b) {
  return result(stepwatch_phase_end(b->sw), "phase_end", NULL);
}

/* Fills vals[0..n) from positional and keyword arguments (vectorcall) by `names`; `fn` names the
 * call in TypeErrors ("stepwatch.sample()"). Unset ones stay NULL. Returns 0, or -1 with an
 * exception set. */
static int take_args(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                     const char* const* names, int n, PyObject** vals, const char* fn) {
  if (nargs > n) {
    PyErr_Format(PyExc_TypeError, "%s takes at most %d arguments (%zd given)", fn, n, nargs);
    return -1;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) vals[i] = args[i];
  if (kwnames == NULL) return 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, i);
    int k = -1;
    for (int j = 0; j < n; ++j) {
      if (PyUnicode_CompareWithASCIIString(key, names[j]) == 0) k = j;
    }
    if (k < 0 || vals[k] != NULL) {
      PyErr_Format(PyExc_TypeError, "%s got an unexpected or repeated argument '%U'", fn, key);
      return -1;
    }
    vals[k] = args[nargs + i];
  }
  return 0;
}

static PyObject* do_checkpoint(BeaconObject* b, PyObject* const* args, Py_ssize_t nargs,
                               PyObject* kwnames) {
  static const char* const names[] = {"id", "step"};
  PyObject* vals[2] = {NULL, NULL};
  if (take_args(args, nargs, kwnames, names, 2, vals, "stepwatch.checkpoint_committed()") != 0)
    return NULL;
  if (vals[0] == NULL || vals[1] == NULL) {
    PyErr_SetString(PyExc_TypeError, "stepwatch.checkpoint_committed() needs id and step");
    return NULL;
  }
  PyObject* detail = PyTuple_Pack(2, vals[0], vals[1]);
  if (detail == NULL) return NULL;
  PyObject* out = NULL;
  const char* id = name_arg(vals[0], "checkpoint_committed", "the checkpoint id", detail);
  if (id != NULL) {
    long long step = PyLong_AsLongLong(vals[1]);
    if (!(step == -1 && PyErr_Occurred())) {
      out = result(stepwatch_checkpoint_committed(b->sw, id, (int64_t)step), "checkpoint_committed",
                   detail);
    }
  }
  Py_DECREF(detail);
  return out;
}

static PyObject* do_finish(BeaconObject* b, PyObject* const* args, Py_ssize_t nargs,
                           PyObject* kwnames) {
  PyObject* ok_obj = nargs > 0 ? args[0] : NULL;
  if (nargs > 1) {
    PyErr_Format(PyExc_TypeError, "stepwatch.finish() takes at most 1 argument (%zd given)", nargs);
    return NULL;
  }
  if (kwnames != NULL) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, i);
      if (PyUnicode_CompareWithASCIIString(key, "ok") != 0 || ok_obj != NULL) {
        PyErr_Format(PyExc_TypeError,
                     "stepwatch.finish() got an unexpected or repeated argument '%U'", key);
        return NULL;
      }
      ok_obj = args[nargs + i];
    }
  }
  int ok = 1;
  if (ok_obj != NULL) {
    ok = PyObject_IsTrue(ok_obj);
    if (ok < 0) return NULL;
  }
  int rc = stepwatch_finish(b->sw, ok);
  if (rc == STEPWATCH_OK)
    disarm(b->sw); /* the trainer said it: the exit status no longer decides */
  return result(rc, "finish", NULL);
}

/* sample(hash, wait, where=None): one progress-sampler record (stepwatch.sampler's thread). The
 * GIL stays held, as for every call here: close() of another thread cannot free the handle under
 * it. */
static PyObject* do_sample(BeaconObject* b, PyObject* const* args, Py_ssize_t nargs,
                           PyObject* kwnames) {
  static const char* const names[] = {"hash", "wait", "where"};
  PyObject* vals[3] = {NULL, NULL, NULL};
  if (take_args(args, nargs, kwnames, names, 3, vals, "stepwatch.sample()") != 0) return NULL;
  if (vals[0] == NULL || vals[1] == NULL) {
    PyErr_SetString(PyExc_TypeError, "stepwatch.sample() needs hash and wait");
    return NULL;
  }
  PyObject* h = PyNumber_Index(vals[0]);
  if (h == NULL) return NULL;
  unsigned long long hash = PyLong_AsUnsignedLongLong(h);
  Py_DECREF(h);
  if (hash == (unsigned long long)-1 && PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
      PyErr_Clear();
      PyErr_SetString(PyExc_OverflowError,
                      "stepwatch.sample: the hash must be between 0 and 2**64-1");
    }
    return NULL;
  }
  int overflow = 0;
  long long w = PyLong_AsLongLongAndOverflow(vals[1], &overflow);
  if (w == -1 && PyErr_Occurred()) return NULL;
  /* Out of int range is out of 0..STEPWATCH_WAIT_MAX too: the library answers EINVAL. */
  int wait = (overflow != 0 || w < INT_MIN || w > INT_MAX) ? -1 : (int)w;
  const char* where = NULL;
  if (vals[2] != NULL && vals[2] != Py_None) {
    where = name_arg(vals[2], "sample", "where", vals[2]);
    if (where == NULL) return NULL;
  }
  return result(stepwatch_sample(b->sw, (uint64_t)hash, wait, where), "sample", vals[1]);
}

static PyObject* do_path(BeaconObject* b) {
  if (b->sw == NULL) return raise_code("path", STEPWATCH_ENULL, NULL);
  return PyUnicode_DecodeFSDefault(stepwatch_path(b->sw));
}

/* ---- Beacon type ---- */

/* None or a non-negative int that fits the C field; -1 (from the environment) for None. */
static int int_option(PyObject* obj, const char* what, long long max, long long* out) {
  *out = -1;
  if (obj == NULL || obj == Py_None) return 0;
  long long v = PyLong_AsLongLong(obj);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < 0 || v > max) {
    PyErr_Format(PyExc_ValueError, "stepwatch: %s must be between 0 and %lld, got %lld", what, max,
                 v);
    return -1;
  }
  *out = v;
  return 0;
}

static int str_option(PyObject* obj, const char* what, const char** out) {
  *out = NULL;
  if (obj == NULL || obj == Py_None) return 0;
  if (!PyUnicode_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "stepwatch: %s must be a str or None, not %.100s", what,
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  Py_ssize_t size = 0;
  const char* s = PyUnicode_AsUTF8AndSize(obj, &size);
  if (s == NULL) return -1;
  if ((size_t)size != strlen(s)) {
    PyErr_Format(PyExc_ValueError, "stepwatch: %s contains a NUL character", what);
    return -1;
  }
  *out = s;
  return 0;
}

static int Beacon_init(BeaconObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"job", "dir", "rank", "local_rank", "world_size", "incarnation", NULL};
  PyObject *job = NULL, *dir = NULL, *rank = NULL, *local_rank = NULL, *world = NULL, *inc = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OOOOOO:Beacon", kwlist, &job, &dir, &rank,
                                   &local_rank, &world, &inc)) {
    return -1;
  }
  stepwatch_options o;
  stepwatch_options_init(&o);
  long long v;
  if (str_option(job, "job", &o.job) < 0 || str_option(dir, "dir", &o.dir) < 0) return -1;
  if (int_option(rank, "rank", INT32_MAX, &v) < 0) return -1;
  o.rank = (int32_t)v;
  if (int_option(local_rank, "local_rank", INT32_MAX, &v) < 0) return -1;
  o.local_rank = (int32_t)v;
  if (int_option(world, "world_size", INT32_MAX, &v) < 0) return -1;
  o.world_size = (int32_t)v;
  if (int_option(inc, "incarnation", UINT32_MAX, &v) < 0) return -1;
  o.incarnation = (int64_t)v;

  stepwatch_t* sw = NULL;
  int rc = stepwatch_open(&o, &sw);
  if (rc != STEPWATCH_OK) {
    PyObject* detail = PyUnicode_DecodeUTF8(stepwatch_last_error(),
                                            (Py_ssize_t)strlen(stepwatch_last_error()), "replace");
    if (detail == NULL) return -1;
    raise_code("open", rc, detail);
    Py_DECREF(detail);
    return -1;
  }
  disarm(self->sw);
  stepwatch_close(self->sw); /* __init__ called twice: the new beacon replaces the old */
  self->sw = sw;
  return 0;
}

static void Beacon_dealloc(BeaconObject* self) {
  if (armed_index(self->sw) < 0) stepwatch_close(self->sw); /* an armed one is exit()'s */
  self->sw = NULL;
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* Beacon_repr(BeaconObject* self) {
  if (self->sw == NULL) return PyUnicode_FromFormat("<%s closed>", Py_TYPE(self)->tp_name);
  return PyUnicode_FromFormat("<%s %s>", Py_TYPE(self)->tp_name, stepwatch_path(self->sw));
}

static PyObject* Beacon_step(BeaconObject* self, PyObject* const* args, Py_ssize_t nargs,
                             PyObject* kwnames) {
  return do_step(self, args, nargs, kwnames);
}
static PyObject* Beacon_loss(BeaconObject* self, PyObject* x) {
  return do_loss(self, x);
}
static PyObject* Beacon_beat(BeaconObject* self, PyObject* Py_UNUSED(ignored)) {
  return do_beat(self);
}
static PyObject* Beacon_phase_begin(BeaconObject* self, PyObject* name) {
  return do_phase_begin(self, name);
}
static PyObject* Beacon_phase_end(BeaconObject* self, PyObject* Py_UNUSED(ignored)) {
  return do_phase_end(self);
}
static PyObject* Beacon_checkpoint(BeaconObject* self, PyObject* const* args, Py_ssize_t nargs,
                                   PyObject* kwnames) {
  return do_checkpoint(self, args, nargs, kwnames);
}
static PyObject* Beacon_finish(BeaconObject* self, PyObject* const* args, Py_ssize_t nargs,
                               PyObject* kwnames) {
  return do_finish(self, args, nargs, kwnames);
}
static PyObject* Beacon_sample(BeaconObject* self, PyObject* const* args, Py_ssize_t nargs,
                               PyObject* kwnames) {
  return do_sample(self, args, nargs, kwnames);
}
static PyObject* Beacon_path(BeaconObject* self, PyObject* Py_UNUSED(ignored)) {
  return do_path(self);
}

static PyObject* Beacon_close(BeaconObject* self, PyObject* Py_UNUSED(ignored)) {
  disarm(self->sw);
  stepwatch_close(self->sw);
  self->sw = NULL;
  Py_RETURN_NONE;
}

static PyObject* Beacon_enter(BeaconObject* self, PyObject* Py_UNUSED(ignored)) {
  Py_INCREF(self);
  return (PyObject*)self;
}

static PyObject* Beacon_exit(BeaconObject* self, PyObject* Py_UNUSED(args)) {
  return Beacon_close(self, NULL);
}

static PyObject* Beacon_get_closed(BeaconObject* self, void* Py_UNUSED(closure)) {
  return PyBool_FromLong(self->sw == NULL);
}

#define FASTCALL_KW(f) (PyCFunction)(void (*)(void))(f)

static PyMethodDef Beacon_methods[] = {
    {"step", FASTCALL_KW(Beacon_step), METH_FASTCALL | METH_KEYWORDS,
     "step(n, loss=None) -> bool\n\nRecords committed optimizer step n (and the loss). False when "
     "the beacon was "
     "busy."},
    {"loss", (PyCFunction)Beacon_loss, METH_O, "loss(x) -> bool\n\nRecords the last loss."},
    {"beat", (PyCFunction)Beacon_beat, METH_NOARGS,
     "beat() -> bool\n\nStill working inside a long phase."},
    {"phase_begin", (PyCFunction)Beacon_phase_begin, METH_O, "phase_begin(name) -> bool"},
    {"phase_end", (PyCFunction)Beacon_phase_end, METH_NOARGS, "phase_end() -> bool"},
    {"checkpoint_committed", FASTCALL_KW(Beacon_checkpoint), METH_FASTCALL | METH_KEYWORDS,
     "checkpoint_committed(id, step) -> bool\n\nCall after the checkpoint's commit marker is "
     "durable."},
    {"finish", FASTCALL_KW(Beacon_finish), METH_FASTCALL | METH_KEYWORDS,
     "finish(ok=True) -> bool\n\nMarks the rank finished (or failed) before it exits."},
    {"sample", FASTCALL_KW(Beacon_sample), METH_FASTCALL | METH_KEYWORDS,
     "sample(hash, wait, where=None) -> bool\n\nOne progress-sampler record: a digest of the main "
     "thread's top frames (0: unknown), what it waits in (WAIT_*), a short label. Has its own "
     "lock: never makes step() busy. False when another thread was sampling."},
    {"path", (PyCFunction)Beacon_path, METH_NOARGS,
     "path() -> str\n\nThe beacon file this handle writes."},
    {"close", (PyCFunction)Beacon_close, METH_NOARGS,
     "close()\n\nUnmaps the beacon; the file stays."},
    {"__enter__", (PyCFunction)Beacon_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Beacon_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Beacon_getset[] = {
    {"closed", (getter)Beacon_get_closed, NULL, "True after close()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BeaconType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stepwatch._native.Beacon",
    .tp_basicsize = sizeof(BeaconObject),
    .tp_dealloc = (destructor)Beacon_dealloc,
    .tp_repr = (reprfunc)Beacon_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc =
        "Beacon(*, job=None, dir=None, rank=None, local_rank=None, world_size=None, "
        "incarnation=None)\n\n"
        "One rank's beacon. None means: take it from the environment (STEPWATCH_JOB, "
        "STEPWATCH_DIR, "
        "RANK/LOCAL_RANK/WORLD_SIZE or SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS, "
        "STEPWATCH_INCARNATION).",
    .tp_methods = Beacon_methods,
    .tp_getset = Beacon_getset,
    .tp_init = (initproc)Beacon_init,
    .tp_new = PyType_GenericNew,
};

/* ---- module-level functions on the default handle ---- */

#define DEFAULT_OR_RAISE(op)   \
  BeaconObject* b = g_default; \
  if (b == NULL) return raise_not_initialized(op);

static PyObject* mod_step(PyObject* Py_UNUSED(m), PyObject* const* args, Py_ssize_t nargs,
                          PyObject* kwnames) {
  DEFAULT_OR_RAISE("step");
  return do_step(b, args, nargs, kwnames);
}
static PyObject* mod_loss(PyObject* Py_UNUSED(m), PyObject* x) {
  DEFAULT_OR_RAISE("loss");
  return do_loss(b, x);
}
static PyObject* mod_beat(PyObject* Py_UNUSED(m), PyObject* Py_UNUSED(ignored)) {
  DEFAULT_OR_RAISE("beat");
  return do_beat(b);
}
static PyObject* mod_phase_begin(PyObject* Py_UNUSED(m), PyObject* name) {
  DEFAULT_OR_RAISE("phase_begin");
  return do_phase_begin(b, name);
}
static PyObject* mod_phase_end(PyObject* Py_UNUSED(m), PyObject* Py_UNUSED(ignored)) {
  DEFAULT_OR_RAISE("phase_end");
  return do_phase_end(b);
}
static PyObject* mod_checkpoint(PyObject* Py_UNUSED(m), PyObject* const* args, Py_ssize_t nargs,
                                PyObject* kwnames) {
  DEFAULT_OR_RAISE("checkpoint_committed");
  return do_checkpoint(b, args, nargs, kwnames);
}
static PyObject* mod_finish(PyObject* Py_UNUSED(m), PyObject* const* args, Py_ssize_t nargs,
                            PyObject* kwnames) {
  DEFAULT_OR_RAISE("finish");
  return do_finish(b, args, nargs, kwnames);
}
static PyObject* mod_path(PyObject* Py_UNUSED(m), PyObject* Py_UNUSED(ignored)) {
  DEFAULT_OR_RAISE("path");
  return do_path(b);
}

static PyObject* mod_get_default(PyObject* Py_UNUSED(m), PyObject* Py_UNUSED(ignored)) {
  if (g_default == NULL) Py_RETURN_NONE;
  Py_INCREF(g_default);
  return (PyObject*)g_default;
}

static PyObject* mod_set_default(PyObject* Py_UNUSED(m), PyObject* obj) {
  if (obj != Py_None && !PyObject_TypeCheck(obj, &BeaconType)) {
    PyErr_Format(PyExc_TypeError, "set_default needs a Beacon or None, not %.100s",
                 Py_TYPE(obj)->tp_name);
    return NULL;
  }
  BeaconObject* old = g_default;
  if (obj == Py_None) {
    g_default = NULL;
  } else {
    Py_INCREF(obj);
    g_default = (BeaconObject*)obj;
  }
  Py_XDECREF(old);
  Py_RETURN_NONE;
}

static PyObject* mod_finish_at_exit(PyObject* Py_UNUSED(m), PyObject* obj) {
  if (!PyObject_TypeCheck(obj, &BeaconType)) {
    PyErr_Format(PyExc_TypeError, "finish_at_exit needs a Beacon, not %.100s",
                 Py_TYPE(obj)->tp_name);
    return NULL;
  }
  BeaconObject* b = (BeaconObject*)obj;
  if (b->sw == NULL || !exit_handler_ready()) Py_RETURN_FALSE;
  if (armed_index(b->sw) >= 0) Py_RETURN_TRUE;
  for (int i = 0; i < AT_EXIT_MAX; ++i) {
    if (g_at_exit[i] == NULL) {
      g_at_exit[i] = b->sw;
      Py_RETURN_TRUE;
    }
  }
  Py_RETURN_FALSE; /* full: the caller marks it itself */
}

static PyObject* mod_strerror(PyObject* Py_UNUSED(m), PyObject* code) {
  long c = PyLong_AsLong(code);
  if (c == -1 && PyErr_Occurred()) return NULL;
  return PyUnicode_FromString(stepwatch_strerror((int)c));
}

static PyObject* mod_abi_version(PyObject* Py_UNUSED(m), PyObject* Py_UNUSED(ignored)) {
  return PyLong_FromLong(stepwatch_abi_version());
}

static PyMethodDef module_methods[] = {
    {"step", FASTCALL_KW(mod_step), METH_FASTCALL | METH_KEYWORDS,
     "step(n, loss=None) -> bool\n\nRecords committed optimizer step n on the default beacon. "
     "False when the "
     "beacon was busy (nothing written, never blocks)."},
    {"loss", (PyCFunction)mod_loss, METH_O,
     "loss(x) -> bool\n\nRecords the last loss on the default beacon."},
    {"beat", (PyCFunction)mod_beat, METH_NOARGS,
     "beat() -> bool\n\nStill working inside a long labeled phase."},
    {"phase_begin", (PyCFunction)mod_phase_begin, METH_O, "phase_begin(name) -> bool"},
    {"phase_end", (PyCFunction)mod_phase_end, METH_NOARGS, "phase_end() -> bool"},
    {"checkpoint_committed", FASTCALL_KW(mod_checkpoint), METH_FASTCALL | METH_KEYWORDS,
     "checkpoint_committed(id, step) -> bool\n\nCall after the checkpoint's commit marker is "
     "durable."},
    {"finish", FASTCALL_KW(mod_finish), METH_FASTCALL | METH_KEYWORDS,
     "finish(ok=True) -> bool\n\nMarks this rank finished (or failed) before it exits."},
    {"path", (PyCFunction)mod_path, METH_NOARGS, "path() -> str\n\nThe default beacon's file."},
    {"get_default", (PyCFunction)mod_get_default, METH_NOARGS, "The default Beacon, or None."},
    {"set_default", (PyCFunction)mod_set_default, METH_O,
     "Sets (or clears, with None) the default Beacon."},
    {"finish_at_exit", (PyCFunction)mod_finish_at_exit, METH_O,
     "finish_at_exit(beacon) -> bool\n\nAt exit(3), marks the beacon finished if the exit status "
     "is 0, failed otherwise. False when that cannot be arranged (no glibc on_exit)."},
    {"strerror", (PyCFunction)mod_strerror, METH_O, "stepwatch_strerror(code)"},
    {"abi_version", (PyCFunction)mod_abi_version, METH_NOARGS, "stepwatch_abi_version()"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "stepwatch._native",
    "C extension binding of libstepwatch.",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
  PyObject* errors = PyImport_ImportModule("stepwatch.errors");
  if (errors == NULL) return NULL;
  g_error_for = PyObject_GetAttrString(errors, "error_for");
  g_not_initialized = PyObject_GetAttrString(errors, "not_initialized");
  Py_DECREF(errors);
  if (g_error_for == NULL || g_not_initialized == NULL) return NULL;

  if (PyType_Ready(&BeaconType) < 0) return NULL;
  PyObject* m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  Py_INCREF(&BeaconType);
  if (PyModule_AddObject(m, "Beacon", (PyObject*)&BeaconType) < 0) {
    Py_DECREF(&BeaconType);
    Py_DECREF(m);
    return NULL;
  }
  if (PyModule_AddIntConstant(m, "WAIT_NONE", STEPWATCH_WAIT_NONE) < 0 ||
      PyModule_AddIntConstant(m, "WAIT_COLLECTIVE", STEPWATCH_WAIT_COLLECTIVE) < 0 ||
      PyModule_AddIntConstant(m, "WAIT_DEVICE", STEPWATCH_WAIT_DEVICE) < 0 ||
      PyModule_AddIntConstant(m, "WAIT_STORE", STEPWATCH_WAIT_STORE) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
