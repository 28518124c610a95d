// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The trace codec (JSONL, docs/replay.md): observations, verdicts and trace headers as JSON, and
// one trace line parsed back. What `stepwatch run` and `stepwatch agent` record, what a node's
// summary embeds, what the API and the page show of a verdict. One JSON object per line:
//   {"type":"header", ...}       once, first: job, host, poll period, optional spec and truth
//   {"type":"obs", ...}          one poll: time, ranks, process / GPU / log evidence
//   {"type":"verdict", ...}      what the live detector said (replay ignores these)
// No I/O here: trace files are trace_file.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/json_fields.h"
#include "src/common/result.h"
#include "src/detect/observation.h"
#include "src/detect/verdict.h"

namespace stepwatch::trace {

inline constexpr int kTraceVersion = 1;

// What a labeled scenario says really happened, for scoring.
struct Truth {
  bool stall = false;               // does a stall (or death) happen at all
  int64_t stall_start_wall_ns = 0;  // when it began
  int64_t allowed_ns = 0;           // a detection within stall start + this meets the target
  int64_t interval_ns = 0;          // the job's real step interval, for "latency in intervals"
  std::vector<int> culprits;        // ranks at fault; empty: none named by the truth
  std::string note;
};

struct TraceHeader {
  int version = kTraceVersion;
  std::string job;
  std::string local_host;
  int64_t poll_ns = 0;
  std::string scenario;                  // generator's name, when generated
  std::optional<std::string> spec_toml;  // the spec the trace was recorded under
  std::optional<Truth> truth;
};

std::string header_to_json(const TraceHeader& h);
std::string observation_to_json(const detect::Observation& o);
std::string verdict_to_json(const detect::Verdict& v, std::string_view job = "");
// Reads what verdict_to_json wrote (seconds back to ns, names back to enums): a multi-node
// job's follower shows its leader's verdict. Errors name the field at fault.
Result<detect::Verdict> verdict_from_json(std::string_view text);
// The same of a value already parsed (bounded: json_fields::parse_bounded), and an "obs" object's
// observation: a node's summary and the leader's view embed them, read in place and never
// re-serialized (reliability review E5).
Result<detect::Verdict> verdict_from_value(const json_fields::Json& j);
Result<detect::Observation> observation_from_value(const json_fields::Json& j);

// Parses one line. Errors name the field at fault (the caller adds file:line).
struct TraceLine {
  enum Kind { kHeader, kObservation, kVerdict } kind = kObservation;
  TraceHeader header;
  detect::Observation obs;
};
Result<TraceLine> parse_trace_line(std::string_view line);

}  // namespace stepwatch::trace
