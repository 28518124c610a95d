// The supervisor's side of the node-fault history (runbook/node_fault.h, docs/node-fault.md):
// every incarnation's start and end go to the store, with the culprits' hosts it implicates, and
// a page names the hosts the rules suspect, with their evidence and an exclusion hint.
#include <fmt/format.h>

#include "src/common/host.h"
#include "src/runbook/node_fault.h"
#include "src/runbook/node_fault_history.h"
#include "src/runbook/slurm.h"
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
  if (opt_.scheduler.kind == spec::ResumeOwner::kSlurm)
    r.scheduler_id = "slurm:" + opt_.scheduler.job_id;
  if (auto st = store_->record_incarnation(r); !st) say(st.error().message);
}

void Supervisor::history_ended(std::string_view reason, const detect::Verdict* v) {
  // Every rank of `stepwatch run` is on this node: a culprit without a host is here.
  store::IncarnationRecord r = runbook::ended_incarnation(opt_.job, state_.incarnation, reason, v,
                                                          node_name(), wall_now_ns());
  r.checkpoint_step = state_.checkpoint_step;
  runbook::StoreHistory history(*store_);
  if (auto st = runbook::record_ended(history, r); !st) say(st.error().message);
  if (spec_.node_fault.drain && spec_.runbook.resume_owner == spec::ResumeOwner::kSlurm &&
      opt_.scheduler.kind == spec::ResumeOwner::kSlurm) {
    drain_suspects();
  }
}

void Supervisor::drain_suspects() {
  // Opt-in ([node_fault] drain): before the next incarnation is requeued, so Slurm places it
  // elsewhere. Draining needs operator rights (stepwatch doctor says whether it has them).
  runbook::StoreHistory history(*store_);
  auto report = runbook::read_node_fault(history, opt_.job, spec_.node_fault, wall_now_ns());
  if (!report) {
    say("node-fault history not read: " + report.error().message);
    return;
  }
  for (const auto& d :
       runbook::drain_suspects(runbook::SlurmControl(spec_.slurm), *report, opt_.job, drained_)) {
    say(d.line);
    record_action(store::action_kind::kNote, d.ok, d.line);
  }
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

bool Supervisor::hold_for_storm(const Resumption& next) {
  int64_t now = wall_now_ns();
  runbook::StoreHistory history(*store_);
  auto report = runbook::read_node_fault(history, opt_.job, spec_.node_fault, now);
  if (!report) {
    say("node-fault history not read: " + report.error().message);
    return false;
  }
  const auto& storm = report->storm;
  if (!storm || !runbook_->id() || *runbook_->id() <= 0) return false;
  int64_t id = *runbook_->id();
  std::string why = fmt::format(
      "restart storm: {}; automatic resume held until acked (stepwatch ack {} --state-dir {}), "
      "then from {}",
      storm->evidence, opt_.job, opt_.state_dir, next.from);
  say(why);
  record_action(store::action_kind::kNote, true, why);
  runbook::send_storm_page(*deliveries_, spec_.runbook.pagers, page(acted_on_), opt_.job, id,
                           state_.incarnation, why, now);
  held_ = Hold{next, id, now};
  return true;
}

Supervisor::Next Supervisor::release_hold(Stamp now) {
  // Every ack is an action of the incident: one after the hold began releases it (an earlier
  // ack of the stall does not).
  auto actions = store_->actions(held_->incident);
  if (!actions) return Next::kContinue;
  bool acked = false;
  for (const auto& a : *actions) {
    acked = acked || (a.kind == store::action_kind::kAck && a.at_ns >= held_->since_wall_ns);
  }
  if (!acked) return Next::kContinue;
  say("restart storm: acked; starting the next incarnation");
  Resumption next = std::move(held_->next);
  held_.reset();
  next_ = Next::kContinue;
  runbook::AfterPreempt after = start_next(next);
  runbook_->close(now,
                  after.resolution.empty() ? "resumed after a restart storm" : after.resolution);
  return next_;
}

}  // namespace stepwatch::supervise
