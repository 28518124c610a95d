// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Trace files (JSONL, docs/replay.md): the reader `stepwatch replay` and the detection benchmark
// use, and the writer `stepwatch run` and `stepwatch agent` record with. The lines themselves are
// codec.h's.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/detect/observation.h"
#include "src/detect/verdict.h"
#include "src/trace/codec.h"

namespace stepwatch::trace {

// Reads a whole trace: bad lines and observations that go back in time are reported with
// file:line and skipped; everything valid is kept.
struct Trace {
  std::string path;
  TraceHeader header;
  std::vector<detect::Observation> observations;
  std::vector<Error> problems;
};
Result<Trace> read_trace(const std::string& path);

// Appends lines to a trace file, flushing each so a crash loses nothing already observed.
class TraceWriter {
 public:
  static Result<TraceWriter> open(const std::string& path, const TraceHeader& header);
  TraceWriter(TraceWriter&& o) noexcept;
  TraceWriter& operator=(TraceWriter&&) = delete;
  ~TraceWriter();
  Status write_observation(const detect::Observation& o);
  Status write_verdict(const detect::Verdict& v);

 private:
  TraceWriter() = default;
  Status write_line(const std::string& line);
  std::FILE* f_ = nullptr;
  std::string path_;
  std::string job_;
};

}  // namespace stepwatch::trace
