// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A tiny simulated job for detector tests: ranks that commit steps, change phases and beat at
// times we choose, producing the same snapshots the beacon reader would.
#pragma once

#include <string>
#include <vector>

#include "src/contract/snapshot.h"
#include "src/detect/observation.h"
#include "stepwatch/beacon_v1.h"

namespace stepwatch::detect::testing {

inline constexpr int64_t kSec = kNsPerSec;

class SimJob {
 public:
  SimJob(int world, Stamp start = {1'700'000'000 * kSec, 5'000 * kSec}, uint32_t incarnation = 0)
      : now_(start) {
    for (int r = 0; r < world; ++r) {
      contract::RankSnapshot s;
      s.job = "sim";
      s.host = "node1";
      s.rank = r;
      s.local_rank = r;
      s.world_size = world;
      s.pid = 1000 + r;
      s.incarnation = incarnation;
      s.created = start;
      s.phase = "init";
      s.phase_since = start;
      ranks_.push_back(s);
    }
  }

  void advance(int64_t ns) {
    now_.wall_ns += ns;
    now_.mono_ns += ns;
  }
  // Moves only the wall clock (NTP step, operator error).
  void jump_wall(int64_t ns) { now_.wall_ns += ns; }
  Stamp now() const { return now_; }

  void step(int rank, int64_t n) {
    auto& s = ranks_[rank];
    s.step = n;
    s.step_at = now_;
    ++s.step_count;
    s.recent.push_back({n, now_.mono_ns});
    if (s.recent.size() > STEPWATCH_RECENT_STEPS) s.recent.erase(s.recent.begin());
    if (s.phase == "init") set_phase(rank, "train");
    touch(s);
  }
  void step_all(int64_t n) {
    for (size_t r = 0; r < ranks_.size(); ++r) step(static_cast<int>(r), n);
  }
  void set_phase(int rank, const std::string& p) {
    auto& s = ranks_[rank];
    s.phase = p;
    s.phase_since = now_;
    ++s.phase_count;
    touch(s);
  }
  void phase_all(const std::string& p) {
    for (size_t r = 0; r < ranks_.size(); ++r) set_phase(static_cast<int>(r), p);
  }
  void beat(int rank) {
    ranks_[rank].beat_at = now_;
    ++ranks_[rank].beat_count;
    touch(ranks_[rank]);
  }
  void finish(int rank) {
    ranks_[rank].status = contract::RankStatus::kFinished;
    touch(ranks_[rank]);
  }
  void fail(int rank) {
    ranks_[rank].status = contract::RankStatus::kFailed;
    touch(ranks_[rank]);
  }
  contract::RankSnapshot& rank(int r) { return ranks_[r]; }

  // The progress sampler's word for a rank now: `hash` names where its main thread is; the
  // moved stamp changes when hash or wait do, as the writer's does.
  void sample(int rank, uint64_t hash, contract::WaitKind wait = contract::WaitKind::kNone,
              const std::string& where = "forward (model.py:10)") {
    auto& s = ranks_[rank];
    contract::Sample x = s.sample.value_or(contract::Sample{});
    if (x.count == 0 || x.hash != hash || x.wait != wait) {
      x.moved_at = now_;
      x.hash = hash;
      x.wait = wait;
      x.where = where;
    }
    ++x.count;
    x.at = now_;
    s.sample = x;
  }

  Observation observe() const {
    Observation o;
    o.now = now_;
    o.local_host = "node1";
    o.ranks = ranks_;
    return o;
  }

 private:
  void touch(contract::RankSnapshot& s) const {
    s.updated = now_;
    s.updated_mono_ns = now_.mono_ns;
  }

  Stamp now_;
  std::vector<contract::RankSnapshot> ranks_;
};

}  // namespace stepwatch::detect::testing
