// The store side of the node-fault rules (node_fault.h, docs/node-fault.md), shared by both
// runbook hosts (`stepwatch run`'s supervisor and `stepwatch agent`): how an ended incarnation
// is recorded with the hosts it implicates, how the rules' inputs are read, and what a page says
// of them. One definition, so that a page names the same hosts whichever process sends it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"
#include "src/detect/verdict.h"
#include "src/runbook/node_fault.h"
#include "src/runbook/pager.h"
#include "src/store/records.h"
#include "src/store/store.h"

namespace stepwatch::runbook {

// The end of one incarnation: `reason` ("failed", "preempted", ...), and from the verdict that
// ended it (null: none, a clean finish or a stop) its cause and culprits. A culprit's host is the
// one the verdict names, else `node` (a single-node job runs every rank there).
store::IncarnationRecord ended_incarnation(const std::string& job, int64_t incarnation,
                                           std::string_view reason, const detect::Verdict* v,
                                           const std::string& node, int64_t ended_wall_ns);

// Records the end (Store::record_incarnation: an upsert) and one implication per host
// implicated_hosts(r) names (idempotent). The first error is returned; the rest is still tried.
Status record_ended(store::Store& store, const store::IncarnationRecord& r);

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
Result<NodeFaultReport> read_node_fault(store::Store& store, const std::string& job,
                                        const NodeFaultPolicy& policy, int64_t now_wall_ns);

// The page's part: a "restart storm: ..." evidence line, and one PageSuspect per suspect host
// with its evidence and the exclusion hint for `scheduler` (spec::resume_owner_name, or an id
// like "slurm:1234"). An error reading the store leaves the page as it was and is returned.
Status add_node_fault(PageMessage& m, store::Store& store, const std::string& job,
                      const NodeFaultPolicy& policy, std::string_view scheduler,
                      int64_t now_wall_ns);
// The same from a report already read.
void add_node_fault(PageMessage& m, const NodeFaultReport& report, std::string_view scheduler);

}  // namespace stepwatch::runbook
