// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Preemption: end every process of one incarnation and prove they are gone. SIGTERM (or the
// spec's preempt command, e.g. scancel), a grace period, SIGKILL to the proven survivors, then a
// check of every listed process: gone, or its pid now belongs to another process. A zombie counts
// as gone (its parent must reap it) and is reported. Optionally waits until the GPUs no longer
// show any of the incarnation's pids. Only listed processes are ever signalled, through
// signal_proven (src/runbook/proven.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/common/clock.h"
#include "src/probe/liveness.h"
#include "src/runbook/command.h"
#include "src/runbook/proven.h"

namespace stepwatch::runbook {

struct PreemptOptions {
  std::string proc_root = "/proc";
  int64_t poll_ns = 20 * kNsPerMs;       // how often /proc is checked while waiting
  int64_t kill_wait_ns = 5 * kNsPerSec;  // after SIGKILL, how long to wait for the pids to go
  int64_t command_timeout_ns = 30 * kNsPerSec;  // preempt_with_command: the command's own limit
  // Also signal the process group of each listed process that leads its own group (the leader is
  // proven and part of the incarnation), so children the list does not name end too.
  bool process_groups = false;
  // Pids currently holding GPU memory (the caller's NVML view); empty: GPU release not checked.
  std::function<std::vector<int>()> gpu_holders;
  int64_t gpu_release_timeout_ns = 30 * kNsPerSec;
};

struct ProcessOutcome {
  ProcessRef process;
  probe::Liveness before = probe::Liveness::kUnknown;  // when preemption began
  probe::Liveness after = probe::Liveness::kUnknown;   // at the final check
  char state_before = '?';
  bool term_sent = false;      // SIGTERM (preempt_processes only)
  bool cont_sent = false;      // SIGCONT after SIGTERM because the process was stopped
  bool kill_sent = false;      // SIGKILL after the grace
  int64_t gone_after_ns = -1;  // since preemption began; -1: still there
  std::string note;            // why a signal failed, who must reap a zombie

  bool gone() const { return probe::ended(after); }
  std::string describe() const;  // "pid 12 (rank 0): exited after SIGTERM in 15 ms"
};

struct GpuRelease {
  bool released = false;  // no listed pid holds GPU memory any more
  int64_t waited_ns = 0;
  std::vector<int> still_holding;
};

struct PreemptReport {
  bool ok = false;                    // every listed process gone (and GPU released if checked)
  std::vector<ProcessRef> survivors;  // listed processes still running at the end
  std::vector<ProcessRef> zombies;    // gone, but not yet reaped by their parent
  std::vector<ProcessOutcome> processes;
  std::optional<CommandResult> command;  // preempt_with_command only
  std::optional<GpuRelease> gpu;         // when options.gpu_holders was given
  bool killed = false;                   // SIGKILL was needed for at least one process
  int64_t all_gone_ns = -1;  // since the start, when the last listed process went; -1: never
  int64_t total_ns = 0;
  std::vector<std::string> notes;

  std::string summary() const;  // one line
};

// What a runbook host's act() did: the artifact (when it collects) and the preempt. Here, beside
// the preempt's report, so that what a multi-node job's nodes report back (coord/orders.h) needs
// only the preempt's types, not the incident state machine.
struct ActReport {
  std::optional<std::string> artifact;  // one line: where, how much, or why it failed
  bool artifact_ok = true;
  PreemptReport preempt;
};

// SIGTERM to every proven listed process (plus SIGCONT to stopped ones, so the TERM is delivered),
// wait up to grace_ns, SIGKILL the proven survivors, then verify.
PreemptReport preempt_processes(const std::vector<ProcessRef>& procs, int64_t grace_ns,
                                const PreemptOptions& options = {});

// Runs the preempt command (argv, under options.command_timeout_ns), waits until grace_ns after
// the start for the processes to go, SIGKILLs proven survivors, then verifies the same way.
PreemptReport preempt_with_command(const std::vector<std::string>& argv,
                                   const std::vector<ProcessRef>& procs, int64_t grace_ns,
                                   const PreemptOptions& options = {});

}  // namespace stepwatch::runbook
