// Header-only C++ convenience over the C ABI: an RAII handle and a scoped phase.
//
//   stepwatch::Handle sw = stepwatch::Handle::from_env();   // disabled (not thrown) on error
//   for (int64_t s = 0; s < steps; ++s) { train(); sw.step(s, loss); }
//   { stepwatch::ScopedPhase eval(sw, "eval"); run_eval(); }
//
// Like the C ABI, nothing here throws: a handle that failed to open is disabled and every call
// on it returns STEPWATCH_ENULL, so the watchdog can never take the trainer down.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "stepwatch/stepwatch.h"

namespace stepwatch {

class Handle {
 public:
  Handle() = default;
  explicit Handle(stepwatch_t* raw) noexcept : h_(raw) {}
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)), open_code_(o.open_code_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      stepwatch_close(h_);
      h_ = std::exchange(o.h_, nullptr);
      open_code_ = o.open_code_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { stepwatch_close(h_); }

  // Opens from the environment (STEPWATCH_JOB, RANK/WORLD_SIZE or SLURM_*).
  static Handle from_env() noexcept {
    Handle h;
    h.open_code_ = stepwatch_open_env(&h.h_);
    return h;
  }
  static Handle open(const stepwatch_options& options) noexcept {
    Handle h;
    h.open_code_ = stepwatch_open(&options, &h.h_);
    return h;
  }

  bool enabled() const noexcept { return h_ != nullptr; }
  explicit operator bool() const noexcept { return enabled(); }
  // The open's return code and, on failure, its detail ("no job id: set STEPWATCH_JOB ...").
  int open_code() const noexcept { return open_code_; }
  std::string open_error() const { return open_code_ == STEPWATCH_OK ? "" : stepwatch_last_error(); }

  int step(int64_t n) noexcept { return stepwatch_step(h_, n); }
  int step(int64_t n, double loss) noexcept { return stepwatch_step_loss(h_, n, loss); }
  int loss(double value) noexcept { return stepwatch_loss(h_, value); }
  int beat() noexcept { return stepwatch_beat(h_); }
  int phase_begin(const char* name) noexcept { return stepwatch_phase_begin(h_, name); }
  int phase_end() noexcept { return stepwatch_phase_end(h_); }
  int checkpoint_committed(const char* id, int64_t step) noexcept {
    return stepwatch_checkpoint_committed(h_, id, step);
  }
  int finish(bool ok = true) noexcept { return stepwatch_finish(h_, ok ? 1 : 0); }
  const char* path() const noexcept { return stepwatch_path(h_); }
  stepwatch_t* raw() const noexcept { return h_; }

 private:
  stepwatch_t* h_ = nullptr;
  int open_code_ = STEPWATCH_ENULL;
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
