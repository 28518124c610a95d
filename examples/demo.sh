#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# make demo: the whole story on a real 2-rank PyTorch training (gloo, CPU), instrumented with the
# stepwatch Python package and supervised by `stepwatch run`: a rank stalls in its data loader,
# the owner is paged, an artifact is collected, the job is preempted, resumed from its last
# committed checkpoint, and finishes. A node agent (`stepwatch agent`, with its dashboard) watches
# the same job on its own. Then the detector on recorded stall scenarios. Then a job split across
# two node agents coordinating through a real etcd (examples/demo_multinode.sh).
set -euo pipefail
build=${1:-build/release}
here=$(cd "$(dirname "$0")/.." && pwd)
sw="$here/$build/src/cli/stepwatch"
work=$(mktemp -d /tmp/stepwatch-demo.XXXXXX)
export PYTHONPATH="$here/$build/python${PYTHONPATH:+:$PYTHONPATH}"
unset STEPWATCH_JOB RANK WORLD_SIZE MASTER_PORT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

/usr/bin/python3 "$here/examples/page_receiver.py" "$work/pager.port" "$work/pages.jsonl" &
receiver=$!
agent=""
trap 'kill $receiver $agent 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$work/pager.port" ] && break; sleep 0.1; done
sed -e "s|@CKPT@|$work/ckpt|" -e "s|@PAGER@|http://127.0.0.1:$(cat "$work/pager.port")/page|" \
  "$here/examples/specs/demo.toml" >"$work/demo.toml"

say "1. The job spec: expected step interval, grace, phase budgets, the runbook"
"$sw" check-spec "$work/demo.toml"

# The node agent watches every job under the beacon root, independently of `stepwatch run`, with
# its own incident store. Its copy of the spec has no pager: `stepwatch run` pages the owner.
mkdir -p "$work/agent-specs"
awk '/^\[\[runbook\.pager\]\]/ {skip = 1; next} /^\[/ {skip = 0} !skip' "$work/demo.toml" \
  >"$work/agent-specs/demo.toml"
cat >"$work/agent.toml" <<EOF
beacon_roots = ["$work/beacons"]
state_dir = "$work/agent-state"
specs_dir = "$work/agent-specs"
listen = "127.0.0.1:0"
poll_interval = "500ms"
EOF
: >"$work/agent.log"
"$sw" agent --config "$work/agent.toml" 2>>"$work/agent.log" &
agent=$!
port=""
for _ in $(seq 50); do  # the agent logs the port it bound: "... API on 127.0.0.1:PORT"
  port=$(sed -n 's/.* API on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/agent.log")
  [ -n "$port" ] || ! kill -0 "$agent" 2>/dev/null && break
  sleep 0.1
done
[ -n "$port" ] || { echo "the node agent did not start:"; cat "$work/agent.log"; exit 1; }
dashboard="http://127.0.0.1:$port"

say "2. stepwatch run: 2 ranks train; rank 1 hangs in its data loader before step 25 (first incarnation only)"
echo "(the trainer's own output is in $work/train.log; stepwatch's lines below)"
echo "dashboard: $dashboard/  (the node agent watches every job under $work/beacons)"
set +e
"$sw" run --spec "$work/demo.toml" --dir "$work/beacons" --state-dir "$work/state" -- \
  /usr/bin/python3 "$here/examples/launch.py" --nproc 2 "$here/examples/train_ddp.py" \
  --steps 60 --step-time 0.05 --ckpt-dir "$work/ckpt" --ckpt-every 10 --eval-every 30 \
  --label-data --hang-rank 1 --hang-at-step 25 --hang-incarnation 0 2>&1 >"$work/train.log" | grep '^stepwatch' \
  | grep -v 'ack server listening'
rc=${PIPESTATUS[0]}
set -e
echo "stepwatch run exited with $rc"

say "3. The page the owner received"
/usr/bin/python3 - "$work/pages.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    p = json.loads(line)
    print(f"  {p['job']}: {p['state']}/{p['cause']}, last step {p['last_step']} "
          f"{p['last_step_age_seconds']:.1f}s ago, expected interval {p['expected_interval_seconds']}s")
    for c in p["culprits"]:
        print(f"  culprit rank {c['rank']}: {c['reason']}")
    print(f"  ack with: {p['ack_command']}")
PY

say "4. The incident, with every action the runbook took"
"$sw" incidents demo --state-dir "$work/state"

art=$(ls -d "$work"/state/incidents/demo-* | head -1)
say "5. The artifact ($art): the culprit's Python stack"
ls "$art"
grep -B2 -A3 hang_forever "$art/rank-1.python-stacks.txt" | head -12

say "6. The resumed incarnation finished: final status of every rank"
"$sw" status --dir "$work/beacons" demo

say "7. What the node agent saw, watching the same beacons on its own ($dashboard/)"
/usr/bin/python3 - "$dashboard" <<'PY'
import json, sys, time, urllib.request
get = lambda path: json.load(urllib.request.urlopen(sys.argv[1] + path, timeout=5))
for _ in range(20):  # a poll or two more to see the job finish
    j = get("/api/v1/jobs/demo")
    if j["state"] == "finished":
        break
    time.sleep(0.25)
print(f"  job demo: {j['state']}, last step {j['last_step']}, {j['incidents_total']} incident(s) "
      "(the agent observes and records; the runbook was stepwatch run's)")
for i in reversed(get("/api/v1/incidents?job=demo")["incidents"]):
    print(f"  incident {i['id']}: opened {i['opened_at']}, {i['status']}"
          f"{': ' + i['resolution'] if i['resolution'] else ''} {i['closed_at'] or ''}")
PY
echo "  its log ($work/agent.log):"
grep -E 'agent: (watching job|job demo: )' "$work/agent.log" \
  | sed -e 's/^stepwatch: info: /    /' -e 's/, expected interval [0-9.]*s (spec)//'

say "8. The detector on recorded stalls: stepwatch replay over the labeled scenario corpus"
"$here/$build/bench/detection/detection_bench" --traces "$work/traces" >/dev/null
for s in checkpoint-rank0 rank-dies; do
  "$sw" replay "$work/traces/$s.jsonl" | grep -v "^             rank [0-9]*: starting"
done
say "done; everything is in $work"
"$here/examples/demo_multinode.sh" "$build"
exit "$rc"
