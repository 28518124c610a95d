// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// One look at a beacon root: which jobs exist and what each rank last reported, from beacon
// files and progress.jsonl alike. Junk in the directory is reported, never fatal.
#pragma once

#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/contract/snapshot.h"

namespace stepwatch::contract {

struct JobView {
  std::string job;
  std::string dir;
  std::vector<RankSnapshot> ranks;  // sorted by rank; one per rank
  std::vector<Error> problems;      // unreadable beacons, bad JSONL lines, junk files
  size_t problems_total = 0;        // including those a bounded list left out
};

// Job directories under root with valid job ids, sorted. Invalid names are skipped and listed
// in `skipped` when given: at most `max_listed` of them, then one line that sums up the rest (a
// root flooded with junk must not flood the log); `skipped_total` receives the full count.
Result<std::vector<std::string>> list_jobs(const std::string& root,
                                           std::vector<Error>* skipped = nullptr,
                                           size_t max_listed = 32, size_t* skipped_total = nullptr);

// Reads every rank of one job once (a one-shot JobReader, src/contract/job_reader.h). When a
// rank has both a beacon and JSONL lines, the source with the most recent step wins (a trainer
// may move from one to the other).
JobView scan_job(const std::string& root, const std::string& job);

// The error for a directory that could not be opened (errno `err`), naming it.
Error dir_error(const std::string& dir, int err);

}  // namespace stepwatch::contract
