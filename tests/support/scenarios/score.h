// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Runs a detector over a scenario and scores it against the scenario's truth.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/detect/verdict.h"
#include "tests/support/scenarios/scenarios.h"

namespace stepwatch::bench {

struct Score {
  std::string scenario;
  std::string detector;
  bool fired = false;
  int64_t fired_wall_ns = 0;
  bool false_page = false;            // fired with no stall, or before the stall began
  std::optional<int64_t> latency_ns;  // fire - stall start, for true stalls detected
  bool missed = false;                // a true stall never detected in the trace
  bool within_target = true;          // detected within truth.allowed_ns (true stalls only)
  std::optional<bool> culprit_ok;     // only where both the truth and the detector name ranks
  std::string verdict;                // stepwatch: state/cause and culprits at the fire
  double gpu_minutes = 0;             // 64 GPUs x (fire or trace end - stall start)
};

inline constexpr int kGpus = 64;
// Issue 27's target for the whole corpus: GPU-minutes burned between stall and page, all stalls.
inline constexpr double kGpuMinutesTarget = 400;

// stepwatch itself, configured from the scenario's spec. `early` false: the step-time rule
// alone (quiet_budget = "off"), for comparison in the same run.
Result<Score> score_stepwatch(const Scenario& s, bool early = true);
// The three baselines.
std::vector<Score> score_baselines(const Scenario& s);

}  // namespace stepwatch::bench
