// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/proven.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/common/clock.h"
#include "src/probe/proc_fs.h"

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
  auto st = probe::ProcFs(proc_root).stat(pid);
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

Status signal_proven(ProcessId id, int sig, const std::string& proc_root) {
  const int pid = id.pid;
  const uint64_t start_ticks = id.start_ticks;
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

Status signal_proven_group(ProcessId id, int sig, const std::string& proc_root) {
  const int leader = id.pid;
  const uint64_t start_ticks = id.start_ticks;
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

}  // namespace stepwatch::runbook
