// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/detect/baselines.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace stepwatch::detect {

namespace {

// Times on one axis: monotonic when the record has it, else wall.
int64_t t_of(const Stamp& s) {
  return s.mono_ns > 0 ? s.mono_ns : s.wall_ns;
}

// The newest progress mark of a rank: its last step, or its start.
int64_t progress_mark(const contract::RankSnapshot& r) {
  return r.step ? t_of(r.step_at) : t_of(r.created);
}

class FixedTimeout final : public Baseline {
 public:
  explicit FixedTimeout(int64_t timeout) : timeout_(timeout) {}
  std::string name() const override {
    return fmt::format("fixed {}min timeout", timeout_ / (60 * kNsPerSec));
  }
  bool observe(const Observation& obs) override {
    for (const auto& r : obs.ranks) {
      if (r.status != contract::RankStatus::kRunning) continue;
      if (t_of(obs.now) - progress_mark(r) > timeout_) return true;
    }
    return false;
  }

 private:
  int64_t timeout_;
};

class CalculatedTimeout final : public Baseline {
 public:
  CalculatedTimeout(double factor, int64_t initial) : factor_(factor), initial_(initial) {}
  std::string name() const override { return fmt::format("{:.0f}x largest interval", factor_); }
  bool observe(const Observation& obs) override {
    for (const auto& r : obs.ranks) {
      auto& m = marks_[r.rank];
      if (r.step && r.step_count > m.count) {
        int64_t at = t_of(r.step_at);
        if (m.count > 0 && r.step_count == m.count + 1) {
          largest_ = std::max(largest_, at - m.at);
          ++intervals_;
        } else if (m.count > 0) {
          // Several steps between polls: the average is all it can know.
          largest_ = std::max(largest_, (at - m.at) / static_cast<int64_t>(r.step_count - m.count));
          ++intervals_;
        }
        m.count = r.step_count;
        m.at = at;
      }
    }
    int64_t timeout =
        intervals_ >= 2 ? static_cast<int64_t>(factor_ * static_cast<double>(largest_)) : initial_;
    for (const auto& r : obs.ranks) {
      if (r.status != contract::RankStatus::kRunning) continue;
      if (t_of(obs.now) - progress_mark(r) > timeout) return true;
    }
    return false;
  }

 private:
  struct Mark {
    uint64_t count = 0;
    int64_t at = 0;
  };
  double factor_;
  int64_t initial_;
  int64_t largest_ = 0;
  int intervals_ = 0;
  std::map<int, Mark> marks_;
};

class SmIdle final : public Baseline {
 public:
  SmIdle(double threshold, int64_t window) : threshold_(threshold), window_(window) {}
  std::string name() const override {
    return fmt::format("SM<{:.0f}% for {}min", threshold_, window_ / (60 * kNsPerSec));
  }
  bool observe(const Observation& obs) override {
    bool any = false, all_idle = true;
    for (const auto& g : obs.gpus) {
      if (!g.sm_util_pct) continue;
      any = true;
      all_idle = all_idle && *g.sm_util_pct < threshold_;
    }
    if (!any || !all_idle) {
      idle_since_ = -1;
      return false;
    }
    if (idle_since_ < 0) idle_since_ = t_of(obs.now);
    return t_of(obs.now) - idle_since_ >= window_;
  }

 private:
  double threshold_;
  int64_t window_;
  int64_t idle_since_ = -1;
};

}  // namespace

std::unique_ptr<Baseline> make_fixed_timeout(int64_t timeout_ns) {
  return std::make_unique<FixedTimeout>(timeout_ns);
}
std::unique_ptr<Baseline> make_calculated_timeout(double factor, int64_t initial_ns) {
  return std::make_unique<CalculatedTimeout>(factor, initial_ns);
}
std::unique_ptr<Baseline> make_sm_idle(double threshold_pct, int64_t window_ns) {
  return std::make_unique<SmIdle>(threshold_pct, window_ns);
}

}  // namespace stepwatch::detect
