// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Proven processes: a process is {pid, start time}, never a name. Everything in the runbook that
// signals a process goes through signal_proven()/signal_proven_group(), which check the start time
// through a pidfd so the check and the signal concern the same process (DESIGN: cleanup only
// touches processes proven to belong to the job). Whether a process still lives is
// probe::inspect (src/probe/liveness.h); running a helper is run_command (command.h).
#pragma once

#include <cstdint>
#include <string>

#include "src/common/process_id.h"
#include "src/common/result.h"

namespace stepwatch::runbook {

// A process as the job recorded it: its identity, and a label for reports ("rank 1 of
// incarnation 2"; may be empty).
struct ProcessRef : ProcessId {
  std::string label;
};

// Sends `sig` to id.pid only if it is still the process that started at id.start_ticks.
// With pidfd (Linux >= 5.3): open a pidfd, then verify the start time, then signal through the
// pidfd. The pidfd pins the process that had the pid at open time; a process with the recorded
// start time that has the pid at check time had it at open time too, so the race is closed.
// Without pidfd (ENOSYS): read the start time, then kill(); the window is a few microseconds and a
// pid is reused only after the kernel has cycled through pid_max, which we accept.
// `proc_root` must be the procfs of the pid namespace the pid comes from (a fake test tree would
// prove nothing about the real process the pidfd names).
// Errors: kNotFound (gone, or the pid now belongs to another process: the message says which),
// kPermission, kInvalidArgument (pid <= 0 or start_ticks == 0: nothing is ever proven by pid
// alone).
Status signal_proven(ProcessId id, int sig, const std::string& proc_root = "/proc");

// Sends `sig` to the process group led by `leader`, only if the leader is proven (pid and start
// time) and really leads its own group (pgrp == pid). Uses pidfd_send_signal with
// PIDFD_SIGNAL_PROCESS_GROUP (Linux >= 6.9); else killpg() while holding the verified pidfd: the
// group id cannot be reused while its unreaped leader holds the pid.
Status signal_proven_group(ProcessId leader, int sig, const std::string& proc_root = "/proc");

// "12 ms", "1.5 s": durations in reports.
std::string format_ns(int64_t ns);

}  // namespace stepwatch::runbook
