// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/contract/jsonl.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "src/contract/names.h"

namespace stepwatch::contract {

namespace {

using json = nlohmann::json;

Error field_error(const char* field, std::string_view why) {
  return Error{Errc::kParse, fmt::format("field \"{}\" {}", field, why)};
}

Result<int64_t> get_int(const json& v, const char* field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) {
    // Accept 12.0 from languages that only have doubles.
    if (v.is_number_float()) {
      double d = v.get<double>();
      // hi may be INT64_MAX, which rounds up to 2^63 as a double: compare below 2^63 too, or the
      // cast of 9223372036854775808.0 is undefined behaviour.
      if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) &&
          d <= static_cast<double>(hi) && d < 9223372036854775808.0) {
        return static_cast<int64_t>(d);
      }
    }
    return field_error(field, fmt::format("must be an integer, got {}", v.dump()));
  }
  int64_t x;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return field_error(field, fmt::format("is out of range {}..{}", lo, hi));
    }
    x = static_cast<int64_t>(u);
  } else {
    x = v.get<int64_t>();
  }
  if (x < lo || x > hi) return field_error(field, fmt::format("is {}, outside {}..{}", x, lo, hi));
  return x;
}

Result<std::string> get_string(const json& v, const char* field) {
  if (!v.is_string()) return field_error(field, fmt::format("must be a string, got {}", v.dump()));
  return v.get<std::string>();
}

}  // namespace

Result<ProgressEvent> parse_progress_line(std::string_view line) {
  if (line.size() > kMaxJsonlLine) {
    return Error{Errc::kParse,
                 fmt::format("line of {} bytes, at most {} allowed", line.size(), kMaxJsonlLine)};
  }
  json doc = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Error{Errc::kParse, "not valid JSON"};
  if (!doc.is_object()) return Error{Errc::kParse, "not a JSON object"};

  ProgressEvent e;
  auto it = doc.find("job");
  if (it == doc.end()) return field_error("job", "is missing");
  auto job = get_string(*it, "job");
  if (!job) return job.error();
  if (auto st = validate_job_id(*job); !st) return field_error("job", st.error().message);
  e.job = std::move(*job);

  it = doc.find("rank");
  if (it == doc.end()) return field_error("rank", "is missing");
  auto rank = get_int(*it, "rank", 0, 1'000'000);
  if (!rank) return rank.error();
  e.rank = static_cast<int>(*rank);

  it = doc.find("time");
  if (it == doc.end()) return field_error("time", "is missing (Unix seconds)");
  if (!it->is_number())
    return field_error("time", fmt::format("must be Unix seconds, got {}", it->dump()));
  double t = it->get<double>();
  if (!std::isfinite(t) || t <= 0 || t > 9.2e9)
    return field_error("time", fmt::format("is {}, not Unix seconds", t));
  e.wall_ns = static_cast<int64_t>(std::llround(t * 1e9));

  for (auto& [key, v] : doc.items()) {
    if (key == "job" || key == "rank" || key == "time") continue;
    if (key == "step") {
      auto r = get_int(v, "step", 0, std::numeric_limits<int64_t>::max());
      if (!r) return r.error();
      e.step = *r;
    } else if (key == "phase") {
      auto r = get_string(v, "phase");
      if (!r) return r.error();
      if (auto st = validate_phase(*r); !st) return field_error("phase", st.error().message);
      e.phase = std::move(*r);
    } else if (key == "beat") {
      if (!v.is_boolean())
        return field_error("beat", fmt::format("must be true or false, got {}", v.dump()));
      e.beat = v.get<bool>();
    } else if (key == "checkpoint") {
      auto r = get_string(v, "checkpoint");
      if (!r) return r.error();
      if (auto st = validate_checkpoint_id(*r); !st)
        return field_error("checkpoint", st.error().message);
      e.checkpoint = std::move(*r);
    } else if (key == "checkpoint_step") {
      auto r = get_int(v, "checkpoint_step", 0, std::numeric_limits<int64_t>::max());
      if (!r) return r.error();
      e.checkpoint_step = *r;
    } else if (key == "loss") {
      if (v.is_null()) continue;  // not reported
      if (v.is_number()) {
        e.loss = v.get<double>();
      } else if (v.is_string() && (v == "nan" || v == "NaN")) {
        e.loss = std::numeric_limits<double>::quiet_NaN();
      } else if (v.is_string() && (v == "inf" || v == "-inf")) {
        e.loss = v == "inf" ? std::numeric_limits<double>::infinity()
                            : -std::numeric_limits<double>::infinity();
      } else {
        return field_error("loss",
                           fmt::format("must be a number, null or \"nan\", got {}", v.dump()));
      }
    } else if (key == "world_size") {
      auto r = get_int(v, "world_size", 1, 1'000'000);
      if (!r) return r.error();
      e.world_size = static_cast<int>(*r);
    } else if (key == "local_rank") {
      auto r = get_int(v, "local_rank", 0, 1'000'000);
      if (!r) return r.error();
      e.local_rank = static_cast<int>(*r);
    } else if (key == "pid") {
      auto r = get_int(v, "pid", 1, std::numeric_limits<int>::max());
      if (!r) return r.error();
      e.pid = static_cast<int>(*r);
    } else if (key == "incarnation") {
      auto r = get_int(v, "incarnation", 0, 0xffffffffLL);
      if (!r) return r.error();
      e.incarnation = static_cast<uint32_t>(*r);
    } else if (key == "host") {
      auto r = get_string(v, "host");
      if (!r) return r.error();
      if (auto st = validate_host(*r); !st) return field_error("host", st.error().message);
      e.host = std::move(*r);
    } else if (key == "status") {
      auto r = get_string(v, "status");
      if (!r) return r.error();
      if (*r == "running")
        e.status = RankStatus::kRunning;
      else if (*r == "finished")
        e.status = RankStatus::kFinished;
      else if (*r == "failed")
        e.status = RankStatus::kFailed;
      else
        return field_error("status",
                           fmt::format("is \"{}\", expected running, finished or failed", *r));
    }
    // Unknown keys are ignored: newer writers may add fields (docs/contract.md, versioning).
  }
  if (e.checkpoint_step && !e.checkpoint)
    return field_error("checkpoint_step", "given without \"checkpoint\"");
  if (e.world_size && e.rank >= *e.world_size) {
    return field_error("rank",
                       fmt::format("is {}, not below world_size {}", e.rank, *e.world_size));
  }
  return e;
}

void JsonlFolder::apply(const ProgressEvent& e) {
  auto [it, inserted] = ranks_.try_emplace(e.rank);
  RankSnapshot& s = it->second;
  Stamp at{e.wall_ns, 0};
  if (inserted) {
    s.source = Source::kJsonl;
    s.path = path_;
    s.job = e.job;
    s.rank = e.rank;
    s.local_rank = e.rank;
    s.created = at;
    s.phase_since = at;
  }
  if (e.world_size) s.world_size = *e.world_size;
  if (e.local_rank) s.local_rank = *e.local_rank;
  if (e.pid) s.pid = *e.pid;
  if (e.host) s.host = *e.host;
  if (e.incarnation) s.incarnation = *e.incarnation;
  if (e.status) s.status = *e.status;
  if (e.step) {
    s.step = *e.step;
    s.step_at = at;
    ++s.step_count;
    if (s.phase == "init" && !e.phase) {
      s.phase = "train";
      s.phase_since = at;
      ++s.phase_count;
    }
  }
  if (e.phase && *e.phase != s.phase) {
    s.phase = *e.phase;
    s.phase_since = at;
    ++s.phase_count;
  }
  if (e.beat) {
    s.beat_at = at;
    ++s.beat_count;
  }
  if (e.checkpoint) {
    s.checkpoint = CheckpointMark{
        *e.checkpoint, e.checkpoint_step.value_or(e.step.value_or(s.step.value_or(0))), at};
  }
  if (e.loss) {
    s.loss = *e.loss;
    s.loss_at = at;
  }
  if (e.wall_ns > s.updated.wall_ns) s.updated.wall_ns = e.wall_ns;
}

Status JsonlFolder::feed(std::string_view line, int64_t line_no) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.remove_suffix(1);
  if (line.empty()) return {};  // blank lines are allowed
  auto e = parse_progress_line(line);
  if (!e) return Error{e.error().code, fmt::format("{}:{}: {}", path_, line_no, e.error().message)};
  if (expected_job_ && e->job != *expected_job_) {
    return Error{Errc::kJobMismatch,
                 fmt::format("{}:{}: line belongs to job \"{}\", expected \"{}\"", path_, line_no,
                             e->job, *expected_job_)};
  }
  auto known = ranks_.find(e->rank);
  if (known != ranks_.end() && known->second.job != e->job) {
    return Error{Errc::kJobMismatch, fmt::format("{}:{}: rank {} was job \"{}\", now \"{}\"", path_,
                                                 line_no, e->rank, known->second.job, e->job)};
  }
  apply(*e);
  return {};
}

Result<std::vector<Error>> JsonlTail::poll(size_t max_bytes, std::optional<uint32_t> owner_uid) {
  std::vector<Error> bad;
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return bad;
    if (errno == ELOOP)
      return Error{Errc::kInvalidArgument, fmt::format("{}: is a symlink, refused", path_)};
    return Error{errno == EACCES ? Errc::kPermission : Errc::kIo,
                 fmt::format("{}: {}", path_, std::strerror(errno))};
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{Errc::kInvalidArgument, fmt::format("{}: not a regular file", path_)};
  }
  if (owner_uid && st.st_uid != *owner_uid) {
    ::close(fd);
    return Error{
        Errc::kPermission,
        fmt::format("{}: owned by uid {}, not by the job directory's owner (uid {}): ignored",
                    path_, st.st_uid, *owner_uid)};
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (st.st_ino != inode_ || size < offset_) {
    // Replaced or truncated: read it again from the top. The fold keeps what it knew.
    if (inode_ != 0) {
      bad.push_back(Error{
          Errc::kIo,
          fmt::format("{}: file was truncated or replaced; reading it from the start", path_)});
    }
    inode_ = st.st_ino;
    offset_ = 0;
    line_no_ = 0;
    partial_.clear();
    skipping_long_line_ = false;
  }
  if (size - offset_ > kJsonlMaxBacklog) {
    // Too far behind to read it all: resume near the end, at the next line boundary (the part
    // line there is dropped like an over-long one). Line numbers count on from the last read.
    uint64_t resume = size - std::min<uint64_t>(kJsonlPollBytes, max_bytes);
    bad.push_back(Error{
        Errc::kSizeMismatch,
        fmt::format("{}: {} bytes behind the writer, more than {}: skipped {} bytes to its tail "
                    "(line numbers after this count from line {})",
                    path_, size - offset_, kJsonlMaxBacklog, resume - offset_, line_no_ + 1)});
    skipped_bytes_ += resume - offset_;
    offset_ = resume;
    partial_.clear();
    skipping_long_line_ = true;
  }
  std::string buf;
  size_t want = static_cast<size_t>(std::min<uint64_t>(size - offset_, max_bytes));
  buf.resize(want);
  size_t got = 0;
  while (got < want) {
    ssize_t n = ::pread(fd, buf.data() + got, want - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  buf.resize(got);
  offset_ += got;

  size_t start = 0;
  uint64_t unlisted = 0;  // bad lines beyond the listed ones
  while (start < buf.size()) {
    size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) {
      if (!skipping_long_line_) partial_.append(buf, start, std::string::npos);
      if (partial_.size() > kMaxJsonlLine) {
        bad.push_back(Error{Errc::kParse, fmt::format("{}:{}: line longer than {} bytes, skipped",
                                                      path_, line_no_ + 1, kMaxJsonlLine)});
        partial_.clear();
        skipping_long_line_ = true;
      }
      break;
    }
    ++line_no_;
    if (skipping_long_line_) {
      skipping_long_line_ = false;
    } else {
      partial_.append(buf, start, nl - start);
      if (auto s = folder_.feed(partial_, line_no_); !s) {
        if (bad.size() < kMaxBadLinesPerPoll) {
          bad.push_back(s.error());
        } else {
          ++unlisted;
        }
      }
    }
    partial_.clear();
    start = nl + 1;
  }
  if (unlisted > 0) {
    bad.push_back(
        Error{Errc::kParse, fmt::format("{}: {} more bad line(s) up to line {}, not listed", path_,
                                        unlisted, line_no_)});
  }
  return bad;
}

}  // namespace stepwatch::contract
