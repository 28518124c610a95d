// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The detector's knobs, taken from the job spec (spec::JobSpec -> detect::Config in
// spec_adapter.h) so the detector itself needs no TOML. Their defaults are the spec's.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace stepwatch::detect {

// Intervals the learner needs before its median is trusted (not a spec setting).
inline constexpr int kLearnMinSamples = 5;

struct PhaseRule {
  int64_t budget_ns = 0;     // how long one stretch of this phase may last
  bool beats_renew = false;  // a beat restarts the phase's clock
};

// No defaults of its own: the job spec is the one source of them (spec.h, builtin_phases()).
// Build one with config_from_spec(spec::default_spec()) and change what a test needs; a bare
// Config{} is all zeros.
struct Config {
  // Expected step interval; nullopt: learn it from the run.
  std::optional<int64_t> expected_interval_ns;
  // Intervals (or fractions of a phase budget) that may pass before `stalled`.
  double grace_intervals = 0;
  // Recent median interval above slow_factor x expected: `slow` (a ticket, never a kill).
  double slow_factor = 0;
  // A rank whose process is gone without a finish or failure record has *ended* while the
  // others follow within this long, or are visibly finishing; a rank still running (and not
  // finishing) past it makes the gone one `dead`. Short: a crash is acted on in seconds.
  int64_t exit_grace_ns = 0;
  // Until the first step (and for the first warmup intervals) the init budget applies.
  int64_t init_budget_ns = 0;
  // Labeled phases with their own budgets. "train" and "init" are not listed here.
  std::map<std::string, PhaseRule> phases;
  // Budget for "compile" in a warm restart (incarnation > 0): caches are warm, so shorter.
  std::optional<PhaseRule> compile_warm;
  // Intervals right after start that neither teach the learner nor fire faster than init.
  int warmup_steps = 0;
  int learn_window = 0;
  // The detector's own, not the spec's: intervals needed before a learned one is trusted.
  int learn_min_samples = kLearnMinSamples;
  // The early rule (quiet.h): false turns it off (quiet_budget = "off").
  bool early = false;
  // A fixed quiet budget; nullopt: learned from the job's own healthy steps.
  std::optional<int64_t> quiet_budget_ns;
  // The least a learned quiet budget (and the early init budget) may be.
  int64_t quiet_floor_ns = 0;
};

}  // namespace stepwatch::detect
