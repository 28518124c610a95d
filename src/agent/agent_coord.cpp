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
#include <fmt/ranges.h>

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

Agent::Coordination::Coordination(const CoordConfig& c, std::shared_ptr<coord::Kv> kv)
    : config(c),
      poll_kv(kv ? kv : std::make_shared<coord::EtcdClient>(etcd_options(c))),
      api_kv(kv ? kv : std::make_shared<coord::EtcdClient>(etcd_options(c))),
      etcd(*poll_kv),
      session(etcd, coord::SessionOptions{c.prefix, c.node_name, c.lease_ttl_ns}),
      api_etcd(*api_kv),
      history(etcd, c.prefix, "", [] { return int64_t{0}; }) {}

coord::LedgerKeys Agent::Coordination::keys(const std::string& job) const {
  coord::LedgerKeys k;
  k.incident = coord::incident_key(config.prefix, job);
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
  if (!t.coord) {
    t.coord = std::make_unique<coord::JobCoord>(coord_->session, t.job,
                                                coord_->config.publish_interval_ns);
    t.orders = std::make_unique<coord::JobOrders>(coord_->etcd, coord_->session.job_key(t.job),
                                                  node_name(), coord_->keys(t.job).fence_key);
    coord::JobCoord* jc = t.coord.get();
    t.history = std::make_unique<coord::EtcdHistory>(coord_->etcd, coord_->config.prefix,
                                                     coord_->keys(t.job).fence_key,
                                                     [jc] { return jc->fence(); });
  }
  bool led = t.coord->leads();
  coord::NodeSummary s;
  s.node = node_name();
  s.poll_seq = polls_;
  for (const auto& r : obs.ranks) s.incarnation = std::max<int64_t>(s.incarnation, r.incarnation);
  s.observation = obs;
  t.coord->poll(s, progress_signature(obs), now);
  if (t.coord->leads()) {
    int64_t incarnation = s.incarnation;
    int world = 0;
    for (const auto& r : obs.ranks) world = std::max(world, r.world_size);
    if (!led) {
      // Taking the job over: the nodes a previous leader knew of this run, even silent ones.
      auto roster = t.orders->roster();
      if (roster && *roster && (*roster)->first == incarnation)
        t.coord->remember((*roster)->second, world, incarnation, now);
    }
    // A node silent since an earlier run is not a silent rank of this one.
    std::vector<const coord::Received*> remote;
    for (const auto* r : t.coord->remote()) {
      if (!r->lapsed_mono_ns || r->summary.incarnation >= incarnation) remote.push_back(r);
    }
    coord::Merged m = coord::merge(obs, node_name(), remote, now);
    for (const auto& p : m.problems) note_problem(fmt::format("job {}: {}", t.job, p));
    obs = std::move(m.observation);
    keep_roster(t, obs, !led, now);
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
  if (t.coord && coord_->session.connected()) follow_orders(t, v, now);
  if (t.coord && t.coord->leads() && coord_->session.connected()) {
    gather_reports(t, now);
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
      start_job_resume(t);
      take_up_storm_hold(t);  // one a previous leader marked stands
    }
    // The incarnation alone tells runs apart: wall clocks of other hosts are not compared.
    t.job_runbook->set_run(t.incarnation, 0);
    if (t.job_resume->holding()) {
      // Held after a restart storm: the preempted ranks' verdict neither recovers nor ends the
      // incident; only the ack (or a next incarnation started by someone else) does.
      t.job_resume->poll(now);
    } else {
      t.job_runbook->step(v, now);
    }
  } else if (t.job_runbook) {
    // Even mid-preempt: the next leader finds the order in etcd and gathers the reports itself.
    if (!coord_->session.connected()) {
      log_info(
          "agent: job {}: etcd does not answer: this node leads it no more (its incident is "
          "in etcd, for the leader to go on with)",
          t.job);
    } else {
      log_info("agent: job {}: this node no longer leads it ({} does): its incident is theirs",
               t.job, t.coord && !t.coord->leader().empty() ? t.coord->leader() : "unknown");
    }
    // A hold is marked in the incarnation key: the next leader takes it up.
    t.job_resume.reset();
    t.job_resume_host.reset();
    t.job_owner.reset();
    t.job_runbook.reset();
    t.job_act.reset();
  }
  if (t.job_deliveries) t.job_deliveries->reap(now);
}

void Agent::keep_roster(Tracked& t, const detect::Observation& merged, bool took_over,
                        Stamp /*now*/) {
  std::map<std::string, std::vector<int>> nodes;
  int64_t incarnation = 0;
  for (const auto& r : merged.ranks) {
    nodes[r.host].push_back(r.rank);
    incarnation = std::max<int64_t>(incarnation, r.incarnation);
  }
  if (!took_over && nodes == t.roster_written) return;
  if (auto st = t.orders->write_roster(incarnation, nodes, t.coord->fence()); !st) {
    coord_->session.note_failure(st.error());
    return;
  }
  t.roster_written = std::move(nodes);
}

void Agent::follow_orders(Tracked& t, const detect::Verdict& v, Stamp now) {
  if (!t.orders) return;
  if (t.order_act && t.order_act->wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    runbook::ActReport r = t.order_act->get();
    t.order_act.reset();
    coord::Order o = *t.order_running;
    t.order_running.reset();
    coord::Done d;
    d.ok = r.preempt.ok;
    d.artifact = r.artifact.value_or("");
    d.summary = r.preempt.summary();
    d.at_ns = now.wall_ns;
    for (const auto& p : r.preempt.processes) {
      d.processes.push_back({p.process.pid, p.process.label, p.gone(), p.describe()});
      if (p.gone()) t.ended_by_orders.insert(p.process.pid);
    }
    auto sent = t.orders->report(o.incident, d);
    if (!sent) {
      coord_->session.note_failure(sent.error());
      t.order_running = o;  // reported next poll: the processes are gone, the report is not
      t.order_act.emplace(std::async(std::launch::deferred, [r] { return r; }));
      return;
    }
    t.orders_done.insert(o.incident);
    t.preempted_incarnation = std::max(t.preempted_incarnation, o.incarnation);
    log_info("agent: job {}: incident {}: preempted on this node ({}) as ordered by {}: {}", t.job,
             o.incident, node_name(), o.by, d.summary);
    store::Action a;
    a.job = t.job;
    a.at_ns = now.wall_ns;
    a.kind = std::string(store::action_kind::kPreempt);
    a.ok = d.ok;
    a.detail =
        fmt::format("ordered by {} for the job's incident {}: {}", o.by, o.incident, d.summary);
    if (auto st = store_.record_action(a); !st) note_store_error(st.error());
    t.state.actions_total[std::string(store::action_kind::kPreempt)]++;
  }
  if (t.order_act) return;  // one at a time
  auto orders = t.orders->orders();
  if (!orders) {
    coord_->session.note_failure(orders.error());
    return;
  }
  for (const auto& o : *orders) {
    if (t.orders_done.count(o.incident)) continue;
    auto already = t.orders->reported(o.incident);
    if (!already) {
      coord_->session.note_failure(already.error());
      return;
    }
    if (*already) {  // reported before this agent (re)started: never carried out twice
      t.orders_done.insert(o.incident);
      continue;
    }
    coord::Done d;
    d.at_ns = now.wall_ns;
    if (o.incarnation != t.incarnation) {  // an order for another run never ends this one
      d.ok = true;
      d.summary = fmt::format("incarnation {} does not run here (this node runs {})", o.incarnation,
                              t.incarnation);
      auto sent = t.orders->report(o.incident, d);
      if (!sent) {
        coord_->session.note_failure(sent.error());
        return;
      }
      t.orders_done.insert(o.incident);
      continue;
    }
    // This node's own rules for its processes: the job must be one it may preempt.
    std::optional<std::string> refused = t.host->may_carry_out();
    runbook::PreemptTargets targets;
    if (!refused) targets = t.host->targets();
    if (refused || targets.processes.empty()) {
      d.ok = !refused && targets.refused.empty();
      d.refused = !refused           ? targets.refused
                  : refused->empty() ? std::string(
                                           "this node's agent does not list the job in "
                                           "preempt_jobs")
                                     : *refused;
      d.summary = refused ? "" : "no process of the job runs here";
      auto sent = t.orders->report(o.incident, d);
      if (!sent) {
        coord_->session.note_failure(sent.error());
        return;
      }
      t.orders_done.insert(o.incident);
      log_info("agent: job {}: incident {}: ordered to preempt by {}: {}", t.job, o.incident, o.by,
               refused ? "refused: " + *refused : d.summary);
      continue;
    }
    log_warn("agent: job {}: incident {}: preempting {} proven process(es) here, as ordered by {}",
             t.job, o.incident, targets.processes.size(), o.by);
    t.order_running = o;
    t.order_act = t.host->act(v, o.incident, std::move(targets));
    return;
  }
}

void Agent::gather_reports(Tracked& t, Stamp now) {
  if (!t.job_act || !t.orders) return;
  Tracked::JobAct& ja = *t.job_act;
  auto reports = t.orders->reports(ja.incident);
  if (!reports) {
    coord_->session.note_failure(reports.error());
    return;
  }
  std::set<std::string> have;
  for (const auto& d : *reports) have.insert(d.node);
  std::vector<std::string> missing;
  for (const auto& n : ja.nodes) {
    if (!have.count(n)) missing.push_back(n);
  }
  // A node that cannot report (dead, cut off) holds the runbook up to the preempt grace and a
  // minute: then its processes are reported as not known to be gone.
  int64_t limit = t.spec.runbook.preempt_grace_ns + 60 * kNsPerSec;
  if (!missing.empty() && now.mono_ns - ja.ordered_mono_ns < limit) return;
  ja.done.set_value(coord::merged_report(*reports, missing));
  t.job_act.reset();
}

std::future<runbook::ActReport> Agent::order_preempt(Tracked& t, int64_t incident) {
  coord::Order o;
  o.incident = incident;
  o.incarnation = t.incarnation;
  o.by = node_name();
  o.at_ns = wall_now_ns();
  auto ordered = t.orders->order(o, t.coord->fence());
  if (!ordered) {
    runbook::ActReport failed;
    runbook::ProcessOutcome why;
    why.process.label = "every node";
    why.note = "the preempt order was not written: " + ordered.error().message;
    failed.preempt.survivors.push_back(why.process);
    failed.preempt.processes.push_back(std::move(why));
    std::promise<runbook::ActReport> p;
    p.set_value(std::move(failed));
    return p.get_future();
  }
  Tracked::JobAct ja;
  ja.incident = incident;
  ja.ordered_mono_ns = t.now.mono_ns;
  std::set<std::string> nodes;
  for (const auto& r : t.state.observation.ranks) nodes.insert(r.host);
  ja.nodes.assign(nodes.begin(), nodes.end());
  log_warn(
      "agent: job {}: incident {}: {} every node ({}) to collect and preempt its proven "
      "processes",
      t.job, incident, *ordered ? "ordered" : "already ordered:", fmt::join(ja.nodes, ", "));
  auto f = ja.done.get_future();
  t.job_act = std::move(ja);
  return f;
}

void Agent::start_job_resume(Tracked& t) {
  coord::JobCoord* jc = t.coord.get();
  Tracked* job = &t;
  LeaderResumeDeps d{t.job,
                     node_name(),
                     *t.orders,
                     *t.job_ledger,
                     history_reader(),
                     *t.job_deliveries,
                     t.spec.runbook.pagers,
                     [jc] { return jc->fence(); },
                     [job] { return job->incarnation; },
                     [job] { return job->job_host->page(job->acted_on); },
                     [job] { return job->job_runbook.get(); },
                     [this](const std::string& line) { note_problem(line); }};
  t.job_owner = runbook::make_resume_owner(t.spec);
  t.job_resume_host = std::make_unique<LeaderResume>(std::move(d));
  t.job_resume = std::make_unique<runbook::Resume>(runbook::ResumePolicy::from_spec(t.job, t.spec),
                                                   *t.job_owner, *t.job_resume_host);
}

runbook::AfterPreempt Agent::after_job_preempt(Tracked& t, const runbook::ActReport& report) {
  if (!report.preempt.ok) return {false, ""};  // survivors: paged again, kept open
  std::set<std::string> nodes;
  for (const auto& r : t.state.observation.ranks) nodes.insert(r.host);
  runbook::Preempted p;
  p.done = fmt::format("preempted on {} node(s) ({})", nodes.size(), fmt::join(nodes, ", "));
  // The incarnation ended here, with the verdict it was preempted on (the job's history).
  end_history(t, "preempted", &t.acted_on, t.now);
  // Acks are stamped by the API threads' wall clock: a hold's start must compare with them.
  const Stamp now{wall_now_ns(), t.now.mono_ns};
  p.next = t.job_resume_host->next(t.job_runbook && t.job_runbook->id() ? *t.job_runbook->id() : 0,
                                   committed_by_every_rank(t.state.observation));
  if (!t.spec.runbook.resume) return t.job_resume->after_preempt(p, now);
  // First: the incarnation key also records a requeue, and a next leader that finds it moved
  // does not act (by then Slurm may have ended the launchers too).
  auto from = t.orders->incarnation();
  if (!from) return {true, p.done + "; not relaunched: " + from.error().message};
  if (from->record.incarnation != t.incarnation) {
    return {true, fmt::format("{}; incarnation {} was started already", p.done,
                              from->record.incarnation)};
  }
  auto launchers = t.orders->launchers();
  if (!launchers) return {true, p.done + "; not relaunched: " + launchers.error().message};
  if (launchers->empty()) {
    return {true, p.done + "; no `stepwatch run --coord` runs for the job: nothing relaunches it"};
  }
  if (p.next.incident > 0 && from->record.hold_incident == p.next.incident) {
    // A previous leader held it: the hold stands (paged already), as of when it was marked.
    take_up_storm_hold(t, from->record, p.done);
    return {false, "", true};
  }
  return t.job_resume->after_preempt(p, now);
}

void Agent::share_view(Tracked& t, Stamp now) {
  if (!t.coord || !t.orders || !coord_->session.connected()) return;
  if (t.coord->leads()) {
    const std::string said =
        fmt::format("{}/{} {}", detect::state_name(t.state.verdict.state),
                    detect::cause_name(t.state.verdict.cause), t.state.verdict.summary);
    bool due = !t.view_written_mono_ns ||
               now.mono_ns - *t.view_written_mono_ns >= coord_->config.publish_interval_ns;
    if (said == t.view_written && !due) return;
    coord::JobView v{node_name(), now.wall_ns, t.state.verdict, t.state.observation,
                     t.state.cluster ? t.state.cluster->nodes : std::vector<watch::NodeState>{}};
    if (auto st = t.orders->write_view(v, t.coord->fence()); !st) {
      coord_->session.note_failure(st.error());
      return;
    }
    t.view_written = said;
    t.view_written_mono_ns = now.mono_ns;
    return;
  }
  auto v = t.orders->view();
  if (!v) {
    note_problem(fmt::format("job {}: the leader's view: {}", t.job, v.error().message));
    return;
  }
  if (!*v || (*v)->leader != t.coord->leader()) return;  // none yet, or an earlier leader's
  // The job's verdict is the leader's; ages are as the leader last judged them, and its ranks'
  // monotonic stamps are of the leader's clock: shown by wall time here.
  t.own = std::move(t.state.observation);
  t.showing_view = true;
  t.state.verdict = std::move((*v)->verdict);
  t.state.observation = std::move((*v)->observation);
  t.state.observation.one_clock = false;
  t.state.observation.local_host.clear();
  // Every node as the leader knows it, its summary ages as of the leader's look.
  if (t.state.cluster && !(*v)->nodes.empty()) t.state.cluster->nodes = std::move((*v)->nodes);
}

bool Agent::preempting(const Tracked& t) const {
  return t.order_act.has_value() || (t.job_runbook && t.job_runbook->acting()) ||
         (t.job_resume && t.job_resume->holding());
}

void Agent::coord_retire(Tracked& t, Stamp now, const char* why) {
  if (t.job_runbook) t.job_runbook->close(now, why);
  // Its summary stays published (its ranks finished, not silent) until the job is forgotten.
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
