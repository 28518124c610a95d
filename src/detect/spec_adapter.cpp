// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/detect/spec_adapter.h"

namespace stepwatch::detect {

Config config_from_spec(const spec::JobSpec& s) {
  Config c;
  c.expected_interval_ns = s.expected_interval_ns;
  c.grace_intervals = s.grace_intervals;
  c.slow_factor = s.slow_factor;
  c.exit_grace_ns = s.exit_grace_ns;
  c.warmup_steps = s.learn.warmup_steps;
  c.learn_window = s.learn.window;
  c.early = s.quiet_early;
  c.quiet_budget_ns = s.quiet_budget_ns;
  c.quiet_floor_ns = s.quiet_floor_ns;
  for (const auto& [name, b] : s.phases) {
    PhaseRule rule{b.budget_ns, b.beats_renew};
    if (name == "init") {
      c.init_budget_ns = b.budget_ns;
    } else if (name == "compile_warm") {
      c.compile_warm = rule;
    } else if (name != "train") {
      c.phases[name] = rule;
    }
  }
  return c;
}

Config default_config() {
  return config_from_spec(spec::default_spec());
}

}  // namespace stepwatch::detect
