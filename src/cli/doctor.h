// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch doctor [--spec FILE] [--job ID] [--dir DIR] [--state-dir DIR] [--port N] [--fix]`:
// the restart-hygiene checks on demand. Prints what an earlier incarnation of the job left behind
// (live processes, the rendezvous port, GPU memory, stale beacons), with evidence, and what it
// would do ("would kill pid 123 (rank 1 of incarnation 2, started ...): holds port 29500").
// With --fix it does it, acting only on what is proven to be the job's own (src/runbook/hygiene.h).
// Under Slurm it also checks what the runbook will ask of Slurm: that the job may be requeued and
// cancelled by this user, and drained when node_fault.drain is on (docs/slurm.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/probe/gpu_probe.h"
#include "src/runbook/hygiene.h"

namespace stepwatch::cli {

// Exit codes.
inline constexpr int kDoctorClean = 0;      // nothing left over, or everything fixed with --fix
inline constexpr int kDoctorLeftovers = 1;  // findings remain (not fixed, or not ours to fix)
inline constexpr int kDoctorUsage = 2;      // bad arguments, unreadable spec, records not loadable

// Loads the processes the store recorded for `job` (every incarnation) from `state_dir`. A plain
// function pointer converts to it; the store module provides one.
using RecordLoader = std::function<Result<std::vector<runbook::RecordedProcess>>(
    const std::string& state_dir, const std::string& job)>;

struct DoctorOptions {
  std::string spec_path;    // --spec: job id, preempt grace, and the port in runbook.resume_command
  std::string job;          // --job; else the spec's job; else $STEPWATCH_JOB
  std::string dir;          // --dir: beacon root; empty: $STEPWATCH_DIR, else /dev/shm/stepwatch
  std::string state_dir;    // --state-dir: handed to load_recorded
  std::optional<int> port;  // --port; else from the spec's resume_command; else $MASTER_PORT
  bool fix = false;         // --fix: act on the provable findings, then check again
  std::vector<runbook::RecordedProcess> recorded;  // records already loaded by the caller
  RecordLoader load_recorded;                      // when set, its records are added to `recorded`
  // The current incarnation: its processes are never touched. Default: the highest incarnation in
  // the records or the job's beacons (the one starting now); everything below it is a leftover.
  std::optional<uint32_t> incarnation;
  // A GPU snapshot (NVML); empty function or nullopt: GPU memory is not checked.
  std::function<std::optional<probe::GpuSnapshot>()> gpu_snapshot;
  std::optional<int64_t>
      grace_ns;  // SIGTERM to SIGKILL under --fix; default: the spec's preempt_grace
  std::string proc_root = "/proc";
  std::function<const char*(const char*)> getenv;  // default: std::getenv (tests inject)
  // --slurm-job: check what stepwatch needs of this Slurm job (requeue, cancel, drain); default
  // $SLURM_JOB_ID when the spec's resume_owner is "slurm" or the doctor runs inside a job.
  std::string slurm_job;
  int64_t uid = -1;  // whose permissions; -1: the caller's
};

// Prints the report to stdout (errors to stderr) and returns the exit code.
int run_doctor(const DoctorOptions& options);

// The same, appending everything it would print to *out (tests).
int doctor_report(const DoctorOptions& options, std::string* out);

}  // namespace stepwatch::cli
