// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Real child processes for the runbook tests: fork/exec with an optional SIGTERM-ignoring
// disposition, a stdout pipe for readiness lines, start-time lookup and state polling. Each Child
// kills (SIGKILL: it is the test's own unreaped child, so the pid cannot have been reused) and
// reaps its process at scope exit.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "src/common/proc_stat.h"

namespace stepwatch::test {

struct SpawnOptions {
  bool ignore_term = false;  // SIG_IGN survives exec: the program ignores SIGTERM
  bool own_group = false;    // setpgid(0, 0) in the child
  bool capture_stdout = true;
};

class Child {
 public:
  Child(const std::vector<std::string>& argv, SpawnOptions options = {}) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int p[2] = {-1, -1};
    if (options.capture_stdout && ::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) {
      if (options.own_group) ::setpgid(0, 0);
      if (options.ignore_term) ::signal(SIGTERM, SIG_IGN);
      if (options.capture_stdout) ::dup2(p[1], 1);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    if (options.own_group) ::setpgid(pid_, pid_);
    if (options.capture_stdout) {
      ::close(p[1]);
      out_ = p[0];
    }
    auto st = read_proc_stat("/proc", pid_);
    if (!st) throw std::runtime_error("no stat for child");
    start_ = st->start_ticks;
  }
  ~Child() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  int pid() const { return pid_; }
  uint64_t start() const { return start_; }

  // One line of the child's stdout ("" on timeout or EOF).
  std::string read_line(int timeout_ms = 5000) {
    std::string line;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < until) {
      pollfd pfd{out_, POLLIN, 0};
      if (::poll(&pfd, 1, 50) <= 0) continue;
      char c;
      ssize_t n = ::read(out_, &c, 1);
      if (n <= 0) return line;
      if (c == '\n') return line;
      line += c;
    }
    return line;
  }

  // The state letter of the child now ('?' when it cannot be read).
  char state() const {
    auto st = read_proc_stat("/proc", pid_);
    return st ? st->state : '?';
  }
  bool wait_state(const std::function<bool(char)>& want, int timeout_ms = 5000) const {
    for (int i = 0; i < timeout_ms / 5; ++i) {
      if (want(state())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return want(state());
  }
  // Waits until the child runs `comm` (exec done).
  bool wait_exec(const std::string& comm, int timeout_ms = 5000) const {
    for (int i = 0; i < timeout_ms / 5; ++i) {
      auto st = read_proc_stat("/proc", pid_);
      if (st && st->comm == comm) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  // Running or sleeping: alive and not stopped, not a zombie.
  bool running() const {
    char s = state();
    return s == 'R' || s == 'S' || s == 'D';
  }
  int reap() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = -1;
  uint64_t start_ = 0;
  int out_ = -1;
  bool reaped_ = false;
};

inline const char* kPython = "/usr/bin/python3";

// A python3 child listening on a free 127.0.0.1 port for a minute.
struct ListeningChild {
  Child child{{kPython, "-c",
               "import socket, time\n"
               "s = socket.socket()\n"
               "s.bind(('127.0.0.1', 0))\n"
               "s.listen()\n"
               "print(s.getsockname()[1], flush=True)\n"
               "time.sleep(60)\n"}};
  int port = std::stoi(child.read_line());
};

}  // namespace stepwatch::test
