// Proven processes: a process is {pid, start time}, never a name. Everything in the runbook that
// signals a process goes through signal_proven()/signal_proven_group(), which check the start time
// through a pidfd so the check and the signal concern the same process (DESIGN: cleanup only
// touches processes proven to belong to the job). run_command() runs a helper (scancel, gdb) under
// a timeout and kills its process group, proven, when the timeout passes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/result.h"

namespace stepwatch::runbook {

// A process as the job recorded it. start_ticks is field 22 of /proc/<pid>/stat.
struct ProcessRef {
  int pid = 0;
  uint64_t start_ticks = 0;
  std::string label;  // for reports: "rank 1 of incarnation 2"; may be empty
};

// What /proc says about a recorded process now.
enum class Liveness {
  kAlive,    // same pid and start time, not a zombie
  kZombie,   // same process, exited, waiting for its parent to reap it
  kGone,     // no such pid
  kReused,   // the pid now belongs to another process (start time differs)
  kUnknown,  // /proc could not be read for another reason
};
const char* liveness_name(Liveness l);

struct ProcessState {
  Liveness liveness = Liveness::kUnknown;
  char state = '?';  // stat state letter of the recorded process when it is still there
  int ppid = 0;
  int pgrp = 0;
  std::string comm;
};

ProcessState inspect(const std::string& proc_root, int pid, uint64_t start_ticks);
// True for kGone, kReused and kZombie: nothing of the recorded process runs any more.
bool ended(Liveness l);

// Sends `sig` to `pid` only if it is still the process that started at `start_ticks`.
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
Status signal_proven(int pid, uint64_t start_ticks, int sig,
                     const std::string& proc_root = "/proc");

// Sends `sig` to the process group led by `leader`, only if the leader is proven (pid and start
// time) and really leads its own group (pgrp == pid). Uses pidfd_send_signal with
// PIDFD_SIGNAL_PROCESS_GROUP (Linux >= 6.9); else killpg() while holding the verified pidfd: the
// group id cannot be reused while its unreaped leader holds the pid.
Status signal_proven_group(int leader, uint64_t start_ticks, int sig,
                           const std::string& proc_root = "/proc");

struct CommandResult {
  bool started = false;    // false: fork/pipe failed (see error)
  int exit_code = -1;      // -1 when killed by a signal or not started; 127: exec failed
  int term_signal = 0;     // the signal that ended it, 0 if none
  bool timed_out = false;  // the timeout passed and the command's group got SIGKILL
  std::string output;      // stdout and stderr together, at most max_output bytes
  bool output_truncated = false;
  int64_t elapsed_ns = 0;
  std::string error;  // why it could not run or could not be ended; empty if none

  bool succeeded() const { return started && !timed_out && exit_code == 0; }
};

// Runs argv (PATH lookup for argv[0]) in its own process group with stdin from /dev/null, for at
// most timeout_ns. On timeout the whole group gets SIGKILL through signal_proven_group.
CommandResult run_command(const std::vector<std::string>& argv, int64_t timeout_ns,
                          size_t max_output = size_t{256} << 10);

// "12 ms", "1.5 s": durations in reports.
std::string format_ns(int64_t ns);

}  // namespace stepwatch::runbook
