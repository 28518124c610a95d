// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The job's process: started in a session (and process group) of its own, with its output
// passed through unchanged while each line is also handed to the log contract; neither ever
// makes the job wait (what a reader does not take is dropped and counted).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "src/common/result.h"

namespace stepwatch::supervise {

enum class Stream { kStdout, kStderr };

// Receives every line (split on '\n' and '\r', without them). Called from the output thread.
using LineSink = std::function<void(Stream, std::string_view)>;

// The environment every launch of a job gets (docs/run.md): STEPWATCH_DIR, STEPWATCH_JOB,
// STEPWATCH_INCARNATION, PYTHONUNBUFFERED=1 (the log contract needs lines as they are written),
// and MASTER_PORT when the rendezvous port is known.
std::map<std::string, std::string> job_environment(const std::string& beacon_root,
                                                   const std::string& job, int64_t incarnation,
                                                   std::optional<int> master_port);

struct LaunchSpec {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to (or replacing in) the supervisor's own
  int out_fd = 1;                          // where the job's stdout goes (passthrough)
  int err_fd = 2;
};

class Child {
 public:
  static Result<std::unique_ptr<Child>> start(const LaunchSpec& spec, LineSink sink);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  int pid() const { return pid_; }  // also the process group and session id
  // The exit status once it exited (waitpid WNOHANG); 128+N for a signal.
  std::optional<int> poll_exit();
  // Sends `sig` to the job's whole process group (we created it: it is ours).
  void signal_group(int sig) const;
  // Ends the job: `sig` to its group, up to `grace_ns` for it to exit (waiting through `sleep`,
  // given ns), then SIGKILL to the group (`on_kill` first, to say so); returns its exit status.
  int stop(int sig, int64_t grace_ns, const std::function<void(int64_t)>& sleep,
           const std::function<void()>& on_kill = {});
  // Waits for the output thread to drain (after the process exited).
  void join_output();
  // Output bytes dropped rather than block the job: passed through (our stdout or stderr was
  // not read), and not given to the log contract (its patterns fell behind). Final once
  // join_output() returned.
  uint64_t dropped_passthrough_bytes() const { return lost_->passthrough.load(); }
  uint64_t dropped_log_bytes() const { return lost_->parse.load(); }

 private:
  Child() = default;
  int pid_ = -1;
  std::optional<int> status_;
  std::thread output_;
  int stop_[2] = {-1, -1};  // tells the output thread to stop waiting for end of file
  std::shared_ptr<std::atomic<bool>> output_done_ = std::make_shared<std::atomic<bool>>(false);
  struct Lost {
    std::atomic<uint64_t> passthrough{0}, parse{0};
  };
  std::shared_ptr<Lost> lost_ = std::make_shared<Lost>();
};

}  // namespace stepwatch::supervise
