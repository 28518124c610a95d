#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# The shipped Prometheus and Alertmanager examples, checked by the real tools (Debian packages
# prometheus and prometheus-alertmanager, installed by scripts/setup-deps.sh):
#  - `promtool check config deploy/prometheus/prometheus.yml`, in a temporary copy whose
#    rule_files entry (the installed /usr/share/stepwatch/prometheus/stepwatch-rules.yml) is
#    rewritten to the checked-in deploy/prometheus/stepwatch-rules.yml, so that promtool also
#    loads and checks the rules it names;
#  - `amtool check-config deploy/alertmanager/alertmanager.yml`;
#  - `amtool config routes test`: each kind of stepwatch alert, with the labels the rules and the
#    agent's own pager give it, reaches the receiver the example means;
#  - a real Alertmanager (prometheus-alertmanager) with the example configuration, sent those
#    alerts: its inhibit rules suppress exactly the ones they are meant to.
# Exit 77 (ctest: skipped) only when promtool, amtool or prometheus-alertmanager is missing.
#
#   deploy_config_check.sh SOURCE_DIR
set -euo pipefail

src="$1"
for tool in promtool amtool prometheus-alertmanager; do
  if ! command -v "$tool" >/dev/null; then
    echo "deploy_config_check: SKIPPED: $tool not found; scripts/setup-deps.sh installs it (Debian packages prometheus, prometheus-alertmanager)"
    exit 77
  fi
done
tmp="$(mktemp -d "${TMPDIR:-/tmp}/stepwatch-deploy-XXXXXX")"
am_pid=""
cleanup() {
  if [ -n "$am_pid" ]; then
    kill "$am_pid" 2>/dev/null || true
    wait "$am_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "deploy_config_check: $*" >&2
  exit 1
}

prom="$src/deploy/prometheus/prometheus.yml"
installed_rules=/usr/share/stepwatch/prometheus/stepwatch-rules.yml
grep -qF -- "- $installed_rules" "$prom" || fail "$prom does not load $installed_rules"
grep -qE '^  - job_name: stepwatch-agent$' "$prom" ||
  fail "$prom has no scrape job named stepwatch-agent (StepwatchAgentDown selects up{job=\"stepwatch-agent\"})"
sed "s#- $installed_rules#- $src/deploy/prometheus/stepwatch-rules.yml#" "$prom" >"$tmp/prometheus.yml"
promtool check config "$tmp/prometheus.yml" || fail "promtool check config $prom (rules rewritten to the checkout's) failed"

am="$src/deploy/alertmanager/alertmanager.yml"
amtool check-config "$am" || fail "amtool check-config $am failed"

# RECEIVER LABEL=VALUE...: an alert with these labels is routed to RECEIVER (and only it).
route() {
  local want="$1"
  shift
  local got
  got="$(amtool config routes test --config.file="$am" "$@" 2>/dev/null)" || true
  [ "$got" = "$want" ] || fail "an alert {$*} goes to '$got', want '$want'"
  echo "  {$*} -> $want"
}
echo "routes:"
rule='job=stepwatch-agent instance=gpu-node-01:9465'
# The rules' job alerts: one per job, no instance; owner and job_class when the spec names them.
job='job=stepwatch-agent job_id=llm-7b'
# shellcheck disable=SC2086 # $rule and $job are lists of labels
{
  route oncall alertname=StepwatchJobStalled severity=page $job
  route oncall alertname=StepwatchRankDead severity=page $job
  route oncall alertname=StepwatchGPUsHeldWithoutProgress severity=page $job
  route stepwatch-tickets alertname=StepwatchJobSlow severity=ticket $job
  route stepwatch-tickets alertname=StepwatchPageNotDelivered severity=warning $job
  route team-llm-pager alertname=StepwatchJobStalled severity=page owner=team-llm job_class=pretrain $job
  route team-llm-pager alertname=StepwatchRankDead severity=page owner=team-llm $job
  route team-llm-pager alertname=StepwatchGPUsHeldWithoutProgress severity=page owner=team-llm $job
  route team-llm-tickets alertname=StepwatchJobSlow severity=ticket owner=team-llm $job
  route team-llm-tickets alertname=StepwatchPageNotDelivered severity=warning owner=team-llm $job
  route stepwatch-platform alertname=StepwatchAgentDown severity=page $rule
  route stepwatch-platform alertname=StepwatchAgentDown severity=page
  route stepwatch-platform alertname=StepwatchAgentPollFailing severity=page $rule
  route stepwatch-tickets alertname=StepwatchAgentStoreFailing severity=ticket $rule
  route stepwatch-tickets alertname=StepwatchCoordinationLost severity=warning node=gpu-node-01 $rule
}
# The agents' own pages (kind = "alertmanager"): with the spec's owner, and without one.
route team-llm-pager alertname=StepwatchJobStalled job_id=llm-7b state=stalled cause=collective severity=page owner=team-llm
route team-llm-pager alertname=StepwatchRankDead job_id=llm-7b state=dead cause=none severity=page owner=team-llm
route oncall alertname=StepwatchJobStalled job_id=nobodys state=stalled cause=host severity=page
route oncall alertname=SomethingElse severity=page

# The inhibit rules, in a real Alertmanager (no cluster; its receivers' example URLs just fail).
port="$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
prometheus-alertmanager --config.file="$am" --storage.path="$tmp/am" --web.listen-address="127.0.0.1:$port" \
  --cluster.listen-address= >"$tmp/am.log" 2>&1 &
am_pid=$!
/usr/bin/python3 - "http://127.0.0.1:$port" <<'PY' || { cat "$tmp/am.log" >&2; fail "the inhibit rules do not inhibit what they should"; }
import json, sys, time, urllib.request
base = sys.argv[1]
rule = {"job": "stepwatch-agent", "owner": "team-llm"}  # the rules' job alerts: no instance
alerts = {  # name: (labels, inhibited?)
    "agent's own page of a": ({"alertname": "StepwatchJobStalled", "job_id": "a", "state": "stalled",
                               "cause": "collective", "severity": "page", "owner": "team-llm"}, False),
    "rules' stall of a": ({"alertname": "StepwatchJobStalled", "job_id": "a", "severity": "page", **rule}, True),
    "slow of a": ({"alertname": "StepwatchJobSlow", "job_id": "a", "severity": "ticket", **rule}, True),
    "GPU cross-check of a": ({"alertname": "StepwatchGPUsHeldWithoutProgress", "job_id": "a", "severity": "page",
                              **rule}, True),
    "slow of b": ({"alertname": "StepwatchJobSlow", "job_id": "b", "severity": "ticket", **rule}, False),
    "rules' stall of c": ({"alertname": "StepwatchJobStalled", "job_id": "c", "severity": "page", **rule}, False),
    "GPU cross-check of c": ({"alertname": "StepwatchGPUsHeldWithoutProgress", "job_id": "c", "severity": "page",
                              **rule}, True),
    "agent's own page of d's dead rank": ({"alertname": "StepwatchRankDead", "job_id": "d", "state": "dead",
                                           "cause": "none", "severity": "page", "owner": "team-llm"}, False),
    "rules' dead ranks of d": ({"alertname": "StepwatchRankDead", "job_id": "d", "severity": "page", **rule}, True),
    "rules' dead ranks of e": ({"alertname": "StepwatchRankDead", "job_id": "e", "severity": "page", **rule}, False),
    "slow of e": ({"alertname": "StepwatchJobSlow", "job_id": "e", "severity": "ticket", **rule}, True),
}
deadline = time.monotonic() + 20
while True:
    try:
        with urllib.request.urlopen(base + "/-/ready", timeout=2) as r:
            if r.status == 200:
                break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("alertmanager did not become ready")
    time.sleep(0.1)
body = json.dumps([{"labels": labels} for labels, _ in alerts.values()]).encode()
urllib.request.urlopen(urllib.request.Request(base + "/api/v2/alerts", body, {"Content-Type": "application/json"}),
                       timeout=5).read()
bad = {}
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    with urllib.request.urlopen(base + "/api/v2/alerts", timeout=5) as r:
        got = {tuple(sorted(a["labels"].items())): bool(a["status"]["inhibitedBy"]) for a in json.load(r)}
    bad = {name: got.get(tuple(sorted(labels.items()))) for name, (labels, want) in alerts.items()
           if got.get(tuple(sorted(labels.items()))) != want}
    if not bad:
        break
    time.sleep(0.2)
for name, (_, want) in alerts.items():
    print(f"  {name}: {'inhibited' if want else 'notified'}{' -- WRONG' if name in bad else ''}")
sys.exit(1 if bad else 0)
PY
echo "deploy_config_check: ok"
