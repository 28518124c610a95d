#include "src/runbook/proven.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/common/clock.h"
#include "src/common/proc_stat.h"

namespace stepwatch::runbook {

namespace {

#ifndef PIDFD_SIGNAL_PROCESS_GROUP
constexpr unsigned kPidfdSignalProcessGroup = 1u << 2;  // linux/pidfd.h, Linux >= 6.9
#else
constexpr unsigned kPidfdSignalProcessGroup = PIDFD_SIGNAL_PROCESS_GROUP;
#endif

int pidfd_open(int pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

int pidfd_send_signal(int fd, int sig, unsigned flags) {
#ifdef SYS_pidfd_send_signal
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, fd, sig, nullptr, flags));
#else
  (void)fd, (void)sig, (void)flags;
  errno = ENOSYS;
  return -1;
#endif
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Whether this process may signal processes of other users (CAP_KILL in its effective set).
bool may_signal_any_user() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_KILL / 32].effective & (1u << (CAP_KILL % 32))) != 0;
}

Error signal_error(int pid, int sig, int err) {
  if (err == ESRCH)
    return {Errc::kNotFound, fmt::format("pid {}: gone before signal {}", pid, sig)};
  if (err == EPERM) {
    // The usual cause: the process belongs to another user and we lack CAP_KILL (an agent whose
    // unit or container dropped it, or `stepwatch run` as a user other than the job's).
    const char* why = may_signal_any_user()
                          ? "EPERM although this process has CAP_KILL (a security module refused?)"
                          : "EPERM: signalling another user's process needs CAP_KILL, which this "
                            "process lacks";
    return {Errc::kPermission, fmt::format("pid {}: signal {} not permitted ({})", pid, sig, why)};
  }
  return {Errc::kIo, fmt::format("pid {}: signal {}: {}", pid, sig, std::strerror(err))};
}

// The verification shared by both signal paths: the pid still has the recorded start time.
Result<ProcStat> verify(const std::string& proc_root, int pid, uint64_t start_ticks) {
  auto st = read_proc_stat(proc_root, pid);
  if (!st) {
    if (st.error().code == Errc::kNotFound)
      return Error{Errc::kNotFound, fmt::format("pid {}: gone", pid)};
    return st.error();
  }
  if (st->start_ticks != start_ticks) {
    return Error{Errc::kNotFound,
                 fmt::format("pid {}: reused by another process ({}, start {} != recorded {}); "
                             "not signalled",
                             pid, st->comm, st->start_ticks, start_ticks)};
  }
  return st;
}

Status check_args(int pid, uint64_t start_ticks) {
  if (pid <= 0) return Error{Errc::kInvalidArgument, fmt::format("pid {}: not a process id", pid)};
  if (start_ticks == 0) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("pid {}: no recorded start time; a pid alone proves nothing", pid)};
  }
  return {};
}

}  // namespace

const char* liveness_name(Liveness l) {
  switch (l) {
    case Liveness::kAlive:
      return "alive";
    case Liveness::kZombie:
      return "zombie";
    case Liveness::kGone:
      return "gone";
    case Liveness::kReused:
      return "reused";
    case Liveness::kUnknown:
      return "unknown";
  }
  return "?";
}

bool ended(Liveness l) {
  return l == Liveness::kGone || l == Liveness::kReused || l == Liveness::kZombie;
}

ProcessState inspect(const std::string& proc_root, int pid, uint64_t start_ticks) {
  ProcessState out;
  auto st = read_proc_stat(proc_root, pid);
  if (!st) {
    out.liveness = st.error().code == Errc::kNotFound ? Liveness::kGone : Liveness::kUnknown;
    return out;
  }
  if (start_ticks == 0 || st->start_ticks != start_ticks) {
    out.liveness = start_ticks == 0 ? Liveness::kUnknown : Liveness::kReused;
    return out;
  }
  out.state = st->state;
  out.ppid = st->ppid;
  out.pgrp = st->pgrp;
  out.comm = st->comm;
  out.liveness = (st->state == 'Z' || st->state == 'X') ? Liveness::kZombie : Liveness::kAlive;
  return out;
}

Status signal_proven(int pid, uint64_t start_ticks, int sig, const std::string& proc_root) {
  if (auto ok = check_args(pid, start_ticks); !ok) return ok;
  Fd fd(pidfd_open(pid));
  if (fd.get() < 0) {
    int err = errno;
    if (err == ESRCH) return Error{Errc::kNotFound, fmt::format("pid {}: gone", pid)};
    if (err != ENOSYS) return signal_error(pid, sig, err);
    // No pidfd on this kernel: check, then kill (see the header for why the window is accepted).
    auto st = verify(proc_root, pid, start_ticks);
    if (!st) return st.error();
    if (::kill(pid, sig) != 0) return signal_error(pid, sig, errno);
    return {};
  }
  auto st = verify(proc_root, pid, start_ticks);
  if (!st) return st.error();
  if (pidfd_send_signal(fd.get(), sig, 0) != 0) return signal_error(pid, sig, errno);
  return {};
}

Status signal_proven_group(int leader, uint64_t start_ticks, int sig,
                           const std::string& proc_root) {
  if (auto ok = check_args(leader, start_ticks); !ok) return ok;
  Fd fd(pidfd_open(leader));
  if (fd.get() < 0 && errno != ENOSYS) {
    int err = errno;
    if (err == ESRCH) return Error{Errc::kNotFound, fmt::format("group leader {}: gone", leader)};
    return signal_error(leader, sig, err);
  }
  auto st = verify(proc_root, leader, start_ticks);
  if (!st) return st.error();
  if (st->pgrp != leader) {
    return Error{
        Errc::kInvalidArgument,
        fmt::format("pid {} does not lead its process group (pgrp {}); group not signalled", leader,
                    st->pgrp)};
  }
  if (fd.get() >= 0 && pidfd_send_signal(fd.get(), sig, kPidfdSignalProcessGroup) == 0) return {};
  if (fd.get() >= 0 && errno != EINVAL && errno != ENOSYS) return signal_error(leader, sig, errno);
  // Kernel without PIDFD_SIGNAL_PROCESS_GROUP: the verified leader still holds the group id.
  if (::killpg(leader, sig) != 0) return signal_error(leader, sig, errno);
  return {};
}

std::string format_ns(int64_t ns) {
  if (ns < 0) return "n/a";
  if (ns < 10 * kNsPerSec) return fmt::format("{} ms", ns / kNsPerMs);
  return fmt::format("{:.1f} s", static_cast<double>(ns) / static_cast<double>(kNsPerSec));
}

namespace {

void append_bounded(CommandResult& r, const char* data, size_t n, size_t max) {
  size_t room = r.output.size() < max ? max - r.output.size() : 0;
  if (n > room) r.output_truncated = true;
  r.output.append(data, std::min(n, room));
}

void drain(int fd, CommandResult& r, size_t max) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      append_bounded(r, buf, static_cast<size_t>(n), max);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;  // EOF, EAGAIN (a background grandchild may keep the pipe open) or an error
  }
}

void record_status(CommandResult& r, int status) {
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, int64_t timeout_ns,
                          size_t max_output) {
  CommandResult r;
  if (argv.empty() || argv[0].empty()) {
    r.error = "empty command";
    return r;
  }
  const int64_t start = mono_now_ns();
  std::vector<char*> args;  // prepared before fork: the child only makes async-signal-safe calls
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    r.error = fmt::format("{}: pipe: {}", argv[0], std::strerror(errno));
    return r;
  }
  pid_t child = ::fork();
  if (child < 0) {
    r.error = fmt::format("{}: fork: {}", argv[0], std::strerror(errno));
    ::close(p[0]);
    ::close(p[1]);
    return r;
  }
  if (child == 0) {
    // The caller may block or ignore signals (a supervisor's signalfd, SIGPIPE); the command
    // starts with the defaults, as it would from a shell.
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);
    ::setpgid(0, 0);
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::execvp(args[0], args.data());
    static const char kMsg[] = "exec failed\n";
    ssize_t ignored = ::write(2, kMsg, sizeof kMsg - 1);
    (void)ignored;
    ::_exit(127);
  }
  ::setpgid(child, child);  // both sides set it, so no signal can reach the wrong group in between
  ::close(p[1]);
  ::fcntl(p[0], F_SETFL, O_NONBLOCK);
  r.started = true;
  // The child is ours and unreaped, so its pid cannot be reused: its start time is certain.
  auto st = read_proc_stat("/proc", child);
  uint64_t child_start = st ? st->start_ticks : 0;

  int status = 0;
  bool exited = false;
  while (!exited) {
    int64_t left = start + timeout_ns - mono_now_ns();
    if (left <= 0) break;
    pollfd pfd{p[0], POLLIN, 0};
    ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left / kNsPerMs + 1, 20)));
    drain(p[0], r, max_output);
    exited = ::waitpid(child, &status, WNOHANG) == child;
  }
  if (!exited) {
    r.timed_out = true;
    Status killed = signal_proven_group(child, child_start, SIGKILL);
    if (!killed) killed = signal_proven(child, child_start, SIGKILL);
    if (!killed)
      r.error =
          fmt::format("{} timed out and could not be killed: {}", argv[0], killed.error().message);
    // SIGKILL ends even a stopped process; only uninterruptible sleep can delay it.
    for (int i = 0; i < 200 && !exited; ++i) {
      exited = ::waitpid(child, &status, WNOHANG) == child;
      if (!exited) ::usleep(10'000);
    }
    if (!exited && r.error.empty())
      r.error = fmt::format("{} (pid {}) did not exit within 2 s of SIGKILL", argv[0], child);
  }
  drain(p[0], r, max_output);
  ::close(p[0]);
  if (exited) record_status(r, status);
  if (r.exit_code == 127 && r.output.find("exec failed") != std::string::npos) {
    r.error = fmt::format("{}: cannot execute", argv[0]);
  }
  r.elapsed_ns = mono_now_ns() - start;
  return r;
}

}  // namespace stepwatch::runbook
