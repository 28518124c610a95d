// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "src/common/clock.h"
#include "src/probe/proc_fs.h"
#include "src/runbook/proven.h"

extern char** environ;

namespace stepwatch::runbook {

namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// SIGPIPE is blocked on this thread while it writes to a child that may not read its stdin
// (EPIPE instead of death); a SIGPIPE raised meanwhile is consumed before the mask is restored.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &old_);
  }
  ~SigpipeGuard() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      struct timespec zero {};
      sigtimedwait(&pipe, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t old_{};
  bool was_pending_ = false;
};

// stdout and stderr, bounded: the first max bytes, or the last ones with keep_tail.
class Output {
 public:
  Output(CommandResult& r, const CommandOptions& o)
      : r_(r), max_(o.max_output), tail_(o.keep_tail) {}
  void add(const char* data, size_t n) {
    if (tail_) {
      r_.output.append(data, n);
      if (r_.output.size() > 2 * max_ + 4096) trim();
      return;
    }
    size_t room = r_.output.size() < max_ ? max_ - r_.output.size() : 0;
    if (n > room) r_.output_truncated = true;
    r_.output.append(data, std::min(n, room));
  }
  void trim() {
    if (r_.output.size() <= max_) return;
    r_.output.erase(0, r_.output.size() - max_);
    r_.output_truncated = true;
  }
  // Reads what is there; closes fd at EOF (EAGAIN keeps it: a grandchild may hold the pipe).
  void drain(int& fd) {
    char buf[4096];
    while (fd >= 0) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        add(buf, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        if (n == 0) close_fd(fd);
        return;
      }
    }
  }

 private:
  CommandResult& r_;
  size_t max_;
  bool tail_;
};

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, const CommandOptions& o) {
  CommandResult r;
  if (argv.empty() || argv[0].empty()) {
    r.error = "empty command";
    return r;
  }
  const std::string& prog = argv[0];
  const int64_t start = mono_now_ns();
  // Everything the child needs is built here: after fork() it may only make async-signal-safe
  // calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    bool replaced = std::any_of(o.env.begin(), o.env.end(), [&](const auto& p) {
      return kv.size() > p.first.size() && kv.compare(0, p.first.size(), p.first) == 0 &&
             kv[p.first.size()] == '=';
    });
    if (!replaced) env_strings.emplace_back(kv);
  }
  for (const auto& [k, v] : o.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> cargv, cenv;
  for (const auto& s : argv) cargv.push_back(const_cast<char*>(s.c_str()));
  cargv.push_back(nullptr);
  for (auto& s : env_strings) cenv.push_back(s.data());
  cenv.push_back(nullptr);

  // in: the command's stdin (only with input); out: its stdout and stderr; err: exec's errno.
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if ((!o.input.empty() && ::pipe2(in, O_CLOEXEC) != 0) || ::pipe2(out, O_CLOEXEC) != 0 ||
      ::pipe2(err, O_CLOEXEC) != 0) {
    r.error = fmt::format("cannot run {}: pipe: {}", prog, std::strerror(errno));
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1]}) close_fd(*fd);
    return r;
  }
  SigpipeGuard sigpipe;
  pid_t child = ::fork();
  if (child == 0) {
    // The caller may block or ignore signals (a supervisor's signalfd, SIGPIPE); the command
    // starts with the defaults, as it would from a shell.
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);
    ::setpgid(0, 0);  // its own group, so a timeout kills whatever it started too
    int stdin_fd = in[0] >= 0 ? in[0] : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (stdin_fd >= 0) ::dup2(stdin_fd, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    // No other descriptor of ours (a server's socket, a pidfd) leaks into the command.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    ::execvpe(cargv[0], cargv.data(), cenv.data());
    int e = errno;
    [[maybe_unused]] ssize_t n = ::write(err[1], &e, sizeof e);
    ::_exit(127);
  }
  int fork_errno = errno;
  close_fd(in[0]);
  close_fd(out[1]);
  close_fd(err[1]);
  if (child < 0) {
    r.error = fmt::format("cannot run {}: fork: {}", prog, std::strerror(fork_errno));
    for (int* fd : {&in[1], &out[0], &err[0]}) close_fd(*fd);
    return r;
  }
  ::setpgid(child, child);  // both sides set it, so the group exists before we might kill it
  r.started = true;
  // Proven by construction: the child is ours and unreaped, so until our waitpid() its pid can
  // name no other process, and the start time read now is its own.
  ProcessId self{child, 0};
  if (auto st = probe::ProcFs("/proc").stat(child)) self.start_ticks = st->start_ticks;

  int exec_errno = 0;
  ssize_t n;
  do n = ::read(err[0], &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  close_fd(err[0]);
  int status = 0;
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    ::waitpid(child, &status, 0);
    close_fd(in[1]);
    close_fd(out[0]);
    r.exit_code = 127;
    r.exec_errno = exec_errno;
    r.error = fmt::format("cannot run {}: {}", prog, std::strerror(exec_errno));
    r.elapsed_ns = mono_now_ns() - start;
    return r;
  }

  if (in[1] >= 0) ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  Output output(r, o);
  size_t written = 0;
  const int64_t deadline = start + o.timeout_ns;
  bool exited = false;
  while (true) {
    if (::waitpid(child, &status, WNOHANG) == child) {
      exited = true;
      break;
    }
    int64_t left = deadline - mono_now_ns();
    if (left <= 0) break;
    struct pollfd fds[2];
    nfds_t nfds = 0;
    if (in[1] >= 0) fds[nfds++] = {in[1], POLLOUT, 0};
    if (out[0] >= 0) fds[nfds++] = {out[0], POLLIN, 0};
    // Short waits: the child's exit is noticed by waitpid, not by a descriptor.
    ::poll(fds, nfds, static_cast<int>(std::clamp<int64_t>(left / kNsPerMs, 1, 20)));
    if (in[1] >= 0) {
      ssize_t k = ::write(in[1], o.input.data() + written, o.input.size() - written);
      if (k > 0) written += static_cast<size_t>(k);
      if (written == o.input.size() || (k < 0 && errno != EAGAIN && errno != EINTR))
        close_fd(in[1]);
    }
    output.drain(out[0]);
  }
  if (!exited) {
    r.timed_out = true;
    // The group first (whatever the command started); a child that left its group, alone.
    Status killed = signal_proven_group(self, SIGKILL);
    if (!killed) killed = signal_proven(self, SIGKILL);
    if (!killed)
      r.error =
          fmt::format("{} timed out and could not be killed: {}", prog, killed.error().message);
    // SIGKILL ends even a stopped process; only uninterruptible sleep can delay it.
    for (int i = 0; i < 200 && !exited; ++i) {
      exited = ::waitpid(child, &status, WNOHANG) == child;
      if (!exited) ::usleep(10'000);
    }
    if (!exited && r.error.empty())
      r.error = fmt::format("{} (pid {}) did not exit within 2 s of SIGKILL", prog, child);
  }
  output.drain(out[0]);  // what it wrote before exiting; a lingering grandchild is not waited for
  output.trim();
  close_fd(in[1]);
  close_fd(out[0]);
  if (exited && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (exited && WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  r.elapsed_ns = mono_now_ns() - start;
  return r;
}

}  // namespace stepwatch::runbook
