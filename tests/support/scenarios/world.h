// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A simulated training job for the scenario corpus: ranks that step, label phases, hang, die
// and go silent, with the process and GPU evidence each activity leaves. Every poll period it
// records the observation a live stepwatch would have made.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/detect/observation.h"

namespace stepwatch::bench {

// What a rank is doing, which decides the evidence probes would see.
enum class Activity {
  kCompute,          // forward/backward: CPU and GPU busy
  kWaitGpu,          // blocked in an NCCL collective: SM spinning at 100%, CPU thread spinning
  kWaitCpu,          // blocked in a gloo collective: asleep on a futex
  kDataWait,         // waiting on its data loader
  kIoStall,          // uninterruptible I/O wait, nothing moving (a dead NFS mount)
  kDeadlock,         // a host deadlock: asleep, nothing moving
  kInitWait,         // waiting for rendezvous at start
  kCheckpointWrite,  // writing a checkpoint: I/O moving, GPU idle
  kIoBound,          // slow storage, but moving
  kGilHeld,          // a C extension holds the GIL and waits: the sampler itself cannot run
  kImport,           // importing, unpickling, building the model: CPU on the main thread
};

class World {
 public:
  World(int world, int64_t poll_ns, uint32_t incarnation = 0);

  int64_t elapsed() const { return t_; }  // since start
  Stamp now() const;
  int world() const { return static_cast<int>(ranks_.size()); }

  // Moves time forward, recording an observation at each poll boundary crossed.
  void advance(int64_t dt);
  void step_all();  // every live rank commits the next step
  void step_rank(int r);
  void phase_all(const std::string& p);
  void phase(int r, const std::string& p);
  void beat_all();
  void checkpoint_all(const std::string& id);
  void activity_all(Activity a);
  void activity(int r, Activity a);
  void freeze_beacon(int r);  // its records stop changing; the process goes on
  void kill(int r, int exit_code);
  void finish_all();
  void jump_wall(int64_t dt);
  void log_lines_per_sec(double rate) { log_rate_ = rate; }
  // Ranks run the progress sampler (on by default, as the Python package does).
  void sampler(bool on) { sampler_ = on; }
  int64_t next_step() const { return next_step_; }

  const std::vector<detect::Observation>& observations() const { return obs_; }

 private:
  struct Rank {
    contract::RankSnapshot snap;
    contract::RankSnapshot frozen;
    bool is_frozen = false;
    bool alive = true;
    int exit_code = 0;
    Activity act = Activity::kInitWait;
    uint64_t position = 0;  // the main thread's frames, as a number that changes when it moves
    contract::Sample sample;
    Stamp changed_at;  // when the main thread last entered another call
  };
  void sample(contract::RankSnapshot& out, Rank& rank);
  void record();
  Stamp stamp() const;

  std::vector<Rank> ranks_;
  int64_t poll_ns_;
  int64_t t_ = 0;
  int64_t next_poll_;
  int64_t wall_offset_ = 0;
  int64_t next_step_ = 0;
  double log_rate_ = 0.5;
  bool sampler_ = true;
  double log_lines_ = 0;
  int64_t last_log_wall_ = 0;
  std::vector<detect::Observation> obs_;
};

}  // namespace stepwatch::bench
