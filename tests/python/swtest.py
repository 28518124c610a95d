# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Shared helpers for the Python and end-to-end tests: locating the built package and the
`stepwatch` binary, an isolated environment per test, and readers for `stepwatch status` output
and for raw beacon files.

ctest passes PYTHONPATH (the staged package), STEPWATCH_LIB and STEPWATCH_BIN. Run by hand,
`/usr/bin/python3 -m unittest discover -s tests/python` finds them under build/py (or the
directory named by STEPWATCH_BUILD_DIR).
"""

import importlib.util
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE_DIR = os.environ.get("STEPWATCH_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..")
)

# The bundled trainers the end-to-end tests run, and whether this interpreter can run the torch one.
LAUNCH = os.path.join(SOURCE_DIR, "examples", "launch.py")
TRAIN = os.path.join(SOURCE_DIR, "examples", "train_ddp.py")
PLAIN = os.path.join(SOURCE_DIR, "examples", "plain_trainer.py")
HAVE_TORCH = importlib.util.find_spec("torch") is not None


def _build_dirs():
    env = os.environ.get("STEPWATCH_BUILD_DIR")
    if env:
        return [env]
    return [os.path.join(SOURCE_DIR, "build", name) for name in ("py", "release", "debug")]


def build_dir():
    for d in _build_dirs():
        if os.path.isdir(os.path.join(d, "python", "stepwatch")):
            return d
    return None


def _ensure_importable():
    try:
        import stepwatch  # noqa: F401

        return
    except ImportError:
        pass
    d = build_dir()
    if d is not None:
        sys.path.insert(0, os.path.join(d, "python"))
        os.environ.setdefault("STEPWATCH_LIB", os.path.join(d, "src", "client", "libstepwatch.so"))


_ensure_importable()


def stepwatch_bin():
    env = os.environ.get("STEPWATCH_BIN")
    if env:
        return env
    d = build_dir()
    if d is not None:
        candidate = os.path.join(d, "src", "cli", "stepwatch")
        if os.access(candidate, os.X_OK):
            return candidate
    raise unittest.SkipTest("the stepwatch binary was not found: set STEPWATCH_BIN")


def python_env():
    """Environment for a child /usr/bin/python3 that must import the same package."""
    env = dict(os.environ)
    import stepwatch

    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(stepwatch.__file__)))
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


IDENTITY_VARS = (
    "STEPWATCH_DIR",
    "STEPWATCH_JOB",
    "STEPWATCH_INCARNATION",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
)


class IsolatedCase(unittest.TestCase):
    """Each test gets an empty STEPWATCH_DIR under a temp dir, STEPWATCH_JOB=<job>, no rank
    variables, and a closed default beacon afterwards."""

    job = "pytest-job"

    def setUp(self):
        import stepwatch

        stepwatch.close()
        self._saved_env = {k: os.environ.get(k) for k in IDENTITY_VARS}
        for k in IDENTITY_VARS:
            os.environ.pop(k, None)
        self.tmp = tempfile.mkdtemp(prefix="stepwatch-pytest-")
        self.dir = os.path.join(self.tmp, "beacons")
        os.environ["STEPWATCH_DIR"] = self.dir
        os.environ["STEPWATCH_JOB"] = self.job

    def tearDown(self):
        import stepwatch

        stepwatch.close()
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.tmp, ignore_errors=True)

    def status(self, job=None, expect_rc=0):
        """Runs `stepwatch status --dir DIR JOB` and returns {rank: StatusRow}."""
        out = run_status(self.dir, job or self.job)
        self.assertEqual(out.returncode, expect_rc, f"stepwatch status failed:\n{out.stdout}\n{out.stderr}")
        return parse_status(out.stdout)


def run_status(directory, job=None, timeout=10):
    cmd = [stepwatch_bin(), "status", "--dir", directory]
    if job:
        cmd.append(job)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


class StatusRow:
    """One rank line of `stepwatch status`."""

    def __init__(self, tokens):
        self.rank = int(tokens[0])
        self.host = tokens[1]
        self.pid = None if tokens[2] == "n/a" else int(tokens[2])
        self.step = None if tokens[3] == "none" else int(tokens[3])
        self.step_age = tokens[4]
        self.phase = tokens[5]
        self.phase_age = tokens[6]
        self.beat_age = tokens[7]
        rest = tokens[8:]
        if rest[0] == "n/a":
            self.checkpoint = None
            self.checkpoint_step = None
            rest = rest[1:]
        else:
            ident, _, step = rest[0].rpartition("@")
            self.checkpoint = ident
            self.checkpoint_step = int(step)
            rest = rest[2:]  # "<id>@<step>" and its age
        self.loss_text = rest[0]
        self.status = rest[1]
        self.source = rest[2]

    @property
    def loss(self):
        if self.loss_text == "n/a":
            return None
        if self.loss_text == "NaN":
            return math.nan
        return float(self.loss_text)

    def __repr__(self):
        return f"StatusRow({self.__dict__})"


def parse_status(text):
    """{rank: StatusRow} for the rank lines; ranks shown as "no record" are absent."""
    rows = {}
    for line in text.splitlines():
        tokens = line.split()
        if len(tokens) < 12 or not tokens[0].isdigit():
            continue
        row = StatusRow(tokens)
        rows[row.rank] = row
    return rows


# Raw beacon fields (include/stepwatch/beacon_v1.h), for counts `status` does not show.
_FIELDS = {
    "seq": (16, "<Q"),
    "pid": (32, "<i"),
    "rank": (36, "<i"),
    "local_rank": (40, "<i"),
    "world_size": (44, "<i"),
    "incarnation": (48, "<I"),
    "status": (52, "<I"),
    "step": (72, "<q"),
    "step_count": (96, "<Q"),
    "beat_count": (136, "<Q"),
    "ckpt_step": (144, "<q"),
    "loss": (168, "<d"),
    "phase_count": (192, "<Q"),
}
_STRINGS = {"job": (208, 64), "host": (272, 64), "phase": (336, 32), "ckpt_id": (368, 64)}
SEQ_OFFSET = 16


def read_beacon(path):
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) == 1024, f"{path}: {len(data)} bytes"
    out = {k: struct.unpack_from(fmt, data, off)[0] for k, (off, fmt) in _FIELDS.items()}
    for k, (off, size) in _STRINGS.items():
        out[k] = data[off : off + size].split(b"\0", 1)[0].decode()
    return out


def alive(pid):
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(pred, timeout, poll=0.2):
    """pred()'s first truthy value within timeout seconds, else its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(poll)
    return pred()


def wait_for(what, check, timeout=20, every=0.05, details=lambda: ""):
    """Polls check() until it returns something true and returns that; a check that raises
    OSError, ValueError, KeyError, IndexError or TypeError (a file not written yet) is polled
    again. AssertionError naming `what`, the last result and details() after `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            last = e
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}: {last}\n{details()}")
