// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/watch/observer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "src/probe/proc_fs.h"
#include "src/watch/job_gpus.h"

namespace stepwatch::watch {

namespace {

// A process's deltas as the detector's facts.
void process_deltas(const probe::ProcDelta& d, detect::ProcessFacts& f) {
  f.cpu_delta_ns = d.cpu_ns;
  f.io_delta_bytes = d.io_bytes;
  f.main_cpu_delta_ns = d.main_cpu_ns;
  f.ctx_switches_delta = d.main_ctx_switches;
}

}  // namespace

std::optional<EnvRank> rank_from_environ(const std::string& proc_root, int pid) {
  auto env = probe::ProcFs(proc_root).environ(pid);
  if (!env) return std::nullopt;
  std::optional<int> slurm;
  for (std::string_view kv : *env) {
    auto value_of = [&](std::string_view key) -> std::optional<int> {
      if (!kv.starts_with(key)) return std::nullopt;
      int v = -1;
      auto digits = kv.substr(key.size());
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec != std::errc() || p != digits.data() + digits.size() || v < 0) return std::nullopt;
      return v;
    };
    if (auto r = value_of("RANK=")) return EnvRank{*r, false};
    if (auto r = value_of("SLURM_PROCID=")) slurm = r;
  }
  if (!slurm) return std::nullopt;
  return EnvRank{*slurm, true};
}

std::map<int, int> ranks_from_environ(const std::string& proc_root, const std::vector<int>& pids) {
  std::map<int, int> by_rank, by_slurm;
  for (int pid : pids) {
    auto r = rank_from_environ(proc_root, pid);
    if (!r) continue;
    (r->from_slurm ? by_slurm : by_rank).try_emplace(r->rank, pid);
  }
  return by_rank.empty() ? by_slurm : by_rank;
}

void Observer::drop_outside_world(std::vector<contract::RankSnapshot>& ranks,
                                  PollReport& rep) const {
  // The world: the spec's, else what most records say (a foreign file must not widen it).
  int world = config_.world_size;
  std::string from = "the spec's world_size";
  if (world <= 0) {
    std::map<int, int> votes;
    for (const auto& r : ranks) ++votes[r.world_size];
    int most = 0;
    for (const auto& [w, n] : votes) {
      if (n > most) {
        most = n;
        world = w;
      }
    }
    from = "what the other ranks say";
  }
  if (world <= 0) return;
  std::erase_if(ranks, [&](const contract::RankSnapshot& r) {
    if (r.rank < world) return false;
    rep.problems.push_back(
        Error{Errc::kInvalidField,
              fmt::format("{}: rank {} is outside the job's world of {} ({}): ignored", r.path,
                          r.rank, world, from)});
    ++rep.problems_total;
    return true;
  });
}

Observer::Observer(ObserverConfig config)
    : config_(std::move(config)),
      procs_(config_.proc_root),
      reader_(config_.beacon_root, config_.job),
      lives_(config_.proc_root) {}

detect::Observation Observer::poll(const Stamp& now,
                                   const std::optional<contract::RankSnapshot>& log_rank,
                                   const std::optional<detect::LogFacts>& log, PollReport* report,
                                   const Result<probe::GpuSnapshot>* gpus) {
  PollReport local;
  PollReport& rep = report ? *report : local;
  detect::Observation obs;
  obs.now = now;
  obs.local_host = config_.local_host;
  obs.world_size = config_.world_size;
  obs.log = log;

  contract::JobView view = reader_.poll();
  rep.problems = std::move(view.problems);
  rep.problems_total = view.problems_total;
  obs.ranks = std::move(view.ranks);
  drop_outside_world(obs.ranks, rep);
  for (const auto& r : obs.ranks) {
    if (r.pid > 0) rep.rank_pids[r.rank] = r.pid;
  }

  // The job's processes. Thread states are read only for the ranks' own processes.
  bool have_selector = config_.selector.root_pid || config_.selector.pgid || config_.selector.sid;
  probe::ScanOptions opts;
  for (const auto& [rank, pid] : rep.rank_pids) opts.thread_scan_pids.insert(pid);
  opts.detail_pids = opts.thread_scan_pids;  // io and wchan for the ranks only
  opts.reuse_known = true;
  if (have_selector) {
    auto tree = procs_.scan(config_.selector, opts);
    if (tree) {
      // An uninstrumented job: its ranks are the processes started with RANK in the environment.
      if (obs.ranks.empty()) {
        std::vector<int> pids;
        for (const auto& [pid, p] : tree->procs) pids.push_back(pid);
        for (const auto& [rank, pid] : ranks_from_environ(config_.proc_root, pids)) {
          if (!rep.rank_pids.count(rank)) rep.rank_pids[rank] = pid;
        }
        // Thread states for those, now that they are known.
        for (auto& [rank, pid] : rep.rank_pids) {
          if (auto p = probe::read_process(config_.proc_root, pid, true, true, true))
            tree->procs[pid] = *p;
        }
      }
      rep.tree = std::move(*tree);
    } else {
      rep.problems.push_back(tree.error());
      ++rep.problems_total;
    }
  }
  bool have_rank0 = false;
  for (const auto& r : obs.ranks) have_rank0 = have_rank0 || r.rank == 0;
  if (log_rank && !have_rank0) {
    contract::RankSnapshot lr = *log_rank;
    if (lr.world_size < static_cast<int>(rep.rank_pids.size()))
      lr.world_size = static_cast<int>(rep.rank_pids.size());
    if (lr.pid == 0 && rep.rank_pids.count(0)) lr.pid = rep.rank_pids[0];
    obs.ranks.insert(obs.ranks.begin(), std::move(lr));
  }

  if (rep.tree) {
    std::map<int, uint64_t> starts;  // rank -> the start time its beacon names
    for (const auto& r : obs.ranks) {
      if (r.source == contract::Source::kBeacon) starts[r.rank] = r.pid_start_ticks;
    }
    for (const auto& [rank, pid] : rep.rank_pids) {
      detect::ProcessFacts f;
      f.rank = rank;
      const probe::ProcInfo* info = nullptr;
      std::optional<probe::ProcInfo> read;
      if (rep.tree->procs.count(pid)) {
        info = &rep.tree->procs.at(pid);
      } else if (auto p = probe::read_process(config_.proc_root, pid, true, true, true)) {
        read = std::move(*p);
        info = &*read;
      }
      // Whether the beacon's process is still the same one (pid and start time both match).
      uint64_t start = starts.count(rank) ? starts[rank] : 0;
      if (info == nullptr) {
        f.alive = false;
      } else {
        if (start != 0 && info->start_ticks != start) f.same_process = false;
        if (info->state == 'Z' || info->state == 'X') f.alive = false;
        f.state = info->state;
        f.threads_in_d = info->threads_in_d;
        f.wchan = info->wchan;
        if (auto d = procs_.delta(*info)) process_deltas(*d, f);
        ++rep.details_read;
      }
      obs.procs.push_back(f);
    }
    procs_.remember(*rep.tree);
  } else {
    rank_facts(now, obs, rep);
  }

  std::set<std::string> now_reported;
  for (const auto& p : rep.problems) {
    // A job directory not made yet (no rank wrote a beacon), a file gone mid-read: not faults.
    if (p.code == Errc::kNotFound) continue;
    if (!reported_.count(p.message)) rep.fresh_problems.push_back(p);
    now_reported.insert(p.message);
  }
  reported_ = std::move(now_reported);

  std::optional<Result<probe::GpuSnapshot>> own;
  if (gpus == nullptr && config_.gpu) {
    own.emplace(config_.gpu->poll());
    gpus = &*own;
  }
  if (gpus != nullptr) {
    if (const auto& snap = *gpus) {
      for (const auto& [rank, pid] : rep.rank_pids) {
        // A rank's GPU: the device on which its process (or a child of it) holds memory.
        std::set<int> mine{pid};
        if (rep.tree) {
          for (const auto& [cpid, p] : rep.tree->procs) {
            if (p.ppid == pid) mine.insert(cpid);
          }
        }
        auto held = devices_held(*snap, mine);
        if (held.empty()) continue;
        const probe::GpuDevice& d = *held.front();
        detect::GpuFacts g;
        g.rank = rank;
        if (d.sm_util_pct) g.sm_util_pct = *d.sm_util_pct;
        g.power_w = d.power_w;
        if (d.mem_used_bytes) g.mem_used_bytes = static_cast<int64_t>(*d.mem_used_bytes);
        obs.gpus.push_back(g);
      }
      rep.gpus = *snap;
    } else {
      rep.problems.push_back(snap.error());
      ++rep.problems_total;
    }
  }
  return obs;
}

bool Observer::owns(int pid) const {
  const auto owner = reader_.owner_uid();
  if (!owner) return false;
  auto status = probe::ProcFs(config_.proc_root).status(pid);
  const auto uids = status ? status->uids : std::nullopt;
  return uids && uids->real == *owner && uids->effective == *owner;
}

void Observer::rank_facts(const Stamp& now, detect::Observation& obs, PollReport& rep) {
  ++polls_;
  // One entry per rank with a pid: has its record changed since the previous poll?
  struct Rank {
    int rank, pid;
    uint64_t start;  // from its beacon; 0: unknown
    RankMemo* memo;
    bool quiet;
    int read = 0;  // 1: details read this poll; -1: gone when read
  };
  std::vector<Rank> ranks;
  ranks.reserve(rep.rank_pids.size());
  for (auto& [rank, memo] : memo_) memo.seen = false;
  auto rec = obs.ranks.begin();  // both sorted by rank
  for (const auto& [rank, pid] : rep.rank_pids) {
    while (rec != obs.ranks.end() && rec->rank < rank) ++rec;
    const contract::RankSnapshot* r = rec != obs.ranks.end() && rec->rank == rank ? &*rec : nullptr;
    RankMemo& m = memo_[rank];
    m.seen = true;
    auto signature = r ? std::make_tuple(r->updated_mono_ns, r->step_count, r->beat_count,
                                         r->phase_count, r->step.value_or(-2))
                       : decltype(m.signature){};
    if (m.changed_mono_ns == 0 || signature != m.signature) {
      m.signature = signature;
      m.changed_mono_ns = now.mono_ns;
    }
    uint64_t start = r && r->source == contract::Source::kBeacon ? r->pid_start_ticks : 0;
    ranks.push_back(
        {rank, pid, start, &m, now.mono_ns - m.changed_mono_ns >= config_.detail_after_ns});
  }
  // Liveness of every rank, at once.
  std::vector<ProcessId> asks;
  asks.reserve(ranks.size());
  for (const auto& k : ranks) asks.push_back({k.pid, k.start});
  std::vector<probe::Liveness> lives = lives_.check(asks);

  // Details for the quiet living ranks, longest unread first, while the budget lasts.
  std::vector<Rank*> due;
  for (size_t i = 0; i < ranks.size(); ++i) {
    bool live = lives[i] == probe::Liveness::kAlive || lives[i] == probe::Liveness::kUnknown;
    if (ranks[i].quiet && live) due.push_back(&ranks[i]);
  }
  std::stable_sort(due.begin(), due.end(), [](const Rank* a, const Rank* b) {
    return a->memo->read_poll < b->memo->read_poll;
  });
  rep.details_due = due.size();
  const auto& budget = config_.detail_budget_ns;
  if (budget) detail_credit_ns_ = std::min(detail_credit_ns_ + *budget, 2 * *budget);
  for (Rank* k : due) {
    if (budget && detail_credit_ns_ <= 0) break;
    int64_t read_from = budget ? mono_now_ns() : 0;
    RankMemo& m = *k->memo;
    // I/O counters and wchan only of a process that runs as the job directory's owner: they are
    // what ptrace access guards, and a beacon may name any pid (an agent running as root would
    // otherwise publish an I/O-timing side channel on sshd or another user's job).
    const bool owners = owns(k->pid);
    if (auto p = probe::read_process(config_.proc_root, k->pid, owners, owners, true)) {
      m.last_delta = m.last ? probe::delta_between(*m.last, *p) : std::nullopt;
      m.last = std::move(*p);
      m.read_poll = polls_;
      k->read = 1;
    } else {
      m.last.reset();
      k->read = -1;
    }
    ++rep.details_read;
    if (budget) detail_credit_ns_ -= mono_now_ns() - read_from;
  }

  for (size_t i = 0; i < ranks.size(); ++i) {
    const Rank& k = ranks[i];
    RankMemo& m = *k.memo;
    detect::ProcessFacts f;
    f.rank = k.rank;
    if (lives[i] == probe::Liveness::kGone || k.read < 0) f.alive = false;
    if (lives[i] == probe::Liveness::kReused) f.same_process = false;
    if (k.read > 0) {
      if (m.last->state == 'Z' || m.last->state == 'X') f.alive = false;
      if (k.start != 0 && m.last->start_ticks != k.start) f.same_process = false;
    }
    // Facts from this poll's read, or carried from the last one while the rank stays quiet.
    if (k.quiet && f.alive && m.last && m.last->pid == k.pid) {
      f.state = m.last->state;
      f.threads_in_d = m.last->threads_in_d;
      f.wchan = m.last->wchan;
      if (m.last_delta) process_deltas(*m.last_delta, f);
    } else if (!k.quiet) {
      // Advancing: its details would be stale by the time they matter; read afresh when quiet.
      m.last.reset();
      m.last_delta.reset();
    }
    obs.procs.push_back(std::move(f));
  }
  for (auto it = memo_.begin(); it != memo_.end();) {
    it = it->second.seen ? std::next(it) : memo_.erase(it);
  }
}

}  // namespace stepwatch::watch
