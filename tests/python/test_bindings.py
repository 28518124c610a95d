# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Both bindings side by side in one process (the C extension and the ctypes fallback), and the
rules that pick one: STEPWATCH_BINDING, STEPWATCH_LIB, a missing extension."""

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import swtest  # noqa: F401 - makes the built package importable

import stepwatch
from stepwatch import errors
from swtest import IsolatedCase, python_env, read_beacon


def _binding_modules():
    out = {}
    try:
        from stepwatch import _native

        out["native"] = _native
    except ImportError:
        pass
    from stepwatch import _ctypes_binding

    out["ctypes"] = _ctypes_binding
    return out


BINDINGS = _binding_modules()


class _BindingContract:
    """The same behaviour from each binding module; subclasses set `binding`."""

    binding = None

    def setUp(self):
        super().setUp()
        self.mod = BINDINGS.get(self.binding)
        if self.mod is None:
            self.skipTest(f"the {self.binding} binding is not built")

    def tearDown(self):
        if self.mod is not None:
            old = self.mod.get_default()
            self.mod.set_default(None)
            if old is not None:
                old.close()
        super().tearDown()

    def test_open_step_read_back(self):
        b = self.mod.Beacon(rank=1, world_size=2)
        self.assertIs(b.step(4), True)
        self.assertIs(b.step(5, 0.5), True)
        self.assertIs(b.beat(), True)
        self.assertIs(b.phase_begin("eval"), True)
        self.assertIs(b.checkpoint_committed(id="ck5", step=5), True)
        raw = read_beacon(b.path())
        self.assertEqual((raw["rank"], raw["step"], raw["step_count"], raw["beat_count"]), (1, 5, 2, 1))
        self.assertEqual((raw["phase"], raw["ckpt_id"], raw["ckpt_step"], raw["loss"]), ("eval", "ck5", 5, 0.5))
        self.assertIs(b.phase_end(), True)
        self.assertIs(b.finish(ok=False), True)
        self.assertEqual(read_beacon(b.path())["status"], 2)
        b.close()
        self.assertTrue(b.closed)

    def test_errors_carry_code_and_op(self):
        b = self.mod.Beacon()
        cases = [
            (lambda: b.phase_end(), errors.EPHASE, "phase_end"),
            (lambda: b.phase_begin("no spaces"), errors.EINVAL, "phase_begin"),
            (lambda: b.phase_begin("nul\0byte"), errors.EINVAL, "phase_begin"),
            (lambda: b.step(-3), errors.EINVAL, "step"),
            (lambda: b.checkpoint_committed("c", -1), errors.EINVAL, "checkpoint_committed"),
        ]
        for call, code, op in cases:
            with self.subTest(op=op, code=code):
                with self.assertRaises(stepwatch.StepwatchError) as cm:
                    call()
                self.assertEqual((cm.exception.code, cm.exception.op), (code, op))
        b.close()
        for call in (lambda: b.step(1), b.beat, lambda: b.loss(1.0), b.path, b.finish):
            with self.assertRaises(stepwatch.StepwatchError) as cm:
                call()
            self.assertEqual(cm.exception.code, errors.ENULL)

    def test_open_error_has_the_library_text(self):
        os.environ.pop("STEPWATCH_JOB")
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            self.mod.Beacon()
        self.assertEqual(cm.exception.code, errors.ENOJOB)
        self.assertIn("set STEPWATCH_JOB", str(cm.exception))
        # A beacon root that cannot be created: the error names the path.
        with open(os.path.join(self.tmp, "blocker"), "w"):
            pass
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            self.mod.Beacon(job="j", dir=os.path.join(self.tmp, "blocker", "sub"))
        self.assertEqual(cm.exception.code, errors.EIO)
        self.assertIn("blocker", str(cm.exception))

    def test_default_handle(self):
        with self.assertRaises(stepwatch.NotInitializedError):
            self.mod.step(1)
        b = self.mod.Beacon()
        self.mod.set_default(b)
        self.assertIs(self.mod.get_default(), b)
        self.assertIs(self.mod.step(3), True)
        self.assertIs(self.mod.step(4, loss=2.0), True)
        self.assertIs(self.mod.loss(1.0), True)
        self.assertIs(self.mod.beat(), True)
        self.assertIs(self.mod.phase_begin("x"), True)
        self.assertIs(self.mod.phase_end(), True)
        self.assertIs(self.mod.checkpoint_committed("c4", 4), True)
        self.assertIs(self.mod.finish(), True)
        self.assertEqual(self.mod.path(), b.path())
        raw = read_beacon(b.path())
        self.assertEqual((raw["step"], raw["loss"], raw["status"], raw["ckpt_id"]), (4, 1.0, 1, "c4"))
        with self.assertRaises(TypeError):
            self.mod.set_default("not a beacon")

    def test_sample(self):
        # The sampler block (beacon_v1.h): sample_wait at 712, sample_count 720, sample_hash 760,
        # sample_where 768; stepwatch.sampler's thread is the usual caller.
        def block(path):
            with open(path, "rb") as f:
                data = f.read()
            where = data[768:832].split(b"\0", 1)[0].decode()
            return struct.unpack_from("<I", data, 712)[0], struct.unpack_from("<Q", data, 720)[0], \
                struct.unpack_from("<Q", data, 760)[0], where

        self.assertEqual((self.mod.WAIT_NONE, self.mod.WAIT_COLLECTIVE, self.mod.WAIT_DEVICE, self.mod.WAIT_STORE),
                         (0, 1, 2, 3))
        b = self.mod.Beacon()
        self.assertEqual(block(b.path()), (0, 0, 0, ""), "no sample yet")
        self.assertIs(b.sample(2**64 - 1, self.mod.WAIT_COLLECTIVE, "all_reduce (distributed_c10d.py:1541)"), True)
        self.assertEqual(block(b.path()), (1, 1, 2**64 - 1, "all_reduce (distributed_c10d.py:1541)"))
        self.assertIs(b.sample(hash=7, wait=self.mod.WAIT_STORE), True)  # where=None
        self.assertEqual(block(b.path())[:3], (3, 2, 7))
        self.assertIs(b.sample(8, self.mod.WAIT_DEVICE, "x" * 100), True)
        self.assertEqual(block(b.path())[3], "x" * 63, "cut to 63 bytes")
        for wait in (-1, 4, 2**40):
            with self.subTest(wait=wait):
                with self.assertRaises(stepwatch.StepwatchError) as cm:
                    b.sample(1, wait)
                self.assertEqual((cm.exception.code, cm.exception.op), (errors.EINVAL, "sample"))
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            b.sample(1, 0, "nul\0byte")
        self.assertEqual(cm.exception.code, errors.EINVAL)
        for bad_hash in (-1, 2**64):
            with self.assertRaises(OverflowError):
                b.sample(bad_hash, 0)
        for call in (lambda: b.sample(1.5, 0), lambda: b.sample(1, "0"), lambda: b.sample(1, 0, b"where"),
                     lambda: b.sample(1), lambda: b.sample(1, 0, "w", 4)):
            with self.assertRaises(TypeError):
                call()
        self.assertEqual(block(b.path())[:3], (2, 3, 8), "rejected samples write nothing")
        b.close()
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            b.sample(1, 0)
        self.assertEqual(cm.exception.code, errors.ENULL)

    def test_strerror_matches(self):
        for code, text in errors.STRERROR.items():
            self.assertEqual(self.mod.strerror(code), text)
        self.assertEqual(self.mod.abi_version(), 1)


class NativeBindingTest(_BindingContract, IsolatedCase):
    binding = "native"


class CtypesBindingTest(_BindingContract, IsolatedCase):
    binding = "ctypes"


class BothInOneProcessTest(IsolatedCase):
    def test_each_writes_its_own_beacon(self):
        if "native" not in BINDINGS:
            self.skipTest("the native binding is not built")
        n = BINDINGS["native"].Beacon(rank=0, world_size=2)
        c = BINDINGS["ctypes"].Beacon(rank=1, world_size=2)
        n.step(100)
        c.step(200)
        self.assertEqual(read_beacon(n.path())["step"], 100)
        self.assertEqual(read_beacon(c.path())["step"], 200)
        rows = self.status()
        self.assertEqual((rows[0].step, rows[1].step), (100, 200))
        n.close()
        c.close()


class SelectionTest(unittest.TestCase):
    def run_child(self, code, **env_overrides):
        env = python_env()
        env.update(env_overrides)
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)

    def test_env_forces_each_binding(self):
        for name in BINDINGS:
            with self.subTest(binding=name):
                out = self.run_child("import stepwatch; print(stepwatch.BINDING)", STEPWATCH_BINDING=name)
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertEqual(out.stdout.strip(), name)

    def test_unknown_binding_is_an_import_error(self):
        out = self.run_child("import stepwatch", STEPWATCH_BINDING="cffi")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("STEPWATCH_BINDING='cffi'", out.stderr)

    def test_bad_library_path(self):
        out = self.run_child("import stepwatch", STEPWATCH_BINDING="ctypes", STEPWATCH_LIB="/nonexistent/libstepwatch.so")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("cannot load libstepwatch.so (set STEPWATCH_LIB", out.stderr)

    def test_falls_back_to_ctypes_without_the_extension(self):
        # A copy of the package without _native*.so, finding libstepwatch.so next to itself.
        pkg = os.path.dirname(os.path.abspath(stepwatch.__file__))
        with tempfile.TemporaryDirectory() as tmp:
            dst = os.path.join(tmp, "stepwatch")
            shutil.copytree(pkg, dst, ignore=shutil.ignore_patterns("_native*", "__pycache__"))
            self.assertTrue(os.path.exists(os.path.join(dst, "libstepwatch.so")))
            env = dict(os.environ, PYTHONPATH=tmp, PYTHONDONTWRITEBYTECODE="1")
            env.pop("STEPWATCH_LIB", None)
            env.pop("STEPWATCH_BINDING", None)
            code = "import stepwatch, stepwatch._ctypes_binding as c; print(stepwatch.BINDING, c.LIBRARY_PATH)"
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.split(), ["ctypes", os.path.join(dst, "libstepwatch.so")])
            env["STEPWATCH_BINDING"] = "native"
            out = subprocess.run([sys.executable, "-c", "import stepwatch"], env=env, capture_output=True, text=True,
                                 timeout=60)
            self.assertNotEqual(out.returncode, 0)
            self.assertIn("STEPWATCH_BINDING=native but the C extension", out.stderr)

    def test_importing_stepwatch_imports_no_framework(self):
        code = (
            "import sys, stepwatch, stepwatch.callbacks\n"
            "bad = [m for m in ('torch', 'lightning', 'pytorch_lightning', 'transformers') if m in sys.modules]\n"
            "print(bad)\n"
        )
        out = self.run_child(code)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "[]")


if __name__ == "__main__":
    unittest.main()
