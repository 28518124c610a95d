// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// JobSpec's defaults and lookups; the loader is spec.cpp, the rules are rules.cpp.
#include "src/spec/spec.h"

namespace stepwatch::spec {

const char* log_preset_name(LogPreset preset) {
  auto i = static_cast<size_t>(preset);
  // The names are literals, so each view's data() ends in a NUL.
  return i < std::size(kLogPresetNames) ? kLogPresetNames[i].data() : "?";
}

const char* checkpoint_source_name(CheckpointSource source) {
  return source == CheckpointSource::kMarker ? "marker" : "beacon";
}

const char* pager_kind_name(PagerKind kind) {
  switch (kind) {
    case PagerKind::kWebhook:
      return "webhook";
    case PagerKind::kAlertmanager:
      return "alertmanager";
    case PagerKind::kCommand:
      return "command";
  }
  return "?";
}

const char* resume_owner_name(ResumeOwner owner) {
  switch (owner) {
    case ResumeOwner::kStepwatch:
      return "stepwatch";
    case ResumeOwner::kSlurm:
      return "slurm";
    case ResumeOwner::kKubernetes:
      return "kubernetes";
  }
  return "?";
}

const char* slurm_requeue_name(SlurmRequeue how) {
  return how == SlurmRequeue::kScontrol ? "scontrol" : "exit";
}

std::map<std::string, PhaseBudget, std::less<>> builtin_phases() {
  constexpr int64_t kMin = 60 * kNsPerSec;
  return {
      {"init", {10 * kMin, false}},         {"compile", {30 * kMin, false}},
      {"compile_warm", {10 * kMin, false}}, {"data", {10 * kMin, false}},
      {"eval", {30 * kMin, false}},         {"checkpoint", {15 * kMin, false}},
      {"finish", {10 * kMin, false}},
  };
}

const PhaseBudget* JobSpec::phase(std::string_view name, bool warm) const {
  if (warm && name == "compile") {
    if (auto it = phases.find(std::string_view("compile_warm")); it != phases.end())
      return &it->second;
  }
  auto it = phases.find(name);
  return it == phases.end() ? nullptr : &it->second;
}

std::optional<int64_t> JobSpec::stall_after_ns() const {
  if (!expected_interval_ns) return std::nullopt;
  return static_cast<int64_t>(static_cast<double>(*expected_interval_ns) * grace_intervals);
}

JobSpec default_spec() {
  return JobSpec{};
}

}  // namespace stepwatch::spec
