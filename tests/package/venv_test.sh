#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# The Python package installs like any other (issue 14): from the checkout into fresh virtual
# environments, offline (Debian's bundled wheels, build isolation), as python/README.md says. The
# extension is compiled once (`pip wheel`, which is what `pip install <checkout>/python` does
# before it installs): make test runs this after installing the .deb (tests/package/deb_test.sh).
#
#   a) `pip wheel <checkout>/python` in a plain venv (no system site packages, so no torch), the
#      wheel installed there: stepwatch.BINDING is native (built for that interpreter),
#      __version__ is VERSION, `python -m stepwatch` says so, a beacon written through it reads
#      back in `stepwatch status`, and nothing imports torch.
#   b) `pip install <checkout>/python` into a plain venv where nothing compiles (CC=false
#      CXX=false): the install still succeeds, without the extension; the binding is ctypes over
#      $STEPWATCH_LIB (the system's libstepwatch.so.1 when unset), and the same round trip works.
#   c) the wheel in a venv with --system-site-packages (torch from Debian): the 2-rank DDP demo
#      trainer under `$STEPWATCH_BIN run` to its end, each rank importing the venv's stepwatch.
#
#   STEPWATCH_BIN=build/release/src/cli/stepwatch [STEPWATCH_LIB=.../libstepwatch.so] tests/package/venv_test.sh
#   (the .deb: STEPWATCH_BIN=/usr/bin/stepwatch, STEPWATCH_LIB unset)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/../.." && pwd)"
bin="${STEPWATCH_BIN:?set STEPWATCH_BIN to the stepwatch binary}"
lib="${STEPWATCH_LIB:-}"
version="$(cat "$src/VERSION")"
wheels=/usr/share/python-wheels # python3-pip-whl, python3-setuptools-whl, python3-wheel-whl
tmp="$(mktemp -d "${TMPDIR:-/tmp}/stepwatch-venv-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# Nothing from the caller's environment may help: no build tree on the path, no pip index or
# configuration, no binding forced, no job identity.
unset PYTHONPATH PYTHONHOME STEPWATCH_LIB STEPWATCH_BINDING STEPWATCH_JOB STEPWATCH_DIR STEPWATCH_INCARNATION \
  RANK LOCAL_RANK WORLD_SIZE MASTER_PORT SLURM_PROCID SLURM_LOCALID SLURM_NTASKS
while read -r var; do unset "$var"; done < <(env | sed -n 's/^\(PIP_[A-Z_]*\)=.*/\1/p')
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
pip_offline=(--no-index --find-links "$wheels")

fail() {
  echo "venv_test: $*" >&2
  exit 1
}
ms() { date +%s%3N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }

# make_venv NAME [venv options]: a venv from Debian's python3 (python3-venv).
make_venv() {
  local name="$1"
  shift
  /usr/bin/python3 -m venv "$@" "$tmp/$name" || fail "python3 -m venv $* failed (python3-venv installed?)"
}

# install NAME WHAT [env...]: pip install WHAT into venv NAME, offline; prints the seconds it took.
install() {
  local name="$1" what="$2" t0
  shift 2
  t0="$(ms)"
  env "$@" "$tmp/$name/bin/python" -m pip install "${pip_offline[@]}" "$what" >"$tmp/$name-pip.log" 2>&1 || {
    cat "$tmp/$name-pip.log" >&2
    fail "pip install into $name failed"
  }
  echo "venv_test: $name: pip install $what: $(secs "$t0" "$(ms)") s"
}

# round_trip NAME [env...]: init/step/finish through venv NAME's stepwatch, read back by `stepwatch status`.
round_trip() {
  local name="$1" dir="$tmp/$1-beacons" out
  shift
  env "$@" "$tmp/$name/bin/python" - "$dir" <<'PY' || fail "$name: the beacon round trip failed"
import sys, stepwatch
stepwatch.init(job="pkgtest", dir=sys.argv[1], rank=0, world_size=1)
assert stepwatch.step(1) and stepwatch.step(2, loss=0.25), "a step was not written"
assert stepwatch.finish(True), "finish was not written"
PY
  out="$("$bin" status --dir "$dir" --sample 0 pkgtest)" || fail "$name: stepwatch status failed: $out"
  # The rank line: rank host pid step ... status (docs/run.md).
  awk '$1 == "0" && $4 == "2" && /finished/ { found = 1 } END { exit !found }' <<<"$out" ||
    fail "$name: stepwatch status does not show rank 0 finished at step 2:"$'\n'"$out"
}

# re TEXT: TEXT as a regular expression that matches it literally.
re() { sed 's/[][\\.*^$+?(){}|]/\\&/g' <<<"$1"; }

# check_binding NAME BINDING WHERE-REGEX [env...]: stepwatch.BINDING, __version__ and python -m stepwatch.
check_binding() {
  local name="$1" want="$2" where="$3" got line
  shift 3
  got="$(env "$@" "$tmp/$name/bin/python" -c 'import stepwatch; print(stepwatch.BINDING, stepwatch.__version__)')" ||
    fail "$name: import stepwatch failed"
  [ "$got" = "$want $version" ] || fail "$name: binding and version are '$got', want '$want $version'"
  line="$(env "$@" "$tmp/$name/bin/python" -m stepwatch)" || fail "$name: python -m stepwatch failed"
  [[ "$line" =~ ^"stepwatch $version: binding $want ("$where")"$ ]] ||
    fail "$name: python -m stepwatch says '$line', want 'stepwatch $version: binding $want ($where)'"
  echo "venv_test: $name: $line"
}

site() { "$tmp/$1/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))'; }

# a) pip wheel builds the extension for the plain venv's interpreter; the wheel goes into it.
make_venv plain
t0="$(ms)"
"$tmp/plain/bin/python" -m pip wheel "${pip_offline[@]}" --no-deps -w "$tmp/wheels" "$src/python" \
  >"$tmp/wheel.log" 2>&1 || {
  cat "$tmp/wheel.log" >&2
  fail "pip wheel failed"
}
wheel="$(ls "$tmp"/wheels/stepwatch-"$version"-*.whl)" || fail "pip wheel made no stepwatch-$version wheel"
echo "venv_test: plain: pip wheel: $(basename "$wheel"): $(secs "$t0" "$(ms)") s"
install plain "$wheel"
plain_site="$(site plain)"
check_binding plain native "$(re "$plain_site")/stepwatch/_native\.cpython-[^/]*\.so"
round_trip plain
"$tmp/plain/bin/python" -c 'import torch' 2>/dev/null && fail "plain: torch is importable in a venv without system site packages"
"$tmp/plain/bin/python" -c '
import sys, stepwatch, stepwatch.callbacks
bad = [m for m in ("torch", "lightning", "pytorch_lightning", "transformers") if m in sys.modules]
assert not bad, f"import stepwatch imported {bad}"' || fail "plain: import stepwatch needs a framework"

# b) Nothing compiles: the package installs without the extension and loads libstepwatch.so.
make_venv nocc
install nocc "$src/python" CC=false CXX=false
ls "$(site nocc)"/stepwatch/_native* >/dev/null 2>&1 && fail "nocc: an extension was installed with CC=false"
if [ -n "$lib" ]; then
  check_binding nocc ctypes "$(re "$lib")" STEPWATCH_LIB="$lib"
  round_trip nocc STEPWATCH_LIB="$lib"
else
  check_binding nocc ctypes "/.*/libstepwatch\.so\.1"
  round_trip nocc
fi

# c) The wheel in a venv that sees Debian's torch: the real demo trainer.
make_venv torch --system-site-packages
install torch "$wheel"
torch_site="$(site torch)"
check_binding torch native "$(re "$torch_site")/stepwatch/_native\.cpython-[^/]*\.so"
"$tmp/torch/bin/python" -c 'import torch' || fail "torch: no torch from the system site packages"

t0="$(ms)"
rc=0
"$bin" run --job pkgtest-ddp --dir "$tmp/ddp-beacons" --state-dir "$tmp/ddp-state" -- \
  "$tmp/torch/bin/python" "$src/examples/launch.py" --nproc 2 "$src/examples/train_ddp.py" --steps 8 \
  >"$tmp/ddp.log" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || {
  cat "$tmp/ddp.log" >&2
  fail "stepwatch run of the DDP trainer exited with $rc"
}
for rank in 0 1; do
  grep -qF "[rank $rank] stepwatch $version, binding native, from $torch_site/stepwatch" "$tmp/ddp.log" || {
    cat "$tmp/ddp.log" >&2
    fail "rank $rank did not use the venv's stepwatch ($torch_site/stepwatch)"
  }
  grep -qF "[rank $rank] done at step 8" "$tmp/ddp.log" || fail "rank $rank did not reach step 8"
done
out="$("$bin" status --dir "$tmp/ddp-beacons" --sample 0 pkgtest-ddp)"
[ "$(awk '$4 == "8" && /finished/' <<<"$out" | wc -l)" -eq 2 ] ||
  fail "stepwatch status does not show both ranks finished at step 8:"$'\n'"$out"
echo "venv_test: torch: stepwatch run of the 2-rank DDP trainer: exit 0 in $(secs "$t0" "$(ms)") s"
echo "venv_test: ok"
