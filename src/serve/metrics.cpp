// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/serve/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "src/store/records.h"

namespace stepwatch::serve {

namespace {

using Labels = std::vector<std::pair<const char*, std::string>>;

constexpr const auto& kStates = detect::kAllStates;
constexpr const auto& kCauses = detect::kAllCauses;

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}
std::string number(int64_t v) {
  return fmt::format("{}", v);
}
std::string number(uint64_t v) {
  return fmt::format("{}", v);
}
std::string seconds(int64_t ns) {
  return number(static_cast<double>(ns) / kNsPerSec);
}

// Age of a stamp at `now`, as the detector computes it: monotonic for records of this host
// (immune to clock jumps), else wall. Absent when neither clock is known on both sides.
std::optional<int64_t> age_of(const Stamp& at, const Stamp& now, bool same_host) {
  if (same_host && at.mono_ns > 0 && now.mono_ns > 0)
    return std::max<int64_t>(0, now.mono_ns - at.mono_ns);
  if (at.wall_ns > 0 && now.wall_ns > 0) return std::max<int64_t>(0, now.wall_ns - at.wall_ns);
  return std::nullopt;
}

// One metric family: written only when it has samples, HELP and TYPE once, before them.
class Family {
 public:
  Family(const char* name, const char* type, const char* help)
      : name_(name), type_(type), help_(help) {}

  void add(const Labels& labels, const std::string& value) {
    body_ += name_;
    if (!labels.empty()) {
      body_ += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        if (i > 0) body_ += ',';
        body_ += labels[i].first;
        body_ += "=\"";
        body_ += escape_label_value(labels[i].second);
        body_ += '"';
      }
      body_ += '}';
    }
    body_ += ' ';
    body_ += value;
    body_ += '\n';
  }

  void write_to(std::string& out) const {
    if (body_.empty()) return;
    // HELP texts are our own constants: no backslash or line feed to escape.
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name_, help_, name_, type_);
    out += body_;
  }

 private:
  const char* name_;
  const char* type_;
  const char* help_;
  std::string body_;
};

struct RankRef {
  const contract::RankSnapshot* snap;
  Labels labels;  // job_id, rank, host
  bool same_host;
};

std::vector<RankRef> sorted_ranks(const watch::JobState& j) {
  std::vector<RankRef> out;
  for (const auto& r : j.observation.ranks) {
    const std::string& host = r.host.empty() ? j.host : r.host;
    bool same_host = detect::on_this_clock(r, j.observation);
    out.push_back(
        {&r, {{"job_id", j.job}, {"rank", std::to_string(r.rank)}, {"host", host}}, same_host});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const RankRef& a, const RankRef& b) { return a.snap->rank < b.snap->rank; });
  return out;
}

}  // namespace

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_metrics(const std::vector<watch::JobState>& jobs,
                           const watch::AgentHealth& health, const NodeFaultSnapshot* node_faults) {
  Family job_info("stepwatch_job_info", "gauge",
                  "The job's owner and class from its spec; always 1.");
  Family job_state("stepwatch_job_state", "gauge",
                   "1 for the job's current verdict state, 0 for the others.");
  Family job_cause("stepwatch_job_cause", "gauge",
                   "1 for the cause of the job's verdict (none unless stalled), 0 for the others.");
  Family job_leader(
      "stepwatch_job_leader", "gauge",
      "1 when this node leads the multi-node job (its verdict and incident), else 0.");
  Family job_step("stepwatch_job_step", "gauge", "Highest step any rank of the job committed.");
  Family job_step_age("stepwatch_job_step_age_seconds", "gauge",
                      "Age of the newest step of the job's slowest rank.");
  Family job_interval("stepwatch_job_expected_interval_seconds", "gauge",
                      "How long a step normally takes, from the spec or learned from the run.");
  Family rank_step("stepwatch_rank_step", "gauge", "Last step the rank committed.");
  Family rank_step_age("stepwatch_rank_step_age_seconds", "gauge",
                       "Time since the rank committed its last step.");
  Family rank_phase("stepwatch_rank_phase_info", "gauge", "The rank's current phase; always 1.");
  Family rank_phase_age("stepwatch_rank_phase_age_seconds", "gauge",
                        "Time since the rank entered its current phase.");
  Family rank_beat_age("stepwatch_rank_beat_age_seconds", "gauge",
                       "Time since the rank's last beat inside a long phase.");
  Family rank_ckpt("stepwatch_rank_checkpoint_step", "gauge",
                   "Step of the rank's last committed checkpoint.");
  Family rank_ckpt_age("stepwatch_rank_checkpoint_age_seconds", "gauge",
                       "Time since the rank's last checkpoint commit.");
  Family gpu_sm("stepwatch_gpu_sm_utilization_ratio", "gauge",
                "Share of time a kernel ran on a GPU the job holds (0..1).");
  Family gpu_power("stepwatch_gpu_power_watts", "gauge", "Power draw of a GPU the job holds.");
  Family gpu_mem("stepwatch_gpu_memory_used_bytes", "gauge",
                 "Device memory in use on a GPU the job holds.");
  Family incidents("stepwatch_job_incidents_total", "counter",
                   "Incidents opened for the job since the agent started.");
  Family actions("stepwatch_job_actions_total", "counter",
                 "Runbook actions taken for the job since the agent started, by action.");
  Family storm("stepwatch_job_restart_storm", "gauge",
               "1 while the job is in a restart storm (too many incarnations started in the "
               "window); absent otherwise.");

  std::vector<const watch::JobState*> sorted;
  for (const auto& j : jobs) {
    // A retired job (finished or vanished) stops exporting: its last state must not keep an
    // alert firing; Prometheus marks the series stale.
    if (!j.retired) sorted.push_back(&j);
  }
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const watch::JobState* a, const watch::JobState* b) { return a->job < b->job; });

  for (const watch::JobState* jp : sorted) {
    const watch::JobState& j = *jp;
    const detect::Verdict& v = j.verdict;
    const Stamp& now = j.observation.now;
    const Labels job{{"job_id", j.job}};

    job_info.add(
        {{"job_id", j.job}, {"host", j.host}, {"owner", j.owner}, {"job_class", j.job_class}}, "1");
    for (detect::State s : kStates) {
      job_state.add({{"job_id", j.job}, {"state", detect::state_name(s)}},
                    s == v.state ? "1" : "0");
    }
    for (detect::Cause c : kCauses) {
      job_cause.add({{"job_id", j.job}, {"cause", detect::cause_name(c)}},
                    c == v.cause ? "1" : "0");
    }
    if (j.cluster) {
      job_leader.add({{"job_id", j.job}, {"host", j.cluster->node}, {"leader", j.cluster->leader}},
                     j.cluster->leads ? "1" : "0");
    }
    if (v.last_step) {
      job_step.add(job, number(*v.last_step));
      if (v.last_step_age_ns >= 0) job_step_age.add(job, seconds(v.last_step_age_ns));
    }
    if (v.expected_interval_ns > 0) job_interval.add(job, seconds(v.expected_interval_ns));

    for (const RankRef& rr : sorted_ranks(j)) {
      const contract::RankSnapshot& r = *rr.snap;
      if (r.step) {
        rank_step.add(rr.labels, number(*r.step));
        if (auto age = age_of(r.step_at, now, rr.same_host))
          rank_step_age.add(rr.labels, seconds(*age));
      }
      if (!r.phase.empty()) {
        Labels with_phase = rr.labels;
        with_phase.emplace_back("phase", r.phase);
        rank_phase.add(with_phase, "1");
        if (auto age = age_of(r.phase_since, now, rr.same_host)) {
          rank_phase_age.add(rr.labels, seconds(*age));
        }
      }
      if (r.beat_at) {
        if (auto age = age_of(*r.beat_at, now, rr.same_host))
          rank_beat_age.add(rr.labels, seconds(*age));
      }
      if (r.checkpoint) {
        rank_ckpt.add(rr.labels, number(r.checkpoint->step));
        if (auto age = age_of(r.checkpoint->at, now, rr.same_host)) {
          rank_ckpt_age.add(rr.labels, seconds(*age));
        }
      }
    }

    if (j.gpus) {
      std::vector<const probe::GpuDevice*> devs;
      for (const auto& d : j.gpus->devices) devs.push_back(&d);
      std::stable_sort(
          devs.begin(), devs.end(),
          [](const probe::GpuDevice* a, const probe::GpuDevice* b) { return a->index < b->index; });
      for (const probe::GpuDevice* d : devs) {
        const Labels gpu{{"job_id", j.job}, {"host", j.host}, {"gpu", std::to_string(d->index)}};
        if (d->sm_util_pct) gpu_sm.add(gpu, number(static_cast<double>(*d->sm_util_pct) / 100.0));
        if (d->power_w) gpu_power.add(gpu, number(*d->power_w));
        if (d->mem_used_bytes) gpu_mem.add(gpu, number(static_cast<uint64_t>(*d->mem_used_bytes)));
      }
    }

    incidents.add(job, number(static_cast<uint64_t>(j.incidents_total)));
    // Every kind from 0, so that increase() sees a job's first page, preempt or failure; and any
    // kind counted that the list does not know. Sorted by action.
    std::map<std::string, uint64_t> counts(j.actions_total.begin(), j.actions_total.end());
    for (std::string_view kind : store::action_kind::kAll) counts.try_emplace(std::string(kind), 0);
    for (const auto& [action, count] : counts) {
      actions.add({{"job_id", j.job}, {"action", action}}, number(count));
    }
    if (node_faults) {
      auto it = node_faults->jobs.find(j.job);
      if (it != node_faults->jobs.end() && it->second.storm) storm.add(job, "1");
    }
  }

  // The node-fault rules' hosts, sorted by host: absent when none.
  Family host_suspect("stepwatch_host_suspect", "gauge",
                      "1 for a host the node-fault rules suspect; absent otherwise.");
  Family host_implications("stepwatch_host_implications", "gauge",
                           "Job incarnations that blamed the host within the cross-job window.");
  if (node_faults) {
    std::vector<const HostFault*> hosts;
    for (const auto& h : node_faults->hosts) hosts.push_back(&h);
    std::stable_sort(hosts.begin(), hosts.end(),
                     [](const HostFault* a, const HostFault* b) { return a->host < b->host; });
    for (const HostFault* h : hosts) {
      if (h->suspect) host_suspect.add({{"host", h->host}}, "1");
      host_implications.add({{"host", h->host}}, number(static_cast<int64_t>(h->implications)));
    }
  }

  Family poll_duration("stepwatch_agent_poll_duration_seconds", "gauge",
                       "How long the agent's last poll of all jobs took.");
  Family polls("stepwatch_agent_polls_total", "counter", "Polls the agent has completed.");
  Family beacons("stepwatch_agent_beacons_read_total", "counter",
                 "Beacon records the agent has read.");
  Family read_errors("stepwatch_agent_read_errors_total", "counter",
                     "Beacon or probe reads that failed.");
  Family start_time("stepwatch_agent_start_time_seconds", "gauge",
                    "When the agent started, in seconds since the Unix epoch.");
  Family poll_failures("stepwatch_agent_consecutive_poll_failures", "gauge",
                       "Polls in a row that failed as a whole: no job is being watched.");
  Family job_failures("stepwatch_agent_job_poll_failures_total", "counter",
                      "Polls of one job that failed while the others went on.");
  Family store_errors("stepwatch_agent_store_errors_total", "counter",
                      "Store writes that failed; pages went out regardless.");
  store_errors.add({}, number(static_cast<uint64_t>(health.store_errors_total)));
  poll_failures.add({}, number(static_cast<uint64_t>(health.consecutive_poll_failures)));
  job_failures.add({}, number(static_cast<uint64_t>(health.job_poll_failures_total)));
  if (health.polls_total > 0) poll_duration.add({}, seconds(health.last_poll_duration_ns));
  polls.add({}, number(static_cast<uint64_t>(health.polls_total)));
  beacons.add({}, number(static_cast<uint64_t>(health.beacons_read_total)));
  read_errors.add({}, number(static_cast<uint64_t>(health.read_errors_total)));
  if (health.started_wall_ns > 0) start_time.add({}, seconds(health.started_wall_ns));

  // Coordination through etcd: only on a multi-node agent ([coord] set).
  Family coord_connected("stepwatch_agent_coord_connected", "gauge",
                         "1 while the agent reaches etcd and holds its node lease, else 0.");
  Family coord_lease_age("stepwatch_agent_coord_lease_age_seconds", "gauge",
                         "Time since the agent last renewed its node lease in etcd.");
  Family coord_lease_ttl("stepwatch_agent_coord_lease_ttl_seconds", "gauge",
                         "TTL of the agent's node lease in etcd.");
  Family coord_losses("stepwatch_agent_coord_losses_total", "counter",
                      "Times the agent lost its coordination through etcd.");
  Family coord_puts("stepwatch_agent_coord_summaries_published_total", "counter",
                    "Job summaries the agent published to etcd.");
  Family coord_jobs_led("stepwatch_agent_coord_jobs_led", "gauge",
                        "Multi-node jobs this node leads now.");
  if (health.coord) {
    const watch::CoordHealth& c = *health.coord;
    coord_connected.add({{"node", c.node}}, c.connected ? "1" : "0");
    if (c.lease_age_ns >= 0) coord_lease_age.add({}, seconds(c.lease_age_ns));
    if (c.lease_ttl_ns > 0) coord_lease_ttl.add({}, seconds(c.lease_ttl_ns));
    coord_losses.add({}, number(static_cast<uint64_t>(c.losses_total)));
    coord_puts.add({}, number(static_cast<uint64_t>(c.puts_total)));
    coord_jobs_led.add({}, number(static_cast<uint64_t>(c.jobs_led)));
  }

  std::string out;
  for (const Family* f :
       {&job_info,        &job_state,         &job_cause,       &job_leader,    &job_step,
        &job_step_age,    &job_interval,      &rank_step,       &rank_step_age, &rank_phase,
        &rank_phase_age,  &rank_beat_age,     &rank_ckpt,       &rank_ckpt_age, &gpu_sm,
        &gpu_power,       &gpu_mem,           &incidents,       &actions,       &storm,
        &host_suspect,    &host_implications, &poll_duration,   &polls,         &beacons,
        &read_errors,     &start_time,        &poll_failures,   &job_failures,  &store_errors,
        &coord_connected, &coord_lease_age,   &coord_lease_ttl, &coord_losses,  &coord_puts,
        &coord_jobs_led}) {
    f->write_to(out);
  }
  return out;
}

}  // namespace stepwatch::serve
