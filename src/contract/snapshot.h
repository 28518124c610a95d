// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What the watchdog knows about one rank at one moment: the validated content of a beacon or
// the fold of a rank's JSONL lines. Plain data; the detector consumes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/common/clock.h"

namespace stepwatch::contract {

enum class Source { kBeacon, kJsonl, kLog };  // kLog: progress read from the trainer's output
enum class RankStatus { kRunning, kFinished, kFailed };
// What the main thread waits in, as the progress sampler saw it (STEPWATCH_WAIT_*, same order).
enum class WaitKind { kNone, kCollective, kDevice, kStore };
inline constexpr WaitKind kAllWaitKinds[] = {WaitKind::kNone, WaitKind::kCollective,
                                             WaitKind::kDevice, WaitKind::kStore};

const char* source_name(Source s);
const char* rank_status_name(RankStatus s);
const char* wait_kind_name(WaitKind w);  // "none", "collective", "device", "store"

struct StepMark {
  int64_t step = 0;
  int64_t mono_ns = 0;
};

struct CheckpointMark {
  std::string id;
  int64_t step = 0;
  Stamp at;
};

// The progress sampler's last word (the beacon's sampler block): where the rank's main thread
// is and when that last changed. Evidence inside a step, between step commits.
struct Sample {
  uint64_t count = 0;  // samples taken
  Stamp at;            // the last sample: a stale one means the sampler itself cannot run
  Stamp moved_at;      // when the main thread's position (hash or wait) last changed
  uint64_t hash = 0;   // digest of the main thread's top frames; 0: unknown
  WaitKind wait = WaitKind::kNone;
  std::string where;  // "all_reduce (distributed_c10d.py:1536)"
};

struct RankSnapshot {
  Source source = Source::kBeacon;
  std::string path;  // the file it came from
  std::string job;
  std::string host;
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int pid = 0;                   // 0: unknown (JSONL without pid)
  uint64_t pid_start_ticks = 0;  // 0: unknown
  uint32_t incarnation = 0;
  RankStatus status = RankStatus::kRunning;
  Stamp created;

  std::optional<int64_t> step;  // last committed step; nullopt before the first
  Stamp step_at;
  uint64_t step_count = 0;

  std::string phase = "init";
  Stamp phase_since;
  uint64_t phase_count = 0;

  std::optional<Stamp> beat_at;
  uint64_t beat_count = 0;

  std::optional<CheckpointMark> checkpoint;

  // Loss: nullopt when never reported. A reported NaN stays NaN (a diverged run says so).
  std::optional<double> loss;
  Stamp loss_at;

  int64_t updated_mono_ns = 0;   // last write of any kind (beacons only)
  Stamp updated;                 // last write, wall and mono where known
  std::vector<StepMark> recent;  // last committed steps, oldest first (beacons only)
  std::optional<Sample> sample;  // nullopt: no sampler runs in this rank
};

}  // namespace stepwatch::contract
