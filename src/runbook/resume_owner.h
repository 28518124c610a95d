// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Who starts a job's next incarnation after the watchdog preempted it (spec runbook.resume_owner;
// docs/run.md, docs/slurm.md, docs/kubernetes.md). One implementation per scheduler, each in a
// file of its own, all made in one place (make_resume_owner):
//   stepwatch   resume_stepwatch.cpp   the host relaunches it (stepwatch run its child; the job
//                                      leader moves the incarnation key for its launchers)
//   slurm       resume_slurm.cpp       fenced `scontrol requeue`, or an exit with RequeueExit;
//                                      `scancel` when the job must stop; drains suspect nodes
//   kubernetes  resume_kubernetes.cpp  an exit with the code the pod failure policy restarts
// An owner answers with a plan; the host applies it (runbook/resume.h). A new scheduler is one
// file here, one value of spec::ResumeOwner, one spec section and one row of make_resume_owner.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/runbook/node_fault_history.h"
#include "src/spec/spec.h"

namespace stepwatch::runbook {

// The scheduler's batch job the ending incarnation runs in: what a requeue is fenced by (the
// restart count it started with) and what a cancel names.
struct BatchJob {
  std::string scheduler;  // "slurm"
  std::string id;         // its job id, validated where it was read
  int64_t restarts = 0;
  // The job directory's owner: the only user whose batch job a requeue or cancel may touch (the
  // id came from the environment or etcd). nullopt: unknown, and nothing is done.
  std::optional<uint32_t> owner_uid = std::nullopt;
};

// What the owner is told about the job.
struct OwnerRequest {
  std::string job;          // the stepwatch job id
  int64_t incarnation = 0;  // the one to start
  // The batch job the ending incarnation runs in, or why it is not known.
  Result<BatchJob> batch = Error{Errc::kNotFound, "no batch job"};
};

// What the owner did, or leaves to the host.
struct ResumePlan {
  enum class Kind {
    kRelaunch,    // the host starts the next incarnation itself
    kExit,        // the host ends with exit_code; the scheduler restarts the job on it
    kRequeued,    // the scheduler requeued the job (done): the host records it and ends
    kNotResumed,  // nothing starts it (a fence refused, the batch job is unknown): detail says
    kFailed,      // the owner's command failed (detail): a host that stays may try again
    kStopped,     // resume = false and nothing to cancel (or the cancel failed: detail)
    kCancelled,   // resume = false: the scheduler's job was cancelled (never requeued)
    kGaveUp,      // the restart budget is spent (runbook/resume.h says this one)
  };
  Kind kind = Kind::kRelaunch;
  int exit_code = 0;          // kExit
  std::string scheduler;      // "slurm", "kubernetes": recorded with the next incarnation
  std::string scheduler_job;  // the batch job, when known
  // kExit: who restarts on the code ("Slurm's RequeueExit", "Kubernetes") and what it does
  // ("requeue job 7", "restart the pod"); else one line: what happened, or why not.
  std::string by;
  std::string detail;

  static ResumePlan of(Kind kind, std::string detail = {}) {
    ResumePlan p;
    p.kind = kind;
    p.detail = std::move(detail);
    return p;
  }
};

// Where an owner writes the actions it takes while it takes them (a cancel ends the process
// that asked for it, so its line is recorded before).
class OwnerNotes {
 public:
  virtual ~OwnerNotes() = default;
  virtual void note(bool ok, const std::string& line) = 0;
};

class ResumeOwner {
 public:
  virtual ~ResumeOwner() = default;
  // spec::resume_owner_name's: "stepwatch", "slurm", "kubernetes".
  virtual const char* name() const = 0;
  // The next incarnation: started by the host, by an exit, or requeued here.
  virtual ResumePlan plan(const OwnerRequest& r, OwnerNotes& notes) = 0;
  // runbook.resume = false: the job stays stopped.
  virtual ResumePlan stop(const OwnerRequest& r, OwnerNotes& notes) = 0;
  // [node_fault] drain: whether the scheduler can keep the next placement away from a host, and
  // before the restart, the suspect hosts so drained (each once: `drained`).
  virtual bool can_drain() const { return false; }
  virtual std::vector<DrainLine> drain(const NodeFaultReport& /*report*/,
                                       const std::string& /*job*/,
                                       std::set<std::string>& /*drained*/) {
    return {};
  }
  // Whether the scheduler restarted `batch` since the incarnation started with it (Slurm: its
  // Restarts moved): why, if so. Then this incarnation is a leftover, and must stand down. An
  // error says that the scheduler could not be asked.
  virtual Result<std::optional<std::string>> superseded(const BatchJob& /*batch*/) const {
    return std::optional<std::string>();
  }
  // Whether the owner acts on the scheduler's batch job (OwnerRequest::batch): a tool that
  // checks its rights (stepwatch doctor) must know which job.
  virtual bool needs_batch_job() const { return false; }
  // How the owner resumes a job, for `stepwatch check-spec` ("by Kubernetes (exit 75)").
  virtual std::string describe() const = 0;
};

// The owner the spec names (runbook.resume_owner), with its section's settings.
std::unique_ptr<ResumeOwner> make_resume_owner(const spec::JobSpec& spec);

// One file each (resume_<name>.cpp).
std::unique_ptr<ResumeOwner> make_stepwatch_owner(const spec::JobSpec& spec);
std::unique_ptr<ResumeOwner> make_slurm_owner(const spec::JobSpec& spec);
std::unique_ptr<ResumeOwner> make_kubernetes_owner(const spec::JobSpec& spec);

}  // namespace stepwatch::runbook
