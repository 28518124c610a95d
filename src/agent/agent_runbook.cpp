// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The agent's side of the runbook (runbook/incident.h runs the sequence): verdict transitions,
// which incident owns the job (this node's, or the job's in etcd through its JobLeader), and
// this node's side of each job (NodeJobHost): its page, who may open incidents, and the artifact
// and preempt of proven processes for jobs that opted in (docs/api.md).
#include <fmt/format.h>

#include <algorithm>

#include "src/agent/agent.h"
#include "src/agent/job_leader.h"
#include "src/agent/node_coord.h"
#include "src/agent/proof.h"
#include "src/agent/watched_job.h"
#include "src/common/duration.h"
#include "src/common/log.h"
#include "src/contract/names.h"
#include "src/probe/liveness.h"
#include "src/runbook/artifact.h"
#include "src/runbook/node_fault_history.h"
#include "src/runbook/page_message.h"
#include "src/runbook/proven.h"
#include "src/trace/codec.h"

namespace stepwatch::agent {

void Agent::transition(WatchedJob& t, detect::State from, const detect::Verdict& v, Stamp now) {
  store::Transition tr;
  tr.job = t.job;
  tr.incarnation = t.incarnation;
  tr.at_ns = now.wall_ns;
  tr.from_state = detect::state_name(from);
  tr.to_state = detect::state_name(v.state);
  tr.cause = detect::cause_name(v.cause);
  tr.summary = v.summary;
  if (auto r = store_.record_transition(tr); !r) note_store_error(r.error());
  if (may_log(t, now)) log_info("agent: job {}: {} -> {}", t.job, tr.from_state, v.summary);
}

namespace {

// Whether rank `r` of `look` runs on another node (a leader's look holds every node's ranks).
bool elsewhere(const contract::RankSnapshot& r, const detect::Observation& look) {
  return !r.host.empty() && !look.local_host.empty() && r.host != look.local_host;
}

}  // namespace

void Agent::settle_preempt(const WatchedJob& t, const detect::Observation& obs,
                           detect::Verdict& v) const {
  if (t.runbook->acting() || preempting(t)) {
    // Under way: the ranks get SIGCONT and SIGTERM and end. What they look like meanwhile (a
    // step written as they wake, "healthy"; an exit status, "dead"; gone, "finished") is not
    // news: the verdict the preempt acts on stands until it is done (E13).
    if (!t.published) return;
    const detect::Verdict& last = t.published->verdict;  // the last poll's
    v.state = last.state;
    v.cause = last.cause;
    v.culprits = last.culprits;
    v.summary = last.summary;
    return;
  }
  const detect::Observation* own = t.leader ? t.leader->own_look() : nullptr;
  if (!preempted_by_us(t, own ? own : &obs)) return;
  // A leader's verdict is the job's: ranks on other nodes that still run say so.
  const bool others = std::any_of(obs.ranks.begin(), obs.ranks.end(),
                                  [&](const auto& r) { return elsewhere(r, obs); });
  if (others && !detect::fires_runbook(v.state) && v.state != detect::State::kFinished) return;
  // Ended by this node's preempt or by the job's order: neither finished nor dead (E13).
  const bool ordered = t.leader && !t.leader->ended_by_orders().empty();
  v.state = detect::State::kPreempted;
  v.cause = detect::Cause::kNone;
  v.culprits.clear();
  v.summary = fmt::format("preempted: its ranks here were ended by {}",
                          ordered ? "the job leader's order" : "this node's preempt");
}

bool Agent::preempted_by_us(const WatchedJob& t, const detect::Observation* own) const {
  static const std::set<int> kNone;
  const std::set<int>& ended = t.runbook->ended_pids();
  const std::set<int>& ordered = t.leader ? t.leader->ended_by_orders() : kNone;
  if (ended.empty() && ordered.empty()) return false;
  bool any = false;
  const detect::Observation& look = own ? *own : t.own_look();
  for (const auto& r : look.ranks) {
    // This node's ranks only: the others' are ended (or not) by their own nodes.
    if (r.pid <= 0 || elsewhere(r, look)) continue;
    if (!ended.count(r.pid) && !ordered.count(r.pid)) return false;
    any = true;
  }
  return any;
}

void Agent::close_unobserved(const std::set<std::string>& seen, Stamp now) {
  auto open = store_.incidents("", 0);
  if (!open) {
    note_store_error(open.error());
    return;
  }
  for (const auto& inc : *open) {
    if (!inc.is_open() || seen.count(inc.job)) continue;
    log_info("agent: job {}: incident {} closed: its beacons vanished while the agent was down",
             inc.job, inc.id);
    if (auto st = store_.close_incident(inc.id, now.wall_ns,
                                        "no longer observed: its beacons vanished while the "
                                        "agent was down");
        !st) {
      note_store_error(st.error());
    }
  }
}

void Agent::note_store_error(const Error& e) {
  note_problem("the store: " + e.message);
  ++store_errors_this_poll_;
  last_store_error_ = e.message;
}

void Agent::retire(WatchedJob& t, Stamp now, const char* why) {
  t.retired_at_wall_ns = now.wall_ns;
  // Its incarnation ends here (once), as its last verdict said: finished, failed or lost.
  end_history_as_seen(t, "lost", now);
  log_info("agent: job {} retired: {}; listed for {} more", t.job, why,
           format_duration(config_.retire_after_ns));
  t.runbook->close(now, why);
  if (t.leader) t.leader->close(now, why);
}

// ---- this node's side of one job ----

class Agent::JobHost final : public NodeJobHost {
 public:
  JobHost(Agent& agent, WatchedJob& job) : agent_(agent), t_(job) {}
  // The host of this node's incident (runbook::IncidentHost).
  runbook::PageMessage page(const detect::Verdict& v) override;
  void log(LogLevel level, const std::string& line) override;
  bool may_open(const detect::Verdict& v, Stamp now) override;
  std::optional<std::string> refuse_act() override;
  runbook::PreemptTargets targets() override;
  std::future<runbook::ActReport> act(const detect::Verdict& v, int64_t incident_id,
                                      runbook::PreemptTargets targets) override;
  runbook::AfterPreempt after_preempt(const runbook::ActReport& report) override;
  void recorded(int64_t id, bool created) override;
  void ledger_failed(const Error& e) override;
  void counted(std::string_view action_kind) override;
  // What the job's leader asks of this node (JobNode; the rest is shared with the above).
  runbook::PageMessage job_page(const detect::Verdict& v) override;
  std::optional<std::string> may_carry_out() const override;
  void carried_out(const store::Action& a) override;
  void ended(std::string_view reason, const detect::Verdict& v, Stamp now) override;
  void problem(const std::string& line) override { agent_.note_problem(line); }
  void keep_delivery(const store::KeptDelivery& d) override {
    if (auto st = agent_.store_.keep_delivery(d); !st) agent_.note_store_error(st.error());
  }
  void forget_delivery(int64_t incident_id) override {
    if (auto st = agent_.store_.forget_delivery(t_.job, incident_id); !st)
      agent_.note_store_error(st.error());
  }
  std::vector<store::KeptDelivery> kept_deliveries() override {
    auto kept = agent_.store_.kept_deliveries(t_.job);
    if (!kept) {
      agent_.note_store_error(kept.error());
      return {};
    }
    return std::move(*kept);
  }
  // This node's own incident of a multi-node job joins the job's page of the same stall (E16).
  std::optional<PagedElsewhere> paged_as(const detect::Verdict&) override {
    if (!t_.leader) return std::nullopt;
    return t_.leader->paged_as(t_.incarnation);
  }

 private:
  // The page, acked here (this node's incident) or on any node (the job's, in etcd).
  runbook::PageMessage page(const detect::Verdict& v, bool job_wide);

  Agent& agent_;
  WatchedJob& t_;
};

std::unique_ptr<NodeJobHost> Agent::make_host(WatchedJob& t) {
  return std::make_unique<JobHost>(*this, t);
}

std::unique_ptr<JobLeader> Agent::make_leader(WatchedJob& t) {
  return std::make_unique<JobLeader>(JobLeaderDeps{
      t.job, t.spec, coord_->etcd, coord_->session, coord_->config.publish_interval_ns,
      coord_->history, coord_->config.prefix, deps_.pager, *t.host, t.dir_uid,
      2 * (coord_->config.publish_interval_ns + config_.poll_interval_ns), &coord_->read_ahead,
      coord_->config.restart_wait_ns});
}

void Agent::step_runbook(WatchedJob& t, const detect::Verdict& v, Stamp now) {
  if (!t.leader || !t.leader->connected()) {
    t.runbook->step(v, now);  // degraded: this node's ranks, paging only (JobHost::refuse_act)
  } else if (t.leader->unattended(v, now) ||
             (t.runbook->is_open() && !detect::fires_runbook(v.state))) {
    // Following a leader that opens nothing: this node's ranks, paging only, until the job's
    // incident opens in etcd (or, recovered, its own incident closes as such).
    if (!t.runbook->is_open())
      log_warn(
          "agent: job {}: stalled here for longer than the lease TTL and no incident is "
          "open in etcd (the leader, {}, opens none): paging from this node",
          t.job, t.leader->leader().empty() ? "unknown" : t.leader->leader());
    t.runbook->step(v, now);
  } else if (t.runbook->is_open() && !t.runbook->acting()) {
    log_info("agent: job {}: etcd answers again: the job's leader ({}) owns its incident now",
             t.job, t.leader->leader().empty() ? "unknown" : t.leader->leader());
    // Its page stands for the stall: the job's incident joins it rather than paging it again.
    // (Its delivery may have finished since the last reap: a poll under a hung etcd is slow.)
    deliveries_.reap(now);
    if (auto key = t.runbook->delivered_key()) t.leader->paged_here(*key, t.incarnation);
    t.runbook->close(now, "coordination resumed: the job's leader owns its incident");
  }
  if (t.leader) t.leader->step(v, t.state.observation, t.incarnation, now);
}

bool Agent::preempting(const WatchedJob& t) const {
  return t.leader && t.leader->preempting();
}

runbook::PageMessage Agent::JobHost::page(const detect::Verdict& v) {
  return page(v, false);
}

runbook::PageMessage Agent::JobHost::job_page(const detect::Verdict& v) {
  return page(v, true);
}

runbook::PageMessage Agent::JobHost::page(const detect::Verdict& v, bool job_wide) {
  runbook::PageMessage m = runbook::page_for_verdict(t_.job, t_.spec.owner, v);
  m.host = agent_.node_name();
  if (!job_wide && agent_.coord_) {
    // A node's own incident of a multi-node job: what this node sees of its own ranks, not the
    // job's verdict (E16).
    m.summary =
        fmt::format("node {}'s view alone ({}): {}", agent_.node_name(),
                    agent_.coord_->session.connected() ? "the job's leader opens no incident"
                                                       : "etcd does not answer it",
                    m.summary);
  }
  // The job's incident is acked on any node (in etcd); this node's own only here.
  m.ack_command =
      job_wide ? fmt::format("stepwatch ack {} (on any node of the job)", t_.job)
               : fmt::format("stepwatch ack {} --state-dir {}", t_.job, agent_.config_.state_dir);
  // The hosts the job's history suspects, and a restart storm: this node's store, or etcd for
  // the job's incident on a multi-node job (a node cut off from etcd names none).
  if (job_wide || !agent_.coord_) {
    const char* scheduler = spec::resume_owner_name(t_.spec.runbook.resume_owner);
    if (auto st = runbook::add_node_fault(m, agent_.history_reader(), t_.job, t_.spec.node_fault,
                                          scheduler, t_.now.wall_ns);
        !st) {
      agent_.note_history_error(st.error());
    }
  }
  return m;
}

void Agent::JobHost::log(LogLevel level, const std::string& line) {
  if (level == LogLevel::kInfo && !agent_.may_log(t_, t_.now)) return;
  log_line(level, fmt::format("agent: job {}: {}", t_.job, line));
}

bool Agent::JobHost::may_open(const detect::Verdict& v, Stamp now) {
  if (agent_.preempted_by_us(t_)) return false;  // the agent ended these processes: no new stall
  if (int64_t preempted = t_.leader ? t_.leader->preempted_incarnation() : -1; preempted >= 0) {
    // Ranks of an incarnation the job's orders preempted are ended, not stalled.
    bool all_ended = !t_.own_look().ranks.empty();
    for (const auto& r : t_.own_look().ranks)
      all_ended = all_ended && static_cast<int64_t>(r.incarnation) <= preempted;
    if (all_ended) return false;
  }
  // One job opens at most so many incidents an hour, before they count against its owner's
  // budget (a job that loops must not mute the owner's other jobs, E7).
  auto& per_job = agent_.job_incident_rate_;
  if (!per_job.allow(t_.job, now.mono_ns)) {
    if (per_job.first_refusal(t_.job, now.mono_ns)) {
      log_warn(
          "agent: job {}: {} incidents opened in the last hour (incidents_per_job_per_hour): it "
          "is {} but no incident is opened or paged for now",
          t_.job, per_job.limit(), detect::state_name(v.state));
    }
    return false;
  }
  // One user's job directories open at most so many incidents an hour (they could be forged
  // by the thousand); the verdict stays in the API, the incident opens once there is room.
  auto& rate = agent_.incident_rate_;
  if (t_.dir_uid && !rate.allow(*t_.dir_uid, now.mono_ns)) {
    if (rate.first_refusal(*t_.dir_uid, now.mono_ns)) {
      log_warn(
          "agent: uid {}: {} incidents opened in the last hour (incidents_per_user_per_hour): "
          "job {} is {} but no incident is opened or paged for now",
          *t_.dir_uid, rate.limit(), t_.job, detect::state_name(v.state));
    }
    return false;
  }
  return true;
}

std::optional<std::string> Agent::JobHost::may_carry_out() const {
  if (!may_preempt(agent_.config_, t_.job)) return std::string();  // observes and pages only
  if (t_.spec.source.empty() || !t_.spec.auto_preempt.enabled) {
    return fmt::format(
        "listed in preempt_jobs, but {}: observing and paging only",
        t_.spec.source.empty() ? "it has no spec" : "its spec sets auto_preempt.enabled = false");
  }
  return std::nullopt;
}

std::optional<std::string> Agent::JobHost::refuse_act() {
  if (auto no = may_carry_out()) return no;
  if (agent_.coord_) {  // this node's incident of a multi-node job: no leader's incident
    return std::string(
        agent_.coord_->session.connected()
            ? "the job's leader opens no incident: paging only from this node, no destructive "
              "action without the leader's order"
            : "coordination lost (etcd does not answer): paging only, no destructive action "
              "without a fenced write");
  }
  return std::nullopt;
}

runbook::PreemptTargets Agent::JobHost::targets() {
  // Only processes proven to be the job's are ever signalled (src/agent/proof.h).
  runbook::PreemptTargets out;
  const std::string& proc_root = agent_.config_.proc_root;
  std::string dir = contract::job_dir(t_.root, t_.job);
  for (const auto& r : t_.own_look().ranks) {
    if (r.status != contract::RankStatus::kRunning || r.pid <= 0) continue;
    // Ranks of other nodes (merged where this node leads, or the leader's view shown here) are
    // never this node's to signal: only its own (named by its node, or by the host the beacon
    // says when this node's own look is shown).
    if (t_.state.cluster && r.host != t_.state.cluster->node && r.host != agent_.deps_.host)
      continue;
    Proof p = prove_rank_process(proc_root, dir, r);
    if (p.proven) {
      p.process.label = fmt::format("rank {}", r.rank);
      out.processes.push_back(p.process);
    } else if (!probe::ended(probe::inspect(proc_root, {r.pid, r.pid_start_ticks}).liveness)) {
      out.refused += (out.refused.empty() ? "" : "; ") + p.why;  // only the living need one
    }
  }
  return out;
}

std::future<runbook::ActReport> Agent::JobHost::act(const detect::Verdict& v, int64_t incident_id,
                                                    runbook::PreemptTargets targets) {
  detect::Verdict& acted_on = t_.history.acted_on;
  acted_on = {};
  acted_on.state = v.state;  // what the incarnation's end records (not its ranks)
  acted_on.cause = v.cause;
  acted_on.culprits = v.culprits;
  // The artifact of the proven processes, then the preempt, on a thread of their own: the poll
  // of every other job goes on meanwhile.
  runbook::ArtifactRequest req;
  req.dir = fmt::format("{}/incidents/{}-{}", agent_.config_.state_dir, t_.job, incident_id);
  req.job = t_.job;
  req.beacon_root = t_.root;
  req.proc_root = agent_.config_.proc_root;
  req.settings = t_.spec.runbook.collect;
  req.verdict_json = trace::verdict_to_json(v, t_.job);
  for (const auto& p : targets.processes) {
    runbook::JobProcess jp;
    jp.process = p;
    for (const auto& r : t_.own_look().ranks) {
      if (r.pid == p.pid) jp.rank = r.rank;
    }
    req.processes.push_back(jp);
  }
  if (t_.state.gpus) req.gpu_text = runbook::gpu_text(*t_.state.gpus);
  runbook::PreemptOptions opts;
  opts.proc_root = agent_.config_.proc_root;
  return std::async(std::launch::async, [req = std::move(req), procs = targets.processes,
                                         collect = targets.collect,
                                         grace = t_.spec.runbook.preempt_grace_ns, opts] {
    runbook::ActReport r;
    if (!collect) {
      r.preempt = runbook::preempt_processes(procs, grace, opts);
      return r;
    }
    runbook::ArtifactReport a = runbook::collect_artifact(req);
    r.artifact_ok = !a.error;
    r.artifact = a.error ? "artifact failed: " + a.error->message
                         : fmt::format("artifact {}: {} files, {} bytes in {}{}{}", a.dir,
                                       a.files.size(), a.bytes, format_duration(a.elapsed_ns),
                                       a.truncated ? ", truncated" : "",
                                       a.timed_out ? ", time limit reached" : "");
    r.preempt = runbook::preempt_processes(procs, grace, opts);
    return r;
  });
}

runbook::AfterPreempt Agent::JobHost::after_preempt(const runbook::ActReport& report) {
  agent_.end_history(t_, "preempted", &t_.history.acted_on, t_.now);
  // Closed only when every process is gone: survivors keep it open (and paged again).
  return {report.preempt.ok, "preempted by the agent: " + report.preempt.summary()};
}

void Agent::JobHost::recorded(int64_t, bool created) {
  if (created) t_.state.incidents_total++;
}

void Agent::JobHost::ledger_failed(const Error& e) {
  agent_.note_store_error(e);
}

void Agent::JobHost::counted(std::string_view action_kind) {
  t_.state.actions_total[std::string(action_kind)]++;
}

void Agent::JobHost::carried_out(const store::Action& a) {
  if (auto st = agent_.store_.record_action(a); !st) agent_.note_store_error(st.error());
  counted(a.kind);
}

void Agent::JobHost::ended(std::string_view reason, const detect::Verdict& v, Stamp now) {
  agent_.end_history(t_, reason, &v, now);
}

}  // namespace stepwatch::agent
