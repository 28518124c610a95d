#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# The multi-node part of make demo (docs/multinode.md): a real etcd, two node agents "a" and "b"
# (each its own beacon root, as two machines would have), and one 2-rank PyTorch job (gloo, CPU)
# whose rank 0 runs on a and rank 1 on b. Rank 1 hangs in its data loader: the job's leader pages
# once, naming rank 1 on b. Then the leader's agent is SIGKILLed and the other node takes over.
#
#   examples/demo_multinode.sh [BUILD_DIR]     (make demo runs it after examples/demo.sh)
set -euo pipefail
build=${1:-build/release}
here=$(cd "$(dirname "$0")/.." && pwd)
sw="$here/$build/src/cli/stepwatch"
work=$(mktemp -d /tmp/stepwatch-demo-multinode.XXXXXX)
export PYTHONPATH="$here/$build/python${PYTHONPATH:+:$PYTHONPATH}"
unset STEPWATCH_JOB RANK WORLD_SIZE LOCAL_RANK MASTER_PORT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
[ -x /usr/bin/etcd ] || { echo "demo: /usr/bin/etcd is missing: scripts/setup-deps.sh installs etcd-server"; exit 1; }

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# jq_py URL EXPR: GETs a JSON document and prints the Python expression EXPR over it (`j`);
# fails when EXPR is false or the GET fails.
jq_py() { /usr/bin/python3 -c 'import json, sys, urllib.request
j = json.load(urllib.request.urlopen(sys.argv[1], timeout=2)); v = eval(sys.argv[2]); print(v); sys.exit(0 if v else 1)' \
  "$@" 2>/dev/null; }
# wait_until SECONDS CMD...: runs CMD every 0.1 s until it succeeds.
wait_until() {
  local n=$(($1 * 10)); shift
  for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
  return 1
}

say "9. Multi-node: one etcd, two node agents (a, b), one job with rank 0 on a and rank 1 on b"
etcd_port=$(free_port) peer_port=$(free_port)
etcd_dir=$(mktemp -d /dev/shm/stepwatch-demo-etcd.XXXXXX)
trap 'cleanup; rm -rf "$etcd_dir"' EXIT
env -u ETCD_NAME /usr/bin/etcd --name=demo --data-dir="$etcd_dir/data" \
  --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
  --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
  --initial-cluster="demo=http://127.0.0.1:$peer_port" --heartbeat-interval=10 --election-timeout=100 \
  --log-level=error >"$work/etcd.log" 2>&1 &
pids+=($!)
wait_until 10 jq_py "http://127.0.0.1:$etcd_port/health" 'j["health"]' >/dev/null \
  || { echo "etcd did not start:"; cat "$work/etcd.log"; exit 1; }
echo "etcd: http://127.0.0.1:$etcd_port (data in $etcd_dir)"

/usr/bin/python3 "$here/examples/page_receiver.py" "$work/pager.port" "$work/pages.jsonl" &
pids+=($!)
wait_until 5 test -s "$work/pager.port"
pager="http://127.0.0.1:$(cat "$work/pager.port")/page"

declare -A api agent
start_agent() {  # start_agent NODE: its agent on 127.0.0.1:0; api[NODE] from its log
  local n=$1 port=""
  local log="$work/$n/agent.log"
  : >"$log"
  "$sw" agent --config "$work/$n/agent.toml" 2>>"$log" &
  agent[$n]=$!
  pids+=($!)
  for _ in $(seq 50); do
    port=$(sed -n 's/.* API on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "agent $n did not start:"; cat "$log"; exit 1; }
  api[$n]="http://127.0.0.1:$port"
}
for n in a b; do
  mkdir -p "$work/$n/specs"
  # The same spec on both nodes: a step every 500 ms, a data fetch of at most 2 s.
  cat >"$work/$n/specs/ddp.toml" <<EOF
job = "ddp"
expected_interval = "500ms"
grace_intervals = 2
[learn]
warmup_steps = 1
[phases]
data = "2s"
[[runbook.pager]]
url = "$pager"
timeout = "2s"
EOF
  cat >"$work/$n/agent.toml" <<EOF
beacon_roots = ["$work/$n/beacons"]
state_dir = "$work/$n/state"
specs_dir = "$work/$n/specs"
listen = "127.0.0.1:0"
poll_interval = "200ms"
[coord]
endpoints = ["http://127.0.0.1:$etcd_port"]
node_name = "$n"
lease_ttl = "2s"
EOF
done

start_agent a
master_port=$(free_port)
for r in 0 1; do
  n=$([ "$r" = 0 ] && echo a || echo b)
  STEPWATCH_JOB=ddp STEPWATCH_DIR="$work/$n/beacons" MASTER_ADDR=127.0.0.1 MASTER_PORT=$master_port RANK=$r \
    LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 /usr/bin/python3 "$here/examples/train_ddp.py" --steps 100000 \
    --step-time 0.05 --label-data --hang-rank 1 --hang-at-step 40 >"$work/rank-$r.log" 2>&1 &
  pids+=($!)
done
# a publishes first (it is first in the job's leader line), then b starts.
wait_until 30 jq_py "${api[a]}/healthz" 'j["coord"]["summaries_published_total"]' >/dev/null
start_agent b
echo "node a: agent ${api[a]}/ watching $work/a/beacons (rank 0)"
echo "node b: agent ${api[b]}/ watching $work/b/beacons (rank 1)"
wait_until 30 jq_py "${api[a]}/api/v1/jobs/ddp" 'len(j["ranks"]) == 2 and j["state"] == "healthy"' \
  >/dev/null || true
jq_py "${api[a]}/api/v1/jobs/ddp" '"  job ddp: " + j["state"] + ", leader " + j["cluster"]["leader"] + ", ranks: " + ", ".join(
  "%d on %s" % (r["rank"], r["beacon"]["host"]) for r in j["ranks"])'

say "10. Rank 1 (on b) hangs in its data loader before step 40; rank 0 (on a) waits in the all-reduce"
wait_until 30 test -s "$work/pages.jsonl" || { echo "no page:"; tail "$work"/*/agent.log; exit 1; }
sleep 1  # a few more polls: nobody pages again
/usr/bin/python3 - "$work/pages.jsonl" <<'PY'
import json, sys
pages = [json.loads(line) for line in open(sys.argv[1])]
print(f"  {len(pages)} page(s) received")
for p in pages:
    print(f"  from node {p['host']}, incident {p['incident_id']}: {p['state']}/{p['cause']}")
    for c in p["culprits"]:
        print(f"  culprit rank {c['rank']} on {c['host']}: {c['reason']}")
PY
leader=$(jq_py "${api[a]}/api/v1/jobs/ddp" 'j["cluster"]["leader"]')
other=$([ "$leader" = a ] && echo b || echo a)
echo "the job's leader is $leader; its cluster view: ${api[$leader]}/#job=ddp  (JSON: ${api[$leader]}/api/v1/jobs/ddp)"

say "11. The leader's agent ($leader) is SIGKILLed: $other takes the job over (lease TTL 2s)"
start=$EPOCHREALTIME
{ kill -KILL "${agent[$leader]}" && wait "${agent[$leader]}"; } 2>/dev/null || true  # no "Killed" line
wait_until 10 jq_py "${api[$other]}/api/v1/jobs/ddp" 'j["cluster"]["leads"]' >/dev/null \
  || { echo "$other did not take over:"; tail "$work/$other/agent.log"; exit 1; }
took=$(/usr/bin/python3 -c "print(f'{$EPOCHREALTIME - $start:.1f}')")
echo "  ${api[$other]}/api/v1/jobs/ddp, $took s after the kill:"
jq_py "${api[$other]}/api/v1/jobs/ddp" '"  cluster.leader = %s, leads = %s, state %s/%s" % (j["cluster"]["leader"],
  j["cluster"]["leads"], j["state"], j["cause"])'
echo "  (it never read $leader's summary; the roster $leader kept in etcd names $leader's rank: rank-silent)"
jq_py "${api[$other]}/api/v1/incidents?job=ddp" '"  incident %s, adopted from etcd: %s" % (j["incidents"][0]["id"],
  j["incidents"][0]["status"])'
sleep 1
echo "  pages received in all: $(wc -l <"$work/pages.jsonl") (the new leader does not page again)"
grep -h "coord: job ddp" "$work"/{a,b}/agent.log | sed 's/^stepwatch: info: /  /'
say "multi-node done; everything is in $work"
