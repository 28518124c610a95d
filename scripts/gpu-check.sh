#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# Checks the NVML probe against a real NVIDIA driver, once, on a machine with a GPU.
#
#   scripts/gpu-check.sh [BUILD_DIR]     (default: build/gpu-check)
#
# Builds only stepwatch-gpu-probe (or uses $STEPWATCH_GPU_PROBE, a prebuilt binary), runs it
# plain and with --json, and, when python3 has torch with CUDA, holds a small CUDA allocation in a
# background process so the compute-process listing must show a pid; then runs the probe again
# and ends that process. nvidia-smi's view is printed next to ours when it exists. Bounded to
# about 170 s in all. With $OUT set, everything printed also lands in $OUT/gpu-check/.
# $STEPWATCH_NVML_LIB passes --nvml-lib to the probe (a driver outside the loader path, or the
# test fake: build/.../tests/probe/fake_nvml/libnvidia-ml.so with STEPWATCH_FAKE_NVML set).
# Exit status: 0 the probe read the driver; 1 it could not be built; 2 no GPU evidence.
set -uo pipefail  # no -e: a failing step is reported and the rest still runs

cd "$(dirname "$0")/.." || exit 1
BUILD_DIR="${1:-build/gpu-check}"
mkdir -p "$(dirname "$BUILD_DIR")"
BUDGET_S=170
START_S=$SECONDS

OUT_DIR=""
if [ -n "${OUT:-}" ]; then
  OUT_DIR="$OUT/gpu-check"
  mkdir -p "$OUT_DIR"
  exec > >(tee "$OUT_DIR/gpu-check.log") 2>&1
fi

say() { echo "gpu-check: $*"; }
left() { echo $((BUDGET_S - (SECONDS - START_S))); }
# bounded SECONDS CMD...: runs CMD with at most SECONDS, or what is left of the budget if less.
bounded() {
  local limit=$1
  shift
  local rest
  rest=$(left)
  [ "$rest" -lt "$limit" ] && limit=$rest
  if [ "$limit" -le 0 ]; then
    say "out of time budget, skipped: $*"
    return 124
  fi
  timeout --kill-after=5 "$limit" "$@"
}
# keep NAME: stdin to stdout, and to $OUT/gpu-check/NAME when $OUT is set.
keep() {
  if [ -n "$OUT_DIR" ]; then tee "$OUT_DIR/$1"; else cat; fi
}

say "host $(uname -n), kernel $(uname -r), uid $(id -u), $(date -u +%FT%TZ)"
say "libnvidia-ml on the loader path: $( (ldconfig -p 2>/dev/null | grep -o 'libnvidia-ml[^ ]*' | sort -u | tr '\n' ' ') || true)"
if command -v nvidia-smi >/dev/null; then
  say "nvidia-smi's view, to compare with the probe's:"
  bounded 20 nvidia-smi --query-gpu=index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,driver_version \
    --format=csv 2>&1 | keep nvidia-smi.csv
else
  say "nvidia-smi not found (the probe does not need it)"
fi

# --- 1. the binary -----------------------------------------------------------------------------
PROBE="${STEPWATCH_GPU_PROBE:-}"
if [ -n "$PROBE" ] && [ ! -x "$PROBE" ]; then
  say "STEPWATCH_GPU_PROBE=$PROBE is not an executable; building instead"
  PROBE=""
fi

build_with_cmake() {
  local gen="Ninja"
  command -v ninja >/dev/null || gen="Unix Makefiles"
  say "configuring $BUILD_DIR ($gen)"
  bounded 60 cmake -S . -B "$BUILD_DIR" -G "$gen" -DCMAKE_BUILD_TYPE=Release -DSTEPWATCH_WERROR=OFF \
    -DSTEPWATCH_TESTS=OFF -DSTEPWATCH_BENCH=OFF -DSTEPWATCH_PYTHON=OFF >"$BUILD_DIR.configure.log" 2>&1 ||
    { tail -n 15 "$BUILD_DIR.configure.log"; return 1; }
  say "building stepwatch-gpu-probe"
  bounded 120 cmake --build "$BUILD_DIR" --target stepwatch-gpu-probe -j "$(nproc)" >"$BUILD_DIR.build.log" 2>&1 ||
    { tail -n 25 "$BUILD_DIR.build.log"; return 1; }
  PROBE="$BUILD_DIR/src/probe/tools/stepwatch-gpu-probe"
}

# Without the project's CMake dependencies (toml++, RE2, CLI11, ...), the probe alone still
# compiles from six files with a C++20 compiler and fmt's headers.
build_direct() {
  local cxx
  cxx=$(command -v c++ || command -v g++ || command -v clang++) || return 1
  say "building the probe directly with $cxx (fmt header-only)"
  mkdir -p "$BUILD_DIR"
  bounded 90 "$cxx" -std=c++20 -O2 -I. -DFMT_HEADER_ONLY \
    src/common/result.cpp src/common/log.cpp src/common/clock.cpp \
    src/probe/nvml.cpp src/probe/gpu_probe.cpp src/probe/tools/gpu_probe_main.cpp \
    -ldl -pthread -o "$BUILD_DIR/stepwatch-gpu-probe-direct" || return 1
  PROBE="$BUILD_DIR/stepwatch-gpu-probe-direct"
}

if [ -z "$PROBE" ]; then
  missing=()
  for tool in cmake c++ pkg-config; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  command -v ninja >/dev/null || command -v make >/dev/null || missing+=("ninja (or make)")
  if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null && [ "$(id -u)" -eq 0 ]; then
    say "missing ${missing[*]}; trying apt-get (needs a network)"
    bounded 60 apt-get install -y -qq --no-install-recommends build-essential cmake ninja-build \
      pkg-config libfmt-dev libre2-dev libtomlplusplus-dev libcli11-dev nlohmann-json3-dev \
      >/dev/null 2>&1 || say "apt-get install failed"
    missing=()
    for tool in cmake c++ pkg-config; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  fi
  [ ${#missing[@]} -gt 0 ] && say "missing build tools: ${missing[*]}"
  if command -v cmake >/dev/null && command -v c++ >/dev/null; then
    build_with_cmake || say "the CMake build failed (output above)"
  fi
  if [ -z "$PROBE" ]; then
    build_direct || true
  fi
  if [ -z "$PROBE" ]; then
    [ -e /usr/include/fmt/format.h ] || say "fmt headers are missing (/usr/include/fmt: libfmt-dev)"
    say "FAILED: could not build stepwatch-gpu-probe; install a C++20 compiler and libfmt-dev," \
      "or set STEPWATCH_GPU_PROBE to a prebuilt binary"
    exit 1
  fi
fi
say "probe binary: $PROBE"
LIB_ARGS=()
[ -n "${STEPWATCH_NVML_LIB:-}" ] && LIB_ARGS=(--nvml-lib "$STEPWATCH_NVML_LIB")

# --- 2. the probe against the real driver ------------------------------------------------------
say "probe, plain (two polls, 1 s apart: utilisation is a sampled rate):"
bounded 30 "$PROBE" "${LIB_ARGS[@]}" --count 2 --interval-ms 1000 2>&1 | keep probe.txt
rc=${PIPESTATUS[0]}
say "probe exit status $rc (0 read the driver, 2 no GPU evidence)"
say "probe, --json:"
bounded 30 "$PROBE" "${LIB_ARGS[@]}" --json 2>/dev/null | keep probe.json
[ "$rc" -eq 2 ] && { say "RESULT: no GPU evidence (reason above)"; exit 2; }

# --- 3. a compute process the listing must show ------------------------------------------------
if ! command -v python3 >/dev/null; then
  say "python3 not found: skipping the compute-process check"
elif ! bounded 40 python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)" 2>/dev/null; then
  say "python3 has no torch with CUDA here: skipping the compute-process check"
else
  marker=$(mktemp)
  # 256 MiB held for at most 60 s; the marker says the CUDA context exists.
  python3 -c "
import sys, time, torch
x = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device='cuda')
torch.cuda.synchronize()
open(sys.argv[1], 'w').write('ready')
time.sleep(60)
" "$marker" &
  holder=$!
  for _ in $(seq 1 60); do
    [ -s "$marker" ] && break
    kill -0 "$holder" 2>/dev/null || break
    sleep 0.5
  done
  if [ -s "$marker" ]; then
    say "python pid $holder holds 256 MiB of GPU memory; probe again:"
    with_process=$(bounded 30 "$PROBE" "${LIB_ARGS[@]}" 2>&1)
    echo "$with_process" | keep probe-with-process.txt
    bounded 30 "$PROBE" "${LIB_ARGS[@]}" --json 2>/dev/null | keep probe-with-process.json
    if command -v nvidia-smi >/dev/null; then
      say "nvidia-smi's compute apps:"
      bounded 20 nvidia-smi --query-compute-apps=pid,used_memory --format=csv 2>&1 | keep nvidia-smi-apps.csv
    fi
    if grep -q "pid $holder " <<<"$with_process"; then
      say "RESULT: the compute-process listing shows pid $holder"
    else
      say "RESULT: pid $holder NOT in the listing (in a container NVML reports host pids; compare above)"
    fi
  else
    say "the CUDA allocation did not become ready in 30 s; skipping"
  fi
  kill "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
  rm -f "$marker"
fi

say "done in $((SECONDS - START_S)) s"
exit 0
