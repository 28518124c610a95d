#include "src/agent/proof.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "src/common/proc_stat.h"
#include "src/probe/procfs.h"

namespace stepwatch::agent {

namespace {

// Whether /proc/<pid>/maps has a mapping of the file with this device and inode.
bool maps_file(const std::string& proc_root, int pid, dev_t dev, ino_t ino) {
  std::ifstream in(fmt::format("{}/{}/maps", proc_root, pid));
  std::string line;
  while (std::getline(in, line)) {
    // address perms offset dev(major:minor, hex) inode path
    std::istringstream fields(line);
    std::string addr, perms, offset, device;
    unsigned long long inode = 0;
    if (!(fields >> addr >> perms >> offset >> device >> inode) || inode != ino) continue;
    size_t colon = device.find(':');
    if (colon == std::string::npos) continue;
    unsigned int major_no = 0, minor_no = 0;
    auto a = std::from_chars(device.data(), device.data() + colon, major_no, 16);
    auto b =
        std::from_chars(device.data() + colon + 1, device.data() + device.size(), minor_no, 16);
    if (a.ec != std::errc() || b.ec != std::errc()) continue;
    if (major_no == major(dev) && minor_no == minor(dev)) return true;
  }
  return false;
}

}  // namespace

Proof prove_rank_process(const std::string& proc_root, const std::string& job_dir,
                         const contract::RankSnapshot& r) {
  Proof p;
  auto refuse = [&](std::string why) {
    p.why = fmt::format("rank {} (pid {}): {}", r.rank, r.pid, why);
    return p;
  };
  if (r.source != contract::Source::kBeacon)
    return refuse("known from JSONL only: no beacon to prove it by");
  if (r.pid <= 0 || r.pid_start_ticks == 0) return refuse("the beacon names no pid and start time");
  struct stat beacon {
  }, dir{};
  if (::lstat(r.path.c_str(), &beacon) != 0 || !S_ISREG(beacon.st_mode)) {
    return refuse(fmt::format("{} is not a regular file", r.path));
  }
  if (::lstat(job_dir.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode))
    return refuse(job_dir + " is not a directory");
  if (dir.st_uid != beacon.st_uid) {
    return refuse(fmt::format("{} belongs to uid {}, its directory to uid {}", r.path,
                              beacon.st_uid, dir.st_uid));
  }
  auto uids = probe::read_process_uids(proc_root, r.pid);
  if (!uids) return refuse("gone, or its status cannot be read");
  if (uids->real != beacon.st_uid || uids->effective != beacon.st_uid) {
    return refuse(fmt::format("runs as uid {}/{}, the beacon belongs to uid {}", uids->real,
                              uids->effective, beacon.st_uid));
  }
  auto st = read_proc_stat(proc_root, r.pid);
  if (!st) return refuse("gone");
  if (st->start_ticks != r.pid_start_ticks) {
    return refuse(
        fmt::format("started at tick {}, the beacon records {}: another process has the pid",
                    st->start_ticks, r.pid_start_ticks));
  }
  if (!maps_file(proc_root, r.pid, beacon.st_dev, beacon.st_ino)) {
    return refuse(fmt::format("does not have {} mapped: not the beacon's writer", r.path));
  }
  p.proven = true;
  p.process = runbook::ProcessRef{r.pid, r.pid_start_ticks, fmt::format("rank {}", r.rank)};
  return p;
}

}  // namespace stepwatch::agent
