// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The writer side of a beacon: creates the file atomically, maps it, and updates it with the
// seqlock protocol. All update methods are noexcept, allocation-free and never wait; they
// return 0 or a negative STEPWATCH_* code (the C ABI passes them through).
#pragma once

#include <time.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "src/common/result.h"
#include "src/contract/identity.h"
#include "src/contract/seqlock.h"
#include "stepwatch/beacon_v1.h"
#include "stepwatch/stepwatch.h"

namespace stepwatch::contract {

class BeaconWriter {
 public:
  // Creates (or replaces) $dir/<job>/rank-<rank>.beacon for this process and maps it.
  // `proc_root` is where this process's start time is read ("/proc").
  static Result<std::unique_ptr<BeaconWriter>> create(const Identity& id,
                                                      const std::string& proc_root = "/proc");
  ~BeaconWriter();
  BeaconWriter(const BeaconWriter&) = delete;
  BeaconWriter& operator=(const BeaconWriter&) = delete;

  int step(int64_t n) noexcept { return step_impl(n, nullptr); }
  int step_loss(int64_t n, double loss) noexcept { return step_impl(n, &loss); }

  int loss(double value) noexcept {
    uint64_t s;
    if (!seq_begin(b_, &s)) return STEPWATCH_EBUSY;
    Now t = now();
    store_relaxed(&b_->loss, value);
    store_relaxed(&b_->loss_wall_ns, t.wall);
    store_relaxed(&b_->loss_mono_ns, t.mono);
    store_relaxed(&b_->update_mono_ns, t.mono);
    seq_end(b_, s);
    return STEPWATCH_OK;
  }

  int beat() noexcept {
    uint64_t s;
    if (!seq_begin(b_, &s)) return STEPWATCH_EBUSY;
    Now t = now();
    store_relaxed(&b_->beat_wall_ns, t.wall);
    store_relaxed(&b_->beat_mono_ns, t.mono);
    store_relaxed(&b_->beat_count, b_->beat_count + 1);
    store_relaxed(&b_->update_mono_ns, t.mono);
    seq_end(b_, s);
    return STEPWATCH_OK;
  }

  // The progress sampler's word (docs/contract.md "Progress sampler"): where the main thread is.
  // Written under the sampler block's own seqlock, so it never makes a step call busy. `where`
  // may be NULL; it is cut at 63 bytes and anything unprintable becomes '?'. The beacon's
  // moved stamp changes when hash or wait differ from the previous sample.
  int sample(uint64_t hash, uint32_t wait, const char* where) noexcept;

  int phase_begin(const char* name) noexcept;
  int phase_end() noexcept;
  int checkpoint_committed(const char* id, int64_t step) noexcept;
  int finish(bool ok) noexcept;

  const std::string& path() const { return path_; }
  const stepwatch_beacon_v1* record() const { return b_; }

 private:
  struct Now {
    int64_t wall, mono;
  };
  // Wall time as monotonic time plus an offset re-read once a second, so a wall-clock step
  // shows in the records within a second (docs/contract.md). Each block's writer has its own
  // offset, touched only by whoever holds that block's seqlock.
  struct ClockOffset {
    int64_t wall_offset = 0;  // CLOCK_REALTIME - CLOCK_MONOTONIC, as of `at`
    int64_t at = 0;
  };
  static Now now(ClockOffset& o) noexcept {
    timespec m;
    clock_gettime(CLOCK_MONOTONIC, &m);
    int64_t mono = m.tv_sec * 1'000'000'000LL + m.tv_nsec;
    if (o.at == 0 || mono - o.at >= 1'000'000'000LL) {
      timespec w;
      clock_gettime(CLOCK_REALTIME, &w);
      o.wall_offset = w.tv_sec * 1'000'000'000LL + w.tv_nsec - mono;
      o.at = mono;
    }
    return {mono + o.wall_offset, mono};
  }
  // One clock read per update of the record (called only inside one).
  Now now() noexcept { return now(record_clock_); }

  int step_impl(int64_t n, const double* loss) noexcept {
    uint64_t s;
    if (!seq_begin(b_, &s)) return STEPWATCH_EBUSY;
    Now t = now();
    uint64_t count = b_->step_count + 1;
    store_relaxed(&b_->step, n);
    store_relaxed(&b_->step_wall_ns, t.wall);
    store_relaxed(&b_->step_mono_ns, t.mono);
    store_relaxed(&b_->step_count, count);
    stepwatch_step_mark* m = &b_->recent[(count - 1) % STEPWATCH_RECENT_STEPS];
    store_relaxed(&m->step, n);
    store_relaxed(&m->mono_ns, t.mono);
    if (loss != nullptr) {
      store_relaxed(&b_->loss, *loss);
      store_relaxed(&b_->loss_wall_ns, t.wall);
      store_relaxed(&b_->loss_mono_ns, t.mono);
    }
    // The first step ends an unlabeled init: the rank is training now.
    if (depth_ == 0 && in_init_) set_phase_locked("train", 5, t);
    store_relaxed(&b_->update_mono_ns, t.mono);
    seq_end(b_, s);
    return STEPWATCH_OK;
  }

  BeaconWriter() = default;
  void set_phase_locked(const char* name, size_t len, Now t) noexcept;

  stepwatch_beacon_v1* b_ = nullptr;
  std::string path_;
  // Phase stack: names of enclosing phases, restored by phase_end. Fixed size: no allocation.
  char stack_[STEPWATCH_PHASE_DEPTH][STEPWATCH_PHASE_MAX] = {};
  int depth_ = 0;
  bool in_init_ = true;       // current phase is the implicit "init"
  ClockOffset record_clock_;  // under seq
  ClockOffset sample_clock_;  // under sample_seq
};

}  // namespace stepwatch::contract
