// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/contract/beacon_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/common/proc_stat.h"
#include "src/contract/names.h"

namespace stepwatch::contract {

namespace {

Status make_dir(const std::string& path, mode_t mode, bool sticky_shared) {
  if (::mkdir(path.c_str(), mode) == 0) {
    // The root is shared by every user's jobs, like /tmp: world-writable and sticky.
    if (sticky_shared) ::chmod(path.c_str(), 01777);
    return {};
  }
  if (errno == EEXIST) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return {};
    return Error{Errc::kIo, fmt::format("{}: exists and is not a directory", path)};
  }
  return Error{errno == EACCES ? Errc::kPermission : Errc::kIo,
               fmt::format("cannot create directory {}: {}", path, std::strerror(errno))};
}

// A directory a beacon may be written into: a real directory (not a symlink) that no other
// user controls. Whoever owns it can replace what is in it: a job directory (or a beacon root)
// made first by another user lets that user hide a real stall behind a forged healthy beacon.
// Root's are fine (the agent's shared root: mode 1777, owned by root).
Status check_owner(const std::string& path, const char* what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return Error{Errc::kIo, fmt::format("{}: {}", path, std::strerror(errno))};
  }
  if (S_ISLNK(st.st_mode)) {
    return Error{Errc::kPermission,
                 fmt::format("{} {} is a symlink: refused (it could point anywhere)", what, path)};
  }
  uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return Error{
        Errc::kPermission,
        fmt::format(
            "{} {} belongs to uid {}, not to you (uid {}): another user could replace its beacons; "
            "remove it, or set STEPWATCH_DIR to a directory of your own",
            what, path, st.st_uid, me)};
  }
  return {};
}

Status make_dirs(const std::string& root, const std::string& job) {
  // Create every missing parent of the root too (for example /dev/shm/stepwatch).
  for (size_t i = 1; i < root.size(); ++i) {
    if (root[i] == '/') {
      std::string parent = root.substr(0, i);
      if (::access(parent.c_str(), F_OK) != 0) {
        if (auto st = make_dir(parent, 0755, false); !st) return st;
      }
    }
  }
  if (auto st = make_dir(root, 0777, true); !st) return st;
  if (auto st = check_owner(root, "the beacon root"); !st) return st;
  std::string dir = job_dir(root, job);
  if (auto st = make_dir(dir, 0755, false); !st) return st;
  return check_owner(dir, "the job directory");
}

void fill_header(stepwatch_beacon_v1* b, const Identity& id, uint64_t start_ticks) {
  std::memset(b, 0, sizeof *b);
  timespec w, m;
  clock_gettime(CLOCK_REALTIME, &w);
  clock_gettime(CLOCK_MONOTONIC, &m);
  int64_t wall = w.tv_sec * 1'000'000'000LL + w.tv_nsec;
  int64_t mono = m.tv_sec * 1'000'000'000LL + m.tv_nsec;
  b->magic = STEPWATCH_BEACON_MAGIC;
  b->version = STEPWATCH_BEACON_VERSION;
  b->size = sizeof(stepwatch_beacon_v1);
  b->seq = 0;
  b->pid_start_ticks = start_ticks;
  b->pid = static_cast<int32_t>(::getpid());
  b->rank = id.rank;
  b->local_rank = id.local_rank;
  b->world_size = id.world_size;
  b->incarnation = id.incarnation;
  b->status = STEPWATCH_STATUS_RUNNING;
  b->created_wall_ns = wall;
  b->created_mono_ns = mono;
  b->step = -1;
  b->phase_wall_ns = wall;
  b->phase_mono_ns = mono;
  b->ckpt_step = -1;
  b->loss = std::nan("");
  b->update_mono_ns = mono;
  std::snprintf(b->job, sizeof b->job, "%s", id.job.c_str());
  std::snprintf(b->host, sizeof b->host, "%s", id.host.c_str());
  std::snprintf(b->phase, sizeof b->phase, "%s", "init");
}

}  // namespace

Result<std::unique_ptr<BeaconWriter>> BeaconWriter::create(const Identity& id,
                                                           const std::string& proc_root) {
  if (auto st = validate_job_id(id.job); !st) return st.error();
  if (auto st = validate_host(id.host); !st) return st.error();
  if (auto st = make_dirs(id.dir, id.job); !st) return st.error();

  uint64_t start_ticks = 0;
  if (auto ps = read_proc_stat(proc_root, static_cast<int>(::getpid())))
    start_ticks = ps->start_ticks;

  // Build the record in a temporary file and rename it into place, so a reader never sees a
  // half-initialised beacon and a beacon of an earlier incarnation is replaced whole.
  std::string final_path = beacon_path(id.dir, id.job, id.rank);
  std::string tmp_path =
      fmt::format("{}/.rank-{}.beacon.tmp-{}", job_dir(id.dir, id.job), id.rank, ::getpid());
  int fd = ::open(tmp_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    return Error{errno == EACCES ? Errc::kPermission : Errc::kIo,
                 fmt::format("cannot create beacon {}: {}", tmp_path, std::strerror(errno))};
  }
  auto fail = [&](const char* what) {
    Error e{Errc::kIo, fmt::format("beacon {}: {}: {}", final_path, what, std::strerror(errno))};
    ::close(fd);
    ::unlink(tmp_path.c_str());
    return e;
  };
  if (::ftruncate(fd, sizeof(stepwatch_beacon_v1)) != 0) return fail("ftruncate");
  void* mem =
      ::mmap(nullptr, sizeof(stepwatch_beacon_v1), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) return fail("mmap");
  auto* b = static_cast<stepwatch_beacon_v1*>(mem);
  fill_header(b, id, start_ticks);
  if (::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    ::munmap(mem, sizeof(stepwatch_beacon_v1));
    return fail("rename");
  }
  ::close(fd);  // the mapping keeps the file

  std::unique_ptr<BeaconWriter> w(new BeaconWriter());
  w->b_ = b;
  w->path_ = final_path;
  return w;
}

BeaconWriter::~BeaconWriter() {
  if (b_ != nullptr) ::munmap(b_, sizeof(stepwatch_beacon_v1));
}

void BeaconWriter::set_phase_locked(const char* name, size_t len, Now t) noexcept {
  store_string(b_->phase, sizeof b_->phase, name, len);
  store_relaxed(&b_->phase_wall_ns, t.wall);
  store_relaxed(&b_->phase_mono_ns, t.mono);
  store_relaxed(&b_->phase_count, b_->phase_count + 1);
  in_init_ = depth_ == 0 && len == 4 && std::memcmp(name, "init", 4) == 0;
}

int BeaconWriter::phase_begin(const char* name) noexcept {
  if (name == nullptr) return STEPWATCH_EINVAL;
  size_t len = ::strnlen(name, STEPWATCH_PHASE_MAX);
  if (len == 0 || len >= STEPWATCH_PHASE_MAX) return STEPWATCH_EINVAL;
  for (size_t i = 0; i < len; ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == ':' || c == '/';
    if (!ok) return STEPWATCH_EINVAL;
  }
  uint64_t s;
  if (!seq_begin(b_, &s)) return STEPWATCH_EBUSY;
  // The phase stack belongs to whoever holds seq: checked only inside, or two threads of a rank
  // could both pass the check and overflow (or underflow) it.
  if (depth_ >= STEPWATCH_PHASE_DEPTH) {
    seq_abort(b_, s);
    return STEPWATCH_EPHASE;
  }
  std::memcpy(stack_[depth_], b_->phase, STEPWATCH_PHASE_MAX);  // only this thread writes it
  ++depth_;
  Now t = now();
  set_phase_locked(name, len, t);
  store_relaxed(&b_->update_mono_ns, t.mono);
  seq_end(b_, s);
  return STEPWATCH_OK;
}

int BeaconWriter::phase_end() noexcept {
  uint64_t s;
  if (!seq_begin(b_, &s)) return STEPWATCH_EBUSY;
  if (depth_ == 0) {
    seq_abort(b_, s);
    return STEPWATCH_EPHASE;
  }
  --depth_;
  const char* prev = stack_[depth_];
  size_t len = ::strnlen(prev, STEPWATCH_PHASE_MAX);
  // Steps completed inside the phase mean the enclosing "init" is over.
  if (depth_ == 0 && len == 4 && std::memcmp(prev, "init", 4) == 0 && b_->step_count > 0) {
    prev = "train";
    len = 5;
  }
  Now t = now();
  set_phase_locked(prev, len, t);
  store_relaxed(&b_->update_mono_ns, t.mono);
  seq_end(b_, s);
  return STEPWATCH_OK;
}

int BeaconWriter::checkpoint_committed(const char* id, int64_t step) noexcept {
  if (id == nullptr) return STEPWATCH_EINVAL;
  size_t len = ::strnlen(id, STEPWATCH_CKPT_ID_MAX);
  if (len == 0 || len >= STEPWATCH_CKPT_ID_MAX || step < 0) return STEPWATCH_EINVAL;
  for (size_t i = 0; i < len; ++i) {
    char c = id[i];
    if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\'' || c == '\\') return STEPWATCH_EINVAL;
  }
  uint64_t s;
  if (!seq_begin(b_, &s)) return STEPWATCH_EBUSY;
  Now t = now();
  store_string(b_->ckpt_id, sizeof b_->ckpt_id, id, len);
  store_relaxed(&b_->ckpt_step, step);
  store_relaxed(&b_->ckpt_wall_ns, t.wall);
  store_relaxed(&b_->ckpt_mono_ns, t.mono);
  store_relaxed(&b_->update_mono_ns, t.mono);
  seq_end(b_, s);
  return STEPWATCH_OK;
}

int BeaconWriter::sample(uint64_t hash, uint32_t wait, const char* where) noexcept {
  if (wait > STEPWATCH_WAIT_MAX) return STEPWATCH_EINVAL;
  char label[STEPWATCH_WHERE_MAX] = {};
  size_t len = where == nullptr ? 0 : ::strnlen(where, STEPWATCH_WHERE_MAX - 1);
  for (size_t i = 0; i < len; ++i) {
    char c = where[i];
    label[i] = (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  uint64_t s;
  if (!seq_begin(&b_->sample_seq, &s)) return STEPWATCH_EBUSY;
  Now t = now(sample_clock_);
  // Only the holder of sample_seq writes these, so reading them back here is race-free.
  bool moved = b_->sample_count == 0 || b_->sample_hash != hash || b_->sample_wait != wait;
  store_relaxed(&b_->sample_count, b_->sample_count + 1);
  store_relaxed(&b_->sample_wall_ns, t.wall);
  store_relaxed(&b_->sample_mono_ns, t.mono);
  if (moved) {
    store_relaxed(&b_->moved_wall_ns, t.wall);
    store_relaxed(&b_->moved_mono_ns, t.mono);
    store_relaxed(&b_->sample_hash, hash);
    store_relaxed(&b_->sample_wait, wait);
    store_string(b_->sample_where, sizeof b_->sample_where, label, len);
  }
  seq_end(&b_->sample_seq, s);
  return STEPWATCH_OK;
}

int BeaconWriter::finish(bool ok) noexcept {
  uint64_t s;
  if (!seq_begin(b_, &s)) return STEPWATCH_EBUSY;
  Now t = now();
  store_relaxed(&b_->status, ok ? STEPWATCH_STATUS_FINISHED : STEPWATCH_STATUS_FAILED);
  store_relaxed(&b_->update_mono_ns, t.mono);
  seq_end(b_, s);
  return STEPWATCH_OK;
}

}  // namespace stepwatch::contract
