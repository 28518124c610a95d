// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/detect/interval.h"

#include <algorithm>
#include <cmath>

namespace stepwatch::detect {

int64_t quantile(std::vector<int64_t> values, double q) {
  if (values.empty()) return 0;
  size_t idx = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  idx = idx == 0 ? 0 : idx - 1;
  idx = std::min(idx, values.size() - 1);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(idx), values.end());
  return values[idx];
}

namespace {
Learned summarize(const std::vector<int64_t>& v) {
  return Learned{quantile(v, 0.5), quantile(v, 0.9), static_cast<int>(v.size())};
}
}  // namespace

void IntervalLearner::add(int64_t interval_ns) {
  if (interval_ns <= 0) return;
  all_.push_back(interval_ns);
  if (all_.size() > std::max<size_t>(static_cast<size_t>(window_), kHistory)) all_.pop_front();
  max_seen_ = std::max(max_seen_, interval_ns);
  ++total_;
  if (!frozen_ && total_ >= window_) frozen_ = *recent(static_cast<size_t>(window_));
}

void IntervalLearner::restore(const Learned& prior) {
  if (prior.samples > 0 && prior.median_ns > 0) {
    frozen_ = prior;
    max_seen_ = std::max(max_seen_, prior.p90_ns);
  }
}

std::optional<Learned> IntervalLearner::baseline() const {
  if (frozen_) return frozen_;
  if (static_cast<int>(all_.size()) >= min_samples_) return recent(static_cast<size_t>(window_));
  return std::nullopt;
}

std::optional<Learned> IntervalLearner::recent(size_t n) const {
  if (all_.empty()) return std::nullopt;
  size_t k = std::min(n, all_.size());
  return summarize(std::vector<int64_t>(all_.end() - static_cast<std::ptrdiff_t>(k), all_.end()));
}

int64_t IntervalLearner::recent_max(size_t n) const {
  int64_t m = 0;
  size_t k = std::min(n, all_.size());
  for (auto it = all_.end() - static_cast<std::ptrdiff_t>(k); it != all_.end(); ++it)
    m = std::max(m, *it);
  return m;
}

}  // namespace stepwatch::detect
