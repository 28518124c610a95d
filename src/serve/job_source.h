// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What the agent's API reads and asks of whoever watches the jobs: the seam that lets serve/
// serve the agent without including it (agent::Agent implements it). Every method is called
// from the API's handler threads and must be thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/serve/node_fault_view.h"
#include "src/store/records.h"
#include "src/watch/job_state.h"

namespace stepwatch::serve {

class JobSource {
 public:
  virtual ~JobSource() = default;

  // Every watched job (retired ones until they expire), sorted by job id.
  virtual std::vector<watch::JobState> jobs() const = 0;
  virtual std::optional<watch::JobState> job(const std::string& id) const = 0;
  virtual watch::AgentHealth health() const = 0;
  virtual int64_t last_poll_wall_ns() const = 0;  // 0: no poll yet

  // Acks the job's open incident; nullopt: none is open.
  virtual Result<std::optional<store::Incident>> ack(const std::string& job, const std::string& by,
                                                     const std::string& note) = 0;
  // Newest first; job "" for every job.
  virtual Result<std::vector<store::Incident>> incidents(const std::string& job, int limit) = 0;

  // What the node-fault rules say of the jobs and hosts (src/serve/node_fault_view.h), as of the
  // last poll that computed it; null: not computed (no history kept).
  virtual std::shared_ptr<const NodeFaultSnapshot> node_faults() const { return nullptr; }

  // The /proc whose net/tcp tells the uid of a client's socket (a fake tree in tests).
  virtual std::string proc_root() const = 0;
};

}  // namespace stepwatch::serve
