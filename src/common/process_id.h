// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A process is its pid and its start time, never a pid alone: a pid is reused once the process
// has been reaped, the pair never is (start_ticks is field 22 of /proc/<pid>/stat, clock ticks
// after boot; 0 means unknown, and an unknown start time proves nothing).
#pragma once

#include <compare>
#include <cstdint>

namespace stepwatch {

struct ProcessId {
  int pid = 0;
  uint64_t start_ticks = 0;

  friend auto operator<=>(const ProcessId&, const ProcessId&) = default;
};

}  // namespace stepwatch
