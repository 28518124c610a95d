// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/contract/beacon_reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>
#include <utility>

#include "src/contract/names.h"
#include "src/contract/seqlock.h"

namespace stepwatch::contract {

const char* source_name(Source s) {
  switch (s) {
    case Source::kBeacon:
      return "beacon";
    case Source::kJsonl:
      return "jsonl";
    case Source::kLog:
      return "log";
  }
  return "?";
}

const char* rank_status_name(RankStatus s) {
  switch (s) {
    case RankStatus::kRunning:
      return "running";
    case RankStatus::kFinished:
      return "finished";
    case RankStatus::kFailed:
      return "failed";
  }
  return "?";
}

const char* wait_kind_name(WaitKind w) {
  switch (w) {
    case WaitKind::kNone:
      return "none";
    case WaitKind::kCollective:
      return "collective";
    case WaitKind::kDevice:
      return "device";
    case WaitKind::kStore:
      return "store";
  }
  return "?";
}

namespace {

// A fixed char field must hold a NUL inside its bounds; returns the string before it.
Result<std::string> fixed_string(const char* field, size_t size, std::string_view path,
                                 const char* name) {
  size_t len = ::strnlen(field, size);
  if (len == size) {
    return Error{Errc::kInvalidField,
                 fmt::format("{}: field {} is not NUL-terminated", path, name)};
  }
  return std::string(field, len);
}

Error field_error(std::string_view path, const char* name, std::string_view why) {
  return Error{Errc::kInvalidField, fmt::format("{}: field {} {}", path, name, why)};
}

// The sampler block of a consistent copy: nullopt when no sampler wrote it (or the copy caught
// the sampler inside an update, which the next poll reads whole).
Result<std::optional<Sample>> decode_sample(const stepwatch_beacon_v1& b, std::string_view path) {
  if (b.sample_count == 0 || (b.sample_seq & 1) != 0) return std::optional<Sample>{};
  if (b.sample_wait > STEPWATCH_WAIT_MAX) {
    return field_error(path, "sample_wait",
                       fmt::format("is {}, must be 0..{}", b.sample_wait, STEPWATCH_WAIT_MAX));
  }
  for (int64_t t : {b.sample_wall_ns, b.sample_mono_ns, b.moved_wall_ns, b.moved_mono_ns}) {
    if (t < 0) return field_error(path, "sample", fmt::format("has a negative timestamp {}", t));
  }
  auto where = fixed_string(b.sample_where, sizeof b.sample_where, path, "sample_where");
  if (!where) return where.error();
  for (char c : *where) {
    if (c < 0x20 || c >= 0x7f)
      return field_error(path, "sample_where", "holds an unprintable byte");
  }
  Sample out;
  out.count = b.sample_count;
  out.at = {b.sample_wall_ns, b.sample_mono_ns};
  out.moved_at = {b.moved_wall_ns, b.moved_mono_ns};
  out.hash = b.sample_hash;
  out.wait = kAllWaitKinds[b.sample_wait];
  out.where = std::move(*where);
  return std::optional<Sample>{std::move(out)};
}

}  // namespace

Result<RankSnapshot> decode_beacon(std::span<const uint8_t> bytes, const ReadOptions& options,
                                   std::string_view path) {
  if (bytes.size() < 16) {
    return Error{Errc::kTruncated,
                 fmt::format("{}: {} bytes, shorter than the 16-byte header", path, bytes.size())};
  }
  uint64_t magic;
  uint32_t version, size;
  std::memcpy(&magic, bytes.data(), 8);
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&size, bytes.data() + 12, 4);
  if (magic != STEPWATCH_BEACON_MAGIC) {
    return Error{Errc::kBadMagic,
                 fmt::format("{}: bad magic 0x{:016x}, not a stepwatch beacon", path, magic)};
  }
  if (version != STEPWATCH_BEACON_VERSION) {
    return Error{Errc::kUnknownVersion,
                 fmt::format("{}: beacon version {}, this stepwatch reads version {}", path,
                             version, STEPWATCH_BEACON_VERSION)};
  }
  if (size != sizeof(stepwatch_beacon_v1)) {
    return Error{Errc::kSizeMismatch, fmt::format("{}: header says {} bytes, version 1 is {}", path,
                                                  size, sizeof(stepwatch_beacon_v1))};
  }
  if (bytes.size() < size) {
    return Error{Errc::kTruncated,
                 fmt::format("{}: {} bytes, header says {}", path, bytes.size(), size)};
  }
  if (bytes.size() > size) {
    return Error{Errc::kSizeMismatch,
                 fmt::format("{}: {} bytes, header says {}", path, bytes.size(), size)};
  }
  stepwatch_beacon_v1 b;
  std::memcpy(&b, bytes.data(), sizeof b);
  if (b.seq & 1)
    return Error{Errc::kTorn, fmt::format("{}: copied while a writer was inside an update", path)};

  RankSnapshot s;
  s.source = Source::kBeacon;
  s.path = std::string(path);
  auto job = fixed_string(b.job, sizeof b.job, path, "job");
  if (!job) return job.error();
  if (auto st = validate_job_id(*job); !st) return field_error(path, "job", st.error().message);
  if (options.expected_job && *job != *options.expected_job) {
    return Error{Errc::kJobMismatch,
                 fmt::format("{}: beacon belongs to job \"{}\", expected \"{}\"", path, *job,
                             *options.expected_job)};
  }
  s.job = std::move(*job);
  auto host = fixed_string(b.host, sizeof b.host, path, "host");
  if (!host) return host.error();
  if (auto st = validate_host(*host); !st) return field_error(path, "host", st.error().message);
  s.host = std::move(*host);
  auto phase = fixed_string(b.phase, sizeof b.phase, path, "phase");
  if (!phase) return phase.error();
  if (auto st = validate_phase(*phase); !st) return field_error(path, "phase", st.error().message);
  s.phase = std::move(*phase);

  if (b.world_size < 1)
    return field_error(path, "world_size", fmt::format("is {}, must be >= 1", b.world_size));
  if (b.rank < 0 || b.rank >= b.world_size) {
    return field_error(path, "rank", fmt::format("is {}, outside 0..{}", b.rank, b.world_size - 1));
  }
  if (b.local_rank < 0 || b.local_rank >= b.world_size) {
    return field_error(path, "local_rank",
                       fmt::format("is {}, outside 0..{}", b.local_rank, b.world_size - 1));
  }
  if (b.pid <= 0) return field_error(path, "pid", fmt::format("is {}, must be > 0", b.pid));
  if (b.status > STEPWATCH_STATUS_FAILED)
    return field_error(path, "status", fmt::format("is {}", b.status));
  if (b.step < -1) return field_error(path, "step", fmt::format("is {}, must be >= -1", b.step));
  if (b.ckpt_step < -1)
    return field_error(path, "ckpt_step", fmt::format("is {}, must be >= -1", b.ckpt_step));
  for (int64_t t :
       {b.created_wall_ns, b.created_mono_ns, b.step_wall_ns, b.step_mono_ns, b.phase_wall_ns,
        b.phase_mono_ns, b.beat_wall_ns, b.beat_mono_ns, b.ckpt_wall_ns, b.ckpt_mono_ns,
        b.loss_wall_ns, b.loss_mono_ns, b.update_mono_ns}) {
    if (t < 0) return field_error(path, "time", fmt::format("has a negative timestamp {}", t));
  }

  s.rank = b.rank;
  s.local_rank = b.local_rank;
  s.world_size = b.world_size;
  s.pid = b.pid;
  s.pid_start_ticks = b.pid_start_ticks;
  s.incarnation = b.incarnation;
  s.status = b.status == STEPWATCH_STATUS_FINISHED ? RankStatus::kFinished
             : b.status == STEPWATCH_STATUS_FAILED ? RankStatus::kFailed
                                                   : RankStatus::kRunning;
  s.created = {b.created_wall_ns, b.created_mono_ns};
  if (b.step >= 0 && b.step_count > 0) {
    s.step = b.step;
    s.step_at = {b.step_wall_ns, b.step_mono_ns};
  }
  s.step_count = b.step_count;
  s.phase_since = {b.phase_wall_ns, b.phase_mono_ns};
  s.phase_count = b.phase_count;
  if (b.beat_count > 0) s.beat_at = Stamp{b.beat_wall_ns, b.beat_mono_ns};
  s.beat_count = b.beat_count;
  if (b.ckpt_step >= 0) {
    auto id = fixed_string(b.ckpt_id, sizeof b.ckpt_id, path, "ckpt_id");
    if (!id) return id.error();
    if (auto st = validate_checkpoint_id(*id); !st)
      return field_error(path, "ckpt_id", st.error().message);
    s.checkpoint = CheckpointMark{std::move(*id), b.ckpt_step, {b.ckpt_wall_ns, b.ckpt_mono_ns}};
  }
  if (b.loss_wall_ns > 0 || b.loss_mono_ns > 0) {
    s.loss = b.loss;
    s.loss_at = {b.loss_wall_ns, b.loss_mono_ns};
  }
  s.updated_mono_ns = b.update_mono_ns;
  s.updated = {0, b.update_mono_ns};
  int64_t latest_wall = std::max({b.created_wall_ns, b.step_wall_ns, b.phase_wall_ns,
                                  b.beat_wall_ns, b.ckpt_wall_ns, b.loss_wall_ns});
  s.updated.wall_ns = latest_wall;

  // The ring, oldest first: slots hold the last min(step_count, 16) commits.
  uint64_t n = std::min<uint64_t>(b.step_count, STEPWATCH_RECENT_STEPS);
  s.recent.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t idx = (b.step_count - n + i) % STEPWATCH_RECENT_STEPS;
    s.recent.push_back({b.recent[idx].step, b.recent[idx].mono_ns});
  }
  auto sample = decode_sample(b, path);
  if (!sample) return sample.error();
  s.sample = std::move(*sample);
  return s;
}

namespace {

// A mapped beacon is a file another user may truncate at any moment; touching a page past the
// new end raises SIGBUS. Reads of a mapping run under this guard: a fault inside one jumps back
// and the read reports that the file shrank, instead of taking the process (often a root-owned
// agent) down. Any other SIGBUS goes where it would have gone without the guard.
thread_local sigjmp_buf* volatile t_fault_jump = nullptr;
struct sigaction g_previous_sigbus;
std::once_flag g_sigbus_once;

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* jump = t_fault_jump) siglongjmp(*jump, 1);
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 && g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(sig, info, context);
    return;
  }
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) == 0 && g_previous_sigbus.sa_handler != SIG_DFL &&
      g_previous_sigbus.sa_handler != SIG_IGN) {
    g_previous_sigbus.sa_handler(sig);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);  // returning re-runs the faulting access, which now ends the process
}

void install_sigbus_guard() {
  std::call_once(g_sigbus_once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    // SA_NODEFER: the jump out of the handler leaves SIGBUS unblocked for the next fault.
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous_sigbus);
  });
}

// Runs `read` (loads from a mapping, nothing to unwind) under the guard; false when it faulted
// (the file shrank under the mapping).
template <class Read>
bool under_fault_guard(Read&& read) {
  sigjmp_buf jump;
  if (sigsetjmp(jump, 0) != 0) {
    t_fault_jump = nullptr;
    return false;
  }
  t_fault_jump = &jump;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  read();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_fault_jump = nullptr;
  return true;
}

Error shrank(const std::string& path) {
  return Error{
      Errc::kSizeMismatch,
      fmt::format("{}: the file shrank while mapped (a version 1 beacon stays {} bytes), skipped",
                  path, sizeof(stepwatch_beacon_v1))};
}

}  // namespace

Result<BeaconMapping> BeaconMapping::open(const std::string& path) {
  install_sigbus_guard();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) return Error{Errc::kNotFound, fmt::format("{}: no such beacon", path)};
    if (e == ELOOP)
      return Error{Errc::kInvalidArgument, fmt::format("{}: is a symlink, refused", path)};
    if (e == EACCES || e == EPERM)
      return Error{Errc::kPermission, fmt::format("{}: {}", path, std::strerror(e))};
    return Error{Errc::kIo, fmt::format("{}: {}", path, std::strerror(e))};
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Error err{Errc::kIo, fmt::format("{}: fstat: {}", path, std::strerror(errno))};
    ::close(fd);
    return err;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{Errc::kInvalidArgument, fmt::format("{}: not a regular file, refused", path)};
  }
  if (static_cast<uint64_t>(st.st_size) != sizeof(stepwatch_beacon_v1)) {
    // A foreign file is reported as such (bad magic), not as a "truncated beacon".
    uint8_t head[16];
    ssize_t got = st.st_size >= 16 ? ::pread(fd, head, sizeof head, 0) : 0;
    ::close(fd);
    if (got == 16) {
      auto r = decode_beacon(std::span<const uint8_t>(head, 16), {}, path);
      Errc c = r ? Errc::kOk : r.error().code;
      if (c == Errc::kBadMagic || c == Errc::kUnknownVersion || c == Errc::kSizeMismatch)
        return r.error();
    }
    Errc code = static_cast<uint64_t>(st.st_size) < sizeof(stepwatch_beacon_v1)
                    ? Errc::kTruncated
                    : Errc::kSizeMismatch;
    return Error{code, fmt::format("{}: file is {} bytes, a version 1 beacon is {}", path,
                                   static_cast<int64_t>(st.st_size), sizeof(stepwatch_beacon_v1))};
  }
  void* mem = ::mmap(nullptr, sizeof(stepwatch_beacon_v1), PROT_READ, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (mem == MAP_FAILED)
    return Error{Errc::kIo, fmt::format("{}: mmap: {}", path, std::strerror(e))};
  BeaconMapping m;
  m.path_ = path;
  m.map_ = static_cast<const stepwatch_beacon_v1*>(mem);
  m.inode_ = st.st_ino;
  m.uid_ = st.st_uid;
  return m;
}

BeaconMapping::BeaconMapping(BeaconMapping&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::exchange(o.map_, nullptr)),
      inode_(o.inode_),
      uid_(o.uid_) {}

BeaconMapping& BeaconMapping::operator=(BeaconMapping&& o) noexcept {
  if (this != &o) {
    if (map_ != nullptr)
      ::munmap(const_cast<stepwatch_beacon_v1*>(map_), sizeof(stepwatch_beacon_v1));
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    inode_ = o.inode_;
    uid_ = o.uid_;
  }
  return *this;
}

BeaconMapping::~BeaconMapping() {
  if (map_ != nullptr)
    ::munmap(const_cast<stepwatch_beacon_v1*>(map_), sizeof(stepwatch_beacon_v1));
}

Result<stepwatch_beacon_v1> BeaconMapping::read_raw(int max_retries) const {
  stepwatch_beacon_v1 copy;
  int odd = 0, stuck = 0;
  uint64_t last = 0;
  for (int attempt = 0; attempt <= max_retries; ++attempt) {
    uint64_t seen = 0;
    ReadOutcome r = ReadOutcome::kOk;
    if (!under_fault_guard([&] { r = seq_read_once(map_, &copy, &seen); })) return shrank(path_);
    if (r == ReadOutcome::kOk) {
      if (!read_sample_block(copy)) return shrank(path_);
      return copy;
    }
    if (r == ReadOutcome::kOdd) ++odd;
    // The same odd sequence again and again: the writer is not progressing (the scheduler took
    // its CPU in the middle of an update). Pause with a growing sleep (~20 ms at most) so it can
    // finish. A busy writer that keeps moving only needs another try.
    stuck = (r == ReadOutcome::kOdd && seen == last) ? stuck + 1 : 0;
    last = seen;
    if (stuck >= 32) {
      timespec pause{0, std::min<long>(200'000, 10'000L * (stuck - 31))};
      nanosleep(&pause, nullptr);
    } else if (attempt >= 8) {
      sched_yield();
    }
  }
  if (odd > max_retries / 2) {
    return Error{Errc::kTorn,
                 fmt::format("{}: writer inside an update for {} reads (stuck or died mid-update)",
                             path_, max_retries + 1)};
  }
  return Error{Errc::kTorn,
               fmt::format("{}: no consistent read after {} retries", path_, max_retries + 1)};
}

bool BeaconMapping::read_sample_block(stepwatch_beacon_v1& copy) const {
  // The sampler writes about once a second and never waits: a few tries find it outside an
  // update. One that does not (it died inside one) leaves the block absent for this read.
  for (int attempt = 0; attempt < 16; ++attempt) {
    ReadOutcome r = ReadOutcome::kOk;
    if (!under_fault_guard([&] { r = sample_read_once(map_, &copy); })) return false;
    if (r == ReadOutcome::kOk) return true;
    if (attempt >= 8) sched_yield();
  }
  copy.sample_count = 0;
  return true;
}

Result<uint64_t> BeaconMapping::sequence() const {
  uint64_t seq = 0, sample_seq = 0;
  if (!under_fault_guard([&] {
        seq = __atomic_load_n(&map_->seq, __ATOMIC_ACQUIRE);
        sample_seq = __atomic_load_n(&map_->sample_seq, __ATOMIC_ACQUIRE);
      }))
    return shrank(path_);
  // Both counters only grow, so their sum is unchanged exactly when both are; it is odd when
  // exactly one writer is inside, and a caller that sees "unchanged and even" skips the read.
  return seq + sample_seq;
}

Result<uint64_t> BeaconMapping::size_on_disk() const {
  struct stat st {};
  if (::fstatat(AT_FDCWD, path_.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Error{errno == ENOENT ? Errc::kNotFound : Errc::kIo,
                 fmt::format("{}: {}", path_, std::strerror(errno))};
  }
  if (st.st_ino != inode_)
    return Error{Errc::kNotFound, fmt::format("{}: replaced by another file", path_)};
  return static_cast<uint64_t>(st.st_size);
}

Result<RankSnapshot> BeaconMapping::read(const ReadOptions& options) const {
  auto raw = read_raw(options.max_retries);
  if (!raw) return raw.error();
  return decode_beacon(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&*raw),
                                                sizeof(stepwatch_beacon_v1)),
                       options, path_);
}

Result<RankSnapshot> read_beacon_file(const std::string& path, const ReadOptions& options) {
  auto m = BeaconMapping::open(path);
  if (!m) return m.error();
  return m->read(options);
}

}  // namespace stepwatch::contract
