// The job leader's resume when a scheduler owns the job's restarts (runbook.resume_owner;
// docs/slurm.md, "Multi-node jobs"). With [slurm] requeue = "exit", or under Kubernetes, the
// incarnation key tells the launchers to exit with the code the scheduler restarts on
// (resume_by_exit). Otherwise: The launchers of the incarnation name the batch job and the
// restart count it started with; the leader requeues it through runbook::SlurmControl, fenced by
// that count, and then records the requeue as the job's next incarnation in etcd (CAS, fenced
// by its leadership): a next leader after a failover finds the incarnation moved and does not
// requeue again. Requeue first, record second: a leader lost in between leaves an unrecorded
// requeue, which the restart-count fence refuses to repeat and the rerun's launchers record
// themselves (SLURM_RESTART_COUNT above the key moves it up).
#include <fmt/format.h>

#include "src/agent/agent.h"
#include "src/agent/tracked.h"
#include "src/common/log.h"
#include "src/coord/incarnation.h"
#include "src/runbook/slurm.h"

namespace stepwatch::agent {

runbook::AfterPreempt Agent::requeue_by_slurm(Tracked& t, const std::string& done,
                                              const std::vector<coord::LauncherRecord>& launchers,
                                              const coord::JobIncarnation& from,
                                              coord::IncarnationRecord to) {
  if (t.spec.slurm.requeue == spec::SlurmRequeue::kExit) {
    auto run = coord::slurm_run_of(launchers, t.incarnation);
    to.scheduler = "slurm";
    to.scheduler_job = run ? run->job : "";
    to.exit_code = t.spec.slurm.requeue_exit_code;
    return resume_by_exit(t, done, from, std::move(to));
  }
  auto run = coord::slurm_run_of(launchers, t.incarnation);
  if (!run) {
    log_warn("agent: job {}: runbook.resume_owner = \"slurm\", but {}: not requeued", t.job,
             run.error().message);
    return {true, fmt::format("{}; not requeued: {}", done, run.error().message)};
  }
  auto r = runbook::SlurmControl(t.spec.slurm).requeue(run->job, run->restarts);
  if (!r) {
    log_warn("agent: job {}: requeueing Slurm job {} failed ({}): the incident stays open", t.job,
             run->job, r.error().message);
    return {false, ""};
  }
  if (!r->requeued) {
    log_info("agent: job {}: {}", t.job, r->detail);
    return {true, fmt::format("{}; {}", done, r->detail)};
  }
  to.scheduler = "slurm";
  to.scheduler_job = run->job;
  auto recorded = t.orders->advance(from, to, t.coord->fence());
  if (!recorded || !*recorded) {
    log_warn(
        "agent: job {}: {}, but the requeue was not recorded as incarnation {} in etcd ({}): the "
        "rerun's launchers record it from SLURM_RESTART_COUNT, and the restart-count fence keeps "
        "a next leader from requeueing again",
        t.job, r->detail, to.incarnation,
        recorded ? "the counter moved or the fence failed" : recorded.error().message);
  } else {
    log_info("agent: job {}: {}: Slurm starts incarnation {}{}", t.job, r->detail, to.incarnation,
             to.resume_from.empty() ? "" : " from " + to.resume_from);
  }
  return {true, fmt::format("{}; {}; next incarnation {}{}", done, r->detail, to.incarnation,
                            to.resume_from.empty() ? "" : " from " + to.resume_from)};
}

runbook::AfterPreempt Agent::resume_by_exit(Tracked& t, const std::string& done,
                                            const coord::JobIncarnation& from,
                                            coord::IncarnationRecord to) {
  // The incarnation key says it once (CAS, fenced): every launcher exits with the code, and the
  // scheduler restarts the job on it; a next leader finds the key moved and does nothing.
  if (!advance_incarnation(t, from, to)) return {false, ""};
  std::string said = fmt::format(
      "its launchers exit with {} for {} to restart it as incarnation {}{}", *to.exit_code,
      to.scheduler == "slurm" ? "Slurm's RequeueExit" : std::string("Kubernetes"), to.incarnation,
      to.resume_from.empty() ? "" : " from " + to.resume_from);
  log_info("agent: job {}: {}", t.job, said);
  return {true, fmt::format("{}; {}", done, said)};
}

runbook::AfterPreempt Agent::cancel_by_slurm(Tracked& t, const std::string& done) {
  // resume = false: the job must stay stopped, and a plain end could be requeued by Slurm
  // (RequeueExit, a node failure): CANCELLED never is.
  auto launchers = t.orders->launchers();
  if (!launchers) {
    return {true, fmt::format("{}; runbook.resume = false; not cancelled: {}", done,
                              launchers.error().message)};
  }
  auto run = coord::slurm_run_of(*launchers, t.incarnation);
  if (!run) {
    return {true, fmt::format("{}; runbook.resume = false; not cancelled: {}", done,
                              run.error().message)};
  }
  if (auto st = runbook::SlurmControl(t.spec.slurm).cancel(run->job); !st) {
    log_warn("agent: job {}: scancel {} failed: {}", t.job, run->job, st.error().message);
    return {true, fmt::format("{}; runbook.resume = false; scancel {} failed: {}", done, run->job,
                              st.error().message)};
  }
  log_info("agent: job {}: runbook.resume = false: Slurm job {} cancelled", t.job, run->job);
  return {true, fmt::format("{}; runbook.resume = false: Slurm job {} cancelled", done, run->job)};
}

}  // namespace stepwatch::agent
