// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Learning a job's expected step interval from its own run. Robust to heavy tails: the expected
// interval is a high quantile (p90) of a window of accepted intervals, not the mean, so an
// occasional slow step is "normal" and a real stall is not.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace stepwatch::detect {

// What a run taught us; persisted so a restart does not relearn from zero.
struct Learned {
  int64_t median_ns = 0;
  int64_t p90_ns = 0;
  int samples = 0;
};

class IntervalLearner {
 public:
  IntervalLearner(int window = 32, int min_samples = 5)
      : window_(window), min_samples_(min_samples) {}

  // An interval between two committed steps outside labeled phases, after warmup.
  void add(int64_t interval_ns);
  // Starts from what an earlier incarnation learned.
  void restore(const Learned& prior);

  // The frozen baseline: set once `window` samples were seen (or restored); before that, a
  // provisional value once `min_samples` exist.
  std::optional<Learned> baseline() const;
  bool frozen() const { return frozen_.has_value(); }
  // The last `n` accepted intervals' median and p90: how the job runs now.
  std::optional<Learned> recent(size_t n = 16) const;
  // The longest of the last `n` accepted intervals (0 when none).
  int64_t recent_max(size_t n) const;
  int64_t max_seen() const { return max_seen_; }
  size_t samples() const { return all_.size(); }

 private:
  int window_;
  int min_samples_;
  // Enough history that a rare slow step (1 in 100) is still remembered when the next comes.
  static constexpr size_t kHistory = 256;
  std::deque<int64_t> all_;  // the last max(window_, kHistory) samples
  std::optional<Learned> frozen_;
  int total_ = 0;
  int64_t max_seen_ = 0;
};

// Quantile q in [0,1] of values (nearest rank); 0 for empty input.
int64_t quantile(std::vector<int64_t> values, double q);

}  // namespace stepwatch::detect
