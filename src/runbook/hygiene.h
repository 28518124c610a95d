// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Restart hygiene: what an earlier incarnation of the job left behind that can make the next
// launch hang at init (background 003: a process not fully killed, a CUDA context not released,
// the rendezvous port still bound, stale beacons). find_leftovers() only reports, with evidence;
// cleanup() acts only on findings proven to be the job's own: a process whose pid AND start time
// match a record of an earlier incarnation, or a stale beacon file in the job's own directory.
// Nothing is ever chosen by name; everything else is reported as "not ours, will not touch".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/common/clock.h"
#include "src/probe/gpu_probe.h"
#include "src/runbook/preempt.h"

namespace stepwatch::runbook {

// One process of one incarnation, as the store recorded it at launch.
struct RecordedProcess {
  int pid = 0;
  uint64_t start_ticks = 0;  // field 22 of /proc/<pid>/stat at launch
  uint32_t incarnation = 0;
  std::string role;  // "rank 1", "launcher"; free text for reports
};

struct HygieneInput {
  std::string job;                         // beacons naming another job are reported, never removed
  uint32_t incarnation = 0;                // the current (new) incarnation; lower ones are earlier
  std::vector<RecordedProcess> recorded;   // every incarnation's processes, from the store
  std::optional<int> port;                 // the rendezvous port (MASTER_PORT); empty: not checked
  std::string beacon_dir;                  // $STEPWATCH_DIR/<job>; empty: beacons not checked
  std::optional<probe::GpuSnapshot> gpus;  // empty: GPU memory not checked
  std::string proc_root = "/proc";
};

enum class LeftoverKind { kProcess, kGpuMemory, kPort, kStaleBeacon, kBeacon };
enum class LeftoverAction { kNone, kKill, kRemoveFile };
const char* leftover_kind_name(LeftoverKind kind);

struct Leftover {
  LeftoverKind kind = LeftoverKind::kProcess;
  bool provable = false;  // proven to be this job's own (pid + start time, or its own beacon dir)
  LeftoverAction action = LeftoverAction::kNone;  // what cleanup() would do
  std::string what;      // short reason: "still alive", "holds port 29500", "stale beacon"
  std::string evidence;  // the facts, one line, with values
  int pid = 0;           // the process involved; 0: owner unknown
  uint64_t start_ticks = 0;
  std::string comm;
  std::optional<RecordedProcess> record;  // the matching record when provable
  std::optional<int> port;
  std::optional<unsigned int> gpu;
  std::string path;    // the beacon file (kStaleBeacon, kBeacon)
  uint64_t inode = 0;  // of that file when it was judged stale
};

std::vector<Leftover> find_leftovers(const HygieneInput& input);

// "rank 1 of incarnation 2, started 2026-05-09 07:35:25 UTC" for a record (start from btime).
std::string describe_record(const RecordedProcess& r, const std::string& proc_root = "/proc");

struct CleanupOptions {
  int64_t grace_ns = 10 * kNsPerSec;  // SIGTERM to SIGKILL
  int64_t kill_wait_ns = 5 * kNsPerSec;
  // A fresh GPU snapshot for the re-check after acting; empty: the re-check reuses input.gpus
  // minus the processes cleanup proved gone.
  std::function<std::optional<probe::GpuSnapshot>()> refresh_gpus;
};

struct CleanupReport {
  std::vector<std::string> done;     // one line per action taken
  std::vector<std::string> failed;   // actions that did not work, with the cause
  std::vector<std::string> refused;  // findings handed in that were not provable (untouched)
  std::vector<Leftover> remaining;   // the re-check after acting
  std::optional<PreemptReport> preempt;

  bool clean() const { return remaining.empty(); }
  // Provable findings still there after acting (a failure of cleanup, not of the input).
  size_t provable_remaining() const;
};

// Acts on the provable findings only: their processes get SIGTERM, grace, SIGKILL (preempt via
// signal_proven; each is re-checked against input.recorded first), stale beacons are re-read and
// removed if still stale and still the same file. Then runs find_leftovers(input) again.
// Meant for the gap between two incarnations, before the new one creates its beacons.
CleanupReport cleanup(const std::vector<Leftover>& leftovers, const HygieneInput& input,
                      const CleanupOptions& options = {});

}  // namespace stepwatch::runbook
