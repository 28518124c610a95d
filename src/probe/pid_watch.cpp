#include "src/probe/pid_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "src/common/proc_stat.h"

namespace stepwatch::probe {

const char* life_name(Life l) {
  switch (l) {
    case Life::kAlive:
      return "alive";
    case Life::kGone:
      return "gone";
    case Life::kReused:
      return "reused";
    case Life::kUnknown:
      return "unknown";
  }
  return "?";
}

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
    : root_(std::move(proc_root)), use_pidfd_(root_ == "/proc") {}

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

Life PidWatch::read_stat(int pid, uint64_t start) const {
  auto st = read_proc_stat(root_, pid);
  if (!st) return st.error().code == Errc::kNotFound ? Life::kGone : Life::kUnknown;
  if (start != 0 && st->start_ticks != start) return Life::kReused;
  if (st->state == 'Z' || st->state == 'X') return Life::kGone;
  return Life::kAlive;
}

Life PidWatch::open_entry(Entry& e, int pid, uint64_t start) {
  if (!use_pidfd_) return read_stat(pid, start);
  int fd = pidfd_open(pid);
  if (fd < 0) {
    if (errno == ESRCH) return Life::kGone;
    if (errno == ENOSYS || errno == EINVAL) use_pidfd_ = false;  // the kernel has none
    return read_stat(pid, start);  // EMFILE and the like: this one without a descriptor
  }
  // Thousands of pidfds must not push every later socket and file past FD_SETSIZE: select()
  // cannot take a descriptor above 1023, and the libraries loaded into the agent (NVML among
  // them) are not ours to audit for it. The pidfds live above that line; the low numbers stay
  // free for everything else.
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, kFirstPidfd);
  ::close(fd);
  if (high < 0) return read_stat(pid, start);  // the limit is too low for that: no descriptor
  fd = high;
  // The descriptor names whatever process has the pid now; it is the rank's only if the start
  // time matches. Checked after opening, so a process that exits in between reads as gone.
  Life life = read_stat(pid, start);
  if (life == Life::kAlive) {
    e.fd = fd;
  } else {
    ::close(fd);
  }
  return life;
}

std::vector<Life> PidWatch::check(const std::vector<std::pair<int, uint64_t>>& procs) {
  for (auto& [key, e] : entries_) e.asked = false;
  std::vector<Life> out(procs.size(), Life::kUnknown);
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, Entry*>> polled;  // out index and entry of each pollfd
  for (size_t i = 0; i < procs.size(); ++i) {
    auto [pid, start] = procs[i];
    if (pid <= 0) continue;
    Entry& e = entries_[{pid, start}];
    e.asked = true;
    if (e.final) {
      out[i] = e.life;
      continue;
    }
    if (e.fd < 0) {
      e.life = open_entry(e, pid, start);
      e.final = e.life == Life::kGone || e.life == Life::kReused;
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
        e.life = Life::kGone;
        e.final = true;
      } else if (n >= 0) {
        e.life = Life::kAlive;
      } else {
        e.life = read_stat(procs[i].first, procs[i].second);
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
