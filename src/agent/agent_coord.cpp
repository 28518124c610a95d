// The agent's multi-node side ([coord] in agent.toml; docs/multinode.md): its node lease, each
// job's summary in etcd, the merge where this node leads a job, and which runbook owns the
// job's incident:
//   - etcd answers, this node leads the job: the job's one incident, in etcd (fenced writes),
//     judged on every node's ranks; one page per job, its id the dedup key;
//   - etcd answers, another node leads: nothing here opens or pages (the leader does);
//   - etcd does not answer: this node's own incident, from its own ranks, paging with the same
//     alert labels (Alertmanager merges the nodes' duplicates) and never acting: no
//     destructive step without a fenced write. Once etcd answers again the local incident is
//     closed and the leader's view takes over.
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "src/agent/agent.h"
#include "src/agent/tracked.h"
#include "src/common/log.h"

namespace stepwatch::agent {

namespace {

coord::EtcdOptions etcd_options(const CoordConfig& c) {
  coord::EtcdOptions o;
  o.endpoints = c.endpoints;
  o.token = c.token;
  o.timeout_ns = c.request_timeout_ns;
  return o;
}

// What changes when the ranks make progress (not their ages, which the leader extrapolates):
// a summary is published again when this changes.
uint64_t progress_signature(const detect::Observation& obs) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 1099511628211ULL;
  };
  for (const auto& r : obs.ranks) {
    mix(static_cast<uint64_t>(r.rank));
    mix(r.step_count);
    mix(r.phase_count);
    mix(r.beat_count);
    mix(static_cast<uint64_t>(r.status));
    mix(static_cast<uint64_t>(r.pid));
    mix(r.incarnation);
  }
  for (const auto& p : obs.procs) {
    mix(static_cast<uint64_t>(p.rank) << 8 | (p.alive ? 1 : 0) | (p.same_process ? 2 : 0));
    mix(static_cast<uint64_t>(p.state));
  }
  return h;
}

}  // namespace

Agent::Coordination::Coordination(const CoordConfig& c)
    : config(c),
      etcd(etcd_options(c)),
      session(etcd, coord::SessionOptions{c.prefix, c.node_name, c.lease_ttl_ns}),
      api_etcd(etcd_options(c)) {}

coord::LedgerKeys Agent::Coordination::keys(const std::string& job) const {
  coord::LedgerKeys k;
  k.incident = session.job_key(job, "incident");
  k.closed_dir = session.job_key(job, "incidents/");
  k.fence_key = session.job_key(job, "nodes/" + config.node_name);
  k.node = config.node_name;
  return k;
}

const std::string& Agent::node_name() const {
  return coord_ ? coord_->config.node_name : deps_.host;
}

void Agent::coord_tick(Stamp now) {
  if (coord_) coord_->session.tick(now);
}

void Agent::coordinate(Tracked& t, detect::Observation& obs, Stamp now) {
  if (!t.coord)
    t.coord = std::make_unique<coord::JobCoord>(coord_->session, t.job,
                                                coord_->config.publish_interval_ns);
  coord::NodeSummary s;
  s.node = node_name();
  s.poll_seq = polls_;
  for (const auto& r : obs.ranks) s.incarnation = std::max<int64_t>(s.incarnation, r.incarnation);
  s.observation = obs;
  t.coord->poll(s, progress_signature(obs), now);
  if (t.coord->leads()) {
    coord::Merged m = coord::merge(obs, node_name(), t.coord->remote(), now);
    for (const auto& p : m.problems) note_problem(fmt::format("job {}: {}", t.job, p));
    obs = std::move(m.observation);
  }
  watch::ClusterState c;
  c.node = node_name();
  c.leader = t.coord->leader();
  c.leads = t.coord->leads();
  c.connected = coord_->session.connected();
  c.nodes = t.coord->nodes(now);
  t.state.cluster = std::move(c);
}

void Agent::step_runbook(Tracked& t, const detect::Verdict& v, Stamp now) {
  if (!coord_) return t.runbook->step(v, now);
  if (!coord_->session.connected() || !t.coord) {
    t.runbook->step(v, now);  // degraded: this node's ranks, paging only (JobHost::refuse_act)
  } else if (t.runbook->is_open() && !t.runbook->acting()) {
    log_info("agent: job {}: etcd answers again: the job's leader ({}) owns its incident now",
             t.job, t.coord->leader().empty() ? "unknown" : t.coord->leader());
    t.runbook->close(now, "coordination resumed: the job's leader owns its incident");
  }
  if (t.coord && t.coord->leads() && coord_->session.connected()) {
    if (!t.job_runbook) {
      if (!t.job_ledger) {
        coord::JobCoord* jc = t.coord.get();
        t.job_ledger = std::make_unique<coord::EtcdLedger>(coord_->etcd, t.job, coord_->keys(t.job),
                                                           [jc] { return jc->fence(); });
        t.job_deliveries =
            std::make_unique<runbook::PageDeliveries>(*t.job_ledger, deps_.pager, delivery_sink());
        t.job_host = std::make_unique<JobHost>(*this, t, JobHost::Scope::kJob);
      }
      // A fresh runbook adopts the job's open incident from etcd, where the previous leader
      // left it: its page is not sent again unless it was claimed and never delivered.
      t.job_runbook = std::make_unique<runbook::Incident>(
          runbook::IncidentScope{t.job, 0, 0}, runbook::IncidentPolicy::from_spec(t.spec),
          *t.job_ledger, *t.job_host, *t.job_deliveries);
    }
    // The incarnation alone tells runs apart: wall clocks of other hosts are not compared.
    t.job_runbook->set_run(t.incarnation, 0);
    t.job_runbook->step(v, now);
  } else if (t.job_runbook && !t.job_runbook->acting()) {
    log_info("agent: job {}: this node no longer leads it ({} does): its incident is theirs", t.job,
             t.coord && !t.coord->leader().empty() ? t.coord->leader() : "unknown");
    t.job_runbook.reset();
  }
  if (t.job_deliveries) t.job_deliveries->reap(now);
}

void Agent::coord_retire(Tracked& t, Stamp now, const char* why) {
  if (t.job_runbook) t.job_runbook->close(now, why);
  if (t.coord) {
    coord_->puts_retired += t.coord->puts();
    t.coord->retire();
  }
}

void Agent::coord_health(watch::AgentHealth& h, Stamp now) const {
  if (!coord_) return;
  watch::CoordHealth c;
  const coord::NodeSession& s = coord_->session;
  c.node = coord_->config.node_name;
  c.connected = s.connected();
  c.error = s.connected() ? "" : s.last_error();
  c.lease_age_ns = s.lease_age_ns(now).value_or(-1);
  c.lease_ttl_ns = coord_->config.lease_ttl_ns;
  c.losses_total = s.losses();
  c.puts_total = coord_->puts_retired;
  for (const auto& [job, t] : tracked_) {
    if (!t->coord) continue;
    c.puts_total += t->coord->puts();
    if (t->coord->leads()) ++c.jobs_led;
  }
  h.coord = std::move(c);
}

}  // namespace stepwatch::agent
