// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The early rule: a verdict within a minute of the job's last progress of any kind, whatever
// its step time. A step of 18 minutes is not 18 minutes of silence: inside it the main thread
// moves from frame to frame (the progress sampler's hash), computes (its own CPU), moves bytes
// (I/O), and writes its record (beats, phases). A hung rank does none of that, and the ranks
// waiting for it sit in the same collective call, unchanged.
//
//  * Progress evidence of a rank, per poll: its record changed (step, beat, phase, checkpoint,
//    loss), its sampler saw the main thread move, its main thread used CPU while not inside a
//    known wait (a thread spinning in cudaStreamSynchronize or NCCL is waiting, not working), or
//    its process moved I/O bytes. Log lines are not progress (a progress bar redraws in a hang);
//    GPU occupancy is not progress (NCCL spins at 100% SM in a hang).
//  * The quiet budget: the longest quiet stretch seen in the job's healthy training, times
//    kQuietMargin, at least the floor; kept apart for stretches spent waiting in a collective
//    (an all-reduce at the end of every step) and for the rest. A spec quiet_budget fixes both.
//    Until kQuietLearnSteps steps were committed with the sampler running, a learned budget is
//    not trusted and the rule stays off.
//  * A rank quiet beyond its budget outside any known wait (or whose sampler stopped: a C
//    extension holding the GIL) while every other rank waits in a collective is
//    stalled/collective, culprit that rank. Every rank waiting in a collective, unchanged beyond
//    the waiting budget, is stalled/collective with no culprit.
//  * Before the first step: every rank of the world present and waiting in rendezvous or store
//    calls (or with its sampler stopped: torch's TCPStore holds the GIL while it waits), at
//    least one saying rendezvous, unchanged beyond the floor (or the spec budget), is
//    stalled/init. A rank still importing or compiling moves; one not there yet is the init
//    budget's business.
//  * It applies only where every rank runs the sampler, none is inside a labeled phase with a
//    budget (those keep their budgets: a long checkpoint, eval or compile is never early-stalled)
//    and no rank has ended. It only ever makes a verdict earlier, never later.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/contract/snapshot.h"
#include "src/detect/config.h"
#include "src/detect/observation.h"
#include "src/detect/verdict.h"

namespace stepwatch::detect {

inline constexpr double kQuietMargin = 2.0;
inline constexpr int kQuietLearnSteps = 2;
// A sampler whose last sample is older than this cannot run (it samples about once a second).
inline constexpr int64_t kSamplerStaleNs = 10 * kNsPerSec;
// The main thread's CPU over a poll that counts as computing (more than a blocked thread's
// wake-ups, less than any real work).
inline constexpr int64_t kMainCpuMovingNs = 50 * kNsPerMs;
// The I/O over a poll that counts as moving data. Less is noise, not work: a beacon on a disk
// (not tmpfs) is written back and dirtied again by the next sample, 4 KiB at a time, and a hung
// rank would otherwise "progress" every writeback.
inline constexpr int64_t kIoMovingBytes = 64 << 10;

class QuietWatch {
 public:
  explicit QuietWatch(const Config& config)
      : early_(config.early), spec_budget_(config.quiet_budget_ns), floor_(config.quiet_floor_ns) {}

  // One poll's view of the job, aligned by index: ranks (sorted by rank), each one's process
  // facts (nullptr: none) and whether it is inside a phase with a budget of its own.
  struct Poll {
    const Observation& obs;
    const std::vector<const contract::RankSnapshot*>& ranks;
    const std::vector<const ProcessFacts*>& procs;
    const std::vector<bool>& labeled;
  };

  // Folds the poll's evidence into each rank's last progress, and learns the quiet stretch that
  // evidence ended, when the job was healthy and no rank held the others in a labeled phase.
  void note(const Poll& poll, bool job_healthy);

  // After the step-time and phase rules: stalls early where the rule above says so. `v.ranks`
  // holds one verdict per entry of poll.ranks, in the same order (more may follow).
  void judge(const Poll& poll, Verdict& v) const;

  // The budgets in force (nullopt: not armed), for status and tests.
  std::optional<int64_t> own_budget() const { return budget_for(own_max_); }
  std::optional<int64_t> wait_budget() const { return budget_for(wait_max_); }
  int64_t init_budget() const;
  int64_t longest_own_quiet() const { return own_max_; }
  int64_t longest_wait_quiet() const { return wait_max_; }

 private:
  struct Memory {
    uint32_t incarnation = 0;
    bool seen = false;
    Stamp progress_at;     // the last progress evidence
    bool waiting = false;  // inside a known wait at the last poll
    bool held = false;     // a rank sat in a labeled phase during the current stretch
    int silent_polls = 0;  // polls without evidence in the current stretch
    uint64_t step_count = 0, beat_count = 0, phase_count = 0;
    int64_t updated_mono_ns = 0, updated_wall_ns = 0;
    Stamp moved_at;  // the sampler's, as last seen
  };
  struct RankQuiet {
    int64_t quiet_ns = 0;  // since its last progress
    bool stale = false;    // the sampler itself stopped
    bool waiting = false;  // fresh sampler inside a known wait
    std::string where;
    contract::WaitKind wait = contract::WaitKind::kNone;
  };
  RankQuiet look(const contract::RankSnapshot& r, const Observation& obs) const;
  void stall_culprits(const Poll& poll, const std::vector<RankQuiet>& qs,
                      const std::vector<size_t>& culprits, int64_t budget, Verdict& v) const;
  bool armed() const;
  // The budget a stretch of `longest` learns (the spec's when it sets one); nullopt: not armed.
  std::optional<int64_t> budget_for(int64_t longest) const;
  std::string budget_text(std::optional<int64_t> budget, int64_t longest) const;

  bool early_;
  std::optional<int64_t> spec_budget_;
  int64_t floor_;
  std::map<int, Memory> memory_;
  int64_t own_max_ = 0;   // longest healthy quiet stretch outside a known wait
  int64_t wait_max_ = 0;  // longest healthy quiet stretch inside one
  int sampled_steps_ = 0;
};

}  // namespace stepwatch::detect
