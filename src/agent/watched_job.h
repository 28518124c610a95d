// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// One job the agent watches (private to src/agent): its watch (observer and detector), what it
// publishes, this node's incident and its host, the notes the node-fault history keeps between
// polls, and, with [coord], its JobLeader (src/agent/job_leader.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "src/agent/job_leader.h"
#include "src/common/clock.h"
#include "src/detect/verdict.h"
#include "src/runbook/incident.h"
#include "src/spec/spec.h"
#include "src/watch/job_state.h"
#include "src/watch/job_watch.h"

namespace stepwatch::agent {

// This node's side of one job: the host of the node's own incident (pages name this node; only
// processes proven to be the job's are collected from and preempted, on a thread of their own;
// a preempt is followed by nothing but the close: the agent never restarts a job), and what the
// job's leader asks of this node. The agent's (agent_runbook.cpp).
class NodeJobHost : public runbook::IncidentHost, public JobNode {};

// What the node-fault history keeps of the job between polls (agent_history.cpp): the
// incarnation whose start is recorded and whose end is not yet, its hosts, the highest one
// handled, and what ends it: the last verdict and the one this node's incident preempted on
// (state, cause, culprits only), and the newest committed checkpoint.
struct HistoryNotes {
  std::optional<int64_t> open;
  std::set<std::string> hosts;
  int64_t seen = -1;
  detect::Verdict last_verdict;
  detect::Verdict acted_on;
  std::optional<int64_t> checkpoint_step;
};

struct WatchedJob {
  std::string job;
  std::string root;
  std::optional<uint32_t> dir_uid;  // the job directory's owner when first seen
  spec::JobSpec spec = spec::default_spec();
  std::unique_ptr<watch::JobWatch> watch;  // its observer and detector
  watch::JobState state;
  int64_t incarnation = 0;
  int64_t run_started_wall_ns = 0;  // the earliest beacon's creation: when this run began
  Stamp now;                        // of the poll under way
  std::optional<int64_t> retired_at_wall_ns;
  bool vanished = false;  // retired because its directory is gone
  bool hidden = false;    // retired longer than retire_after, but its (finished) directory remains
  size_t ranks = 0;       // at the last observation
  size_t due = 0;         // ranks that wanted process details at the last observation
  bool observed = false;  // observed in this poll: `state` holds a new observation to publish
  std::shared_ptr<const watch::JobState> published;  // what the API sees of this job
  HistoryNotes history;
  // Declared in the order they are built: each outlives what uses it.
  std::unique_ptr<NodeJobHost> host;
  std::unique_ptr<runbook::Incident> runbook;  // this node's incident, page and preempt
  std::unique_ptr<JobLeader> leader;           // [coord] only

  // This node's own look at its own ranks (a follower shows its leader's view in `state`).
  const detect::Observation& own_look() const {
    const detect::Observation* own = leader ? leader->own_look() : nullptr;
    return own ? *own : state.observation;
  }
};

}  // namespace stepwatch::agent
