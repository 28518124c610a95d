// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The few facts of /proc/<pid>/stat that the contract needs (process start time as the pid-reuse
// guard). Parsed from the *last* ')' because a process name may contain ')' and spaces.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/common/result.h"

namespace stepwatch {

struct ProcStat {
  int pid = 0;
  std::string comm;
  char state = '?';
  int ppid = 0;
  int pgrp = 0;
  int session = 0;
  uint64_t utime_ticks = 0;
  uint64_t stime_ticks = 0;
  int64_t num_threads = 0;
  uint64_t start_ticks = 0;  // field 22: clock ticks after boot
};

// Parses the text of a stat file. Errors name the field that was malformed.
Result<ProcStat> parse_proc_stat(std::string_view text);

// A stat line is far shorter (52 numbers and a comm of at most 64 bytes).
inline constexpr size_t kStatMaxBytes = 1024;

// Reads <proc_root>/<pid>/stat. A vanished process is Errc::kNotFound. Kept in common, not in
// probe::ProcFs, because the beacon writer in libstepwatch.so needs its own start time and must
// not link the probe; every other reader goes through probe::ProcFs::stat.
Result<ProcStat> read_proc_stat(const std::string& proc_root, int pid);

}  // namespace stepwatch
