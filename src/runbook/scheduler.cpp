// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/scheduler.h"

#include <fmt/format.h>

#include <algorithm>

#include "src/contract/names.h"

namespace stepwatch::runbook {

namespace {

const char* value(const GetEnv& getenv, const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// A restart counter: contract::int_var, and a whole number >= 0.
Result<std::optional<int64_t>> count(const GetEnv& getenv, const char* name) {
  auto n = contract::int_var(getenv, name);
  if (n && (!*n || (**n >= 0 && **n <= 1'000'000'000))) return n;
  return Error{
      Errc::kInvalidArgument,
      fmt::format("{}={} is not a restart count (a whole number >= 0)", name, getenv(name))};
}

}  // namespace

std::string SchedulerContext::describe() const {
  switch (kind) {
    case spec::ResumeOwner::kSlurm:
      return fmt::format("Slurm job {}", job_id);
    case spec::ResumeOwner::kKubernetes:
      return "Kubernetes";
    case spec::ResumeOwner::kStepwatch:
      break;
  }
  return "no scheduler";
}

bool SchedulerContext::present() const {
  return kind != spec::ResumeOwner::kStepwatch;
}

Result<BatchJob> SchedulerContext::batch_job() const {
  if (kind != spec::ResumeOwner::kSlurm || job_id.empty())
    return Error{Errc::kNotFound, fmt::format("{} runs no batch job", describe())};
  return BatchJob{"slurm", job_id, restart_count.value_or(0)};
}

Result<SchedulerContext> scheduler_from_env(const GetEnv& getenv) {
  SchedulerContext ctx;
  if (const char* id = value(getenv, "SLURM_JOB_ID")) {
    // It reaches scontrol and scancel, and through the launcher key the root agent's: checked
    // where it is read.
    if (auto st = contract::validate_slurm_job_id(id); !st)
      return Error{st.error().code, "SLURM_JOB_ID: " + st.error().message};
    ctx.kind = spec::ResumeOwner::kSlurm;
    ctx.job_id = id;
    auto n = count(getenv, "SLURM_RESTART_COUNT");
    if (!n) return n.error();
    ctx.restart_count = n->value_or(0);  // unset on the first run
    if (const char* node = value(getenv, "SLURMD_NODENAME")) ctx.node = node;
    return ctx;
  }
  if (value(getenv, "KUBERNETES_SERVICE_HOST") != nullptr) {
    ctx.kind = spec::ResumeOwner::kKubernetes;
    auto n = count(getenv, "STEPWATCH_INCARNATION");
    if (!n) return n.error();
    ctx.restart_count = *n;
  }
  return ctx;
}

Result<std::string> job_id_for(const JobIdGiven& given, const SchedulerContext& ctx,
                               const GetEnv& getenv) {
  std::string id, from;
  if (!given.value.empty()) {
    id = given.value;
    from = given.as;
  } else if (given.spec_job && !given.spec_job->empty()) {
    id = *given.spec_job;
    from = "the spec's job";
  } else if (const char* e = value(getenv, "STEPWATCH_JOB")) {
    id = e;
    from = "STEPWATCH_JOB";
  } else if (ctx.kind == spec::ResumeOwner::kSlurm && !ctx.job_id.empty()) {
    id = "slurm-" + ctx.job_id;
    from = "SLURM_JOB_ID";
  } else if (!given.required) {
    return std::string();
  } else {
    return Error{Errc::kInvalidArgument,
                 fmt::format("no job id: give {}{}, set STEPWATCH_JOB, or run inside a Slurm job "
                             "(slurm-<SLURM_JOB_ID>)",
                             given.as, given.spec_job ? ", set job in the spec" : "")};
  }
  if (auto st = contract::validate_job_id(id); !st)
    return Error{st.error().code, fmt::format("{}: {}", from, st.error().message)};
  return id;
}

Status check_resume_owner(spec::ResumeOwner owner, const SchedulerContext& ctx) {
  if (owner == spec::ResumeOwner::kStepwatch || owner == ctx.kind) return {};
  if (owner == spec::ResumeOwner::kSlurm) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("runbook.resume_owner = \"slurm\", but SLURM_JOB_ID is not set ({}): "
                             "outside a Slurm batch job nothing would requeue it",
                             ctx.describe())};
  }
  return Error{Errc::kInvalidArgument,
               fmt::format("runbook.resume_owner = \"kubernetes\", but KUBERNETES_SERVICE_HOST is "
                           "not set ({}): outside a pod nothing would restart it",
                           ctx.describe())};
}

int64_t first_incarnation(const SchedulerContext& ctx, std::optional<int64_t> stored) {
  int64_t next = stored ? *stored + 1 : 0;
  if (!ctx.restart_count) return next;
  return std::max(next, *ctx.restart_count);
}

}  // namespace stepwatch::runbook
