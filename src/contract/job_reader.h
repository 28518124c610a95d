// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Repeated looks at one job, for a watcher that polls it every second: what scan_job reads, but
// beacons stay mapped between polls, a beacon whose update counter did not move is not decoded
// again, and progress.jsonl is followed rather than re-read. Bad files are reported on every
// poll they persist, without being reopened each time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "src/contract/beacon_reader.h"
#include "src/contract/job_scan.h"
#include "src/contract/jsonl.h"

namespace stepwatch::contract {

struct JobReaderOptions {
  // A file that could not be mapped (wrong size, symlink, foreign content) is retried when its
  // name points to a new file, and otherwise once every `audit_every` polls; the same round
  // checks that a mapped beacon still has its size (a beacon that grew is skipped).
  int audit_every = 16;
  // Problems listed per poll; the rest are summed up in one line (a directory flooded with junk
  // must not flood the log).
  size_t max_problems = 32;
  // Beacon files watched per job: more than any node runs ranks of one job (the benchmarks go to
  // 10,000). Beyond it new names are not opened or remembered, only counted in one problem
  // line: a directory flooded with rank-N.beacon files must not cost the agent memory and poll
  // time without bound.
  size_t max_entries = 16384;
};

class JobReader {
 public:
  JobReader(std::string root, std::string job, JobReaderOptions options = {});

  JobView poll();

  struct Stats {
    uint64_t mapped = 0;     // beacons opened and mapped this poll
    uint64_t decoded = 0;    // beacons whose record changed and was decoded again
    uint64_t unchanged = 0;  // beacons whose update counter did not move
    uint64_t audited = 0;    // files whose size was checked by path
  };
  const Stats& last_stats() const { return stats_; }
  // The job directory's owner as of the last poll: only that user's files are read, and only
  // that user's processes are the job's. nullopt until the directory has been seen.
  std::optional<uint32_t> owner_uid() const { return dir_uid_; }

 private:
  struct Entry {
    std::string path;
    int rank = -1;                     // from the file name
    uint64_t d_ino = 0;                // from the directory listing; a new value: a new file
    std::optional<BeaconMapping> map;  // absent: the file could not be mapped (see error)
    uint64_t seq = 1;                  // the counter the cached result was read at (odd: none)
    std::optional<RankSnapshot> snap;
    std::optional<Error> error;
    bool seen = false;
  };
  void refresh(Entry& e, bool reopen, bool audit);

  std::string root_, job_, dir_;
  JobReaderOptions options_;
  std::map<std::string, Entry> entries_;  // by file name
  std::optional<JsonlTail> tail_;
  std::optional<uint32_t> dir_uid_;  // the job directory's owner: only its files are read
  uint64_t polls_ = 0;
  Stats stats_;
};

}  // namespace stepwatch::contract
