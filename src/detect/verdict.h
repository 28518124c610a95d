// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The detector's output: a verdict for the job and for each rank, in DESIGN.md's vocabulary.
// A verdict is a plain value; verdict_json.h turns it into JSON for pages, traces and the API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stepwatch::detect {

// kPreempted is never the detector's: the agent's, for a job whose ranks its own preempt (or the
// job leader's order) ended (watch::LookInputs::settle). Like kFinished, the job has ended.
enum class State { kStarting, kHealthy, kSlow, kSuspect, kStalled, kDead, kFinished, kPreempted };
enum class Cause { kNone, kCollective, kIo, kHost, kInit, kPhaseOverrun, kRankSilent, kUnknown };

// Every state and cause, in order (the codec reads names back by them; metrics list them).
inline constexpr State kAllStates[] = {State::kStarting, State::kHealthy,  State::kSlow,
                                       State::kSuspect,  State::kStalled,  State::kDead,
                                       State::kFinished, State::kPreempted};
inline constexpr Cause kAllCauses[] = {Cause::kNone,       Cause::kCollective, Cause::kIo,
                                       Cause::kHost,       Cause::kInit,       Cause::kPhaseOverrun,
                                       Cause::kRankSilent, Cause::kUnknown};

const char* state_name(State s);
const char* cause_name(Cause c);
// Higher is worse: used to combine rank states into the job's state.
int severity(State s);
// The states that open an incident and run the runbook: stalled and dead.
bool fires_runbook(State s);

// Ranks as ranges: "0-3,8,10-11"; "none" for no ranks.
std::string rank_ranges(std::vector<int> ranks);

// Where the expected interval came from.
enum class IntervalSource { kSpec, kLearned, kLearning };
const char* interval_source_name(IntervalSource s);

struct Culprit {
  // A constructor, not an aggregate: {rank, reason} stays valid (and free of
  // -Wmissing-field-initializers) now that host follows.
  Culprit() = default;
  Culprit(int r, std::string why, std::string on = {})
      : rank(r), reason(std::move(why)), host(std::move(on)) {}

  int rank = -1;
  std::string reason;  // "behind: step 41 while others are at 42"
  // The node the rank runs on, when the job spans more than one (empty on a single host, so
  // single-node pages and summaries read as before).
  std::string host;
};

// One fact the verdict used, with its value and age: "rank 1 phase" = "data", age 95 s.
struct Evidence {
  std::string name;
  std::string value;
  int rank = -1;        // -1: job-wide
  int64_t age_ns = -1;  // -1: not a timed fact
};

struct RankVerdict {
  int rank = -1;
  State state = State::kStarting;
  Cause cause = Cause::kNone;
  std::optional<int64_t> step;
  int64_t step_age_ns = -1;  // since the last step, or since start when none
  std::string phase;
  int64_t phase_age_ns = -1;
  std::optional<int64_t> budget_ns;  // the limit being applied to this rank now
  std::string note;                  // one line: why this state
  // Its process is gone without a finish or failure record: `finished` while that reads as an
  // ending (the others follow within the exit grace), `dead` once it reads as a death.
  bool exited = false;
};

struct Verdict {
  State state = State::kStarting;
  Cause cause = Cause::kNone;
  int64_t since_wall_ns = 0;         // when the job entered this state
  std::optional<int64_t> last_step;  // highest step any rank committed
  int64_t last_step_age_ns = -1;     // age of the newest step of the slowest rank
  int64_t expected_interval_ns = 0;  // 0: not known yet
  IntervalSource interval_source = IntervalSource::kLearning;
  std::string phase;  // the job's dominant phase
  std::optional<int64_t> phase_budget_ns;
  std::vector<RankVerdict> ranks;
  std::vector<Culprit> culprits;
  std::vector<Evidence> evidence;
  std::string summary;  // one human line for pages and status
};

}  // namespace stepwatch::detect
