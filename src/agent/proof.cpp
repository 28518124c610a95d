// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/agent/proof.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include "src/probe/proc_fs.h"

namespace stepwatch::agent {

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
  const probe::ProcFs proc(proc_root);
  auto status = proc.status(r.pid);
  auto uids = status ? status->uids : std::nullopt;
  if (!uids) return refuse("gone, or its status cannot be read");
  if (uids->real != beacon.st_uid || uids->effective != beacon.st_uid) {
    return refuse(fmt::format("runs as uid {}/{}, the beacon belongs to uid {}", uids->real,
                              uids->effective, beacon.st_uid));
  }
  auto st = proc.stat(r.pid);
  if (!st) return refuse("gone");
  if (st->start_ticks != r.pid_start_ticks) {
    return refuse(
        fmt::format("started at tick {}, the beacon records {}: another process has the pid",
                    st->start_ticks, r.pid_start_ticks));
  }
  auto mapped = proc.maps_file(r.pid, beacon.st_dev, beacon.st_ino);
  if (!mapped || !*mapped) {
    return refuse(fmt::format("does not have {} mapped: not the beacon's writer", r.path));
  }
  p.proven = true;
  p.process = runbook::ProcessRef{{r.pid, r.pid_start_ticks}, fmt::format("rank {}", r.rank)};
  return p;
}

}  // namespace stepwatch::agent
