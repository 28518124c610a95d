// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: recorded traces (docs/replay.md). The input is written to one file in
// /dev/shm (read_trace takes a path) and read back. Nothing may crash or throw; every problem
// names the file and a line that exists; kept observations move forward in time and hold
// valid ranks; every kept header and observation survives a round trip through its writer.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/require.h"
#include "fuzz/scratch.h"
#include "src/contract/names.h"
#include "src/trace/trace_file.h"

namespace {

using stepwatch::detect::Observation;
using stepwatch::trace::TraceHeader;
using stepwatch::trace::TraceLine;

void write_file(const std::string& path, std::string_view text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_REQUIRE(fd >= 0);
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    FUZZ_REQUIRE(n > 0);
    text.remove_prefix(static_cast<size_t>(n));
  }
  ::close(fd);
}

// The lines std::getline yields: a last line without '\n' counts, an empty tail does not.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  return lines;
}

bool first_line_is_header(std::string_view text) {
  for (std::string_view line : split_lines(text)) {
    if (line.empty()) continue;
    auto parsed = stepwatch::trace::parse_trace_line(line);
    return parsed.ok() && parsed->kind == TraceLine::kHeader;
  }
  return false;
}

// "PATH:LINE: ..." names a line of the file; "PATH: ..." the file as a whole.
void check_problem(const stepwatch::Error& e, const std::string& path, int64_t lines) {
  FUZZ_REQUIRE(e.code != stepwatch::Errc::kOk);
  std::string_view m = e.message;
  FUZZ_REQUIRE(m.starts_with(path + ":"));
  m.remove_prefix(path.size() + 1);
  if (m.starts_with(" ")) return;
  int64_t line = 0;
  size_t i = 0;
  for (; i < m.size() && m[i] >= '0' && m[i] <= '9'; ++i) line = line * 10 + (m[i] - '0');
  FUZZ_REQUIRE(i > 0 && i < m.size() && m[i] == ':');
  FUZZ_REQUIRE(line >= 1 && line <= lines);
}

void check_observation(const Observation& o) {
  for (const auto& r : o.ranks) {
    FUZZ_REQUIRE(stepwatch::contract::validate_job_id(r.job).ok());
    FUZZ_REQUIRE(r.world_size >= 1 && r.rank >= 0 && r.rank < r.world_size);
    FUZZ_REQUIRE(stepwatch::contract::validate_phase(r.phase).ok());
  }
  // Written and read back, it writes the same line again.
  std::string line = stepwatch::trace::observation_to_json(o);
  auto back = stepwatch::trace::parse_trace_line(line);
  FUZZ_REQUIRE(back.ok() && back->kind == TraceLine::kObservation);
  FUZZ_REQUIRE(stepwatch::trace::observation_to_json(back->obs) == line);
}

void check_header(const TraceHeader& h) {
  FUZZ_REQUIRE(h.version == stepwatch::trace::kTraceVersion);
  std::string line = stepwatch::trace::header_to_json(h);
  auto back = stepwatch::trace::parse_trace_line(line);
  FUZZ_REQUIRE(back.ok() && back->kind == TraceLine::kHeader);
  FUZZ_REQUIRE(stepwatch::trace::header_to_json(back->header) == line);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string& path =
      stepwatch::fuzz::scratch_path("trace");  // one file, rewritten each time
  write_file(path, text);
  auto trace = stepwatch::trace::read_trace(path);
  FUZZ_REQUIRE(trace.ok());
  FUZZ_REQUIRE(trace->path == path);
  auto lines = static_cast<int64_t>(split_lines(text).size());
  for (const auto& e : trace->problems) check_problem(e, path, lines);
  FUZZ_REQUIRE(static_cast<int64_t>(trace->observations.size()) <= lines);

  check_header(trace->header);
  // A header on the first line gives every observation its host (a later one only those after
  // it: known and reported, a header that is not first is taken without a word).
  bool header_first = first_line_is_header(text);
  stepwatch::Stamp last{};
  for (const auto& o : trace->observations) {
    bool mono = o.now.mono_ns > 0 && last.mono_ns > 0;
    FUZZ_REQUIRE(mono ? o.now.mono_ns >= last.mono_ns : o.now.wall_ns >= last.wall_ns);
    last = o.now;
    FUZZ_REQUIRE(!header_first || trace->header.local_host.empty() || !o.local_host.empty());
    check_observation(o);
  }
  return 0;
}
