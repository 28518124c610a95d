// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// This node's part in multi-node coordination ([coord] in agent.toml; docs/multinode.md): the
// etcd clients, its lease, and every job's node-fault history as read here. Each job's own
// coordination is its JobLeader (job_leader.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "src/agent/config.h"
#include "src/coord/etcd_history.h"
#include "src/coord/etcd_ledger.h"
#include "src/coord/kv.h"
#include "src/coord/poll_budget.h"
#include "src/coord/read_ahead.h"
#include "src/coord/session.h"

namespace stepwatch::agent {

struct NodeCoord {
  // kv: null, an EtcdClient per thread over c.endpoints; else every call goes to it (tests).
  NodeCoord(const CoordConfig& c, std::shared_ptr<coord::Kv> kv);
  CoordConfig config;
  std::shared_ptr<coord::Kv> poll_kv, api_kv;  // what etcd and api_etcd are
  // Every call of the poll thread under one budget per poll: a hung etcd costs a poll one
  // request_timeout, not one per job (E8). The agent re-arms it at the top of each poll.
  coord::PollBudget budget;
  // A job's reads of a poll in one request, where its leader host prefetches them (JobLeader).
  coord::ReadAhead read_ahead;
  coord::Kv& etcd;  // the poll thread's: read ahead, within the budget
  coord::NodeSession session;
  std::mutex api_mu;
  coord::Kv& api_etcd;        // the API threads' (guarded by api_mu)
  uint64_t puts_retired = 0;  // summaries published for jobs no longer tracked
  // Every job's node-fault history and every host's implications, read on the poll thread
  // (unfenced: it writes nothing; a job's leader writes through the job's own, fenced).
  coord::EtcdHistory history;
  // The keys of the job's incident in etcd, with this node's fence.
  coord::LedgerKeys keys(const std::string& job) const { return coord::ledger_keys(session, job); }
};

}  // namespace stepwatch::agent
