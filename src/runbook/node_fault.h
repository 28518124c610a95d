// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Deciding that a node, not the job, is at fault (docs/node-fault.md, multinode.md §4): pure
// rules over a job's incarnation history and every job's host implications. No I/O and no
// clock (the caller passes now). They name hosts and count; they never act: the runbook pages,
// holds automatic resume on a storm, and drains a host only when the spec opts in.
//
// Conventions shared by every rule:
// - job_history is the job's incarnations as Store::incarnations returns them (newest first);
//   the rules order by incarnation number themselves, so any order works. Pass at least the
//   newest max(storm_incarnations, suspect_of_last, short_run_count) + 1 (the running one).
// - A running incarnation (no ended_ns) counts for the storm (by started_ns) only; the culprit
//   and short-run rules skip it: it neither counts nor breaks a chain.
// - A policy count or duration <= 0 disables its rule.
// - Windows are (now - window, now]: a time equal to now - window is out, one after now is out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/spec/spec.h"
#include "src/store/records.h"

namespace stepwatch::runbook {

// The rules' thresholds are the spec's [node_fault] (spec::NodeFaultSettings, whose fields say
// which source each default comes from).
using NodeFaultPolicy = spec::NodeFaultSettings;

struct RestartStorm {
  int incarnations = 0;  // started within the window
  int64_t window_ns = 0;
  int64_t first_started_ns = 0;
  int64_t last_started_ns = 0;
  // One line: "5 incarnations started in 12m00s (limit 5 in 30m00s): 3, 4, 5, 6, 7".
  std::string evidence;
};

// The storm, when at least storm_incarnations incarnations of the job started in
// (now - storm_window, now]. The caller pages (severity warning) and holds automatic resume
// until acked; restart_budget (no checkpoint progress) stays the hard stop.
std::optional<RestartStorm> restart_storm(const std::vector<store::IncarnationRecord>& job_history,
                                          const NodeFaultPolicy& p, int64_t now_wall_ns);

struct SuspectHost {
  std::string host;
  std::vector<std::string> evidence;  // one line per rule that fired, with numbers and ids
  // The culprit or the cross-job rule fired: the host itself was blamed, not only present in a
  // chain of short runs (correlation only). Only a blamed host is ever drained.
  bool blamed = false;
  // The counts behind the rules, filled whether or not each rule fired.
  int culprit_in = 0;       // implicated in this many of the last of_last ended incarnations
  int of_last = 0;          // the ended incarnations examined: min(suspect_of_last, available)
  int short_runs = 0;       // the trailing chain of short runs that included this host
  int jobs_implicated = 0;  // distinct jobs that implicated it within the cross-job window
};

// The job's suspect hosts: those for which at least one rule fires, strongest first (more
// rules fired, then more jobs, more culprit incarnations, more short runs; then by name).
// - Culprit rule: among the last suspect_of_last ended incarnations (fewer if the job has fewer:
//   2 of 2 is no weaker than 2 of 3, so the rule fires on those available), count those whose
//   implicated_hosts() include the host.
// - Short-run rule: walking back from the newest ended incarnation, count the chain of
//   consecutive ended incarnations (in incarnation order; gaps in the numbering do not break it:
//   an unrecorded incarnation cannot be judged) that ran on the host (hosts or culprit_hosts)
//   and ended, not "finished", in less than short_run_ns. The first one that fails ends the
//   chain: an old streak followed by a long run or a placement elsewhere names nobody.
// - Cross-job rule: distinct jobs among the implications of the host with at_ns in the window.
//   Only hosts this job ran on are named here (the page is about this job); see
//   cross_job_suspects for the whole fleet.
std::vector<SuspectHost> suspect_hosts(const std::vector<store::IncarnationRecord>& job_history,
                                       const std::vector<store::HostImplication>& implications,
                                       const NodeFaultPolicy& p, int64_t now_wall_ns);

// The cross-job rule alone over every host (for metrics and the agent's fleet view).
std::vector<SuspectHost> cross_job_suspects(const std::vector<store::HostImplication>& implications,
                                            const NodeFaultPolicy& p, int64_t now_wall_ns);

// The hosts one ended incarnation implicates: its culprits' hosts (each once, in order). A
// running or "finished" incarnation implicates none, and neither does a collective hang with no
// lagging rank (cause "collective" and no culprit ranks): every rank waited on every other, and
// blaming all their hosts would exclude the job from the cluster (multinode.md §4, ByteRobust).
std::vector<std::string> implicated_hosts(const store::IncarnationRecord& r);

// The exclusion hint for a scheduler ("slurm:1234" works too: the part before ':' is used):
//   "slurm"               -> "sbatch --exclude=h1,h2"
//   "kubernetes" or "k8s" -> "node affinity: kubernetes.io/hostname NotIn [h1, h2]"
//   anything else         -> "exclude h1, h2 from the job's next placement"
// Hosts are named once each; no hosts -> "".
std::string exclude_hint(std::string_view scheduler, const std::vector<std::string>& hosts);

}  // namespace stepwatch::runbook
