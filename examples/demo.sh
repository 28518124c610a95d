#!/usr/bin/env bash
# make demo: a real 2-rank PyTorch training (gloo, CPU) instrumented with the stepwatch Python
# package, watched through its step contract; then the detector on recorded stall scenarios.
set -euo pipefail
build=${1:-build/release}
here=$(cd "$(dirname "$0")/.." && pwd)
sw="$here/$build/src/cli/stepwatch"
work=$(mktemp -d /tmp/stepwatch-demo.XXXXXX)
export STEPWATCH_DIR="$work/beacons" STEPWATCH_JOB=demo
export PYTHONPATH="$here/$build/python${PYTHONPATH:+:$PYTHONPATH}"
trap 'kill $train 2>/dev/null || true' EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. The job spec this demo runs under"
"$sw" check-spec "$here/examples/specs/debug-small.toml"

say "2. Training 2 ranks (torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), gloo, CPU); every rank writes its beacon"
/usr/bin/python3 "$here/examples/launch.py" --nproc 2 "$here/examples/train_ddp.py" \
  --steps 80 --step-time 0.05 --ckpt-dir "$work/ckpt" --ckpt-every 20 --eval-every 30 >"$work/train.log" 2>&1 &
train=$!
for i in 1 2 3; do
  sleep 3
  say "stepwatch status (after ${i}x3 s): step, step age, phase, beat, checkpoint, loss per rank"
  "$sw" status --dir "$STEPWATCH_DIR" demo || true
done
wait $train
say "training finished: final status"
"$sw" status --dir "$STEPWATCH_DIR" demo
echo "committed checkpoints: $(ls "$work/ckpt" | tr '\n' ' ')"

say "3. The detector on recorded stalls (stepwatch replay over the labeled scenario corpus)"
"$here/$build/bench/detection/detection_bench" --traces "$work/traces" >/dev/null
for s in collective-hang-data checkpoint-rank0 rank-dies; do
  "$sw" replay "$work/traces/$s.jsonl" | grep -v "^             rank [0-9]*: starting"
done
say "done; files are in $work"
