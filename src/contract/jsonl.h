// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The JSONL text contract: one JSON object per line appended to
// $STEPWATCH_DIR/<job>/progress.jsonl, for writers that cannot map a file (shell, other
// languages). Each line is an event; folding a rank's events gives the same RankSnapshot a
// beacon gives. Bad lines are reported with file and line number and skipped: nothing already
// folded is lost.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"
#include "src/contract/snapshot.h"

namespace stepwatch::contract {

struct ProgressEvent {
  std::string job;
  int rank = 0;
  int64_t wall_ns = 0;  // "time": Unix seconds (fractional allowed)
  std::optional<int64_t> step;
  std::optional<std::string> phase;  // the phase current from this event on
  bool beat = false;
  std::optional<std::string> checkpoint;  // id of a committed checkpoint
  std::optional<int64_t> checkpoint_step;
  std::optional<double> loss;  // "nan" (a string) is a reported NaN
  std::optional<int> world_size;
  std::optional<int> local_rank;
  std::optional<int> pid;
  std::optional<std::string> host;
  std::optional<RankStatus> status;  // "finished" | "failed" | "running"
  std::optional<uint32_t> incarnation;
};

inline constexpr size_t kMaxJsonlLine = 64 * 1024;

// Parses one line (without its newline). Errors name the field at fault.
Result<ProgressEvent> parse_progress_line(std::string_view line);

// Per-rank fold of events for one job.
class JsonlFolder {
 public:
  explicit JsonlFolder(std::string path = "progress.jsonl",
                       std::optional<std::string> expected_job = {})
      : path_(std::move(path)), expected_job_(std::move(expected_job)) {}

  // Parses and applies one line; an error names path:line and leaves the fold unchanged.
  Status feed(std::string_view line, int64_t line_no);
  void apply(const ProgressEvent& e);

  const std::map<int, RankSnapshot>& ranks() const { return ranks_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::optional<std::string> expected_job_;
  std::map<int, RankSnapshot> ranks_;
};

// How much of a progress.jsonl one poll reads, and how far behind a reader may fall before it
// skips to the file's tail: a writer (or a hostile user: `truncate -s 100G`) can grow the file
// faster than any poll reads it, and the newest lines are the ones that say where the job is.
inline constexpr size_t kJsonlPollBytes = 4 << 20;
inline constexpr uint64_t kJsonlMaxBacklog = 16 << 20;
// Bad lines listed by one poll; the rest are counted in one more line.
inline constexpr size_t kMaxBadLinesPerPoll = 32;

// Follows a progress.jsonl as it grows: reads only new bytes, keeps an unterminated last line
// for the next poll, restarts from the top when the file is truncated or replaced. Work is
// bounded: at most max_bytes a poll, and a backlog beyond kJsonlMaxBacklog is skipped (said once
// per skip) so that reading resumes at the line boundary after the last kJsonlPollBytes.
class JsonlTail {
 public:
  explicit JsonlTail(std::string path, std::optional<std::string> expected_job = {})
      : path_(path), folder_(std::move(path), std::move(expected_job)) {}

  // Reads what was appended since the last poll (at most max_bytes). Returns the bad lines seen
  // in this poll; a missing file is not an error (nothing written yet).
  // With `owner_uid`, a file of another owner is refused (kPermission), nothing read.
  Result<std::vector<Error>> poll(size_t max_bytes = kJsonlPollBytes,
                                  std::optional<uint32_t> owner_uid = {});
  uint64_t skipped_bytes() const { return skipped_bytes_; }  // by backlog skips, in all

  const JsonlFolder& folder() const { return folder_; }
  int64_t lines() const { return line_no_; }

 private:
  std::string path_;
  JsonlFolder folder_;
  uint64_t offset_ = 0;
  uint64_t inode_ = 0;
  int64_t line_no_ = 0;
  std::string partial_;
  bool skipping_long_line_ = false;
  uint64_t skipped_bytes_ = 0;
};

}  // namespace stepwatch::contract
