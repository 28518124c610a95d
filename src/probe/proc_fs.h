// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one /proc reader. Every parser of procfs lives here or in the probe files that use it
// (procfs.cpp: the process tree; ports.cpp: sockets; liveness.cpp: identity), and every read is
// rooted at a configurable root, so tests run on a checked-in fake tree (tests/probe/data/proc).
// A process that vanishes mid-read is Errc::kNotFound: normal, not an error.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/proc_stat.h"
#include "src/common/result.h"

namespace stepwatch::probe {

// The real and effective uid of a process (the "Uid:" line: real, effective, saved, fs).
struct ProcessUids {
  uint32_t real = 0;
  uint32_t effective = 0;
};

// The parts of /proc/<pid>/status that we use; a line that is absent or malformed is nullopt.
struct ProcStatus {
  std::optional<ProcessUids> uids;
  std::optional<uint64_t> caught_signals;  // "SigCgt:" mask (hex), bit n-1 for signal n
  std::optional<uint64_t> effective_caps;  // "CapEff:" mask (hex), bit n for capability n
  // voluntary_ctxt_switches + nonvoluntary_ctxt_switches: of the main thread only (the kernel
  // does not sum a process's threads here); both lines must read.
  std::optional<uint64_t> ctx_switches;
};

// Parses the text of a status file.
ProcStatus parse_proc_status(const std::string& text);

class ProcFs {
 public:
  // Implicit: a procfs is named by its root ("/proc", or a test tree).
  ProcFs(std::string root = "/proc");  // NOLINT(google-explicit-constructor)

  const std::string& root() const { return root_; }
  // <root>/<pid>/<name>
  std::string path(int pid, std::string_view name) const;

  // Any file of a process (io, wchan, stack, ...), read until EOF up to max_bytes.
  Result<std::string> read(int pid, std::string_view name, size_t max_bytes = 64 << 10) const;
  Result<ProcStat> stat(int pid) const;
  Result<ProcStat> task_stat(int pid, int tid) const;  // <root>/<pid>/task/<tid>/stat
  // The thread ids of a process, ascending.
  Result<std::vector<int>> tasks(int pid) const;
  Result<ProcStatus> status(int pid) const;
  // The environment, one "KEY=value" per entry.
  Result<std::vector<std::string>> environ(int pid) const;
  // Whether the process maps the file with this device and inode (/proc/<pid>/maps).
  Result<bool> maps_file(int pid, dev_t dev, ino_t ino) const;
  // The socket inodes among the process's descriptors ("socket:[N]" links in /proc/<pid>/fd).
  Result<std::vector<uint64_t>> socket_inodes(int pid) const;
  // The pids listed in the root, in directory order.
  Result<std::vector<int>> pids() const;
  // The text of <root>/net/tcp (v6: tcp6).
  Result<std::string> net_tcp(bool v6) const;
  // System boot time, seconds since the epoch ("btime" of <root>/stat).
  Result<int64_t> btime() const;

 private:
  std::string root_;
};

// Whether the process has a handler for `sig` (1..64) installed; nullopt when unknown.
std::optional<bool> catches_signal(const ProcFs& proc, int pid, int sig);

}  // namespace stepwatch::probe
