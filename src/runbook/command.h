// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one subprocess runner of the runbook: a pager command, a preempt command (scancel), gdb.
// The command runs (no shell, PATH lookup for argv[0]) in its own process group with default
// signal dispositions, `input` on stdin (or /dev/null) and `env` added to the environment, no
// descriptor of ours but 0-2, and at most timeout_ns. On timeout its group is SIGKILLed through
// signal_proven_group (proven.h): the child is proven by construction (its start time is read
// right after fork, while it is ours and unreaped, so the pid cannot have been reused), and the
// group is signalled only while that child still leads it. A child that left its group is then
// killed alone, proven the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace stepwatch::runbook {

struct CommandOptions {
  int64_t timeout_ns = 0;
  std::string input;  // written to stdin, then stdin is closed; empty: stdin is /dev/null
  std::vector<std::pair<std::string, std::string>> env;  // added, or replacing the same name
  size_t max_output = size_t{256} << 10;
  bool keep_tail = false;  // over max_output: keep the last bytes (default: the first)
};

struct CommandResult {
  bool started = false;    // false: the command could not be started (see error)
  int exit_code = -1;      // -1 when killed by a signal or not started; 127: exec failed
  int term_signal = 0;     // the signal that ended it, 0 if none
  int exec_errno = 0;      // why exec failed (ENOENT: no such program); 0 if it ran
  bool timed_out = false;  // the timeout passed and the command's group got SIGKILL
  std::string output;      // stdout and stderr together, at most max_output bytes
  bool output_truncated = false;
  int64_t elapsed_ns = 0;
  std::string error;  // why it could not run or could not be ended; empty if none

  bool succeeded() const { return started && !timed_out && exit_code == 0; }
};

CommandResult run_command(const std::vector<std::string>& argv, const CommandOptions& options);

}  // namespace stepwatch::runbook
