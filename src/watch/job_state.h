// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What the agent knows about one job after a poll: the plain data that /metrics, the JSON API
// and the dashboard render. Producers (the agent) fill it; renderers never poll anything.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/detect/observation.h"
#include "src/detect/verdict.h"
#include "src/probe/gpu_probe.h"

namespace stepwatch::watch {

// A node of a multi-node job, as this node last read it from etcd.
struct NodeState {
  std::string node;
  bool leader = false;
  bool lapsed = false;          // its summary's lease expired: its ranks are rank-silent
  int64_t summary_age_ns = -1;  // since its summary was read (this node's: published)
  std::vector<int> ranks;
};

// A multi-node job's coordination, from this node's side ([coord] in agent.toml).
struct ClusterState {
  std::string node;    // this node's name
  std::string leader;  // "" unknown (etcd unreachable)
  bool leads = false;  // this node leads the job: the verdict and the incident are the job's
  bool connected = false;
  std::vector<NodeState> nodes;  // the leader knows every node; the others know themselves
};

struct JobState {
  std::string job;
  std::string owner;      // from the job's spec; "" when none
  std::string job_class;  // from the job's spec; "" when none
  std::string host;       // this node
  std::optional<uint32_t>
      owner_uid;         // the job directory's owner (agent); who may ack without a token
  bool retired = false;  // finished or vanished; kept for history
  int64_t first_seen_wall_ns = 0;
  int64_t last_poll_wall_ns = 0;
  detect::Verdict verdict;
  detect::Observation observation;           // the last poll: ranks, process and GPU facts
  std::vector<int64_t> recent_intervals_ns;  // recent step intervals (oldest first), for charts
  std::optional<probe::GpuSnapshot> gpus;    // devices the job holds, as NVML last saw them
  uint64_t incidents_total = 0;              // opened for this job since the agent started
  std::map<std::string, uint64_t> actions_total;  // by kind: page, page-failed, ack, preempt ...
  std::optional<ClusterState> cluster;            // multi-node; nullopt: single node
};

// The agent's coordination through etcd, for /metrics and /healthz.
struct CoordHealth {
  std::string node;
  bool connected = false;
  std::string error;          // why not ("" while connected)
  int64_t lease_age_ns = -1;  // since the node lease was last renewed; -1: never
  int64_t lease_ttl_ns = 0;
  uint64_t losses_total = 0;  // times coordination was lost
  uint64_t puts_total = 0;    // summaries published
  uint64_t jobs_led = 0;      // jobs this node leads now
};

// The agent's own health, for /metrics.
struct AgentHealth {
  int64_t last_poll_duration_ns = 0;
  uint64_t polls_total = 0;
  uint64_t beacons_read_total = 0;
  uint64_t read_errors_total = 0;
  int64_t started_wall_ns = 0;
  // Polls in a row that failed as a whole (no beacon root readable, or the poll threw); jobs
  // whose own poll failed are counted apart. /healthz fails from kPollFailuresUnhealthy on.
  uint64_t consecutive_poll_failures = 0;
  uint64_t job_poll_failures_total = 0;
  // Store writes that failed (disk full, read-only, corrupt). Pages still go out; /healthz
  // fails while the last poll's writes failed, and store_error says why ("": none).
  uint64_t store_errors_total = 0;
  std::string store_error;
  std::optional<CoordHealth> coord;  // multi-node; nullopt: single node
  // Whether the poll loop turns: since the last poll began (-1: none yet), against the poll
  // interval. /healthz says "lagging" past poll_lags() (E8: a poll held by etcd went unseen).
  int64_t poll_age_ns = -1;
  int64_t poll_interval_ns = 0;
};

// Whether the poll loop lags: its last poll began more than 3 intervals, and 5 s beyond one
// interval, ago.
inline bool poll_lags(const AgentHealth& h) {
  return h.poll_age_ns >
         std::max<int64_t>(3 * h.poll_interval_ns, h.poll_interval_ns + 5'000'000'000);
}

inline constexpr uint64_t kPollFailuresUnhealthy = 3;

}  // namespace stepwatch::watch
