#!/usr/bin/python3
"""Cost of one progress report from a Python training loop, in one /usr/bin/python3 process.

    /usr/bin/python3 bench/python_bench.py --build-dir build/release

Cases (each a plain `for i in range(calls): <call>` loop, so the loop's own ~10-20 ns is
included; python_loop_empty measures it):
  python_step_native   stepwatch.step(n) through the C extension (stepwatch._native)
  python_step_ctypes   stepwatch.step(n) through the ctypes binding of libstepwatch.so
  python_print_flush   print(n, flush=True) to a file in a temp dir
  python_jsonl_flush   one JSON progress line (json.dumps + write + flush) to a file in a temp dir
  python_step_loss_native, python_loop_empty   for context

Each case runs --batches batches of --calls calls (after warm-up batches); a batch's mean ns per
call is one sample. Output: one JSON object per line on stdout,
{"name": ..., "median_ns": ..., "p90_ns": ...}; details go to stderr.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=None, help="CMake build dir with python/stepwatch (default build/release, then build/py)")
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=10, help="batches run before measuring")
    return p.parse_args(argv)


def locate(build_dir):
    candidates = [build_dir] if build_dir else [os.path.join(ROOT, "build", "release"), os.path.join(ROOT, "build", "py")]
    for d in candidates:
        pkg = os.path.join(d, "python", "stepwatch")
        if os.path.isdir(pkg):
            sys.path.insert(0, os.path.join(d, "python"))
            lib = os.path.join(d, "src", "client", "libstepwatch.so")
            if os.path.exists(lib):
                os.environ.setdefault("STEPWATCH_LIB", lib)
            return d
    sys.exit(f"python_bench: no built package under {candidates} (build with STEPWATCH_PYTHON=ON)")


def run_case(loop, batches, calls, warmup):
    """loop(calls) runs one batch. Returns (median, p90) of the per-call ns of each batch."""
    clock = time.perf_counter_ns
    for _ in range(warmup):
        loop(calls)
    samples = []
    for _ in range(batches):
        t0 = clock()
        loop(calls)
        samples.append((clock() - t0) / calls)
    samples.sort()
    p90 = samples[min(len(samples) - 1, int(round(0.9 * (len(samples) - 1))))]
    return statistics.median(samples), p90


def main(argv=None):
    args = parse_args(argv)
    build = locate(args.build_dir)
    os.environ.setdefault("STEPWATCH_JOB", "python-bench")
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)

    import stepwatch
    from stepwatch import _ctypes_binding
    from stepwatch import _native

    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # beacons live on tmpfs in production
    with tempfile.TemporaryDirectory(prefix="stepwatch-bench-", dir=shm) as beacon_root, \
            tempfile.TemporaryDirectory(prefix="stepwatch-bench-") as tmp:
        native = _native.Beacon(dir=beacon_root, rank=0)
        _native.set_default(native)
        ctypes_beacon = _ctypes_binding.Beacon(dir=beacon_root, job="python-bench-ctypes", rank=0)
        _ctypes_binding.set_default(ctypes_beacon)
        print_file = open(os.path.join(tmp, "print.log"), "w")
        jsonl_file = open(os.path.join(tmp, "progress.jsonl"), "w")

        def loop_empty(calls):
            for i in range(calls):
                pass

        def step_native(calls, step=_native.step):
            for i in range(calls):
                step(i)

        def step_loss_native(calls, step=_native.step):
            for i in range(calls):
                step(i, 0.5)

        def step_ctypes(calls, step=_ctypes_binding.step):
            for i in range(calls):
                step(i)

        def print_flush(calls, f=print_file):
            for i in range(calls):
                print(i, file=f, flush=True)

        def jsonl_flush(calls, f=jsonl_file, dumps=json.dumps, now=time.time):
            for i in range(calls):
                f.write(dumps({"job": "python-bench", "rank": 0, "step": i, "time": now()}) + "\n")
                f.flush()

        cases = [
            ("python_step_native", step_native),
            ("python_step_ctypes", step_ctypes),
            ("python_print_flush", print_flush),
            ("python_jsonl_flush", jsonl_flush),
            ("python_step_loss_native", step_loss_native),
            ("python_loop_empty", loop_empty),
        ]
        print(f"python_bench: {sys.executable} {sys.version.split()[0]}, package from {build}/python "
              f"(default binding {stepwatch.BINDING}), beacons in {beacon_root}, files in {tmp}, "
              f"{args.batches} batches x {args.calls} calls", file=sys.stderr)
        for name, loop in cases:
            median, p90 = run_case(loop, args.batches, args.calls, args.warmup)
            print(json.dumps({"name": name, "median_ns": round(median, 1), "p90_ns": round(p90, 1)}), flush=True)

        _native.set_default(None)
        _ctypes_binding.set_default(None)
        native.close()
        ctypes_beacon.close()
        print_file.close()
        jsonl_file.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
