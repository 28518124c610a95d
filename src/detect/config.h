// The detector's knobs, taken from the job spec (spec::JobSpec -> detect::Config in
// spec_adapter.h) so the detector itself needs no TOML. Defaults match docs/spec.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "src/common/clock.h"

namespace stepwatch::detect {

struct PhaseRule {
  int64_t budget_ns = 0;     // how long one stretch of this phase may last
  bool beats_renew = false;  // a beat restarts the phase's clock
};

struct Config {
  // Expected step interval; nullopt: learn it from the run.
  std::optional<int64_t> expected_interval_ns;
  // Intervals (or fractions of a phase budget) that may pass before `stalled`.
  double grace_intervals = 2.0;
  // Recent median interval above slow_factor x expected: `slow` (a ticket, never a kill).
  double slow_factor = 1.5;
  // A rank whose process is gone without a finish or failure record has *ended* while the
  // others follow within this long, or are visibly finishing; a rank still running (and not
  // finishing) past it makes the gone one `dead`. Short: a crash is acted on in seconds.
  int64_t exit_grace_ns = 5 * kNsPerSec;
  // Until the first step (and for the first warmup intervals) the init budget applies.
  int64_t init_budget_ns = 10 * 60 * kNsPerSec;
  // Labeled phases with their own budgets. "train" and "init" are not listed here.
  std::map<std::string, PhaseRule> phases = {
      {"compile", {30 * 60 * kNsPerSec, false}}, {"data", {10 * 60 * kNsPerSec, false}},
      {"eval", {30 * 60 * kNsPerSec, false}},    {"checkpoint", {15 * 60 * kNsPerSec, false}},
      {"finish", {10 * 60 * kNsPerSec, false}},
  };
  // Budget for "compile" in a warm restart (incarnation > 0): caches are warm, so shorter.
  std::optional<PhaseRule> compile_warm = PhaseRule{10 * 60 * kNsPerSec, false};
  // Intervals right after start that neither teach the learner nor fire faster than init.
  int warmup_steps = 3;
  int learn_window = 32;
  int learn_min_samples = 5;
};

}  // namespace stepwatch::detect
