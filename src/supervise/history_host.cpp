// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The supervisor's side of the node-fault history (runbook/node_fault.h, docs/node-fault.md):
// every incarnation's start and end go to the store, with the culprits' hosts it implicates, and
// a page names the hosts the rules suspect, with their evidence and an exclusion hint.
#include <fmt/format.h>

#include "src/common/host.h"
#include "src/runbook/node_fault.h"
#include "src/runbook/node_fault_history.h"
#include "src/supervise/supervisor.h"

namespace stepwatch::supervise {

std::string Supervisor::node_name() const {
  // Slurm's node name is what --exclude and a drain take; elsewhere the host name.
  return opt_.scheduler.node.empty() ? short_hostname() : opt_.scheduler.node;
}

void Supervisor::history_started(int64_t started_ns) {
  store::IncarnationRecord r;
  r.job = opt_.job;
  r.incarnation = state_.incarnation;
  r.started_ns = started_ns;
  r.hosts = {node_name()};
  if (auto batch = opt_.scheduler.batch_job()) r.scheduler_id = batch->scheduler + ":" + batch->id;
  if (auto st = store_->record_incarnation(r); !st) say(st.error().message);
}

void Supervisor::history_ended(std::string_view reason, const detect::Verdict* v) {
  // Every rank of `stepwatch run` is on this node: a culprit without a host is here.
  store::IncarnationRecord r = runbook::ended_incarnation(opt_.job, state_.incarnation, reason, v,
                                                          node_name(), wall_now_ns());
  r.checkpoint_step = state_.checkpoint_step;
  runbook::StoreHistory history(*store_);
  if (auto st = runbook::record_ended(history, r); !st) say(st.error().message);
}

void Supervisor::add_node_fault(runbook::PageMessage& m) {
  runbook::StoreHistory history(*store_);
  if (auto st = runbook::add_node_fault(m, history, opt_.job, spec_.node_fault,
                                        spec::resume_owner_name(spec_.runbook.resume_owner),
                                        wall_now_ns());
      !st) {
    say("node-fault history not read: " + st.error().message);
  }
}

}  // namespace stepwatch::supervise
