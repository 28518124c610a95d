// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The detectors stepwatch is measured against in `make bench` (bench/detection_bench.cpp).
// Each sees the same observations and answers one question: has it fired yet?
#pragma once

#include <memory>
#include <string>

#include "src/detect/observation.h"

namespace stepwatch::detect {

class Baseline {
 public:
  virtual ~Baseline() = default;
  virtual std::string name() const = 0;
  // True when this observation makes the detector fire (a page / a kill).
  virtual bool observe(const Observation& obs) = 0;
};

// A fixed no-progress timeout, NCCL's default of 10 minutes: fires when any rank has gone that
// long without a step (counting from its start before the first one).
std::unique_ptr<Baseline> make_fixed_timeout(int64_t timeout_ns = 10 * 60 * kNsPerSec);

// NVIDIA resiliency extension style: an initial timeout until two intervals were seen, then
// `factor` x the largest interval seen so far (phases included: it has no labels).
std::unique_ptr<Baseline> make_calculated_timeout(double factor = 5.0,
                                                  int64_t initial_ns = 30 * 60 * kNsPerSec);

// "GPUs idle": every reporting GPU below `threshold_pct` SM for `window_ns`. Never fires
// without GPU facts.
std::unique_ptr<Baseline> make_sm_idle(double threshold_pct = 10.0,
                                       int64_t window_ns = 5 * 60 * kNsPerSec);

}  // namespace stepwatch::detect
