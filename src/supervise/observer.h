// One poll of a job: its ranks' progress records and the evidence that explains them, turned
// into the detector's Observation. Used by `stepwatch run` and `stepwatch agent` alike; every
// source is optional and a missing one is "evidence absent", never an error.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/contract/job_scan.h"
#include "src/detect/observation.h"
#include "src/probe/gpu_probe.h"
#include "src/probe/procfs.h"

namespace stepwatch::supervise {

struct ObserverConfig {
  std::string beacon_root;
  std::string job;
  std::string proc_root = "/proc";
  std::string local_host;
  int world_size = 0;             // expected ranks; 0: whatever the records say
  probe::Selector selector;       // the job's processes; empty: only the pids the beacons name
  std::shared_ptr<probe::GpuProbe> gpu;  // null: no GPU evidence
};

// What one poll found besides the observation itself.
struct PollReport {
  std::vector<Error> problems;              // unreadable beacons, bad JSONL lines
  std::optional<probe::ProcessTree> tree;   // the job's processes, when a selector was given
  std::optional<probe::GpuSnapshot> gpus;
  std::map<int, int> rank_pids;             // rank -> pid, from beacons or RANK in the environment
};

class Observer {
 public:
  explicit Observer(ObserverConfig config);

  // `log_rank`: progress read from the trainer's output (uninstrumented trainers), used for
  // rank 0 when no beacon or JSONL record exists for it. `log`: the log's own facts.
  detect::Observation poll(const Stamp& now, const std::optional<contract::RankSnapshot>& log_rank = {},
                           const std::optional<detect::LogFacts>& log = {}, PollReport* report = nullptr);

  const ObserverConfig& config() const { return config_; }

 private:
  ObserverConfig config_;
  probe::ProcessProbe procs_;
};

// The RANK (or SLURM_PROCID) a process was started with, from /proc/<pid>/environ.
std::optional<int> rank_from_environ(const std::string& proc_root, int pid);

}  // namespace stepwatch::supervise
