// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "tests/support/scenarios/world.h"

#include "stepwatch/beacon_v1.h"

namespace stepwatch::bench {

namespace {
constexpr int64_t kStartWall = 1'760'000'000LL * kNsPerSec;
constexpr int64_t kStartMono = 86'400LL * kNsPerSec;
}  // namespace

World::World(int world, int64_t poll_ns, uint32_t incarnation)
    : poll_ns_(poll_ns), next_poll_(poll_ns) {
  for (int r = 0; r < world; ++r) {
    Rank rank;
    auto& s = rank.snap;
    s.job = "scenario";
    s.host = "node1";
    s.rank = r;
    s.local_rank = r % 8;
    s.world_size = world;
    s.pid = 4000 + r;
    s.pid_start_ticks = 100'000 + static_cast<uint64_t>(r);
    s.incarnation = incarnation;
    s.created = stamp();
    s.phase = "init";
    s.phase_since = s.created;
    rank.changed_at = s.created;
    ranks_.push_back(rank);
  }
  record();
}

Stamp World::stamp() const {
  return Stamp{kStartWall + t_ + wall_offset_, kStartMono + t_};
}
Stamp World::now() const {
  return stamp();
}

void World::advance(int64_t dt) {
  int64_t end = t_ + dt;
  while (next_poll_ <= end) {
    t_ = next_poll_;
    next_poll_ += poll_ns_;
    record();
  }
  t_ = end;
}

void World::step_rank(int r) {
  Rank& rank = ranks_[r];
  if (!rank.alive) return;
  auto& s = rank.snap;
  s.step = next_step_;
  s.step_at = stamp();
  ++s.step_count;
  s.recent.push_back({next_step_, s.step_at.mono_ns});
  s.updated = s.step_at;
  s.updated_mono_ns = s.step_at.mono_ns;
  if (s.recent.size() > STEPWATCH_RECENT_STEPS) s.recent.erase(s.recent.begin());
  if (s.phase == "init") phase(r, "train");
  activity(r, Activity::kCompute);
}

void World::step_all() {
  for (int r = 0; r < world(); ++r) step_rank(r);
  ++next_step_;
}

void World::phase(int r, const std::string& p) {
  auto& s = ranks_[r].snap;
  s.phase = p;
  s.phase_since = stamp();
  ++s.phase_count;
  s.updated = s.phase_since;
  s.updated_mono_ns = s.phase_since.mono_ns;
}

void World::phase_all(const std::string& p) {
  for (int r = 0; r < world(); ++r) phase(r, p);
}

void World::beat_all() {
  for (auto& rank : ranks_) {
    rank.snap.beat_at = stamp();
    ++rank.snap.beat_count;
    rank.snap.updated = stamp();
    rank.snap.updated_mono_ns = rank.snap.updated.mono_ns;
  }
}

void World::checkpoint_all(const std::string& id) {
  for (auto& rank : ranks_) {
    rank.snap.checkpoint = contract::CheckpointMark{id, next_step_ - 1, stamp()};
  }
}

void World::activity_all(Activity a) {
  for (int r = 0; r < world(); ++r) activity(r, a);
}
void World::activity(int r, Activity a) {
  if (ranks_[r].act != a) {  // a new call: the frames change
    ++ranks_[r].position;
    ranks_[r].changed_at = stamp();
  }
  ranks_[r].act = a;
}

void World::freeze_beacon(int r) {
  ranks_[r].frozen = ranks_[r].snap;
  if (ranks_[r].sample.count > 0) ranks_[r].frozen.sample = ranks_[r].sample;
  ranks_[r].is_frozen = true;
}

void World::kill(int r, int exit_code) {
  ranks_[r].alive = false;
  ranks_[r].exit_code = exit_code;
}

void World::finish_all() {
  for (auto& rank : ranks_) rank.snap.status = contract::RankStatus::kFinished;
}

void World::jump_wall(int64_t dt) {
  wall_offset_ += dt;
}

// What the progress sampler would have written by now: where the main thread is, and whether
// it moved (compute moves every poll; a wait sits in one call).
void World::sample(contract::RankSnapshot& out, Rank& rank) {
  struct Where {
    contract::WaitKind wait;
    const char* where;
    bool moves;
  };
  Where w{contract::WaitKind::kNone, "forward (model.py:88)", true};
  switch (rank.act) {
    case Activity::kCompute:
    case Activity::kIoBound:
    case Activity::kImport:
      break;
    case Activity::kWaitGpu:
    case Activity::kWaitCpu:
      w = {contract::WaitKind::kCollective, "all_reduce (distributed_c10d.py:1536)", false};
      break;
    case Activity::kDataWait:
      w = {contract::WaitKind::kNone, "__next__ (dataloader.py:628)", false};
      break;
    case Activity::kIoStall:
      w = {contract::WaitKind::kNone, "read (loader.py:40)", false};
      break;
    case Activity::kDeadlock:
      w = {contract::WaitKind::kNone, "acquire (queue.py:171)", false};
      break;
    case Activity::kInitWait:
      w = {contract::WaitKind::kStore, "init_process_group (distributed_c10d.py:754)", false};
      break;
    case Activity::kCheckpointWrite:
      w = {contract::WaitKind::kNone, "save (serialization.py:423)", false};
      break;
    case Activity::kGilHeld:
      break;
  }
  // The sampler runs every second: a rank that moves moved just now; one that entered a call
  // since the last poll moved when it entered it.
  Stamp t = stamp();
  if (rank.act != Activity::kGilHeld) {
    if (w.moves) {
      ++rank.position;
      rank.changed_at = t;
    }
    contract::Sample& s = rank.sample;
    if (s.count == 0 || s.hash != rank.position + 1 || s.wait != w.wait) {
      s.moved_at = rank.changed_at;
      s.hash = rank.position + 1;
      s.wait = w.wait;
      s.where = w.where;
    }
    ++s.count;
    s.at = t;
  }
  if (rank.sample.count > 0) out.sample = rank.sample;
}

void World::record() {
  detect::Observation o;
  o.now = stamp();
  o.local_host = "node1";
  o.world_size = world();
  double poll = static_cast<double>(poll_ns_);
  for (auto& rank : ranks_) {
    o.ranks.push_back(rank.is_frozen ? rank.frozen : rank.snap);
    detect::ProcessFacts p;
    p.rank = rank.snap.rank;
    detect::GpuFacts g;
    g.rank = rank.snap.rank;
    g.mem_used_bytes = int64_t{60} << 30;
    if (!rank.alive) {
      p.alive = false;
      p.exit_code = rank.exit_code;
      o.procs.push_back(p);
      g.sm_util_pct = 0;
      g.power_w = 70;
      g.mem_used_bytes = 0;
      o.gpus.push_back(g);
      continue;
    }
    auto set = [&](char state, double cpu_frac, int64_t io, const char* wchan, double sm,
                   double power) {
      p.state = state;
      p.cpu_delta_ns = static_cast<int64_t>(cpu_frac * poll);
      p.main_cpu_delta_ns = p.cpu_delta_ns;
      p.ctx_switches_delta = static_cast<int64_t>(cpu_frac * 1000 * poll / 1e9);
      p.io_delta_bytes = io;
      p.wchan = wchan;
      g.sm_util_pct = sm;
      g.power_w = power;
    };
    switch (rank.act) {
      case Activity::kCompute:
        set('R', 0.95, 1 << 20, "", 92, 650);
        break;
      case Activity::kWaitGpu:
        set('R', 1.0, 0, "", 100, 420);
        break;
      case Activity::kWaitCpu:
        set('S', 0.01, 0, "futex_wait_queue", 0, 90);
        break;
      case Activity::kDataWait:
        set('S', 0.0, 0, "pipe_read", 0, 90);
        break;
      case Activity::kIoStall:
        set('D', 0.0, 0, "rpc_wait_bit_killable", 0, 90);
        p.threads_in_d = 4;
        break;
      case Activity::kDeadlock:
        set('S', 0.0, 0, "futex_wait_queue", 0, 85);
        break;
      case Activity::kInitWait:
        set('S', 0.0, 0, "inet_csk_accept", 0, 80);
        break;
      case Activity::kCheckpointWrite:
        set('R', 0.5, int64_t{400} << 20, "", 0, 120);
        break;
      case Activity::kIoBound:
        set('S', 0.3, int64_t{80} << 20, "wait_woken", 25, 250);
        break;
      case Activity::kGilHeld:
        set('S', 0.0, 0, "futex_wait_queue", 0, 90);
        break;
      case Activity::kImport:
        set('R', 0.9, int64_t{4} << 20, "", 0, 80);
        break;
    }
    o.procs.push_back(p);
    o.gpus.push_back(g);
    if (sampler_ && !rank.is_frozen) sample(o.ranks.back(), rank);
  }
  log_lines_ += log_rate_ * poll / 1e9;
  detect::LogFacts log;
  log.lines_total = static_cast<uint64_t>(log_lines_);
  if (log_rate_ > 0) last_log_wall_ = o.now.wall_ns;
  log.last_line_wall_ns = last_log_wall_;
  o.log = log;
  obs_.push_back(std::move(o));
}

}  // namespace stepwatch::bench
