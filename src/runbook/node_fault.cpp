// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/node_fault.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "src/common/duration.h"

namespace stepwatch::runbook {

namespace {

using store::HostImplication;
using store::IncarnationRecord;

bool in_window(int64_t t, int64_t now, int64_t window) {
  return t > now - window && t <= now;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Each value once, in the order first seen.
std::vector<std::string> unique(const std::vector<std::string>& v) {
  std::vector<std::string> out;
  for (const auto& s : v) {
    if (!contains(out, s)) out.push_back(s);
  }
  return out;
}

// The ended incarnations, newest (highest number) first, whatever order the caller used.
std::vector<const IncarnationRecord*> ended_newest_first(
    const std::vector<IncarnationRecord>& history) {
  std::vector<const IncarnationRecord*> out;
  for (const auto& r : history) {
    if (r.ended()) out.push_back(&r);
  }
  std::sort(out.begin(), out.end(),
            [](const auto* a, const auto* b) { return a->incarnation > b->incarnation; });
  return out;
}

// Incarnation ids, oldest first, for evidence lines.
std::string ids(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return fmt::format("{}", fmt::join(v, ", "));
}

// host -> (job -> newest implicated incarnation) within the cross-job window.
using JobsByHost = std::map<std::string, std::map<std::string, int64_t>>;

JobsByHost jobs_by_host(const std::vector<HostImplication>& implications, const NodeFaultPolicy& p,
                        int64_t now) {
  JobsByHost out;
  if (p.cross_job_min <= 0 || p.cross_job_window_ns <= 0) return out;
  for (const auto& i : implications) {
    if (!in_window(i.at_ns, now, p.cross_job_window_ns)) continue;
    auto& newest = out[i.host].emplace(i.job, i.incarnation).first->second;
    newest = std::max(newest, i.incarnation);
  }
  return out;
}

void apply_cross_job(SuspectHost& s, const std::map<std::string, int64_t>& jobs,
                     const NodeFaultPolicy& p) {
  s.jobs_implicated = static_cast<int>(jobs.size());
  if (p.cross_job_min <= 0 || s.jobs_implicated < p.cross_job_min) return;
  s.blamed = true;
  std::vector<std::string> names;
  for (const auto& [job, incarnation] : jobs) {
    names.push_back(fmt::format("{}#{}", job, incarnation));
  }
  s.evidence.push_back(fmt::format("implicated in {} jobs in the last {} (limit {}): {}",
                                   s.jobs_implicated, format_duration(p.cross_job_window_ns),
                                   p.cross_job_min, fmt::join(names, ", ")));
}

// Strongest first: more rules fired; then the cross-job count (the stronger sign), the culprit
// count, the short-run chain; then by name so the order is stable.
void sort_by_strength(std::vector<SuspectHost>& v) {
  std::sort(v.begin(), v.end(), [](const SuspectHost& a, const SuspectHost& b) {
    auto key = [](const SuspectHost& s) {
      return std::make_tuple(s.evidence.size(), s.jobs_implicated, s.culprit_in, s.short_runs);
    };
    if (key(a) != key(b)) return key(a) > key(b);
    return a.host < b.host;
  });
}

}  // namespace

std::optional<RestartStorm> restart_storm(const std::vector<IncarnationRecord>& job_history,
                                          const NodeFaultPolicy& p, int64_t now_wall_ns) {
  if (p.storm_incarnations <= 0 || p.storm_window_ns <= 0) return std::nullopt;
  RestartStorm storm;
  std::vector<int64_t> started;
  for (const auto& r : job_history) {
    if (!in_window(r.started_ns, now_wall_ns, p.storm_window_ns)) continue;
    if (started.empty() || r.started_ns < storm.first_started_ns) {
      storm.first_started_ns = r.started_ns;
    }
    if (started.empty() || r.started_ns > storm.last_started_ns) {
      storm.last_started_ns = r.started_ns;
    }
    started.push_back(r.incarnation);
  }
  if (static_cast<int>(started.size()) < p.storm_incarnations) return std::nullopt;
  storm.incarnations = static_cast<int>(started.size());
  storm.window_ns = p.storm_window_ns;
  storm.evidence = fmt::format(
      "{} incarnations started in {} (limit {} in {}): {}", storm.incarnations,
      format_duration(storm.last_started_ns - storm.first_started_ns), p.storm_incarnations,
      format_duration(p.storm_window_ns), ids(std::move(started)));
  return storm;
}

std::vector<std::string> implicated_hosts(const IncarnationRecord& r) {
  if (!r.ended() || r.end_reason == "finished") return {};
  if (r.cause == "collective" && r.culprit_ranks.empty()) return {};
  return unique(r.culprit_hosts);
}

std::vector<SuspectHost> suspect_hosts(const std::vector<IncarnationRecord>& job_history,
                                       const std::vector<HostImplication>& implications,
                                       const NodeFaultPolicy& p, int64_t now_wall_ns) {
  const auto ended = ended_newest_first(job_history);
  // Per host, the incarnation ids behind each rule; a host is named if any rule fires.
  std::map<std::string, std::vector<int64_t>> culprit_in, chain;

  // Culprit rule: the last suspect_of_last ended incarnations, or as many as there are.
  const bool culprit_on = p.suspect_of_last > 0 && p.suspect_culprit_min > 0;
  const size_t of_last = culprit_on ? std::min(ended.size(), size_t(p.suspect_of_last)) : 0;
  for (size_t k = 0; k < of_last; ++k) {
    for (const auto& h : implicated_hosts(*ended[k]))
      culprit_in[h].push_back(ended[k]->incarnation);
  }

  // Short-run rule: the trailing chain per host, from the newest ended incarnation back.
  if (p.short_run_count > 0 && p.short_run_ns > 0 && !ended.empty()) {
    auto ran_on = [](const IncarnationRecord& r, const std::string& h) {
      return contains(r.hosts, h) || contains(r.culprit_hosts, h);
    };
    std::vector<std::string> hosts = ended[0]->hosts;
    hosts.insert(hosts.end(), ended[0]->culprit_hosts.begin(), ended[0]->culprit_hosts.end());
    for (const auto& h : unique(hosts)) {
      for (const auto* r : ended) {
        const bool short_run =
            r->end_reason != "finished" && *r->ended_ns - r->started_ns < p.short_run_ns;
        if (!short_run || !ran_on(*r, h)) break;
        chain[h].push_back(r->incarnation);
      }
    }
  }

  // Cross-job rule, for the hosts this job ran on.
  std::set<std::string> ran_here;
  for (const auto& r : job_history) {
    ran_here.insert(r.hosts.begin(), r.hosts.end());
    ran_here.insert(r.culprit_hosts.begin(), r.culprit_hosts.end());
  }
  JobsByHost jobs = jobs_by_host(implications, p, now_wall_ns);

  std::vector<SuspectHost> out;
  for (const auto& host : ran_here) {
    SuspectHost s;
    s.host = host;
    s.of_last = static_cast<int>(of_last);
    auto& c = culprit_in[host];
    s.culprit_in = static_cast<int>(c.size());
    if (culprit_on && s.culprit_in >= p.suspect_culprit_min) {
      s.blamed = true;
      s.evidence.push_back(
          fmt::format("culprit in {} of the last {} ended incarnations (limit {} of {}): {}",
                      s.culprit_in, of_last, p.suspect_culprit_min, p.suspect_of_last, ids(c)));
    }
    auto& ch = chain[host];
    s.short_runs = static_cast<int>(ch.size());
    if (p.short_run_count > 0 && s.short_runs >= p.short_run_count) {
      s.evidence.push_back(fmt::format(
          "in {} consecutive incarnations that each ended, not finished, within {} (limit {}): "
          "{} (weak: correlation only)",
          s.short_runs, format_duration(p.short_run_ns), p.short_run_count, ids(ch)));
    }
    if (auto it = jobs.find(host); it != jobs.end()) apply_cross_job(s, it->second, p);
    if (!s.evidence.empty()) out.push_back(std::move(s));
  }
  sort_by_strength(out);
  return out;
}

std::vector<SuspectHost> cross_job_suspects(const std::vector<HostImplication>& implications,
                                            const NodeFaultPolicy& p, int64_t now_wall_ns) {
  std::vector<SuspectHost> out;
  for (const auto& [host, jobs] : jobs_by_host(implications, p, now_wall_ns)) {
    SuspectHost s;
    s.host = host;
    apply_cross_job(s, jobs, p);
    if (!s.evidence.empty()) out.push_back(std::move(s));
  }
  sort_by_strength(out);
  return out;
}

std::string exclude_hint(std::string_view scheduler, const std::vector<std::string>& hosts) {
  const auto h = unique(hosts);
  if (h.empty()) return "";
  scheduler = scheduler.substr(0, scheduler.find(':'));
  if (scheduler == "slurm") return fmt::format("sbatch --exclude={}", fmt::join(h, ","));
  if (scheduler == "kubernetes" || scheduler == "k8s") {
    return fmt::format("node affinity: kubernetes.io/hostname NotIn [{}]", fmt::join(h, ", "));
  }
  return fmt::format("exclude {} from the job's next placement", fmt::join(h, ", "));
}

}  // namespace stepwatch::runbook
