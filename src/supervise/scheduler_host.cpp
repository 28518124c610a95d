// The supervisor when a scheduler owns the job's restarts (runbook.resume_owner, docs/slurm.md,
// docs/kubernetes.md): after the preempt it asks the scheduler for the next incarnation and
// exits, instead of relaunching the command itself.
//   slurm       `scontrol requeue`, fenced by the restart count this incarnation started with;
//               or an exit with the cluster's RequeueExit code; `scancel` when it must stop
//   kubernetes  an exit with the "requeue me" code that the pod failure policy restarts
#include <fmt/format.h>

#include "src/runbook/slurm.h"
#include "src/supervise/supervisor.h"

namespace stepwatch::supervise {

bool Supervisor::superseded() {
  const auto& sched = opt_.scheduler;
  if (spec_.runbook.resume_owner != spec::ResumeOwner::kSlurm ||
      sched.kind != spec::ResumeOwner::kSlurm || !sched.restart_count) {
    return false;
  }
  // One scontrol per would-be incident or ending, not per poll: the controller serves the
  // whole cluster.
  auto job = runbook::SlurmControl(spec_.slurm).show(sched.job_id);
  if (!job) {
    say(
        fmt::format("cannot ask Slurm whether job {} was requeued ({}); going on as its current "
                    "incarnation",
                    sched.job_id, job.error().message));
    return false;
  }
  if (job->restarts == *sched.restart_count) return false;
  std::string why = fmt::format(
      "standing down: Slurm job {} was requeued since this incarnation started (Restarts {} -> "
      "{}), so incarnation {} is a leftover; no incident, no page, no requeue (the fence). The "
      "next incarnation's hygiene ends what is left of it",
      sched.job_id, *sched.restart_count, job->restarts, state_.incarnation);
  say(why);
  record_action(store::action_kind::kNote, true, why);
  stood_down_ = true;
  return true;
}

bool Supervisor::may_open(const detect::Verdict&, Stamp) {
  return !superseded();
}

runbook::AfterPreempt Supervisor::resume_by_scheduler(const std::string& from) {
  const auto& sched = opt_.scheduler;
  next_ = Next::kExit;
  if (auto st = store_->save_state(state_); !st) say(st.error().message);
  if (spec_.runbook.resume_owner == spec::ResumeOwner::kKubernetes) {
    exit_code_ = spec_.kubernetes.requeue_exit_code;
    std::string why =
        fmt::format("exiting with {} for Kubernetes to restart the pod (next incarnation from {})",
                    exit_code_, from);
    say(why);
    record_action(store::action_kind::kResume, true, why);
    return {true, why};
  }
  if (spec_.slurm.requeue == spec::SlurmRequeue::kExit) {
    exit_code_ = spec_.slurm.requeue_exit_code;
    std::string why = fmt::format(
        "exiting with {} for Slurm's RequeueExit to requeue job {} (next incarnation from {})",
        exit_code_, sched.job_id, from);
    say(why);
    record_action(store::action_kind::kResume, true, why);
    return {true, why};
  }
  exit_code_ = spec::kExitStopped;
  auto r =
      runbook::SlurmControl(spec_.slurm).requeue(sched.job_id, sched.restart_count.value_or(0));
  if (!r) {
    std::string why = "not requeued: " + r.error().message;
    say(why);
    record_action(store::action_kind::kResume, false, why);
    return {true, why};
  }
  std::string why =
      r->requeued ? fmt::format("{}; next incarnation from {}", r->detail, from) : r->detail;
  say(why);
  record_action(r->requeued ? store::action_kind::kResume : store::action_kind::kNote, r->requeued,
                why);
  return {true, why};
}

runbook::AfterPreempt Supervisor::stop_for_scheduler(std::optional<int> own_exit) {
  // resume = false: the job must stop, and stay stopped. A plain exit could be requeued by
  // Slurm (75 is a common RequeueExit code), so under Slurm the job is cancelled: CANCELLED is
  // never requeued. Kubernetes' pod failure policy fails the job on 75 (docs/kubernetes.md).
  next_ = Next::kExit;
  exit_code_ = own_exit.value_or(spec::kExitStopped);
  if (spec_.runbook.resume_owner != spec::ResumeOwner::kSlurm) {
    return {true, own_exit ? fmt::format("ended with status {}; resume is off", *own_exit)
                           : "preempted; resume is off"};
  }
  const std::string& id = opt_.scheduler.job_id;
  // Recorded before scancel: cancelling the job ends this process too.
  std::string why = fmt::format("resume is off: cancelling Slurm job {} so it is not requeued", id);
  say(why);
  record_action(store::action_kind::kNote, true, why);
  if (auto st = runbook::SlurmControl(spec_.slurm).cancel(id); !st) {
    say("scancel failed: " + st.error().message);
    record_action(store::action_kind::kNote, false, "scancel failed: " + st.error().message);
    return {true, "preempted; resume is off; scancel failed: " + st.error().message};
  }
  return {true, fmt::format("preempted; resume is off; Slurm job {} cancelled", id)};
}

}  // namespace stepwatch::supervise
