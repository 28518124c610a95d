// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Whether a process named by a beacon may be signalled by an agent that runs as root and trusts
// no beacon. A beacon is written by the trainer's user: it can name any pid, and read any
// process's start time. A process is proven to be the job's only when all of these hold:
//   - the beacon is a regular file in the job's directory, both owned by the same user;
//   - the process's real and effective uid are that user (a user's beacon never gets another
//     user's process signalled);
//   - its start time is the one the beacon records (the pid was not reused);
//   - it has that very beacon file mapped (device and inode in /proc/<pid>/maps): it is the
//     beacon's writer, a process of the job's tree, not merely some process of the same user.
// The signal itself still goes through runbook::signal_proven, which checks the start time
// again through a pidfd, so the check and the signal concern the same process.
#pragma once

#include <string>

#include "src/contract/snapshot.h"
#include "src/runbook/proven.h"

namespace stepwatch::agent {

struct Proof {
  bool proven = false;
  runbook::ProcessRef process;  // when proven
  std::string why;              // when not: which condition failed, naming the pid and file
};

Proof prove_rank_process(const std::string& proc_root, const std::string& job_dir,
                         const contract::RankSnapshot& rank);

}  // namespace stepwatch::agent
