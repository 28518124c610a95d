// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch replay`: the detector over recorded traces with a simulated clock.
#pragma once

#include <string>
#include <vector>

namespace stepwatch::cli {

struct ReplayOptions {
  std::vector<std::string> traces;
  std::string spec_path;  // overrides the spec recorded in the trace
  bool json = false;      // one JSON object per transition
  bool all = false;       // every poll, not only transitions
};

// Prints the verdict timeline of each trace. Returns 0 when every trace was read cleanly, 1 when
// some lines were bad (they are reported and skipped; the rest is replayed), 2 when a trace or
// the spec could not be used at all.
int run_replay(const ReplayOptions& options);

}  // namespace stepwatch::cli
