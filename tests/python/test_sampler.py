# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""The progress sampler (stepwatch.sampler): what it writes to the beacon's sampler block, read
back here byte by byte at the offsets of include/stepwatch/beacon_v1.h under its own seqlock;
how it classifies waits (fake modules at torch's paths, and a real two-rank gloo job); how it
starts, stops and is configured; and that it never makes step() busy."""

import importlib.util
import io
import mmap
import os
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types
import unittest

import swtest  # noqa: F401 - makes the built package importable

import stepwatch
from stepwatch import errors, sampler
from swtest import HAVE_TORCH, IsolatedCase, python_env, wait_for

# The sampler block of the beacon (beacon_v1.h, contract 1.1).
SAMPLE_SEQ = 704
_BLOCK = struct.Struct("<QIIQqqqqQ")  # seq, wait, pad, count, wall, mono, moved wall, moved mono, hash
WHERE_OFFSET, WHERE_MAX = 768, 64
SAMPLER_VARS = ("STEPWATCH_SAMPLER", "STEPWATCH_SAMPLER_PERIOD")
FAST = "0.02"  # the period most tests run the sampler at


def read_sampler(path):
    """The sampler block as a dict, read the way the watchdog must: sample_seq even and the same
    before and after the copy."""
    fd = os.open(path, os.O_RDONLY)
    try:
        for _ in range(2000):
            data = os.pread(fd, 1024, 0)
            after = struct.unpack("<Q", os.pread(fd, 8, SAMPLE_SEQ))[0]
            seq, wait, pad, count, wall, mono, moved_wall, moved_mono, h = _BLOCK.unpack_from(data, SAMPLE_SEQ)
            if seq % 2 == 0 and seq == after:
                where = data[WHERE_OFFSET : WHERE_OFFSET + WHERE_MAX]
                assert b"\0" in where, "sample_where is not NUL-terminated"
                return {
                    "seq": seq, "wait": wait, "pad": pad, "count": count, "wall": wall, "mono": mono,
                    "moved_wall": moved_wall, "moved_mono": moved_mono, "hash": h,
                    "where": where.split(b"\0", 1)[0].decode("ascii"),
                }
            time.sleep(0.001)
    finally:
        os.close(fd)
    raise AssertionError(f"{path}: sample_seq never settled")


def blocked(seconds):
    time.sleep(seconds)  # BLOCKED_LINE


BLOCKED_LINE = next(i for i, line in enumerate(open(__file__), 1) if line.rstrip().endswith("# BLOCKED_LINE"))

# Fake torch sources: files whose paths end like torch 1.13's, loaded under other module names.
# Each function calls block() (the test's code, so the wait frame is not the innermost one).
FAKE_TORCH = {
    "torch/distributed/distributed_c10d.py": """
        def all_reduce(block): return block()
        def broadcast_object_list(block): return block()
        def monitored_barrier(block): return block()
        def init_process_group(block): return block()
        def _store_based_barrier(block): return block()
        def new_group(block): return block()
        def get_rank(block): return block()
    """,
    "torch/autograd/__init__.py": "def backward(block): return block()\n",
    "torch/_tensor.py": """
        class Tensor:
            def backward(self, block): return block()
    """,
    "torch/cuda/__init__.py": """
        def synchronize(block): return block()
        def current_stream(block): return block()
    """,
    "torch/cuda/streams.py": """
        class Stream:
            def synchronize(self, block): return block()
            def wait_event(self, block): return block()
        class Event:
            def synchronize(self, block): return block()
            def query(self, block): return block()
    """,
    "torch/distributed/rendezvous.py": "def _env_rendezvous_handler(block): return block()\n",
    "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py": "def next_rendezvous(block): return block()\n",
    "torch/distributed/elastic/utils/store.py": "def barrier(block): return block()\n",
    # Not torch: the path only ends like it.
    "xtorch/distributed/distributed_c10d.py": "def all_reduce(block): return block()\n",
}


class FakeTorch:
    def __init__(self, root):
        self.mods = {}
        for i, (rel, src) in enumerate(sorted(FAKE_TORCH.items())):
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(textwrap.dedent(src))
            spec = importlib.util.spec_from_file_location(f"stepwatch_fake_{i}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            self.mods[rel] = mod

    def __getitem__(self, rel):
        return self.mods[rel]


class _FakeDistributed:
    """sys.modules["torch.distributed"] with is_initialized() answering `initialized`."""

    def __init__(self, initialized):
        self.mod = types.ModuleType("torch.distributed")
        self.mod.is_initialized = lambda: initialized

    def __enter__(self):
        self.saved = sys.modules.get("torch.distributed")
        sys.modules["torch.distributed"] = self.mod

    def __exit__(self, *exc):
        if self.saved is None:
            del sys.modules["torch.distributed"]
        else:
            sys.modules["torch.distributed"] = self.saved


class SamplerCase(IsolatedCase):
    def setUp(self):
        super().setUp()
        self._saved_sampler_env = {k: os.environ.pop(k, None) for k in SAMPLER_VARS}
        os.environ["STEPWATCH_SAMPLER_PERIOD"] = FAST

    def tearDown(self):
        super().tearDown()
        for k, v in self._saved_sampler_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def sampled(self, what, check, timeout=10):
        return wait_for(what, lambda: (lambda s: s if check(s) else None)(read_sampler(stepwatch.path())), timeout)

    def while_blocked(self, call, check, timeout=10):
        """Runs call(block) in this (the main) thread; block() waits until a reader thread sees
        check(sampler block) hold. Returns that block, or fails."""
        seen, release = [], threading.Event()

        def reader():
            deadline = time.monotonic() + timeout
            try:
                while time.monotonic() < deadline:
                    s = read_sampler(stepwatch.path())
                    if check(s):
                        seen.append(s)
                        return
                    time.sleep(0.005)
            finally:
                release.set()

        t = threading.Thread(target=reader)
        t.start()
        call(lambda: release.wait(timeout + 1))
        t.join()
        self.assertTrue(seen, f"the sampler never showed the expected wait; last: {read_sampler(stepwatch.path())}")
        return seen[0]


class ClassifyTest(unittest.TestCase):
    """describe() on real frames inside the fake torch files: the rules, first match from the
    innermost frame wins."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="stepwatch-faketorch-")
        cls.torch = FakeTorch(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def describe_inside(self, call):
        return call(lambda: sampler.describe(sys._getframe()))  # innermost: this lambda

    def test_rules(self):
        t = self.torch
        c10d = t["torch/distributed/distributed_c10d.py"]
        streams = t["torch/cuda/streams.py"]
        cases = [
            (c10d.all_reduce, sampler.WAIT_COLLECTIVE, "all_reduce (distributed_c10d.py:"),
            (c10d.broadcast_object_list, sampler.WAIT_COLLECTIVE, "broadcast_object_list (distributed_c10d.py:"),
            (c10d.monitored_barrier, sampler.WAIT_COLLECTIVE, "monitored_barrier (distributed_c10d.py:"),
            (c10d.init_process_group, sampler.WAIT_STORE, "init_process_group (distributed_c10d.py:"),
            (c10d._store_based_barrier, sampler.WAIT_STORE, "_store_based_barrier (distributed_c10d.py:"),
            (c10d.new_group, sampler.WAIT_STORE, "new_group (distributed_c10d.py:"),
            (c10d.get_rank, sampler.WAIT_NONE, "<lambda> (test_sampler.py:"),
            (t["torch/cuda/__init__.py"].synchronize, sampler.WAIT_DEVICE, "synchronize (__init__.py:"),
            (t["torch/cuda/__init__.py"].current_stream, sampler.WAIT_NONE, "<lambda> (test_sampler.py:"),
            (streams.Stream().synchronize, sampler.WAIT_DEVICE, "synchronize (streams.py:"),
            (streams.Event().synchronize, sampler.WAIT_DEVICE, "synchronize (streams.py:"),
            (streams.Stream().wait_event, sampler.WAIT_NONE, "<lambda> (test_sampler.py:"),
            (streams.Event().query, sampler.WAIT_NONE, "<lambda> (test_sampler.py:"),
            (t["torch/distributed/rendezvous.py"]._env_rendezvous_handler, sampler.WAIT_STORE,
             "_env_rendezvous_handler (rendezvous.py:"),
            (t["torch/distributed/elastic/rendezvous/dynamic_rendezvous.py"].next_rendezvous, sampler.WAIT_STORE,
             "next_rendezvous (dynamic_rendezvous.py:"),
            (t["torch/distributed/elastic/utils/store.py"].barrier, sampler.WAIT_STORE, "barrier (store.py:"),
            (t["xtorch/distributed/distributed_c10d.py"].all_reduce, sampler.WAIT_NONE, "<lambda> (test_sampler.py:"),
        ]
        for call, wait, where in cases:
            with self.subTest(call=call.__qualname__, file=call.__code__.co_filename):
                h, got_wait, got_where = self.describe_inside(call)
                self.assertEqual(got_wait, wait)
                self.assertTrue(got_where.startswith(where), got_where)
                self.assertTrue(0 < h < 2**64)

    def test_innermost_match_wins(self):
        c10d = self.torch["torch/distributed/distributed_c10d.py"]
        # init_process_group (STORE) calling barrier-like all_reduce (COLLECTIVE) inside it.
        _, wait, where = c10d.init_process_group(lambda: self.describe_inside(c10d.all_reduce))
        self.assertEqual((wait, where.split(" ")[0]), (sampler.WAIT_COLLECTIVE, "all_reduce"))

    def test_backward_is_a_collective_only_while_distributed_is_initialized(self):
        if sys.modules.get("torch.distributed") is not None:
            self.skipTest("a real torch.distributed is imported in this process")
        calls = [
            self.torch["torch/autograd/__init__.py"].backward,
            self.torch["torch/_tensor.py"].Tensor().backward,
        ]
        for call in calls:
            with self.subTest(file=call.__code__.co_filename):
                self.assertEqual(self.describe_inside(call)[1], sampler.WAIT_NONE, "no torch.distributed")
                with _FakeDistributed(False):
                    self.assertEqual(self.describe_inside(call)[1], sampler.WAIT_NONE)
                with _FakeDistributed(True):
                    _, wait, where = self.describe_inside(call)
                    self.assertEqual(wait, sampler.WAIT_COLLECTIVE)
                    self.assertTrue(where.startswith("backward ("), where)

    def test_hash_follows_the_position(self):
        here = sys._getframe()
        h1 = sampler.describe(here)[0]
        h2 = sampler.describe(here)[0]  # another line of the same function
        self.assertNotEqual(h1, h2)
        frames = [sampler.describe(here) for _ in range(2)]  # one line, twice
        self.assertEqual(frames[0], frames[1])

    def test_hash_is_the_same_in_another_process(self):
        # The digest depends on file, function and line only (not on str hashing's random seed):
        # ranks running the same code agree.
        code = (
            "import sys, stepwatch.sampler as s\n"
            "def f():\n    return s.describe(sys._getframe())[0]\n"
            "print(f())\n"
        )
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "same.py")
            with open(script, "w") as f:
                f.write(code)
            outs = []
            for seed in ("1", "2"):
                env = dict(python_env(), PYTHONHASHSEED=seed)
                out = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=60)
                self.assertEqual(out.returncode, 0, out.stderr)
                outs.append(out.stdout.strip())
        self.assertEqual(outs[0], outs[1])

    def test_where_label_is_short_ascii(self):
        self.assertEqual(sampler.where_label("all_reduce", "distributed_c10d.py", 1536),
                         "all_reduce (distributed_c10d.py:1536)")
        long = sampler.where_label("f" * 100, "module.py", 12)
        self.assertEqual(len(long), 63)
        self.assertTrue(long.endswith(" (module.py:12)"), long)
        odd = sampler.where_label("schön", "modül.py", 3)
        self.assertEqual(odd, "sch?n (mod?l.py:3)")
        self.assertLessEqual(len(sampler.where_label("g", "x" * 100 + ".py", 1)), 63)

    def test_describe_is_cheap(self):
        # A deep stack (40 frames) still costs little: the digest reads 8 frames, the wait walk
        # stops at 64, and per-code facts are cached.
        def deep(n):
            return deep(n - 1) if n else sys._getframe()

        frame = deep(40)
        sampler.describe(frame)
        t0 = time.perf_counter()
        for _ in range(200):
            sampler.describe(frame)
        per_call = (time.perf_counter() - t0) / 200
        self.assertLess(per_call, 0.002, f"describe() took {per_call * 1e6:.0f} us")


class BeaconFieldsTest(SamplerCase):
    def test_fields_move_while_running_and_stay_while_blocked(self):
        stepwatch.init()
        self.assertTrue(stepwatch.sampler_running())
        first = self.sampled("a first sample", lambda s: s["count"] > 0)
        self.assertNotEqual(first["hash"], 0)
        self.assertEqual(first["pad"], 0)

        # Running Python code: the position changes from sample to sample.
        hashes = set()
        deadline = time.monotonic() + 0.6
        n = 0
        while time.monotonic() < deadline:
            n += sum(i * i for i in range(200))
            hashes.add(read_sampler(stepwatch.path())["hash"])
        running = read_sampler(stepwatch.path())
        self.assertGreater(running["count"], first["count"])
        self.assertGreater(running["moved_mono"], first["moved_mono"])
        self.assertGreater(len(hashes), 1, "the hash never changed while the main thread ran")

        # Blocked in one call: samples go on, the position and its time stay.
        readings = []

        def reader():
            for _ in range(2):
                time.sleep(0.3)
                readings.append(read_sampler(stepwatch.path()))

        t = threading.Thread(target=reader)
        t.start()
        blocked(0.75)
        t.join()
        r1, r2 = readings
        self.assertGreater(r2["count"], r1["count"])
        self.assertGreater(r2["mono"], r1["mono"])
        self.assertGreater(r2["wall"], r1["wall"])
        self.assertEqual((r2["hash"], r2["moved_mono"], r2["moved_wall"]), (r1["hash"], r1["moved_mono"], r1["moved_wall"]))
        self.assertEqual(r1["where"], f"blocked (test_sampler.py:{BLOCKED_LINE})")
        self.assertEqual(r1["wait"], stepwatch.WAIT_NONE)
        # The stamps are clocks of this machine: the last sample is recent.
        self.assertLess(abs(time.time_ns() - r2["wall"]), 5 * 10**9)
        self.assertLess(abs(time.monotonic_ns() - r2["mono"]), 5 * 10**9)

    def test_waits_through_the_beacon(self):
        with tempfile.TemporaryDirectory(prefix="stepwatch-faketorch-") as tmp:
            t = FakeTorch(tmp)
            stepwatch.init()
            cases = [
                (t["torch/distributed/distributed_c10d.py"].all_reduce, stepwatch.WAIT_COLLECTIVE, "all_reduce ("),
                (t["torch/cuda/__init__.py"].synchronize, stepwatch.WAIT_DEVICE, "synchronize (__init__.py:"),
                (t["torch/distributed/distributed_c10d.py"].init_process_group, stepwatch.WAIT_STORE,
                 "init_process_group ("),
            ]
            for call, wait, where in cases:
                with self.subTest(wait=sampler.WAIT_NAMES[wait]):
                    s = self.while_blocked(call, lambda s, w=wait: s["wait"] == w)
                    self.assertTrue(s["where"].startswith(where), s["where"])
            # Back in its own code: no wait.
            self.sampled("the wait to clear", lambda s: s["wait"] == stepwatch.WAIT_NONE)

    def test_constants_match_the_header(self):
        self.assertEqual((stepwatch.WAIT_NONE, stepwatch.WAIT_COLLECTIVE, stepwatch.WAIT_DEVICE, stepwatch.WAIT_STORE),
                         (0, 1, 2, 3))
        self.assertEqual((sampler.WAIT_NONE, sampler.WAIT_COLLECTIVE, sampler.WAIT_DEVICE, sampler.WAIT_STORE),
                         (0, 1, 2, 3))


class LifecycleTest(SamplerCase):
    def sampler_threads(self):
        return [t for t in threading.enumerate() if t.name == "stepwatch-sampler"]

    def test_close_stops_the_thread(self):
        b = stepwatch.init()
        self.sampled("a sample", lambda s: s["count"] > 0)
        self.assertEqual(len(self.sampler_threads()), 1)
        path = b.path()
        stepwatch.close()
        self.assertFalse(stepwatch.sampler_running())
        self.assertEqual(self.sampler_threads(), [])
        before = read_sampler(path)
        time.sleep(0.15)
        self.assertEqual(read_sampler(path)["count"], before["count"], "samples after close()")

    def test_finish_and_reinit_stop_it(self):
        stepwatch.init()
        self.assertTrue(stepwatch.finish())
        self.assertFalse(stepwatch.sampler_running())
        self.assertEqual(self.sampler_threads(), [])
        stepwatch.init()
        stepwatch.init()  # replaces the default: one sampler, on the new beacon
        self.assertEqual(len(self.sampler_threads()), 1)
        with stepwatch.init() as b:
            self.assertTrue(stepwatch.sampler_running())
        self.assertTrue(b.closed)
        self.assertEqual(self.sampler_threads(), [])

    def test_a_closed_beacon_stops_it_quietly(self):
        b = stepwatch.Beacon()
        s = sampler.Sampler(b, period=0.01).start()
        wait_for("a sample", lambda: s.samples > 0)
        err, sys.stderr = sys.stderr, io.StringIO()
        try:
            stepwatch._b.Beacon.close(b)  # the binding's close: the sampler is not told
            wait_for("the sampler to end", lambda: not s.running, timeout=5)
            said = sys.stderr.getvalue()
        finally:
            sys.stderr = err
        self.assertEqual(said, "")

    def test_an_unexpected_error_ends_the_thread_with_one_line(self):
        b = stepwatch.Beacon()
        s = sampler.Sampler(b, period=0.01)
        saved = sampler.describe
        err, sys.stderr = sys.stderr, io.StringIO()
        sampler.describe = lambda frame: 1 / 0
        try:
            s.start()
            wait_for("the sampler to end", lambda: not s.running, timeout=5)
            said = sys.stderr.getvalue()
        finally:
            sampler.describe = saved
            sys.stderr = err
        self.assertEqual(said, "stepwatch: progress sampler stopped: ZeroDivisionError: division by zero\n")
        self.assertIs(b.step(1), True, "the trainer goes on")
        b.close()

    def test_fork_child_has_no_sampler(self):
        stepwatch.init()
        self.assertTrue(stepwatch.sampler_running())
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                if not stepwatch.sampler_running() and not self.sampler_threads():
                    stepwatch.close()  # must not try to join the parent's thread
                    code = 0
            except BaseException:  # noqa: BLE001
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertTrue(stepwatch.sampler_running(), "the parent keeps its sampler")
        before = read_sampler(stepwatch.path())["count"]
        self.sampled("more samples in the parent", lambda s: s["count"] > before)


class ConfigTest(SamplerCase):
    def test_env_turns_it_off(self):
        for value in ("0", "off", "false", " OFF ", "no"):
            with self.subTest(value=value):
                os.environ["STEPWATCH_SAMPLER"] = value
                b = stepwatch.init()
                self.assertFalse(stepwatch.sampler_running())
                time.sleep(0.05)
                self.assertEqual(read_sampler(b.path())["count"], 0)
                stepwatch.close()
        os.environ["STEPWATCH_SAMPLER"] = "0"
        stepwatch.init(sampler=True)  # the argument wins
        self.assertTrue(stepwatch.sampler_running())
        stepwatch.close()
        for value in ("1", "on", "true", ""):
            with self.subTest(value=value):
                os.environ["STEPWATCH_SAMPLER"] = value
                stepwatch.init()
                self.assertTrue(stepwatch.sampler_running())
                stepwatch.close()
        stepwatch.init(sampler=False)
        self.assertFalse(stepwatch.sampler_running())

    def test_bad_values_name_the_variable(self):
        os.environ["STEPWATCH_SAMPLER"] = "maybe"
        with self.assertRaises(stepwatch.StepwatchError) as cm:
            stepwatch.init()
        self.assertIn("STEPWATCH_SAMPLER='maybe'", str(cm.exception))
        self.assertIn("0/off/false", str(cm.exception))
        os.environ.pop("STEPWATCH_SAMPLER")
        for value in ("abc", "0", "-1", "nan", "inf", "61", "1e-3"):
            with self.subTest(value=value):
                os.environ["STEPWATCH_SAMPLER_PERIOD"] = value
                with self.assertRaises(stepwatch.StepwatchError) as cm:
                    stepwatch.init()
                self.assertIn(f"STEPWATCH_SAMPLER_PERIOD={value!r}", str(cm.exception))
                self.assertIn("0.01 to 60", str(cm.exception))
        self.assertFalse(stepwatch.is_initialized())
        self.assertFalse(os.path.exists(self.dir), "a bad setting must not open the beacon")
        os.environ["STEPWATCH_SAMPLER_PERIOD"] = "2.5"
        stepwatch.init()
        self.assertEqual(sampler.current().period, 2.5)
        with self.assertRaises(TypeError):
            stepwatch.init(sampler="yes")


class NeverBusyTest(SamplerCase):
    def test_a_sample_in_progress_does_not_make_step_busy(self):
        # The separate lock is what keeps step() free: hold sample_seq odd, as a sampler inside
        # an update would, and step() still writes while sample() gives up.
        b = stepwatch.init(sampler=False)
        self.assertIs(b.sample(5, stepwatch.WAIT_NONE), True)
        with open(b.path(), "r+b") as f, mmap.mmap(f.fileno(), 1024) as m:
            seq = struct.unpack_from("<Q", m, SAMPLE_SEQ)[0]
            struct.pack_into("<Q", m, SAMPLE_SEQ, seq + 1)
            try:
                self.assertIs(b.sample(6, stepwatch.WAIT_NONE), False)
                self.assertIs(stepwatch.step(1), True)
                self.assertIs(stepwatch.beat(), True)
            finally:
                struct.pack_into("<Q", m, SAMPLE_SEQ, seq)
        self.assertEqual(read_sampler(b.path())["hash"], 5)

    def test_many_steps_while_sampling(self):
        os.environ["STEPWATCH_SAMPLER_PERIOD"] = "0.01"
        stepwatch.init()
        start = self.sampled("a sample", lambda s: s["count"] > 0)["count"]
        busy = n = 0
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            for _ in range(1000):
                n += 1
                if not stepwatch.step(n):
                    busy += 1
        self.assertEqual(busy, 0, f"{busy} of {n} steps found the beacon busy")
        self.assertGreater(read_sampler(stepwatch.path())["count"] - start, 20, "the sampler did not run meanwhile")


_RANK_SCRIPT = r"""
import os, sys, time
import torch
import torch.distributed as dist
import stepwatch

if not dist.is_available() or not dist.is_gloo_available():
    sys.exit(77)
rank = int(os.environ["RANK"])
go = os.environ["SW_GO_DIR"]


def wait_go(name):
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(go, name)):
        if time.monotonic() > deadline:
            sys.exit(f"rank {rank}: no {name} signal")
        time.sleep(0.02)


stepwatch.init()
if rank == 1:
    wait_go("init")
dist.init_process_group("gloo")
if rank == 1:
    wait_go("all_reduce")
t = torch.ones(1)
dist.all_reduce(t)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
loss = model(torch.ones(2, 4)).sum()
if rank == 1:
    wait_go("backward")
loss.backward()
stepwatch.step(1)
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} ok {t.item()}")
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(HAVE_TORCH, "torch is not installed for this interpreter")
class GlooTest(SamplerCase):
    """Two real ranks over gloo; rank 1 holds back at each point, and rank 0's beacon must say
    what rank 0 waits in: the rendezvous (or a stale stamp, see below), the all_reduce, DDP's
    backward."""

    def test_rank_waiting_for_a_peer(self):
        go = os.path.join(self.tmp, "go")
        os.makedirs(go)
        script = os.path.join(self.tmp, "rank.py")
        with open(script, "w") as f:
            f.write(_RANK_SCRIPT)
        env = python_env()
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE="2", SW_GO_DIR=go,
                   STEPWATCH_SAMPLER_PERIOD="0.05", OMP_NUM_THREADS="1")
        procs = []
        for rank in (0, 1):
            procs.append(subprocess.Popen([sys.executable, script], env=dict(env, RANK=str(rank)),
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        beacon = os.path.join(self.dir, self.job, "rank-0.beacon")

        said = {}

        def output():
            for i, p in enumerate(procs):
                if p.poll() is None:
                    p.kill()
                if i not in said:
                    said[i] = p.communicate()[0]
            return "\n".join(f"rank {i}: {text}" for i, text in said.items())

        def rank0_shows(wait, where):
            def check():
                for p in procs:
                    if p.poll() == 77:
                        raise unittest.SkipTest("torch.distributed with gloo is not available")
                    if p.poll() is not None:
                        raise AssertionError(f"a rank exited early ({p.returncode})")
                s = read_sampler(beacon)
                if wait is None:
                    return s if s["count"] > 0 else None
                return s if s["wait"] == wait and s["where"].startswith(where) else None

            return check

        try:
            # 1. Rank 0 in init_process_group, rank 1 not there yet. torch 1.13's TCPStore holds
            # the GIL while the master waits for workers: the sampler cannot run, and its stamp
            # going stale is the evidence. A torch that lets go of the GIL there shows STORE.
            wait_for("rank 0's first sample", rank0_shows(None, ""), timeout=60, details=output)
            time.sleep(0.5)
            r1 = read_sampler(beacon)
            time.sleep(1.0)
            r2 = read_sampler(beacon)
            starved = r2["count"] == r1["count"] and r2["mono"] == r1["mono"]
            self.assertTrue(starved or (r2["wait"] == stepwatch.WAIT_STORE and r2["count"] > r1["count"]),
                            f"rank 0 in rendezvous: neither a stale stamp nor STORE: {r1} then {r2}")
            open(os.path.join(go, "init"), "w").close()
            # 2. and 3. Both wait with the GIL released: the sampler sees them.
            seen = []
            for signal, wait, where in (
                ("all_reduce", stepwatch.WAIT_COLLECTIVE, "all_reduce (distributed_c10d.py:"),
                ("backward", stepwatch.WAIT_COLLECTIVE, "backward ("),
            ):
                seen.append(wait_for(f"rank 0 waiting before {signal}", rank0_shows(wait, where), timeout=60,
                                     details=output))
                open(os.path.join(go, signal), "w").close()
            for p in procs:
                p.wait(timeout=60)
        except BaseException as e:
            text = output()
            if not isinstance(e, unittest.SkipTest):
                print(text, file=sys.stderr)
            raise
        outs = output()
        self.assertEqual([p.returncode for p in procs], [0, 0], outs)
        self.assertIn("rank 0 ok 2.0", outs)
        reduce_, backward = seen
        self.assertRegex(backward["where"], r"^backward \((_tensor|__init__)\.py:\d+\)$")
        # A waiting rank's position stays: moved is older than the sample that saw it.
        self.assertGreaterEqual(reduce_["mono"], reduce_["moved_mono"])


if __name__ == "__main__":
    unittest.main()
