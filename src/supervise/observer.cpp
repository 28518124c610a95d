#include "src/supervise/observer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

namespace stepwatch::supervise {

std::optional<int> rank_from_environ(const std::string& proc_root, int pid) {
  std::string path = fmt::format("{}/{}/environ", proc_root, pid);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string env;
  char buf[8192];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 && env.size() < (1 << 20)) env.append(buf, static_cast<size_t>(n));
  ::close(fd);
  std::optional<int> slurm;
  size_t start = 0;
  while (start < env.size()) {
    size_t end = env.find('\0', start);
    if (end == std::string::npos) end = env.size();
    std::string_view kv(env.data() + start, end - start);
    auto value_of = [&](std::string_view key) -> std::optional<int> {
      if (!kv.starts_with(key)) return std::nullopt;
      int v = -1;
      auto digits = kv.substr(key.size());
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
      if (ec != std::errc() || p != digits.data() + digits.size() || v < 0) return std::nullopt;
      return v;
    };
    if (auto r = value_of("RANK=")) return r;
    if (auto r = value_of("SLURM_PROCID=")) slurm = r;
    start = end + 1;
  }
  return slurm;
}

Observer::Observer(ObserverConfig config) : config_(std::move(config)), procs_(config_.proc_root) {}

detect::Observation Observer::poll(const Stamp& now, const std::optional<contract::RankSnapshot>& log_rank,
                                   const std::optional<detect::LogFacts>& log, PollReport* report) {
  PollReport local;
  PollReport& rep = report ? *report : local;
  detect::Observation obs;
  obs.now = now;
  obs.local_host = config_.local_host;
  obs.world_size = config_.world_size;
  obs.log = log;

  contract::JobView view = contract::scan_job(config_.beacon_root, config_.job);
  rep.problems = std::move(view.problems);
  obs.ranks = std::move(view.ranks);
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
        for (const auto& [pid, p] : tree->procs) {
          auto rank = rank_from_environ(config_.proc_root, pid);
          if (rank && !rep.rank_pids.count(*rank)) rep.rank_pids[*rank] = pid;
        }
        // Thread states for those, now that they are known.
        for (auto& [rank, pid] : rep.rank_pids) {
          if (auto p = probe::read_process(config_.proc_root, pid, true, true, true)) tree->procs[pid] = *p;
        }
      }
      rep.tree = std::move(*tree);
    } else {
      rep.problems.push_back(tree.error());
    }
  }
  bool have_rank0 = false;
  for (const auto& r : obs.ranks) have_rank0 = have_rank0 || r.rank == 0;
  if (log_rank && !have_rank0) {
    contract::RankSnapshot lr = *log_rank;
    if (lr.world_size < static_cast<int>(rep.rank_pids.size())) lr.world_size = static_cast<int>(rep.rank_pids.size());
    if (lr.pid == 0 && rep.rank_pids.count(0)) lr.pid = rep.rank_pids[0];
    obs.ranks.insert(obs.ranks.begin(), std::move(lr));
  }

  probe::ProcessTree seen;  // without a tree: what this poll read, remembered for the next delta
  for (const auto& [rank, pid] : rep.rank_pids) {
    detect::ProcessFacts f;
    f.rank = rank;
    const probe::ProcInfo* info = nullptr;
    std::optional<probe::ProcInfo> read;
    if (rep.tree && rep.tree->procs.count(pid)) {
      info = &rep.tree->procs.at(pid);
    } else if (auto p = probe::read_process(config_.proc_root, pid, true, true, true)) {
      read = std::move(*p);
      info = &*read;
      seen.procs[pid] = *read;
    }
    // Whether the beacon's process is still the same one (pid and start time both match).
    uint64_t start = 0;
    for (const auto& r : obs.ranks) {
      if (r.rank == rank && r.source == contract::Source::kBeacon) start = r.pid_start_ticks;
    }
    if (info == nullptr) {
      f.alive = false;
    } else {
      if (start != 0 && info->start_ticks != start) f.same_process = false;
      if (info->state == 'Z' || info->state == 'X') f.alive = false;
      f.state = info->state;
      f.threads_in_d = info->threads_in_d;
      f.wchan = info->wchan;
      if (auto d = procs_.delta(*info)) {
        f.cpu_delta_ns = d->cpu_ns;
        f.io_delta_bytes = d->io_bytes;
      }
    }
    obs.procs.push_back(f);
  }
  if (rep.tree) {
    procs_.remember(*rep.tree);
  } else {
    procs_.remember(seen);  // not re-read: a second stat of every rank was a third of a poll's cost
  }

  if (config_.gpu) {
    if (auto snap = config_.gpu->poll()) {
      for (const auto& [rank, pid] : rep.rank_pids) {
        // A rank's GPU: the device on which its process (or a child of it) holds memory.
        std::set<int> mine{pid};
        if (rep.tree) {
          for (const auto& [cpid, p] : rep.tree->procs) {
            if (p.ppid == pid) mine.insert(cpid);
          }
        }
        for (const auto& d : snap->devices) {
          bool holds = false;
          if (d.processes) {
            for (const auto& gp : *d.processes) holds = holds || mine.count(static_cast<int>(gp.pid)) > 0;
          }
          if (!holds) continue;
          detect::GpuFacts g;
          g.rank = rank;
          if (d.sm_util_pct) g.sm_util_pct = *d.sm_util_pct;
          g.power_w = d.power_w;
          if (d.mem_used_bytes) g.mem_used_bytes = static_cast<int64_t>(*d.mem_used_bytes);
          obs.gpus.push_back(g);
          break;
        }
      }
      rep.gpus = std::move(*snap);
    } else {
      rep.problems.push_back(snap.error());
    }
  }
  return obs;
}

}  // namespace stepwatch::supervise
