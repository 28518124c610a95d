// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// One job watched: its observer and detector, the verdict's transitions and the learned step
// interval. `stepwatch run`, the agent and `stepwatch status` each hold one per job; what follows
// a verdict (the runbook, the store, the API) is theirs.
#pragma once

#include <functional>
#include <optional>

#include "src/common/clock.h"
#include "src/detect/detector.h"
#include "src/watch/observer.h"

namespace stepwatch::watch {

// What one look gave.
struct Look {
  detect::Observation observation;
  detect::Verdict verdict;
  PollReport report;
  // The state and cause before this verdict, when this verdict changed either.
  std::optional<std::pair<detect::State, detect::Cause>> changed_from;
  // The learned interval, when its median moved since the last look (worth saving).
  std::optional<detect::Learned> learned;
};

struct LookInputs {
  std::optional<contract::RankSnapshot> log_rank;    // progress parsed from the trainer's output
  std::optional<detect::LogFacts> log;               // the log's own facts
  const Result<probe::GpuSnapshot>* gpus = nullptr;  // this tick's snapshot; null: the observer's
  // Amends the observation before it is judged (stepwatch run adds its child's exit status).
  std::function<void(detect::Observation&, const PollReport&)> amend;
  // Settles the verdict before it is compared with the last one (the agent: a job its own
  // preempt ended reads preempted, and a preempt under way holds the verdict it acts on).
  std::function<void(const detect::Observation&, detect::Verdict&)> settle;
};

class JobWatch {
 public:
  // `learned`: an interval learned by an earlier incarnation, so a restart is judged at once.
  JobWatch(ObserverConfig observer, detect::Config detector,
           std::optional<detect::Learned> learned = {});

  Look look(Stamp now, const LookInputs& in = {});

  Observer& observer() { return observer_; }
  const detect::Detector& detector() const { return detector_; }
  detect::State state() const { return state_; }

 private:
  Observer observer_;
  detect::Detector detector_;
  detect::State state_ = detect::State::kStarting;
  detect::Cause cause_ = detect::Cause::kNone;
  std::optional<int64_t> learned_median_ns_;
};

}  // namespace stepwatch::watch
