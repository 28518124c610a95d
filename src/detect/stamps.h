// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// How the detector compares stamps: monotonic time where both sides have it (immune to wall
// clock jumps), else wall time.
#pragma once

#include <algorithm>
#include <cstdint>

#include "src/common/clock.h"

namespace stepwatch::detect {

// Age of a stamp: monotonic for records of this host, else wall.
inline int64_t age_of(const Stamp& at, const Stamp& now, bool same_host) {
  if (same_host && at.mono_ns > 0 && now.mono_ns > 0)
    return std::max<int64_t>(0, now.mono_ns - at.mono_ns);
  if (at.wall_ns > 0 && now.wall_ns > 0) return std::max<int64_t>(0, now.wall_ns - at.wall_ns);
  return 0;
}

inline bool later(const Stamp& a, const Stamp& b) {
  if (a.mono_ns > 0 && b.mono_ns > 0) return a.mono_ns > b.mono_ns;
  return a.wall_ns > b.wall_ns;
}

}  // namespace stepwatch::detect
