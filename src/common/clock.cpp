// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/clock.h"

#include <time.h>

namespace stepwatch {

namespace {
int64_t read_clock(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}
}  // namespace

int64_t wall_now_ns() {
  return read_clock(CLOCK_REALTIME);
}
int64_t mono_now_ns() {
  return read_clock(CLOCK_MONOTONIC);
}

Stamp SystemClock::now() const {
  return Stamp{wall_now_ns(), mono_now_ns()};
}

const SystemClock& SystemClock::instance() {
  static const SystemClock clock;
  return clock;
}

}  // namespace stepwatch
