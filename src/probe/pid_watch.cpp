// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/pid_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace stepwatch::probe {

namespace {

int pidfd_open(int pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

PidWatch::PidWatch(std::string proc_root)
    : proc_(std::move(proc_root)), use_pidfd_(proc_.root() == "/proc") {}

PidWatch::~PidWatch() {
  for (auto& [key, e] : entries_) {
    if (e.fd >= 0) ::close(e.fd);
  }
}

size_t PidWatch::descriptors() const {
  size_t n = 0;
  for (const auto& [key, e] : entries_) n += e.fd >= 0;
  return n;
}

Liveness PidWatch::read_stat(ProcessId id) const {
  auto st = proc_.stat(id.pid);
  if (!st) return st.error().code == Errc::kNotFound ? Liveness::kGone : Liveness::kUnknown;
  // A start time of 0 here means "whatever runs under the pid now" (inspect() would say kUnknown).
  if (id.start_ticks != 0 && st->start_ticks != id.start_ticks) return Liveness::kReused;
  if (st->state == 'Z' || st->state == 'X') return Liveness::kGone;
  return Liveness::kAlive;
}

Liveness PidWatch::open_entry(Entry& e, ProcessId id) {
  if (!use_pidfd_) return read_stat(id);
  int fd = pidfd_open(id.pid);
  if (fd < 0) {
    if (errno == ESRCH) return Liveness::kGone;
    if (errno == ENOSYS || errno == EINVAL) use_pidfd_ = false;  // the kernel has none
    return read_stat(id);  // EMFILE and the like: this one without a descriptor
  }
  // Thousands of pidfds must not push every later socket and file past FD_SETSIZE: select()
  // cannot take a descriptor above 1023, and the libraries loaded into the agent (NVML among
  // them) are not ours to audit for it. The pidfds live above that line; the low numbers stay
  // free for everything else.
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, kFirstPidfd);
  ::close(fd);
  if (high < 0) return read_stat(id);  // the limit is too low for that: no descriptor
  fd = high;
  // The descriptor names whatever process has the pid now; it is the rank's only if the start
  // time matches. Checked after opening, so a process that exits in between reads as gone.
  Liveness life = read_stat(id);
  if (life == Liveness::kAlive) {
    e.fd = fd;
  } else {
    ::close(fd);
  }
  return life;
}

std::vector<Liveness> PidWatch::check(const std::vector<ProcessId>& procs) {
  for (auto& [key, e] : entries_) e.asked = false;
  std::vector<Liveness> out(procs.size(), Liveness::kUnknown);
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, Entry*>> polled;  // out index and entry of each pollfd
  for (size_t i = 0; i < procs.size(); ++i) {
    if (procs[i].pid <= 0) continue;
    Entry& e = entries_[procs[i]];
    e.asked = true;
    if (e.final) {
      out[i] = e.life;
      continue;
    }
    if (e.fd < 0) {
      e.life = open_entry(e, procs[i]);
      e.final = e.life == Liveness::kGone || e.life == Liveness::kReused;
      out[i] = e.life;
      if (e.fd < 0) continue;
    }
    fds.push_back({e.fd, POLLIN, 0});
    polled.emplace_back(i, &e);
  }
  if (!fds.empty()) {
    int n;
    do {
      n = ::poll(fds.data(), fds.size(), 0);
    } while (n < 0 && errno == EINTR);
    for (size_t k = 0; k < fds.size(); ++k) {
      auto [i, entry] = polled[k];
      Entry& e = *entry;
      if (n >= 0 && (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        ::close(e.fd);
        e.fd = -1;
        e.life = Liveness::kGone;
        e.final = true;
      } else if (n >= 0) {
        e.life = Liveness::kAlive;
      } else {
        e.life = read_stat(procs[i]);
      }
      out[i] = e.life;
    }
  }
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!it->second.asked) {
      if (it->second.fd >= 0) ::close(it->second.fd);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

}  // namespace stepwatch::probe
