// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The detector: a deterministic function of (config, the sequence of observations) to verdicts.
// It reads no clock and does no I/O: `stepwatch run`, `stepwatch agent` and `stepwatch replay`
// feed it the same way, so any incident can be replayed and any grace tried on old traces.
//
// The rules, in one place:
//  * A rank with no step yet is judged against the init budget (or its labeled phase's budget);
//    beyond it: stalled/init (or stalled/phase-overrun).
//  * A rank inside a labeled phase with a budget is judged against that budget; a beat renews
//    it only when the phase says so. Beyond it: stalled/phase-overrun.
//  * Otherwise it is judged in step time: silent longer than the effective interval is
//    `suspect`; longer than grace x effective interval is `stalled`. The effective interval is
//    max(expected, p90 of recent intervals), so a job whose steps slow down but complete is
//    `slow`, never stalled. During the first warmup intervals the init budget is the floor.
//  * A rank that reported failure, or whose exit status is known and non-zero, is `dead`; so is
//    every rank when the launcher exited non-zero. A rank whose process is merely gone (or
//    replaced) without a word has *ended*: it becomes `dead` only when another rank is still
//    running, and not finishing, exit_grace after the first one went (a crash while the others
//    block in a collective). Ranks that all end within the grace are `finished`. Once dead, a
//    rank stays dead. Culprits of a death: the ranks that ended first (the silent ones when a
//    silent and a reporting one ended in the same poll).
//  * After a rank ended well, ranks as far along that still run are finishing: no step will
//    come, so the `finish` phase budget applies instead of step time.
//  * Inside a step, the early rule (quiet.h): a rank with no progress evidence of any kind for
//    its quiet budget while the others wait in a collective is stalled/collective before
//    grace x interval; so is every rank unchanged in one collective, and every rank unchanged
//    in rendezvous before the first step is stalled/init.
//  * Job state = the worst rank; the cause is chosen from the ranks' pattern and the evidence.
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "src/detect/config.h"
#include "src/detect/interval.h"
#include "src/detect/observation.h"
#include "src/detect/quiet.h"
#include "src/detect/verdict.h"

namespace stepwatch::detect {

class Detector {
 public:
  explicit Detector(Config config);

  Verdict observe(const Observation& obs);

  // What was learned, for persistence; restore before the first observe of a new incarnation.
  std::optional<Learned> learned() const { return learner_.baseline(); }
  void restore_learned(const Learned& prior) { learner_.restore(prior); }
  const Config& config() const { return config_; }
  const QuietWatch& quiet() const { return quiet_; }

 private:
  struct RankMemory {
    uint64_t step_count = 0;
    uint64_t phase_count = 0;
    uint32_t incarnation = 0;
    bool seen = false;
    std::optional<int64_t> jsonl_step;  // for records without a ring: step at the last poll
    int64_t jsonl_step_wall_ns = 0;
    std::optional<Stamp> ended_at;  // the first poll that saw it gone, failed or exited
    bool dead = false;              // judged dead once: stays dead
  };

  void learn(const contract::RankSnapshot& r, RankMemory& m);
  // The budget rule of the rank's current phase, or nullptr for train/init/unbudgeted phases.
  const PhaseRule* rule_for(const contract::RankSnapshot& r) const;
  const ProcessFacts* proc_of(int rank) const;  // in this observation
  RankVerdict judge_rank(const contract::RankSnapshot& r, const Observation& obs,
                         int64_t effective_ns, const Stamp& job_phase_mark);
  // Decides whether ranks whose process is gone ended or died (the rules above).
  void settle_endings(const Observation& obs, Verdict& v,
                      const std::vector<const contract::RankSnapshot*>& ranks);
  void judge_finishing(const Observation& obs, Verdict& v,
                       const std::vector<const contract::RankSnapshot*>& ranks,
                       const Stamp& first_end, std::optional<int64_t> last_ended_step) const;
  void choose_cause(const Observation& obs, Verdict& v, int64_t effective_ns) const;

  Config config_;
  IntervalLearner learner_;
  QuietWatch quiet_{config_};
  std::map<int, RankMemory> memory_;
  State last_state_ = State::kStarting;
  Cause last_cause_ = Cause::kNone;
  int64_t since_wall_ns_ = 0;
  std::vector<std::pair<int, const ProcessFacts*>> proc_index_;  // of the observation being judged
};

}  // namespace stepwatch::detect
