// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The store side of the node-fault rules (node_fault.h, docs/node-fault.md), shared by every
// runbook host (`stepwatch run`'s supervisor, `stepwatch agent`, a multi-node job's leader): how
// an ended incarnation is recorded with the hosts it implicates, how the rules' inputs are read,
// and what a page says of them. One definition, so that a page names the same hosts whichever
// process sends it. Where the history lives is a HistoryLedger: one node's SQLite store
// (StoreHistory), or etcd for a multi-node job (coord::EtcdHistory).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"
#include "src/detect/verdict.h"
#include "src/runbook/incident.h"
#include "src/runbook/node_fault.h"
#include "src/runbook/pager.h"
#include "src/store/records.h"
#include "src/store/store.h"

namespace stepwatch::runbook {

// Where a job's incarnations and every job's host implications are kept. The semantics are
// Store's (store.h): record_incarnation merges into the recorded one (store::merge_incarnation),
// record_implication keeps the first of a (host, job, incarnation), incarnations() is newest
// first, implications(since) those with at_ns >= since, newest first.
class HistoryLedger {
 public:
  virtual ~HistoryLedger() = default;
  virtual Status record_incarnation(const store::IncarnationRecord& record) = 0;
  virtual Result<std::vector<store::IncarnationRecord>> incarnations(const std::string& job,
                                                                     int limit) = 0;
  virtual Status record_implication(const store::HostImplication& implication) = 0;
  virtual Result<std::vector<store::HostImplication>> implications(int64_t since_ns) = 0;
};

// The history in one node's store. The store must outlive it; one thread.
class StoreHistory final : public HistoryLedger {
 public:
  explicit StoreHistory(store::Store& store) : store_(store) {}
  Status record_incarnation(const store::IncarnationRecord& record) override {
    return store_.record_incarnation(record);
  }
  Result<std::vector<store::IncarnationRecord>> incarnations(const std::string& job,
                                                             int limit) override {
    return store_.incarnations(job, limit);
  }
  Status record_implication(const store::HostImplication& implication) override {
    return store_.record_implication(implication);
  }
  Result<std::vector<store::HostImplication>> implications(int64_t since_ns) override {
    return store_.implications(since_ns);
  }

 private:
  store::Store& store_;
};

// The end of one incarnation: `reason` ("failed", "preempted", ...), and from the verdict that
// ended it (null: none, a clean finish or a stop) its cause and culprits. A culprit's host is the
// one the verdict names, else `node` (a single-node job runs every rank there).
store::IncarnationRecord ended_incarnation(const std::string& job, int64_t incarnation,
                                           std::string_view reason, const detect::Verdict* v,
                                           const std::string& node, int64_t ended_wall_ns);

// Records the end (Store::record_incarnation: an upsert) and one implication per host
// implicated_hosts(r) names (idempotent). The first error is returned; the rest is still tried.
Status record_ended(HistoryLedger& history, const store::IncarnationRecord& r);

// What the rules say of one job now.
struct NodeFaultReport {
  std::optional<RestartStorm> storm;
  std::vector<SuspectHost> suspects;              // strongest first
  std::vector<store::IncarnationRecord> history;  // the job's, newest first (kHistoryRead)
};

// How many of a job's newest incarnations the rules read: more than any sane threshold needs.
inline constexpr int kHistoryRead = 64;

// Reads the job's history and every job's implications within the cross-job window, and applies
// restart_storm and suspect_hosts with the job's [node_fault] policy.
Result<NodeFaultReport> read_node_fault(HistoryLedger& history, const std::string& job,
                                        const NodeFaultPolicy& policy, int64_t now_wall_ns);

// The page's part: a "restart storm: ..." evidence line, and one PageSuspect per suspect host
// with its evidence and the exclusion hint for `scheduler` (spec::resume_owner_name, or an id
// like "slurm:1234"). An error reading the store leaves the page as it was and is returned.
Status add_node_fault(PageMessage& m, HistoryLedger& history, const std::string& job,
                      const NodeFaultPolicy& policy, std::string_view scheduler,
                      int64_t now_wall_ns);
// The same from a report already read.
void add_node_fault(PageMessage& m, const NodeFaultReport& report, std::string_view scheduler);

// A page about what follows a preempt, sent to `pagers` as an escalation of `incident`: `m` (the
// host's page for the verdict the job was preempted on) with `severity`, `state` and `why`.
void send_after_preempt_page(PageDeliveries& deliveries, const std::vector<spec::Pager>& pagers,
                             PageMessage m, const std::string& job, int64_t incident,
                             int64_t incarnation, const std::string& severity,
                             const std::string& state, const std::string& why, int64_t now_wall_ns);

// The page of a restart storm that holds automatic resume: `m` (the host's page for the verdict
// the job was preempted on, with its suspects) becomes a warning, state "restart-storm", that
// says `why`, for `incident` and `incarnation`; sent to `pagers` as an escalation of the incident.
void send_storm_page(PageDeliveries& deliveries, const std::vector<spec::Pager>& pagers,
                     PageMessage m, const std::string& job, int64_t incident, int64_t incarnation,
                     const std::string& why, int64_t now_wall_ns);

// The opt-in drain ([node_fault] drain, under Slurm): each blamed suspect host (SuspectHost::
// blamed: the culprit or cross-job rule; the short-run correlation alone drains nothing) of the
// report not yet in `drained` is drained through `slurm` (scontrol update NodeName=... State=DRAIN)
// with the job and the first line of its evidence as the reason, and added to `drained`. One line
// per host says what happened (drained, or why not), for the host's log and the incident's actions.
struct DrainLine {
  std::string line;
  bool ok = false;
};
class SlurmControl;
std::vector<DrainLine> drain_suspects(const SlurmControl& slurm, const NodeFaultReport& report,
                                      const std::string& job, std::set<std::string>& drained);

}  // namespace stepwatch::runbook
