#!/usr/bin/env bash
# Builds the libFuzzer targets with clang++-14 and runs each for SECONDS (default 30).
# Fails on any crash, sanitizer report or property violation; a reproducer lands in
# build/fuzz/artifacts/<target>/. New inputs accumulate in .fuzz-corpus/<target> (git-ignored);
# the checked-in seeds in fuzz/corpus/<target> are read, never written.
#
#   fuzz/run.sh 60
#   STEPWATCH_FUZZ_BUILD_DIR=/tmp/f fuzz/run.sh 10
set -euo pipefail

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

command -v "$cxx" >/dev/null || { echo "fuzz: $cxx not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 1; }

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build"

status=0
for target in beacon jsonl; do
  corpus="$work/$target"
  artifacts="$build/artifacts/$target"
  log="$build/fuzz_$target.log"
  mkdir -p "$corpus" "$artifacts"
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$artifacts/")
  case "$target" in
    beacon) args+=(-max_len=2048) ;;
    jsonl) args+=(-max_len=8192 -dict="$here/jsonl.dict") ;;
  esac
  echo "fuzz: $target for ${seconds}s"
  rc=0
  # The first corpus directory receives new inputs; the seeds are only read.
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    "$build/fuzz_$target" "${args[@]}" "$corpus" "$here/corpus/$target" >"$log" 2>&1 || rc=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $target FAILED (exit $rc) after ${execs:-?} runs; log $log:" >&2
    tail -n 60 "$log" >&2
    status=1
  else
    echo "fuzz: $target ok: ${execs:-?} runs in ${seconds}s, corpus $(ls "$corpus" | wc -l) files"
  fi
done
exit "$status"
