// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// runbook.resume_owner = "slurm" (docs/slurm.md): Slurm starts the next incarnation.
//   [slurm] requeue = "scontrol"  `scontrol requeue` of the batch job, fenced by the restart count
//                                 the ending incarnation started with (SlurmControl::requeue): a
//                                 moved count means someone else started the next one already
//   [slurm] requeue = "exit"      the host exits with requeue_exit_code, the cluster's RequeueExit
// resume = false cancels the batch job: a plain end could be requeued (RequeueExit, a node
// failure), CANCELLED never is. [node_fault] drain takes blamed suspect nodes out of placement
// before the requeue. A requeue or cancel touches the batch job only when its UserId is the job
// directory's owner (BatchJob::owner_uid), the host's to say.
#include <fmt/format.h>

#include "src/runbook/resume_owner.h"
#include "src/runbook/slurm.h"

namespace stepwatch::runbook {

namespace {

class SlurmOwner final : public ResumeOwner {
 public:
  explicit SlurmOwner(spec::SlurmSettings s) : s_(std::move(s)), slurm_(s_) {}
  const char* name() const override { return "slurm"; }
  bool needs_batch_job() const override { return true; }

  Result<std::optional<std::string>> superseded(const BatchJob& batch) const override {
    auto job = slurm_.show(batch.id);
    if (!job) {
      return Error{job.error().code,
                   fmt::format("cannot ask Slurm whether job {} was requeued ({})", batch.id,
                               job.error().message)};
    }
    if (job->restarts == batch.restarts) return std::optional<std::string>();
    return std::optional<std::string>(
        fmt::format("Slurm job {} was requeued since this incarnation started (Restarts {} -> {})",
                    batch.id, batch.restarts, job->restarts));
  }

  ResumePlan plan(const OwnerRequest& r, OwnerNotes& /*notes*/) override {
    ResumePlan p;
    p.scheduler = "slurm";
    if (r.batch) p.scheduler_job = r.batch->id;
    if (s_.requeue == spec::SlurmRequeue::kExit) {
      p.kind = ResumePlan::Kind::kExit;
      p.exit_code = s_.requeue_exit_code;
      p.by = "Slurm's RequeueExit";
      p.detail = r.batch ? fmt::format("requeue job {}", r.batch->id) : "requeue the job";
      return p;
    }
    if (!r.batch) {
      p.kind = ResumePlan::Kind::kNotResumed;
      p.detail = "not requeued: " + r.batch.error().message;
      return p;
    }
    auto q = slurm_.requeue(r.batch->id, r.batch->restarts, r.batch->owner_uid);
    if (!q) {
      p.kind = ResumePlan::Kind::kFailed;
      p.detail = "not requeued: " + q.error().message;
      return p;
    }
    p.kind = q->requeued ? ResumePlan::Kind::kRequeued : ResumePlan::Kind::kNotResumed;
    p.detail = q->detail;
    return p;
  }

  ResumePlan stop(const OwnerRequest& r, OwnerNotes& notes) override {
    ResumePlan p = ResumePlan::of(ResumePlan::Kind::kStopped);
    p.scheduler = "slurm";
    if (!r.batch) {
      p.detail = "not cancelled: " + r.batch.error().message;
      return p;
    }
    const std::string& id = r.batch->id;
    p.scheduler_job = id;
    // Said before scancel: cancelling the job may end the process that asked for it.
    notes.note(true,
               fmt::format("resume is off: cancelling Slurm job {} so it is not requeued", id));
    if (auto st = slurm_.cancel(id, r.batch->owner_uid); !st) {
      notes.note(false, "not cancelled: " + st.error().message);
      p.detail = fmt::format("Slurm job {} not cancelled: {}", id, st.error().message);
      return p;
    }
    p.kind = ResumePlan::Kind::kCancelled;
    p.detail = fmt::format("Slurm job {} cancelled", id);
    return p;
  }

  bool can_drain() const override { return true; }
  std::vector<DrainLine> drain(const NodeFaultReport& report, const std::string& job,
                               std::set<std::string>& drained) override {
    return drain_suspects(slurm_, report, job, drained);
  }

  std::string describe() const override {
    return s_.requeue == spec::SlurmRequeue::kScontrol
               ? "by Slurm (scontrol requeue, fenced by the restart count)"
               : fmt::format("by Slurm (exit {} for RequeueExit)", s_.requeue_exit_code);
  }

 private:
  spec::SlurmSettings s_;
  SlurmControl slurm_;
};

}  // namespace

std::unique_ptr<ResumeOwner> make_slurm_owner(const spec::JobSpec& spec) {
  return std::make_unique<SlurmOwner>(spec.slurm);
}

}  // namespace stepwatch::runbook
