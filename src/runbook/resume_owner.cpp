// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one place a resume owner is made from the spec: a row per scheduler.
#include "src/runbook/resume_owner.h"

namespace stepwatch::runbook {

namespace {

struct OwnerRow {
  spec::ResumeOwner owner;
  std::unique_ptr<ResumeOwner> (*make)(const spec::JobSpec& spec);
};

constexpr OwnerRow kOwners[] = {
    {spec::ResumeOwner::kStepwatch, &make_stepwatch_owner},
    {spec::ResumeOwner::kSlurm, &make_slurm_owner},
    {spec::ResumeOwner::kKubernetes, &make_kubernetes_owner},
};

}  // namespace

std::unique_ptr<ResumeOwner> make_resume_owner(const spec::JobSpec& spec) {
  for (const auto& row : kOwners) {
    if (row.owner == spec.runbook.resume_owner) return row.make(spec);
  }
  return make_stepwatch_owner(spec);  // the spec's reader admits no other value
}

}  // namespace stepwatch::runbook
