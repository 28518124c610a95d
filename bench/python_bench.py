#!/usr/bin/python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Cost of one progress report from a Python training loop, in one /usr/bin/python3 process.

    /usr/bin/python3 bench/python_bench.py --build-dir build/release

Cases (each a plain `for i in range(calls): <call>` loop, so the loop's own ~10-20 ns is
included; python_loop_empty measures it):
  python_step_native   stepwatch.step(n) through the C extension (stepwatch._native)
  python_step_ctypes   stepwatch.step(n) through the ctypes binding of libstepwatch.so
  python_print_flush   print(n, flush=True) to a file in a temp dir
  python_jsonl_flush   one JSON progress line (json.dumps + write + flush) to a file in a temp dir
  python_step_loss_native, python_loop_empty   for context
  python_step_native_sampling   python_step_native while the progress sampler (stepwatch.sampler)
                       samples this thread at its period (STEPWATCH_SAMPLER_PERIOD, default 1 s);
                       batches run for at least --sampler-seconds so samples land inside them,
                       and the row adds mean_ns (a batch that waited for a sample counts there)
  python_sampler_describe   one sampler look at a 40-frame-deep stack (digest + wait walk)

Then the sampler's own CPU per rank: the main thread runs a 40-frame-deep loop of steps and
arithmetic for --sampler-seconds while the sampler samples it at its period; the sampler thread's
CPU time (time.thread_time, read in that thread) over the wall time is one row:
{"name": "python_sampler_cpu", "cpu_pct": ..., "us_per_sample": ..., "samples": ..., "period_s": ...}.

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
    p.add_argument("--sampler-seconds", type=float, default=5.0,
                   help="how long the sampler cases run (at least): the CPU row and the step-while-sampling row")
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


def run_case_for(loop, batches, calls, warmup, seconds):
    """run_case, with batches added until `seconds` have passed. Returns (median, p90, mean)."""
    clock = time.perf_counter_ns
    for _ in range(warmup):
        loop(calls)
    samples = []
    end = clock() + int(seconds * 1e9)
    while len(samples) < batches or clock() < end:
        t0 = clock()
        loop(calls)
        samples.append((clock() - t0) / calls)
    mean = statistics.fmean(samples)
    samples.sort()
    p90 = samples[min(len(samples) - 1, int(round(0.9 * (len(samples) - 1))))]
    return statistics.median(samples), p90, mean


def sampler_cpu(beacon, step, seconds):
    """The sampler thread's CPU over `seconds` of a busy, 40-frame-deep main thread."""
    from stepwatch import sampler

    s = sampler.Sampler(beacon).start()
    deadline = time.monotonic() + 5
    while s.samples == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    cpu0, n0, t0 = s.cpu_s, s.samples, time.perf_counter()

    def deep(n):
        if n:
            return deep(n - 1)
        end = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < end:
            for _ in range(1000):
                i += 1
                step(i)
                i = (i * 7 + 3) % 1000003
        return i

    deep(40)
    wall = time.perf_counter() - t0
    cpu1, n1 = s.cpu_s, s.samples
    s.stop()
    samples = n1 - n0
    return {
        "name": "python_sampler_cpu",
        "cpu_pct": round(100 * (cpu1 - cpu0) / wall, 4),
        "us_per_sample": round(1e6 * (cpu1 - cpu0) / samples, 1) if samples else None,
        "samples": samples,
        "period_s": s.period,
        "wall_s": round(wall, 2),
    }


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

        # The progress sampler: the step call with and without it, side by side, then its cost.
        from stepwatch import sampler

        rows = []
        for name, period in (("python_step_native", None), ("python_step_native_sampling", sampler.period_from())):
            s = sampler.Sampler(native, period).start() if period else None
            median, p90, mean = run_case_for(step_native, args.batches, args.calls, args.warmup, args.sampler_seconds)
            if s is not None:
                s.stop()
            rows.append({"name": name, "median_ns": round(median, 1), "p90_ns": round(p90, 1), "mean_ns": round(mean, 1)})
        print(json.dumps(rows[1]), flush=True)

        def deep(n):
            return deep(n - 1) if n else sys._getframe()

        frame = deep(40)
        describe = sampler.describe

        def describe_loop(calls):
            for i in range(calls):
                describe(frame)

        median, p90 = run_case(describe_loop, max(3, args.batches // 10), max(1, args.calls // 10), args.warmup)
        print(json.dumps({"name": "python_sampler_describe", "median_ns": round(median, 1), "p90_ns": round(p90, 1)}),
              flush=True)
        del frame
        cpu = sampler_cpu(native, _native.step, args.sampler_seconds)
        print(json.dumps(cpu), flush=True)
        print(f"python_bench: step without sampler {rows[0]['median_ns']} ns median / {rows[0]['mean_ns']} ns mean;"
              f" with sampler every {cpu['period_s']} s {rows[1]['median_ns']} ns median / {rows[1]['mean_ns']} ns mean;"
              f" sampler thread {cpu['cpu_pct']}% of a core per rank ({cpu['us_per_sample']} us per sample,"
              f" {cpu['samples']} samples in {cpu['wall_s']} s); one look at a 40-frame stack {round(median / 1000, 1)} us",
              file=sys.stderr)

        _native.set_default(None)
        _ctypes_binding.set_default(None)
        native.close()
        ctypes_beacon.close()
        print_file.close()
        jsonl_file.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
