#!/usr/bin/python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""One table of what progress reporting costs, against stepwatch's targets.

Runs the C++ benchmarks (<build>/bench/contract_bench, Google Benchmark, JSON output, several
repetitions, medians) and, when present, bench/python_bench.py (JSON lines with median_ns), and
prints one markdown table: operation, median ns per call (per 10,000 beacons for the readers),
target, and whether it is met. Targets: a C/C++ step <= 50 ns, a Python step <= 1000 ns.

    /usr/bin/python3 bench/report.py --build-dir build/release [--repetitions 7] [--check]
                                     [--python-build-dir build/py] [--no-python]

--check exits 1 when a target is missed (the default only reports).
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# benchmark name -> (operation shown, unit note, target ns or None)
CXX_ROWS = [
    ("BM_c_step", "C `stepwatch_step` (libstepwatch.so)", "", 50),
    ("BM_c_step_loss", "C `stepwatch_step_loss`", "", 50),
    ("BM_cpp_step", "C++ `Handle::step`", "", 50),
    ("BM_cpp_step_loss", "C++ `Handle::step(n, loss)`", "", 50),
    ("BM_c_beat", "C `stepwatch_beat`", "", None),
    ("BM_c_step_while_sampling", "C `stepwatch_step` while another thread samples 1000/s", "", 50),
    ("BM_c_step_beside_a_waking_thread", "C `stepwatch_step` beside a thread waking 1000/s, no sample (control)", "", None),
    ("BM_c_sample", "C `stepwatch_sample` (the progress sampler's write, ~1/s)", "", None),
    ("BM_clock_gettime", "one `clock_gettime(CLOCK_MONOTONIC)` (floor of a step)", "", None),
    ("BM_c_fprintf_fflush", "C `fprintf` + `fflush` of a line (alternative)", "", None),
    ("BM_c_jsonl_write", "C JSON line + `write(2)` (alternative)", "", None),
    ("BM_read_10k_cold", "read 10k beacons, cold (open+map+read+unmap)", "per 10k", None),
    ("BM_read_10k_warm", "read 10k beacons, warm (kept mappings)", "per 10k", None),
]

PY_ROWS = {
    "python_step_native": ("Python `stepwatch.step` (C extension)", 1000),
    "python_step_loss_native": ("Python `stepwatch.step(n, loss)` (C extension)", 1000),
    "python_step_ctypes": ("Python `stepwatch.step` (ctypes binding)", 1000),
    "python_step_native_sampling": ("Python `stepwatch.step` (C extension) while the progress sampler runs", 1000),
    "python_sampler_describe": ("one look of the progress sampler at a 40-frame stack (context)", None),
    "python_print_flush": ("Python `print(..., flush=True)` (alternative)", None),
    "python_jsonl_flush": ("Python JSON line + flush (alternative)", None),
    "python_loop_empty": ("Python empty loop iteration (context)", None),
}

UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"),
                   help="CMake build directory with bench/contract_bench (default build/release)")
    p.add_argument("--python-build-dir", default=None,
                   help="build directory with the Python package for python_bench.py (default: --build-dir)")
    p.add_argument("--repetitions", type=int, default=7, help="Google Benchmark repetitions (median of these)")
    p.add_argument("--min-time", type=float, default=0.2, help="seconds per repetition")
    p.add_argument("--no-python", action="store_true", help="skip bench/python_bench.py")
    p.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    return p.parse_args(argv)


def run_cxx(build_dir, repetitions, min_time):
    """Returns {benchmark name: median ns per iteration} and a list of problems."""
    binary = os.path.join(build_dir, "bench", "contract_bench")
    if not os.access(binary, os.X_OK):
        return {}, [f"{binary} not found: build with STEPWATCH_BENCH=ON"]
    cmd = [binary, "--benchmark_format=json", f"--benchmark_repetitions={repetitions}",
           "--benchmark_report_aggregates_only=true", f"--benchmark_min_time={min_time}"]
    print("report: " + " ".join(cmd), file=sys.stderr)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    problems = [] if proc.returncode == 0 else [f"contract_bench exited {proc.returncode}"]
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        return {}, problems + [f"contract_bench output is not JSON: {e}"]
    medians = {}
    for b in doc.get("benchmarks", []):
        if b.get("error_occurred"):
            problems.append(f"{b.get('run_name', b.get('name'))}: {b.get('error_message')}")
            continue
        if b.get("aggregate_name") != "median":
            continue
        medians[b["run_name"]] = b["real_time"] * UNIT_NS[b.get("time_unit", "ns")]
    return medians, problems


def run_python(build_dir):
    """Returns {case name: median ns} from bench/python_bench.py, or a note why not; the sampler's
    own CPU (a row without median_ns) comes back as a note."""
    script = os.path.join(ROOT, "bench", "python_bench.py")
    if not os.path.exists(script):
        return {}, ["bench/python_bench.py not present: Python rows skipped"]
    cmd = [sys.executable, script, "--build-dir", build_dir]
    print("report: " + " ".join(cmd), file=sys.stderr)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    out = {}
    sampler = None
    for line in proc.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
            if row.get("name") == "python_sampler_cpu":
                sampler = row
                continue
            out[row["name"]] = float(row["median_ns"])
        except (ValueError, KeyError):
            continue
    notes = [] if proc.returncode == 0 else [f"python_bench.py exited {proc.returncode}: Python rows may be missing"]
    if sampler is not None:
        notes.append(f"the progress sampler's own thread: {sampler.get('cpu_pct')}% of one core per rank "
                     f"({sampler.get('us_per_sample')} us per sample, period {sampler.get('period_s')} s), "
                     f"measured beside a step loop")
    return out, notes


def fmt_ns(ns, per):
    if per == "per 10k":
        return f"{ns:,.0f} ns per 10k ({ns / 1e6:.2f} ms)"
    return f"{ns:,.1f}"


def main(argv=None):
    args = parse_args(argv)
    build_dir = os.path.abspath(args.build_dir)
    cxx, problems = run_cxx(build_dir, args.repetitions, args.min_time)
    py_build = os.path.abspath(args.python_build_dir) if args.python_build_dir else build_dir
    py, notes = ({}, ["Python rows skipped (--no-python)"]) if args.no_python else run_python(py_build)

    rows = []
    missed = []
    for name, op, per, target in CXX_ROWS:
        if name not in cxx:
            continue
        rows.append((op, cxx[name], per, target))
    for name, (op, target) in PY_ROWS.items():
        if name in py:
            rows.append((op, py[name], "", target))
    for name in sorted(set(py) - set(PY_ROWS)):
        rows.append((f"Python `{name}`", py[name], "", None))

    print("| operation | median ns per call | target | met |")
    print("| --- | ---: | ---: | :---: |")
    for op, ns, per, target in rows:
        if target is None:
            t, met = "—", "—"
        else:
            t = f"<= {target} ns"
            ok = round(ns, 1) <= target  # judged on the value shown
            met = "yes" if ok else "**no**"
            if not ok:
                missed.append(op)
        print(f"| {op} | {fmt_ns(ns, per)} | {t} | {met} |")
    for p in problems + notes:
        print(f"\nnote: {p}")
    if not cxx:
        return 1
    if args.check and missed:
        print(f"\nmissed targets: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
