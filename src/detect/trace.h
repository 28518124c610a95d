// Recorded observation traces (JSONL, docs/replay.md): what `stepwatch run` and `stepwatch agent`
// record and `stepwatch replay` and the detection benchmark read. One JSON object per line:
//   {"type":"header", ...}       once, first: job, host, poll period, optional spec and truth
//   {"type":"obs", ...}          one poll: time, ranks, process / GPU / log evidence
//   {"type":"verdict", ...}      what the live detector said (replay ignores these)
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"
#include "src/detect/observation.h"
#include "src/detect/verdict.h"

namespace stepwatch::detect {

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
std::string observation_to_json(const Observation& o);
std::string verdict_to_json(const Verdict& v, std::string_view job = "");
// Reads what verdict_to_json wrote (seconds back to ns, names back to enums): a multi-node
// job's follower shows its leader's verdict. Errors name the field at fault.
Result<Verdict> verdict_from_json(std::string_view text);

// Parses one line. Errors name the field at fault (the caller adds file:line).
struct TraceLine {
  enum Kind { kHeader, kObservation, kVerdict } kind = kObservation;
  TraceHeader header;
  Observation obs;
};
Result<TraceLine> parse_trace_line(std::string_view line);

// Reads a whole trace: bad lines and observations that go back in time are reported with
// file:line and skipped; everything valid is kept.
struct Trace {
  std::string path;
  TraceHeader header;
  std::vector<Observation> observations;
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
  Status write_observation(const Observation& o);
  Status write_verdict(const Verdict& v);

 private:
  TraceWriter() = default;
  Status write_line(const std::string& line);
  std::FILE* f_ = nullptr;
  std::string path_;
  std::string job_;
};

}  // namespace stepwatch::detect
