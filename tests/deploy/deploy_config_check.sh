#!/usr/bin/env bash
# The shipped Prometheus and Alertmanager examples, checked by the real tools (Debian packages
# prometheus and prometheus-alertmanager, installed by scripts/setup-deps.sh):
#  - `promtool check config deploy/prometheus/prometheus.yml`, in a temporary copy whose
#    rule_files entry (the installed /usr/share/stepwatch/prometheus/stepwatch-rules.yml) is
#    rewritten to the checked-in deploy/prometheus/stepwatch-rules.yml, so that promtool also
#    loads and checks the rules it names;
#  - `amtool check-config deploy/alertmanager/alertmanager.yml`;
#  - `amtool config routes test`: each kind of stepwatch alert, with the labels the rules and the
#    agent's own pager give it, reaches the receiver the example means.
# Exit 77 (ctest: skipped) only when promtool or amtool is missing.
#
#   deploy_config_check.sh SOURCE_DIR
set -euo pipefail

src="$1"
for tool in promtool amtool; do
  if ! command -v "$tool" >/dev/null; then
    echo "deploy_config_check: SKIPPED: $tool not found; scripts/setup-deps.sh installs it (Debian packages prometheus, prometheus-alertmanager)"
    exit 77
  fi
done
tmp="$(mktemp -d "${TMPDIR:-/tmp}/stepwatch-deploy-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
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
# shellcheck disable=SC2086 # $rule is a list of labels
{
  route oncall alertname=StepwatchJobStalled job_id=llm-7b state=stalled severity=page $rule
  route oncall alertname=StepwatchGPUsHeldWithoutProgress job_id=llm-7b severity=page $rule
  route stepwatch-tickets alertname=StepwatchJobSlow job_id=llm-7b state=slow severity=ticket $rule
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
echo "deploy_config_check: ok"
