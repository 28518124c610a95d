// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// runbook.resume_owner = "kubernetes" (docs/kubernetes.md): the host exits with
// [kubernetes] requeue_exit_code, which the Job's pod failure policy restarts (a JobSet restart
// gives the next incarnation). With resume = false the host exits otherwise: the policy fails
// the job on any other code.
#include <fmt/format.h>

#include "src/runbook/resume_owner.h"

namespace stepwatch::runbook {

namespace {

class KubernetesOwner final : public ResumeOwner {
 public:
  explicit KubernetesOwner(int exit_code) : exit_code_(exit_code) {}
  const char* name() const override { return "kubernetes"; }
  ResumePlan plan(const OwnerRequest& /*r*/, OwnerNotes& /*notes*/) override {
    ResumePlan p = ResumePlan::of(ResumePlan::Kind::kExit);
    p.exit_code = exit_code_;
    p.scheduler = "kubernetes";
    p.by = "Kubernetes";
    p.detail = "restart the pod";
    return p;
  }
  ResumePlan stop(const OwnerRequest& /*r*/, OwnerNotes& /*notes*/) override {
    return ResumePlan::of(ResumePlan::Kind::kStopped);
  }
  std::string describe() const override {
    return fmt::format("by Kubernetes (exit {})", exit_code_);
  }

 private:
  int exit_code_;
};

}  // namespace

std::unique_ptr<ResumeOwner> make_kubernetes_owner(const spec::JobSpec& spec) {
  return std::make_unique<KubernetesOwner>(spec.kubernetes.requeue_exit_code);
}

}  // namespace stepwatch::runbook
