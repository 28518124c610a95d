// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What the node-fault rules (runbook/node_fault.h) say of the agent's jobs and hosts, as plain
// data for the API, /metrics and the dashboard. The agent computes it (serve/ never runs the
// rules or reads the store for it); docs/api.md and docs/metrics.md list how it is shown.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/store/records.h"

namespace stepwatch::serve {

// A host the rules suspect for one job, as its page names it.
struct SuspectHostView {
  std::string host;
  std::vector<std::string> evidence;  // one line per rule that fired
  std::string exclude_hint;           // for the job's scheduler; "" when none
};

struct RestartStormView {
  int incarnations = 0;  // started within the window
  int64_t window_ns = 0;
  std::string evidence;  // "5 incarnations started in 12m00s (limit 5 in 30m00s): 3, 4, 5, 6, 7"
};

// One job's history and what the rules make of it.
struct JobNodeFault {
  std::vector<SuspectHostView> suspects;  // strongest first
  std::optional<RestartStormView> storm;  // nullopt: no storm
  // The newest incarnations, newest first, at most kIncarnationsShown.
  std::vector<store::IncarnationRecord> incarnations;
};

inline constexpr size_t kIncarnationsShown = 20;

// One host with implications in the fleet's cross-job window, or named suspect by a job.
struct HostFault {
  std::string host;
  int jobs_implicated = 0;  // distinct jobs that implicated it within the window
  int implications = 0;     // implications (job incarnations that blamed it) within the window
  bool suspect = false;     // the cross-job rule, or the view of a job that is not retired
  std::vector<std::string> evidence;  // the rules' lines; a job's own prefixed "job J: "
};

struct NodeFaultSnapshot {
  std::map<std::string, JobNodeFault> jobs;  // by job id; jobs the agent lists
  std::vector<HostFault> hosts;              // sorted by host
  int64_t window_ns = 0;                     // the fleet's cross-job window
};

}  // namespace stepwatch::serve
