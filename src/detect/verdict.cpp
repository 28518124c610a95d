// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/detect/verdict.h"

#include <fmt/format.h>

#include <algorithm>

namespace stepwatch::detect {

std::string rank_ranges(std::vector<int> ranks) {
  if (ranks.empty()) return "none";
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] <= ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += ranks[i] == ranks[j] ? fmt::format("{}", ranks[i])
                                : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

const char* state_name(State s) {
  switch (s) {
    case State::kStarting:
      return "starting";
    case State::kHealthy:
      return "healthy";
    case State::kSlow:
      return "slow";
    case State::kSuspect:
      return "suspect";
    case State::kStalled:
      return "stalled";
    case State::kDead:
      return "dead";
    case State::kFinished:
      return "finished";
    case State::kPreempted:
      return "preempted";
  }
  return "?";
}

const char* cause_name(Cause c) {
  switch (c) {
    case Cause::kNone:
      return "none";
    case Cause::kCollective:
      return "collective";
    case Cause::kIo:
      return "io";
    case Cause::kHost:
      return "host";
    case Cause::kInit:
      return "init";
    case Cause::kPhaseOverrun:
      return "phase-overrun";
    case Cause::kRankSilent:
      return "rank-silent";
    case Cause::kUnknown:
      return "unknown";
  }
  return "?";
}

bool fires_runbook(State s) {
  return s == State::kStalled || s == State::kDead;
}

int severity(State s) {
  switch (s) {
    case State::kFinished:
    case State::kPreempted:
      return 0;
    case State::kHealthy:
      return 1;
    case State::kStarting:
      return 2;
    case State::kSlow:
      return 3;
    case State::kSuspect:
      return 4;
    case State::kStalled:
      return 5;
    case State::kDead:
      return 6;
  }
  return 0;
}

const char* interval_source_name(IntervalSource s) {
  switch (s) {
    case IntervalSource::kSpec:
      return "spec";
    case IntervalSource::kLearned:
      return "learned";
    case IntervalSource::kLearning:
      return "learning";
  }
  return "?";
}

}  // namespace stepwatch::detect
