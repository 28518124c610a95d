// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The trainer's output as evidence: each line goes through the log contract (when the spec
// has one) and into a ring of recent lines for the incident artifact. Fed from the output
// thread, read from the supervisor's loop.
#pragma once

#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "src/contract/snapshot.h"
#include "src/detect/observation.h"
#include "src/probe/log_contract.h"
#include "src/spec/spec.h"

namespace stepwatch::supervise {

class LogFeed {
 public:
  // An invalid pattern is an error here (the spec loader has already checked it).
  static Result<std::unique_ptr<LogFeed>> create(const spec::LogContract& log, size_t keep_lines);

  void feed(std::string_view line, int64_t wall_ns);
  // Progress read from the log as a rank snapshot (rank 0, wall times only); nullopt when the
  // spec has no log contract.
  std::optional<contract::RankSnapshot> progress(const std::string& job,
                                                 uint32_t incarnation) const;
  std::optional<detect::LogFacts> facts() const;
  // With preset "auto": "NAME (from output line N)" once per pick (or refinement); else nullopt.
  std::optional<std::string> take_pick();
  std::vector<std::string> recent() const;
  // A new incarnation starts from scratch.
  void reset(int64_t wall_ns);
  bool has_contract() const { return contract_.has_value(); }

 private:
  LogFeed() = default;
  mutable std::mutex mu_;
  std::optional<probe::LogContract> contract_;
  std::deque<std::string> recent_;
  size_t keep_ = 200;
  uint64_t lines_ = 0;
  int64_t last_line_wall_ns_ = 0;
  int64_t started_wall_ns_ = 0;  // the incarnation's launch
  bool auto_ = false;            // the spec's preset is "auto"
  std::string told_preset_;      // the pick take_pick() last returned
};

}  // namespace stepwatch::supervise
