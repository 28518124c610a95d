#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets with clang++-14 and runs each for SECONDS (default 30).
# Fails on any crash, sanitizer report or property violation; a reproducer lands in
# build/fuzz/artifacts/<target>/. New inputs accumulate in .fuzz-corpus/<target> (git-ignored);
# the checked-in seeds in fuzz/corpus/<target> are read, never written. fuzz/README.md lists
# the targets and what each one asserts.
#
#   fuzz/run.sh 60
#   fuzz/run.sh --build-only
#   STEPWATCH_FUZZ_BUILD_DIR=/tmp/f fuzz/run.sh 10
#   STEPWATCH_FUZZ_TARGETS="spec http" STEPWATCH_FUZZ_JOBS=2 fuzz/run.sh 600
#
# STEPWATCH_FUZZ_TARGETS: which targets (default: all); STEPWATCH_FUZZ_JOBS: how many run at
# once (default 1: the runs share the machine's cores with everything else).
set -euo pipefail

# --build-only: build the targets and stop (make test builds them while other tests run).
build_only=0
if [ "${1:-}" = "--build-only" ]; then
  build_only=1
  shift
fi
seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: $0 SECONDS_PER_TARGET" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${STEPWATCH_FUZZ_BUILD_DIR:-$root/build/fuzz}"
work="${STEPWATCH_FUZZ_CORPUS_DIR:-$root/.fuzz-corpus}"
cxx="${STEPWATCH_FUZZ_CXX:-clang++-14}"
cc="${STEPWATCH_FUZZ_CC:-clang-14}"
all_targets="beacon jsonl spec agent_config trace log_contract proc http coord"
targets="${STEPWATCH_FUZZ_TARGETS:-$all_targets}"
jobs="${STEPWATCH_FUZZ_JOBS:-1}"

command -v "$cxx" >/dev/null || { echo "fuzz: $cxx not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 1; }
for target in $targets; do
  [[ " $all_targets " == *" $target "* ]] || { echo "fuzz: no target $target (targets: $all_targets)" >&2; exit 2; }
done

# OSS-Fuzz's flags: -O1 and line tables only (a report still names file and line). Full debug
# info at -O2 was a third of each file's compile time, and this build compiles nearly every
# module again. Only the targets that run are built (their modules, not the CLI's).
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" >/dev/null
build_targets=()
for target in $targets; do build_targets+=("fuzz_$target"); done
cmake --build "$build" --target "${build_targets[@]}"
[ "$build_only" -eq 0 ] || exit 0

# The options of one target: the longest input worth trying and its dictionary, if any.
target_args() {
  case "$1" in
    beacon) echo "-max_len=2048" ;;
    jsonl) echo "-max_len=8192 -dict=$here/jsonl.dict" ;;
    spec) echo "-max_len=4096 -dict=$here/spec.dict" ;;
    agent_config) echo "-max_len=4096 -dict=$here/agent_config.dict" ;;
    trace) echo "-max_len=16384 -dict=$here/trace.dict" ;;
    log_contract) echo "-max_len=8192 -dict=$here/log_contract.dict" ;;
    proc) echo "-max_len=4096 -dict=$here/proc.dict" ;;
    coord) echo "-max_len=16384 -dict=$here/trace.dict" ;;
    # No per-input leak check for the servers: a connection's thread may still be ending (its
    # stack no longer scanned, its buffers not yet freed) when libFuzzer looks, which LeakSanitizer
    # reports as a leak of httplib's stream. The servers' leaks are checked where they stop:
    # the ASan build of tests/serve, tests/runbook and tests/agent.
    http) echo "-max_len=4096 -dict=$here/http.dict -detect_leaks=0" ;;
  esac
}

# Runs one target; its exit status is the fuzzer's. Prints one summary line (and the log's
# tail on failure).
run_target() {
  local target="$1" corpus="$work/$1" artifacts="$build/artifacts/$1" log="$build/fuzz_$1.log" rc=0
  mkdir -p "$corpus" "$artifacts"
  # The first corpus directory receives new inputs; the seeds are only read.
  # shellcheck disable=SC2046 # target_args is a list of options
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    "$build/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" $(target_args "$target") "$corpus" "$here/corpus/$target" >"$log" 2>&1 || rc=$?
  local execs
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $target FAILED (exit $rc) after ${execs:-?} runs; log $log:" >&2
    tail -n 60 "$log" >&2
  else
    echo "fuzz: $target ok: ${execs:-?} runs in ${seconds}s, corpus $(find "$corpus" -type f | wc -l) files"
  fi
  return "$rc"
}

status=0
pids=()
for target in $targets; do
  echo "fuzz: $target for ${seconds}s"
  run_target "$target" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
exit "$status"
