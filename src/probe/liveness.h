// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one liveness vocabulary: what /proc says about a process recorded as {pid, start time}.
// PidWatch (pid_watch.h) answers the same question for many processes at once through pidfds.
#pragma once

#include <string>

#include "src/common/process_id.h"
#include "src/probe/proc_fs.h"

namespace stepwatch::probe {

enum class Liveness {
  kAlive,    // same pid and start time, not a zombie
  kZombie,   // same process, exited, waiting for its parent to reap it
  kGone,     // no such pid
  kReused,   // the pid now belongs to another process (start time differs)
  kUnknown,  // no recorded start time, or /proc could not be read for another reason
};
const char* liveness_name(Liveness l);
// True for kGone, kReused and kZombie: nothing of the recorded process runs any more.
bool ended(Liveness l);

struct ProcessState {
  Liveness liveness = Liveness::kUnknown;
  char state = '?';  // stat state letter of the recorded process when it is still there
  int ppid = 0;
  int pgrp = 0;
  std::string comm;
};

// One read of <root>/<pid>/stat. A start time of 0 proves nothing: kUnknown unless it is gone.
ProcessState inspect(const ProcFs& proc, ProcessId id);

}  // namespace stepwatch::probe
