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

std::string render_status(const std::vector<contract::JobView>& jobs, const Stamp& now, const std::string& local_host) {
  std::string out;
  if (jobs.empty()) return "no jobs\n";
  for (const auto& job : jobs) {
    int world = 0;
    for (const auto& r : job.ranks) world = std::max(world, r.world_size);
    out += fmt::format("job {}  ranks {}/{}  dir {}\n", job.job, job.ranks.size(), world, job.dir);
    if (!job.ranks.empty()) {
      out += fmt::format("  {:>4} {:<10} {:>7} {:>10} {:>8} {:<12} {:>9} {:>8} {:<22} {:>9} {:<8} {}\n", "RANK", "HOST",
                         "PID", "STEP", "STEP AGE", "PHASE", "PHASE AGE", "BEAT AGE", "CHECKPOINT", "LOSS", "STATUS",
                         "SRC");
    }
    for (const auto& r : job.ranks) {
      bool same = !r.host.empty() && r.host == local_host;
      std::string ckpt = "n/a";
      if (r.checkpoint) {
        ckpt = fmt::format("{}@{} {}", r.checkpoint->id, r.checkpoint->step, age(r.checkpoint->at, now, same));
      }
      out += fmt::format("  {:>4} {:<10} {:>7} {:>10} {:>8} {:<12} {:>9} {:>8} {:<22} {:>9} {:<8} {}\n", r.rank,
                         r.host.empty() ? "n/a" : r.host.substr(0, 10), r.pid > 0 ? fmt::format("{}", r.pid) : "n/a",
                         r.step ? fmt::format("{}", *r.step) : "none", r.step ? age(r.step_at, now, same) : "n/a",
                         r.phase.substr(0, 12), age(r.phase_since, now, same),
                         r.beat_at ? age(*r.beat_at, now, same) : "n/a", ckpt, loss_text(r),
                         contract::rank_status_name(r.status), contract::source_name(r.source));
    }
    for (int rank = 0; rank < world; ++rank) {
      bool seen = false;
      for (const auto& r : job.ranks) seen = seen || r.rank == rank;
      if (!seen) out += fmt::format("  {:>4} no record\n", rank);
    }
    for (const auto& p : job.problems) out += fmt::format("  problem: {}\n", p.message);
  }
  return out;
}

}  // namespace stepwatch::cli
