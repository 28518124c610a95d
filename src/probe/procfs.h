// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The process probe: a job's process tree from /proc, with what each process is doing. Every
// reader takes a filesystem root so tests run on a checked-in fake tree (tests/probe/data/proc);
// a process that vanishes mid-read is normal and simply not in the result.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/probe/proc_fs.h"

namespace stepwatch::probe {

struct ProcInfo {
  int pid = 0;
  int ppid = 0;
  int pgrp = 0;
  int session = 0;
  uint64_t start_ticks = 0;  // field 22 of stat: with pid, the identity of a process
  char state = '?';          // of the process (its main thread)
  std::string comm;
  int64_t threads = 0;
  int threads_in_d = 0;                // counted only when threads were scanned (see ScanOptions)
  uint64_t cpu_ticks = 0;              // utime + stime
  std::optional<uint64_t> read_bytes;  // /proc/<pid>/io; absent when not permitted
  std::optional<uint64_t> write_bytes;
  std::string wchan;  // "" when running or not permitted
  // The main thread alone (read with the threads): its CPU (utime + stime) and context switches.
  // A rank's helper threads (NCCL's proxy, the pin-memory thread) spin while the main one hangs.
  std::optional<uint64_t> main_cpu_ticks;
  std::optional<uint64_t> main_ctx_switches;
};

// Which processes make up the job.
struct Selector {
  std::optional<int> root_pid;  // this process and all its descendants
  std::optional<int> pgid;      // every member of this process group
  std::optional<int> sid;       // every member of this session
};

struct ScanOptions {
  // Per-thread states cost a read per thread; ask for them only for the pids that matter (the
  // ranks), not for every helper process of the tree.
  std::set<int> thread_scan_pids;
  bool io = true;
  bool wchan = true;
  // io and wchan cost two more reads per process: when set, only for these pids (the ranks);
  // every process of the tree still gets its stat (state, CPU time, identity).
  std::optional<std::set<int>> detail_pids;
  // A live process keeps its parent, group, session and start time: with this set, a pid already
  // seen by the previous scan is not read again (unless it is a detail or thread pid), so a poll
  // costs one directory listing plus the new processes and the ranks. Identity is still checked
  // from /proc (start time) before anything is signalled.
  bool reuse_known = false;
};

struct ProcessTree {
  std::map<int, ProcInfo> procs;  // by pid
  int unreadable = 0;             // entries that vanished or refused mid-scan
};

// Deltas between two polls of the same process (same pid and start time).
struct ProcDelta {
  int64_t cpu_ns = 0;
  std::optional<int64_t> io_bytes;
  std::optional<int64_t> main_cpu_ns;  // the main thread's (both reads scanned its threads)
  std::optional<int64_t> main_ctx_switches;
};

class ProcessProbe {
 public:
  explicit ProcessProbe(std::string proc_root = "/proc");

  // One poll: the selected processes. Errors only when the root itself cannot be listed.
  Result<ProcessTree> scan(const Selector& selector, const ScanOptions& options = {});

  // Since the previous scan (nullopt for a process first seen, or one whose pid was reused).
  std::optional<ProcDelta> delta(const ProcInfo& now) const;
  // Remembers this scan as the baseline for the next delta() calls.
  void remember(const ProcessTree& tree);

  const std::string& root() const { return proc_.root(); }
  static int64_t ns_per_tick();

 private:
  ProcFs proc_;
  std::map<int, ProcInfo> previous_;
  std::map<int, ProcInfo> known_;  // every process of the last listing, at stat level
};

// What `now` used since `was` (nullopt unless both are the same process: pid and start time).
std::optional<ProcDelta> delta_between(const ProcInfo& was, const ProcInfo& now);

// Reads one process (stat, and optionally io, wchan and its threads' states).
Result<ProcInfo> read_process(const std::string& proc_root, int pid, bool io, bool wchan,
                              bool threads);

}  // namespace stepwatch::probe
