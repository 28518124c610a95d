// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What both coordination benches measure with (coord_bench, coord_scale_bench): this thread's
// CPU, another process's CPU (etcd's), the mean and a percentile of samples, and the detector
// they judge the simulated job with.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "src/common/clock.h"
#include "src/common/proc_stat.h"
#include "src/detect/detector.h"
#include "src/detect/spec_adapter.h"

namespace stepwatch::bench {

inline int64_t thread_cpu_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * kNsPerSec + t.tv_nsec;
}

// utime + stime of a process (0 once it is gone).
inline int64_t process_cpu_ns(pid_t pid) {
  auto st = read_proc_stat("/proc", pid);
  if (!st) return 0;
  return static_cast<int64_t>(st->utime_ticks + st->stime_ticks) * kNsPerSec / sysconf(_SC_CLK_TCK);
}

inline double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// A job of one step per `interval_ns`, judged from its first step (no warm-up), grace and the
// rest from the default spec.
inline detect::Config detector_config(int64_t interval_ns) {
  detect::Config c = detect::default_config();
  c.expected_interval_ns = interval_ns;
  c.init_budget_ns = 60 * kNsPerSec;
  c.warmup_steps = 0;
  return c;
}

}  // namespace stepwatch::bench
