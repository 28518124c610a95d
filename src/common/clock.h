// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Time in stepwatch is int64 nanoseconds: wall clock (CLOCK_REALTIME, comparable across hosts)
// and monotonic (CLOCK_MONOTONIC, immune to clock jumps, comparable only on one host and boot).
// The detector never reads a clock itself: it is handed a Clock, so replay and tests can
// drive time by hand.
#pragma once

#include <cstdint>

namespace stepwatch {

constexpr int64_t kNsPerUs = 1'000;
constexpr int64_t kNsPerMs = 1'000'000;
constexpr int64_t kNsPerSec = 1'000'000'000;

struct Stamp {
  int64_t wall_ns = 0;  // 0: unknown
  int64_t mono_ns = 0;  // 0: unknown (for example, a record from another host)
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Stamp now() const = 0;
};

// The process's real clocks.
class SystemClock final : public Clock {
 public:
  Stamp now() const override;
  static const SystemClock& instance();
};

// A clock moved by hand: tests and replay.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Stamp start = {1'700'000'000 * kNsPerSec, 1'000 * kNsPerSec}) : t_(start) {}
  Stamp now() const override { return t_; }
  void advance(int64_t ns) {
    t_.wall_ns += ns;
    t_.mono_ns += ns;
  }
  void set(Stamp t) { t_ = t; }

 private:
  Stamp t_;
};

int64_t wall_now_ns();
int64_t mono_now_ns();

}  // namespace stepwatch
