// Whether many processes are still alive, cheaply enough to ask every second for thousands of
// ranks: one pidfd per process, opened once after its start time was checked, and one poll()
// over all of them. A pidfd names one process, not a number: a pid reused by another process
// never reads as alive. Without pidfds (an old kernel, a fake /proc in tests, no descriptors
// left) the answer comes from reading /proc/<pid>/stat instead.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace stepwatch::probe {

enum class Life {
  kAlive,
  kGone,     // exited (a zombie counts: it will never commit another step)
  kReused,   // the pid now belongs to a process with another start time
  kUnknown,  // pid 0, or /proc refused
};
const char* life_name(Life l);

class PidWatch {
 public:
  // Pidfds are kept at this descriptor number or above (see open_entry).
  static constexpr int kFirstPidfd = 1024;

  explicit PidWatch(std::string proc_root = "/proc");
  ~PidWatch();
  PidWatch(const PidWatch&) = delete;
  PidWatch& operator=(const PidWatch&) = delete;

  // Each (pid, start ticks; 0 when unknown) asked, in order. Descriptors of processes not asked
  // for any more are closed.
  std::vector<Life> check(const std::vector<std::pair<int, uint64_t>>& procs);

  size_t descriptors() const;  // pidfds held now
  bool using_pidfds() const { return use_pidfd_; }

 private:
  struct Entry {
    int fd = -1;
    Life life = Life::kUnknown;
    bool final = false;  // gone or reused: never changes again
    bool asked = false;
  };
  Life open_entry(Entry& e, int pid, uint64_t start);
  Life read_stat(int pid, uint64_t start) const;

  std::string root_;
  bool use_pidfd_;
  std::map<std::pair<int, uint64_t>, Entry> entries_;
};

}  // namespace stepwatch::probe
