// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// One poll of a job: its ranks' progress records and the evidence that explains them, turned
// into the detector's Observation. Used by `stepwatch run` and `stepwatch agent` alike; every
// source is optional and a missing one is "evidence absent", never an error.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "src/contract/job_reader.h"
#include "src/detect/observation.h"
#include "src/probe/gpu_probe.h"
#include "src/probe/pid_watch.h"
#include "src/probe/procfs.h"

namespace stepwatch::watch {

struct ObserverConfig {
  std::string beacon_root;
  std::string job;
  std::string proc_root = "/proc";
  std::string local_host;
  int world_size = 0;        // expected ranks; 0: whatever the records say
  probe::Selector selector;  // the job's processes; empty: only the pids the beacons name
  std::shared_ptr<probe::GpuProbe> gpu;  // null: no GPU evidence
  // Without a selector (the agent): a rank's process details (state, CPU, I/O, wchan, thread
  // states: four reads or more) are read only once its record has not changed for this long;
  // a rank that keeps committing steps only has its liveness checked (one pidfd each). 0: every
  // poll, for every rank.
  int64_t detail_after_ns = 0;
  // Time spent on details is rationed (a trainer rank has dozens of threads, each a read): each
  // poll adds this much credit (banked up to two polls' worth) and reads go on while credit is
  // left, each costing the time it took. The ranks longest unread go first; the others keep the
  // facts of their last read until their turn. nullopt: no limit.
  std::optional<int64_t> detail_budget_ns;
};

// What one poll found besides the observation itself.
struct PollReport {
  std::vector<Error> problems;  // unreadable beacons, bad JSONL lines (a bounded list)
  size_t problems_total = 0;    // all of them, listed or not
  // The problems not reported by the previous poll: a bad file is told once when it is first
  // seen and again only when what is wrong with it changes (or after it was fixed and broke).
  std::vector<Error> fresh_problems;
  std::optional<probe::ProcessTree> tree;  // the job's processes, when a selector was given
  std::optional<probe::GpuSnapshot> gpus;
  std::map<int, int> rank_pids;  // rank -> pid, from beacons or RANK in the environment
  size_t details_read = 0;       // ranks whose process details were read this poll
  size_t details_due = 0;        // ranks quiet long enough to want them
};

class Observer {
 public:
  explicit Observer(ObserverConfig config);

  // `log_rank`: progress read from the trainer's output (uninstrumented trainers), used for
  // rank 0 when no beacon or JSONL record exists for it. `log`: the log's own facts.
  // `gpus`: a snapshot already taken for this tick (the agent reads NVML once per poll for all
  // its jobs); null: this observer's own probe is asked, when it has one.
  detect::Observation poll(const Stamp& now,
                           const std::optional<contract::RankSnapshot>& log_rank = {},
                           const std::optional<detect::LogFacts>& log = {},
                           PollReport* report = nullptr,
                           const Result<probe::GpuSnapshot>* gpus = nullptr);

  const ObserverConfig& config() const { return config_; }
  void set_detail_after(int64_t ns) { config_.detail_after_ns = ns; }
  void set_detail_budget(std::optional<int64_t> ns) { config_.detail_budget_ns = ns; }

 private:
  // Ranks whose number is outside the job's world are a foreign file: reported, not judged.
  void drop_outside_world(std::vector<contract::RankSnapshot>& ranks, PollReport& rep) const;
  // Process facts of the ranks when no selector names the job's processes (the agent's case).
  void rank_facts(const Stamp& now, detect::Observation& obs, PollReport& rep);
  // Whether pid runs (real and effective uid) as the job directory's owner.
  bool owns(int pid) const;

  // What the fast path remembers per rank between polls.
  struct RankMemo {
    std::tuple<int64_t, uint64_t, uint64_t, uint64_t, int64_t> signature{};  // record changed?
    int64_t changed_mono_ns = 0;          // when the record last changed
    std::optional<probe::ProcInfo> last;  // the last detail read, for deltas and carried facts
    std::optional<probe::ProcDelta> last_delta;
    uint64_t read_poll = 0;  // the poll of that read
    bool seen = false;
  };

  ObserverConfig config_;
  probe::ProcessProbe procs_;
  contract::JobReader reader_;
  probe::PidWatch lives_;
  std::map<int, RankMemo> memo_;    // by rank
  std::set<std::string> reported_;  // the problems of the previous poll
  uint64_t polls_ = 0;
  int64_t detail_credit_ns_ = 0;
};

// The RANK (or SLURM_PROCID) a process was started with, from /proc/<pid>/environ.
struct EnvRank {
  int rank = -1;
  bool from_slurm = false;  // SLURM_PROCID: the process had no RANK
};
std::optional<EnvRank> rank_from_environ(const std::string& proc_root, int pid);

// The ranks of an uninstrumented job's processes (pids ascending), by rank: RANK first. A
// process known only by SLURM_PROCID counts only when none carries RANK: under Slurm a launcher
// (the batch script's, or torchrun in an srun task) has SLURM_PROCID too, and its ranks RANK.
std::map<int, int> ranks_from_environ(const std::string& proc_root, const std::vector<int>& pids);

}  // namespace stepwatch::watch
