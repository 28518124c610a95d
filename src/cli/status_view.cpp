// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/cli/status_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "src/common/duration.h"

namespace stepwatch::cli {

int64_t age_ns(const Stamp& at, const Stamp& now, bool same_host) {
  if (same_host && at.mono_ns > 0 && now.mono_ns > 0) return now.mono_ns - at.mono_ns;
  if (at.wall_ns > 0 && now.wall_ns > 0) return now.wall_ns - at.wall_ns;
  return -1;
}

namespace {

std::string age(int64_t ns) {
  return ns < 0 ? "n/a" : format_duration(ns);
}

std::string loss_text(const std::optional<double>& loss) {
  if (!loss) return "n/a";
  if (std::isnan(*loss)) return "NaN";
  return fmt::format("{:.4g}", *loss);
}

std::string over(const std::string& value, std::optional<int64_t> limit) {
  return limit && *limit > 0 ? value + "/" + format_duration(*limit) : value;
}

std::string proc_text(const std::optional<detect::ProcessFacts>& p) {
  if (!p) return "n/a";
  if (!p->alive) return "gone";
  if (!p->same_process) return "pid-reused";
  std::string w = p->wchan.empty() ? "" : ":" + p->wchan.substr(0, 14);
  return fmt::format("{}{}{}", p->state,
                     p->threads_in_d > 0 ? fmt::format("(D{})", p->threads_in_d) : "", w);
}

std::string cpu_text(const std::optional<detect::ProcessFacts>& p, int64_t sample_ns) {
  if (!p || !p->cpu_delta_ns || sample_ns <= 0) return "n/a";
  return fmt::format(
      "{:.0f}%", 100.0 * static_cast<double>(*p->cpu_delta_ns) / static_cast<double>(sample_ns));
}

std::string io_text(const std::optional<detect::ProcessFacts>& p, int64_t sample_ns) {
  if (!p || !p->io_delta_bytes || sample_ns <= 0) return "n/a";
  double per_s = static_cast<double>(*p->io_delta_bytes) * 1e9 / static_cast<double>(sample_ns);
  if (per_s >= 1 << 20) return fmt::format("{:.1f}MB/s", per_s / (1 << 20));
  if (per_s >= 1 << 10) return fmt::format("{:.0f}KB/s", per_s / (1 << 10));
  return fmt::format("{:.0f}B/s", per_s);
}

std::string gpu_text(const std::optional<detect::GpuFacts>& g) {
  if (!g) return "n/a";
  return fmt::format("{} {} {}", g->sm_util_pct ? fmt::format("{:.0f}%", *g->sm_util_pct) : "n/a",
                     g->power_w ? fmt::format("{:.0f}W", *g->power_w) : "n/a",
                     g->mem_used_bytes ? fmt::format("{}GiB", *g->mem_used_bytes >> 30) : "n/a");
}

// Who leads the job, then each node with the age of its summary in etcd.
std::string cluster_lines(const watch::ClusterState& c) {
  std::string out =
      fmt::format("  cluster: leader {}{}, this node {}{}\n",
                  c.leader.empty() ? "unknown" : c.leader, c.leads ? " (this node)" : "",
                  c.node.empty() ? "n/a" : c.node, c.connected ? "" : ", coordination lost");
  for (const watch::NodeState& n : c.nodes) {  // in the API's order: by name
    out += fmt::format("  node {}{}: summary {}{}, ranks {}\n", n.node, n.leader ? " (leader)" : "",
                       n.summary_age_ns < 0 ? "n/a" : age(n.summary_age_ns) + " ago",
                       n.lapsed ? ", LAPSED" : "", detect::rank_ranges(n.ranks));
  }
  return out;
}

template <typename T>
std::optional<T> of_rank(const std::vector<T>& facts, int rank) {
  for (const auto& f : facts)
    if (f.rank == rank) return f;
  return std::nullopt;
}

}  // namespace

StatusJob status_job(const contract::JobView& view, const Stamp& now, const std::string& local_host,
                     const JobEvidence* ev) {
  StatusJob job;
  job.job = view.job;
  job.dir = view.dir;
  const detect::Verdict* verdict = ev && ev->verdict ? &*ev->verdict : nullptr;
  job.evidence = ev != nullptr;
  if (ev != nullptr) job.sample_ns = ev->sample_ns;
  if (verdict != nullptr) job.verdict_summary = verdict->summary;
  for (const auto& r : view.ranks) {
    job.world_size = std::max(job.world_size, r.world_size);
    const bool same = !r.host.empty() && r.host == local_host;
    StatusRank row;
    row.rank = r.rank;
    row.host = r.host;
    row.pid = r.pid;
    row.step = r.step;
    if (r.step) row.step_age_ns = age_ns(r.step_at, now, same);
    row.phase = r.phase;
    row.phase_age_ns = age_ns(r.phase_since, now, same);
    if (r.beat_at) row.beat_age_ns = age_ns(*r.beat_at, now, same);
    if (r.checkpoint) {
      row.checkpoint = r.checkpoint->id;
      row.checkpoint_step = r.checkpoint->step;
      row.checkpoint_age_ns = age_ns(r.checkpoint->at, now, same);
    }
    row.loss = r.loss;
    row.status = contract::rank_status_name(r.status);
    row.source = contract::source_name(r.source);
    if (verdict != nullptr) {
      if (verdict->expected_interval_ns > 0) row.expected_ns = verdict->expected_interval_ns;
      if (auto rv = of_rank(verdict->ranks, r.rank)) {
        if (r.phase != "train") row.budget_ns = rv->budget_ns;
        row.verdict = detect::state_name(rv->state);
        row.note = rv->note;
      }
    }
    if (ev != nullptr) {
      row.process = of_rank(ev->procs, r.rank);
      row.gpu = of_rank(ev->gpus, r.rank);
    }
    job.ranks.push_back(std::move(row));
  }
  if (verdict != nullptr) {
    for (const auto& c : verdict->culprits) job.culprits.emplace_back(c.rank, c.reason);
  }
  for (const auto& p : view.problems) job.problems.push_back(p.message);
  return job;
}

std::string render_jobs(const std::vector<StatusJob>& jobs) {
  if (jobs.empty()) return "no jobs\n";
  std::string out;
  for (const auto& job : jobs) {
    out += fmt::format("job {}", job.job);
    if (!job.state.empty()) out += "  " + job.state;
    out += fmt::format("  ranks {}/{}", job.ranks.size(), job.world_size);
    if (!job.owner.empty()) out += "  owner " + job.owner;
    if (!job.dir.empty()) out += "  dir " + job.dir;
    if (job.retired) out += "  (retired)";
    out += "\n";
    if (job.verdict_summary) out += fmt::format("  verdict: {}\n", *job.verdict_summary);
    if (job.cluster) out += cluster_lines(*job.cluster);
    if (!job.ranks.empty()) {
      out +=
          fmt::format("  {:>4} {:<10} {:>7} {:>10} {:>8} {:<12} {:>9} {:>8} {:<22} {:>9} {:<8} {}",
                      "RANK", "HOST", "PID", "STEP", "STEP AGE", "PHASE", "PHASE AGE", "BEAT AGE",
                      "CHECKPOINT", "LOSS", "STATUS", "SRC");
      if (job.evidence)
        out += fmt::format("  {:<22} {:>5} {:>9} {:<16} {:<9} {}", "PROC", "CPU", "IO",
                           "GPU SM PWR MEM", "VERDICT", "NOTE");
      out += "\n";
    }
    for (const auto& r : job.ranks) {
      std::string ckpt = r.checkpoint ? fmt::format("{}@{} {}", *r.checkpoint, r.checkpoint_step,
                                                    age(r.checkpoint_age_ns))
                                      : "n/a";
      out += fmt::format(
          "  {:>4} {:<10} {:>7} {:>10} {:>8} {:<12} {:>9} {:>8} {:<22} {:>9} {:<8} {}", r.rank,
          r.host.empty() ? "n/a" : r.host.substr(0, 10),
          r.pid > 0 ? fmt::format("{}", r.pid) : "n/a",
          r.step ? fmt::format("{}", *r.step) : "none",
          over(r.step ? age(r.step_age_ns) : "n/a", r.expected_ns),
          r.phase.empty() ? "n/a" : r.phase.substr(0, 12), over(age(r.phase_age_ns), r.budget_ns),
          age(r.beat_age_ns), ckpt, loss_text(r.loss), r.status, r.source);
      if (job.evidence) {
        out += fmt::format("  {:<22} {:>5} {:>9} {:<16} {:<9} {}", proc_text(r.process),
                           cpu_text(r.process, job.sample_ns), io_text(r.process, job.sample_ns),
                           gpu_text(r.gpu), r.verdict.empty() ? "n/a" : r.verdict, r.note);
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();  // an empty note
      out += "\n";
    }
    // Ranks the world size promises but no record shows (a rank that never started).
    int missing = job.world_size - static_cast<int>(job.ranks.size());
    if (missing > 32) {
      out += fmt::format("  {} of {} ranks have no record\n", missing, job.world_size);
    } else {
      for (int rank = 0; rank < job.world_size; ++rank) {
        bool seen = false;
        for (const auto& r : job.ranks) seen = seen || r.rank == rank;
        if (!seen) out += fmt::format("  {:>4} no record\n", rank);
      }
    }
    for (const auto& [rank, reason] : job.culprits)
      out += fmt::format("  culprit: rank {}: {}\n", rank, reason);
    for (const auto& p : job.problems) out += fmt::format("  problem: {}\n", p);
  }
  return out;
}

std::string render_status(const std::vector<contract::JobView>& jobs, const Stamp& now,
                          const std::string& local_host,
                          const std::map<std::string, JobEvidence>* evidence) {
  std::vector<StatusJob> out;
  for (const auto& view : jobs) {
    const JobEvidence* ev = nullptr;
    if (evidence != nullptr) {
      auto it = evidence->find(view.job);
      if (it != evidence->end()) ev = &it->second;
    }
    out.push_back(status_job(view, now, local_host, ev));
  }
  return render_jobs(out);
}

}  // namespace stepwatch::cli
