// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// runbook.resume_owner = "stepwatch" (the default): the host starts the next incarnation itself.
// `stepwatch run` relaunches its command (or runbook.resume_command) with the checkpoint in
// STEPWATCH_RESUME_CHECKPOINT; a multi-node job's leader moves the incarnation key, and every
// node's `stepwatch run --coord` relaunches. With resume = false the job is left to its owner.
#include "src/runbook/resume_owner.h"

namespace stepwatch::runbook {

namespace {

class StepwatchOwner final : public ResumeOwner {
 public:
  explicit StepwatchOwner(std::vector<std::string> command) : command_(std::move(command)) {}
  const char* name() const override { return "stepwatch"; }
  ResumePlan plan(const OwnerRequest& /*r*/, OwnerNotes& /*notes*/) override {
    return ResumePlan::of(ResumePlan::Kind::kRelaunch);
  }
  ResumePlan stop(const OwnerRequest& /*r*/, OwnerNotes& /*notes*/) override {
    return ResumePlan::of(ResumePlan::Kind::kStopped);
  }
  std::string describe() const override {
    if (command_.empty()) return "the original command (STEPWATCH_RESUME_CHECKPOINT)";
    std::string out;
    for (const auto& a : command_)
      out += (out.empty() ? "" : " ") + (a.find(' ') == std::string::npos ? a : "'" + a + "'");
    return out;
  }

 private:
  std::vector<std::string> command_;  // runbook.resume_command; empty: the original one
};

}  // namespace

std::unique_ptr<ResumeOwner> make_stepwatch_owner(const spec::JobSpec& spec) {
  return std::make_unique<StepwatchOwner>(spec.runbook.resume_command);
}

}  // namespace stepwatch::runbook
