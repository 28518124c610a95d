// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The scheduler a job runs under, as the environment of `stepwatch run` says, and the one rule
// that keeps restarts with one owner: the spec's runbook.resume_owner must be where the job runs.
// The counters that become the incarnation (docs/slurm.md, docs/kubernetes.md):
//   Slurm       SLURM_JOB_ID, SLURM_RESTART_COUNT (unset on the first run, then 1, 2, ...)
//   Kubernetes  KUBERNETES_SERVICE_HOST, and STEPWATCH_INCARNATION from the JobSet label
//               jobset.sigs.k8s.io/restart-attempt through the downward API
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "src/common/result.h"
#include "src/contract/identity.h"
#include "src/runbook/resume_owner.h"
#include "src/spec/spec.h"

namespace stepwatch::runbook {

using GetEnv = contract::GetEnv;

struct SchedulerContext {
  spec::ResumeOwner kind = spec::ResumeOwner::kStepwatch;  // kStepwatch: no scheduler found
  std::string job_id;  // Slurm's job id, checked (contract::validate_slurm_job_id); "" elsewhere
  // The scheduler's restart counter for this run; nullopt where it has none to give.
  std::optional<int64_t> restart_count;
  std::string node;  // SLURMD_NODENAME under Slurm; "" elsewhere

  // "Slurm job 1234", "Kubernetes", "no scheduler".
  std::string describe() const;
  // Whether the job runs under a scheduler at all.
  bool present() const;
  // The batch job this run is (Slurm: its id and restart count), or why there is none.
  Result<BatchJob> batch_job() const;
};

// Errors name the variable and its value (SLURM_RESTART_COUNT=x is not a count); SLURM_JOB_ID
// must be a Slurm job id (contract::validate_slurm_job_id).
Result<SchedulerContext> scheduler_from_env(const GetEnv& getenv);

// What a command was told of its job: the id it was given (and how the command names that
// source), and its spec's `job` where it reads a spec.
struct JobIdGiven {
  std::string_view value;                    // "": none given
  std::string_view as = "--job";             // "--job"; ack: "the job argument"
  std::optional<std::string_view> spec_job;  // nullopt: the command reads no spec
  // false (`status`, `incidents`): none found is "" (every job), not an error.
  bool required = true;
};

// The job id of a command run for one job, one rule for `run`, `run --coord`, `doctor`, `ack`,
// and for `status` and `incidents` without a job (docs/run.md, "The job id"): the one given, else
// the spec's `job`, else $STEPWATCH_JOB (the Kubernetes manifests set it to the JobSet's name),
// else under Slurm "slurm-<SLURM_JOB_ID>", which every requeue of the batch job keeps. The result
// is a valid job id; the error of none names every way this command has to give one, that of a bad
// one its source.
Result<std::string> job_id_for(const JobIdGiven& given, const SchedulerContext& ctx,
                               const GetEnv& getenv);

// Refuses a resume owner that is not where the job runs: a scheduler that is not there would
// never restart the job. Errors name runbook.resume_owner and what the environment lacks.
Status check_resume_owner(spec::ResumeOwner owner, const SchedulerContext& ctx);

// The incarnation `stepwatch run` starts: the scheduler's counter when it gives one, but never
// below the store's next (a new batch job under a job id the store knows goes on counting).
int64_t first_incarnation(const SchedulerContext& ctx, std::optional<int64_t> stored);

}  // namespace stepwatch::runbook
