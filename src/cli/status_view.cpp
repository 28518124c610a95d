#include "src/cli/status_view.h"

#include <fmt/format.h>

#include <cmath>

#include "src/common/duration.h"

namespace stepwatch::cli {

int64_t age_ns(const Stamp& at, const Stamp& now, bool same_host) {
  if (same_host && at.mono_ns > 0 && now.mono_ns > 0) return now.mono_ns - at.mono_ns;
  if (at.wall_ns > 0 && now.wall_ns > 0) return now.wall_ns - at.wall_ns;
  return -1;
}

namespace {

std::string age(const Stamp& at, const Stamp& now, bool same_host) {
  int64_t a = age_ns(at, now, same_host);
  return a < 0 ? "n/a" : format_duration(a);
}

std::string loss_text(const contract::RankSnapshot& r) {
  if (!r.loss) return "n/a";
  if (std::isnan(*r.loss)) return "NaN";
  return fmt::format("{:.4g}", *r.loss);
}

}  // namespace

namespace {

std::string over(const std::string& value, std::optional<int64_t> limit) {
  return limit && *limit > 0 ? value + "/" + format_duration(*limit) : value;
}

std::string proc_text(const detect::ProcessFacts* p) {
  if (p == nullptr) return "n/a";
  if (!p->alive) return "gone";
  if (!p->same_process) return "pid-reused";
  std::string w = p->wchan.empty() ? "" : ":" + p->wchan.substr(0, 14);
  return fmt::format("{}{}{}", p->state,
                     p->threads_in_d > 0 ? fmt::format("(D{})", p->threads_in_d) : "", w);
}

std::string cpu_text(const detect::ProcessFacts* p, int64_t sample_ns) {
  if (p == nullptr || !p->cpu_delta_ns || sample_ns <= 0) return "n/a";
  return fmt::format(
      "{:.0f}%", 100.0 * static_cast<double>(*p->cpu_delta_ns) / static_cast<double>(sample_ns));
}

std::string io_text(const detect::ProcessFacts* p, int64_t sample_ns) {
  if (p == nullptr || !p->io_delta_bytes || sample_ns <= 0) return "n/a";
  double per_s = static_cast<double>(*p->io_delta_bytes) * 1e9 / static_cast<double>(sample_ns);
  if (per_s >= 1 << 20) return fmt::format("{:.1f}MB/s", per_s / (1 << 20));
  if (per_s >= 1 << 10) return fmt::format("{:.0f}KB/s", per_s / (1 << 10));
  return fmt::format("{:.0f}B/s", per_s);
}

std::string gpu_text(const detect::GpuFacts* g) {
  if (g == nullptr) return "n/a";
  return fmt::format("{} {} {}", g->sm_util_pct ? fmt::format("{:.0f}%", *g->sm_util_pct) : "n/a",
                     g->power_w ? fmt::format("{:.0f}W", *g->power_w) : "n/a",
                     g->mem_used_bytes ? fmt::format("{}GiB", *g->mem_used_bytes >> 30) : "n/a");
}

}  // namespace

std::string render_status(const std::vector<contract::JobView>& jobs, const Stamp& now,
                          const std::string& local_host,
                          const std::map<std::string, JobEvidence>* evidence) {
  std::string out;
  if (jobs.empty()) return "no jobs\n";
  for (const auto& job : jobs) {
    const JobEvidence* ev = nullptr;
    if (evidence != nullptr) {
      auto it = evidence->find(job.job);
      if (it != evidence->end()) ev = &it->second;
    }
    const detect::Verdict* verdict = ev && ev->verdict ? &*ev->verdict : nullptr;
    int world = 0;
    for (const auto& r : job.ranks) world = std::max(world, r.world_size);
    out += fmt::format("job {}  ranks {}/{}  dir {}\n", job.job, job.ranks.size(), world, job.dir);
    if (verdict != nullptr) out += fmt::format("  verdict: {}\n", verdict->summary);
    if (!job.ranks.empty()) {
      out +=
          fmt::format("  {:>4} {:<10} {:>7} {:>10} {:>8} {:<12} {:>9} {:>8} {:<22} {:>9} {:<8} {}",
                      "RANK", "HOST", "PID", "STEP", "STEP AGE", "PHASE", "PHASE AGE", "BEAT AGE",
                      "CHECKPOINT", "LOSS", "STATUS", "SRC");
      if (ev != nullptr)
        out += fmt::format("  {:<22} {:>5} {:>9} {:<16} {}", "PROC", "CPU", "IO", "GPU SM PWR MEM",
                           "VERDICT");
      out += "\n";
    }
    for (const auto& r : job.ranks) {
      bool same = !r.host.empty() && r.host == local_host;
      std::string ckpt = "n/a";
      if (r.checkpoint) {
        ckpt = fmt::format("{}@{} {}", r.checkpoint->id, r.checkpoint->step,
                           age(r.checkpoint->at, now, same));
      }
      const detect::RankVerdict* rv = nullptr;
      if (verdict != nullptr) {
        for (const auto& x : verdict->ranks)
          if (x.rank == r.rank) rv = &x;
      }
      std::optional<int64_t> expected, budget;
      if (verdict != nullptr && verdict->expected_interval_ns > 0)
        expected = verdict->expected_interval_ns;
      if (rv != nullptr && r.phase != "train") budget = rv->budget_ns;
      out +=
          fmt::format("  {:>4} {:<10} {:>7} {:>10} {:>8} {:<12} {:>9} {:>8} {:<22} {:>9} {:<8} {}",
                      r.rank, r.host.empty() ? "n/a" : r.host.substr(0, 10),
                      r.pid > 0 ? fmt::format("{}", r.pid) : "n/a",
                      r.step ? fmt::format("{}", *r.step) : "none",
                      over(r.step ? age(r.step_at, now, same) : "n/a", expected),
                      r.phase.substr(0, 12), over(age(r.phase_since, now, same), budget),
                      r.beat_at ? age(*r.beat_at, now, same) : "n/a", ckpt, loss_text(r),
                      contract::rank_status_name(r.status), contract::source_name(r.source));
      if (ev != nullptr) {
        const detect::ProcessFacts* p = nullptr;
        for (const auto& x : ev->procs)
          if (x.rank == r.rank) p = &x;
        const detect::GpuFacts* g = nullptr;
        for (const auto& x : ev->gpus)
          if (x.rank == r.rank) g = &x;
        out += fmt::format("  {:<22} {:>5} {:>9} {:<16} {}", proc_text(p),
                           cpu_text(p, ev->sample_ns), io_text(p, ev->sample_ns), gpu_text(g),
                           rv ? detect::state_name(rv->state) : "n/a");
      }
      out += "\n";
    }
    // Ranks the world size promises but no record shows (a rank that never started).
    int missing = world - static_cast<int>(job.ranks.size());
    if (missing > 32) {
      out += fmt::format("  {} of {} ranks have no record\n", missing, world);
    } else {
      for (int rank = 0; rank < world; ++rank) {
        bool seen = false;
        for (const auto& r : job.ranks) seen = seen || r.rank == rank;
        if (!seen) out += fmt::format("  {:>4} no record\n", rank);
      }
    }
    if (verdict != nullptr) {
      for (const auto& c : verdict->culprits)
        out += fmt::format("  culprit: rank {}: {}\n", c.rank, c.reason);
    }
    for (const auto& p : job.problems) out += fmt::format("  problem: {}\n", p.message);
  }
  return out;
}

}  // namespace stepwatch::cli
