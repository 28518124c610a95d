// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The incident artifact: what an on-call engineer needs to see where a stalled job is stuck,
// collected into one directory before the job is preempted. Bounded in time
// (CollectSettings.time_limit_ns, for the whole collection) and in size (max_bytes: files are cut
// and the manifest says so). Collecting never kills anything and never leaves anything stopped:
// the stack signal goes only to ranks that catch it (SigCgt) and have a stacks file; gdb runs under
// a timeout, and a target it leaves stopped gets SIGCONT (proven) and is checked again.
//
// Layout of the directory:
//   verdict.json                 the verdict, as given
//   gpu.txt                      the GPU snapshot text, as given
//   log-tail.txt                 the last CollectSettings.log_lines lines, as given
//   rank-<r>.python-stacks.txt   what the rank's faulthandler appended after our signal
//   pid-<pid>/status|wchan|stack|threads.txt   procfs of every given process
//   pid-<pid>/native-stacks.txt  gdb "thread apply all bt"
//   beacons/rank-<r>.beacon, beacons/summary.txt   raw beacon bytes and their decoded content
//   manifest.txt                 every file with its size, and what could not be collected and why
//                                (always written; not counted against max_bytes)
#pragma once

#include <signal.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/common/clock.h"
#include "src/probe/gpu_probe.h"
#include "src/runbook/proven.h"
#include "src/spec/spec.h"

namespace stepwatch::runbook {

struct JobProcess {
  ProcessRef process;
  int rank = -1;  // -1: not a rank (launcher, data loader worker): procfs and native stacks only
};

struct ArtifactRequest {
  std::string dir;  // the incident directory; created if missing
  std::string job;
  std::string beacon_root;  // $STEPWATCH_DIR: beacons and <root>/<job>/rank-<r>.stacks
  std::string proc_root = "/proc";
  spec::CollectSettings settings;
  std::string verdict_json;
  std::vector<JobProcess> processes;    // every process of the job to look at
  std::optional<std::string> gpu_text;  // absent: no GPU snapshot available
  std::vector<std::string>
      log_lines;               // the caller's recent output; the last settings.log_lines kept
  int stack_signal = SIGUSR1;  // what stepwatch.install_stack_dump() registered
  int64_t stacks_wait_ns =
      10 * kNsPerSec;  // for the Python stacks (also bounded by the time limit)
  int64_t native_timeout_ns = 15 * kNsPerSec;  // per gdb run (also bounded by the time limit)
  std::string gdb = "gdb";                     // a name looked up in PATH, or a path
};

struct ArtifactFile {
  std::string name;  // relative to the incident directory
  uint64_t bytes = 0;
  bool truncated = false;
};

struct ArtifactReport {
  std::string dir;
  std::vector<ArtifactFile> files;  // manifest.txt last
  std::vector<std::string> notes;   // what could not be collected, and why
  uint64_t bytes = 0;               // written, manifest excluded
  bool truncated = false;           // max_bytes was reached
  bool timed_out = false;           // the time limit was reached
  int64_t elapsed_ns = 0;
  std::optional<Error> error;  // the directory itself could not be created or written

  const ArtifactFile* file(const std::string& name) const;
};

ArtifactReport collect_artifact(const ArtifactRequest& request);

// The GPUs as the artifact's gpu.txt shows them: one line a device, one a process on it.
std::string gpu_text(const probe::GpuSnapshot& snapshot);

}  // namespace stepwatch::runbook
