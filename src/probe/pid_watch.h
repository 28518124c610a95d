// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Whether many processes are still alive, cheaply enough to ask every second for thousands of
// ranks: one pidfd per process, opened once after its start time was checked, and one poll()
// over all of them. A pidfd names one process, not a number: a pid reused by another process
// never reads as alive. Without pidfds (an old kernel, a fake /proc in tests, no descriptors
// left) the answer comes from reading /proc/<pid>/stat instead.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/common/process_id.h"
#include "src/probe/liveness.h"

namespace stepwatch::probe {

class PidWatch {
 public:
  // Pidfds are kept at this descriptor number or above (see open_entry).
  static constexpr int kFirstPidfd = 1024;

  explicit PidWatch(std::string proc_root = "/proc");
  ~PidWatch();
  PidWatch(const PidWatch&) = delete;
  PidWatch& operator=(const PidWatch&) = delete;

  // Each process (start ticks 0 when unknown) asked, in order. Descriptors of processes not asked
  // for any more are closed. Answers kAlive, kGone (exited: a zombie counts, it will never commit
  // another step, and a pidfd cannot tell the two apart), kReused, or kUnknown (pid 0, or /proc
  // refused).
  std::vector<Liveness> check(const std::vector<ProcessId>& procs);

  size_t descriptors() const;  // pidfds held now
  bool using_pidfds() const { return use_pidfd_; }

 private:
  struct Entry {
    int fd = -1;
    Liveness life = Liveness::kUnknown;
    bool final = false;  // gone or reused: never changes again
    bool asked = false;
  };
  Liveness open_entry(Entry& e, ProcessId id);
  Liveness read_stat(ProcessId id) const;

  ProcFs proc_;
  bool use_pidfd_;
  std::map<ProcessId, Entry> entries_;
};

}  // namespace stepwatch::probe
