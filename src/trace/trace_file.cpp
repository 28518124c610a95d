// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Trace files: read line by line (a bad line is reported and skipped), appended line by line.
#include "src/trace/trace_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

namespace stepwatch::trace {

using detect::Observation;
using detect::Verdict;

Result<Trace> read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Error{errno == ENOENT ? Errc::kNotFound : Errc::kIo,
                 fmt::format("{}: {}", path, std::strerror(errno))};
  }
  Trace t;
  t.path = path;
  std::string line;
  int64_t line_no = 0;
  bool have_header = false;
  Stamp last{};
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto parsed = parse_trace_line(line);
    if (!parsed) {
      t.problems.push_back(Error{parsed.error().code,
                                 fmt::format("{}:{}: {}", path, line_no, parsed.error().message)});
      continue;
    }
    if (parsed->kind == TraceLine::kHeader) {
      if (have_header) {
        t.problems.push_back(
            Error{Errc::kParse, fmt::format("{}:{}: a second header, ignored", path, line_no)});
        continue;
      }
      have_header = true;
      t.header = std::move(parsed->header);
    } else if (parsed->kind == TraceLine::kObservation) {
      const Stamp& now = parsed->obs.now;
      bool backwards = now.mono_ns > 0 && last.mono_ns > 0 ? now.mono_ns < last.mono_ns
                                                           : now.wall_ns < last.wall_ns;
      if (backwards) {
        t.problems.push_back(
            Error{Errc::kParse,
                  fmt::format("{}:{}: observation time goes backwards ({} after {}), skipped", path,
                              line_no, now.mono_ns > 0 ? now.mono_ns : now.wall_ns,
                              last.mono_ns > 0 ? last.mono_ns : last.wall_ns)});
        continue;
      }
      last = now;
      if (parsed->obs.local_host.empty()) parsed->obs.local_host = t.header.local_host;
      t.observations.push_back(std::move(parsed->obs));
    }
  }
  if (!have_header && line_no > 0) {
    t.problems.push_back(
        Error{Errc::kParse, fmt::format("{}: no header line; using defaults", path)});
  }
  return t;
}

Result<TraceWriter> TraceWriter::open(const std::string& path, const TraceHeader& header) {
  TraceWriter w;
  w.f_ = std::fopen(path.c_str(), "a");
  if (w.f_ == nullptr)
    return Error{Errc::kIo, fmt::format("cannot write trace {}: {}", path, std::strerror(errno))};
  w.path_ = path;
  w.job_ = header.job;
  if (auto st = w.write_line(header_to_json(header)); !st) return st.error();
  return w;
}

TraceWriter::TraceWriter(TraceWriter&& o) noexcept
    : f_(std::exchange(o.f_, nullptr)), path_(std::move(o.path_)), job_(std::move(o.job_)) {}

TraceWriter::~TraceWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

Status TraceWriter::write_line(const std::string& line) {
  if (std::fputs(line.c_str(), f_) < 0 || std::fputc('\n', f_) == EOF || std::fflush(f_) != 0) {
    return Error{Errc::kIo, fmt::format("{}: write failed: {}", path_, std::strerror(errno))};
  }
  return {};
}

Status TraceWriter::write_observation(const Observation& o) {
  return write_line(observation_to_json(o));
}

Status TraceWriter::write_verdict(const Verdict& v) {
  std::string j = verdict_to_json(v, job_);
  // Tag the line so replay can tell it from an observation.
  j.insert(1, "\"type\":\"verdict\",");
  return write_line(j);
}

}  // namespace stepwatch::trace
