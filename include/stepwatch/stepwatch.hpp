// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Header-only C++ convenience over the C ABI: an RAII handle and a scoped phase.
//
//   int main() {
//     stepwatch::Handle sw = stepwatch::Handle::from_env();   // disabled (not thrown) on error
//     for (int64_t s = 0; s < steps; ++s) { train(); sw.step(s, loss); }
//     { stepwatch::ScopedPhase eval(sw, "eval"); run_eval(); }
//     sw.finish();                                             // say how the rank ended
//   }
//
// Like the C ABI, nothing here throws: a handle that failed to open is disabled and every call
// on it returns STEPWATCH_ENULL, so the watchdog can never take the trainer down.
//
// How the rank ended (docs/contract.md, "How a rank says how it ended"): call finish(true) or
// finish(false) before the process exits. A destructor cannot see the exit status (`return 1`
// and exit(3) look like `return 0` from inside it), so by default (OnDestroy::kFailIfUnwinding)
// a handle that is destroyed without a finish() says "failed" only when an exception unwinds it
// (std::uncaught_exceptions() above its count when the handle was opened) and says nothing
// otherwise: the watchdog then judges the rank from its process's exit. kFinishOrFail also says
// "finished" on a normal destruction (for a handle that lives exactly as long as the training,
// e.g. in main()); kNothing never writes at destruction. After any finish() call the destructor
// writes nothing. Moving a handle moves its policy and count.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <utility>

#include "stepwatch/stepwatch.h"

namespace stepwatch {

// What a handle says at destruction (or when a move-assignment replaces it) if finish() was
// never called.
enum class OnDestroy {
  kFailIfUnwinding,  // "failed" while an exception unwinds the handle, nothing otherwise
  kFinishOrFail,     // that, and "finished" on a normal destruction
  kNothing,          // never writes: the watchdog judges the rank from its process's exit
};

class Handle {
 public:
  Handle() = default;
  explicit Handle(stepwatch_t* raw, OnDestroy on_destroy = OnDestroy::kFailIfUnwinding) noexcept
      : h_(raw), on_destroy_(on_destroy) {}
  Handle(Handle&& o) noexcept
      : h_(std::exchange(o.h_, nullptr)),
        open_code_(o.open_code_),
        on_destroy_(o.on_destroy_),
        unwinding_at_open_(o.unwinding_at_open_),
        said_(o.said_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      end_and_close();
      h_ = std::exchange(o.h_, nullptr);
      open_code_ = o.open_code_;
      on_destroy_ = o.on_destroy_;
      unwinding_at_open_ = o.unwinding_at_open_;
      said_ = o.said_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { end_and_close(); }

  // Opens from the environment (STEPWATCH_JOB, RANK/WORLD_SIZE or SLURM_*).
  static Handle from_env(OnDestroy on_destroy = OnDestroy::kFailIfUnwinding) noexcept {
    Handle h;
    h.on_destroy_ = on_destroy;
    h.open_code_ = stepwatch_open_env(&h.h_);
    return h;
  }
  static Handle open(const stepwatch_options& options,
                     OnDestroy on_destroy = OnDestroy::kFailIfUnwinding) noexcept {
    Handle h;
    h.on_destroy_ = on_destroy;
    h.open_code_ = stepwatch_open(&options, &h.h_);
    return h;
  }

  bool enabled() const noexcept { return h_ != nullptr; }
  explicit operator bool() const noexcept { return enabled(); }
  // The open's return code and, on failure, its detail ("no job id: set STEPWATCH_JOB ...").
  int open_code() const noexcept { return open_code_; }
  std::string open_error() const {
    return open_code_ == STEPWATCH_OK ? "" : stepwatch_last_error();
  }

  int step(int64_t n) noexcept { return stepwatch_step(h_, n); }
  int step(int64_t n, double loss) noexcept { return stepwatch_step_loss(h_, n, loss); }
  int loss(double value) noexcept { return stepwatch_loss(h_, value); }
  int beat() noexcept { return stepwatch_beat(h_); }
  // From the trainer's own sampler thread: where the main thread is (stepwatch.h).
  int sample(uint64_t hash, int wait, const char* where = nullptr) noexcept {
    return stepwatch_sample(h_, hash, wait, where);
  }
  int phase_begin(const char* name) noexcept { return stepwatch_phase_begin(h_, name); }
  int phase_end() noexcept { return stepwatch_phase_end(h_); }
  int checkpoint_committed(const char* id, int64_t step) noexcept {
    return stepwatch_checkpoint_committed(h_, id, step);
  }
  // Marks the rank finished (or failed). The word is final for the destructor, which then
  // writes nothing, whatever this call returned.
  int finish(bool ok = true) noexcept {
    said_ = true;
    return stepwatch_finish(h_, ok ? 1 : 0);
  }
  const char* path() const noexcept { return stepwatch_path(h_); }
  stepwatch_t* raw() const noexcept { return h_; }

  OnDestroy on_destroy() const noexcept { return on_destroy_; }
  void set_on_destroy(OnDestroy on_destroy) noexcept { on_destroy_ = on_destroy; }

 private:
  void end_and_close() noexcept {
    if (h_ != nullptr && !said_ && on_destroy_ != OnDestroy::kNothing) {
      if (std::uncaught_exceptions() > unwinding_at_open_) {
        stepwatch_finish(h_, 0);
      } else if (on_destroy_ == OnDestroy::kFinishOrFail) {
        stepwatch_finish(h_, 1);
      }
    }
    stepwatch_close(h_);
    h_ = nullptr;
  }

  stepwatch_t* h_ = nullptr;
  int open_code_ = STEPWATCH_ENULL;
  OnDestroy on_destroy_ = OnDestroy::kFailIfUnwinding;
  // Exceptions in flight when the handle was made: a handle opened inside a destructor that
  // runs during unwinding is not itself being unwound when it dies at the end of that scope.
  int unwinding_at_open_ = std::uncaught_exceptions();
  bool said_ = false;
};

// Labels a stretch of work for its lifetime: begin on construction, end on destruction.
class ScopedPhase {
 public:
  ScopedPhase(Handle& h, const char* name) noexcept : h_(h), code_(h.phase_begin(name)) {}
  ~ScopedPhase() {
    if (code_ == STEPWATCH_OK) h_.phase_end();
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;
  int code() const noexcept { return code_; }

 private:
  Handle& h_;
  int code_;
};

}  // namespace stepwatch
