// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The labeled scenario corpus: each scenario is a simulated run with the spec it runs under and
// its truth (when a stall began, which ranks are at fault).
#pragma once

#include <string>
#include <vector>

#include "src/detect/observation.h"
#include "src/trace/codec.h"

namespace stepwatch::bench {

struct Scenario {
  std::string name;
  std::string description;
  std::string spec_toml;
  int64_t poll_ns = 0;
  trace::Truth truth;
  std::vector<detect::Observation> observations;
};

std::vector<Scenario> make_scenarios(unsigned seed = 42);

// Writes a scenario as a replayable trace, its spec and truth in the header (docs/replay.md).
Status write_trace(const Scenario& s, const std::string& path);

}  // namespace stepwatch::bench
