// The agent's side of the runbook (runbook/incident.h runs the sequence): verdict transitions,
// and the host of each job's incident: its page, who may open incidents, and the artifact and
// preempt of proven processes for jobs that opted in (docs/api.md).
#include <fmt/format.h>

#include <algorithm>

#include "src/agent/agent.h"
#include "src/agent/proof.h"
#include "src/agent/tracked.h"
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

void Agent::transition(Tracked& t, detect::State from, const detect::Verdict& v, Stamp now) {
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

bool Agent::preempted_by_us(const Tracked& t) const {
  const std::set<int>& ended = t.runbook->ended_pids();
  if (ended.empty() && t.ended_by_orders.empty()) return false;
  bool any = false;
  for (const auto& r : t.own_look().ranks) {
    if (r.pid <= 0) continue;
    if (!ended.count(r.pid) && !t.ended_by_orders.count(r.pid)) return false;
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

void Agent::retire(Tracked& t, Stamp now, const char* why) {
  t.retired_at_wall_ns = now.wall_ns;
  // Its incarnation ends here (once), as its last verdict said: finished, failed or lost.
  end_history_as_seen(t, "lost", now);
  log_info("agent: job {} retired: {}; listed for {} more", t.job, why,
           format_duration(config_.retire_after_ns));
  t.runbook->close(now, why);
  coord_retire(t, now, why);
}

// ---- the runbook's host for one job ----

runbook::PageMessage Agent::JobHost::page(const detect::Verdict& v) {
  runbook::PageMessage m = runbook::page_for_verdict(t_.job, t_.spec.owner, v);
  m.host = agent_.node_name();
  // The job's incident is acked on any node (in etcd); this node's own only here.
  m.ack_command =
      scope_ == Scope::kJob
          ? fmt::format("stepwatch ack {} (on any node of the job)", t_.job)
          : fmt::format("stepwatch ack {} --state-dir {}", t_.job, agent_.config_.state_dir);
  // The hosts the job's history suspects, and a restart storm: this node's store, or etcd for
  // the job's incident on a multi-node job (a node cut off from etcd names none).
  if (scope_ == Scope::kJob || !agent_.coord_) {
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
  if (t_.preempted_incarnation >= 0) {
    // Ranks of an incarnation the job's orders preempted are ended, not stalled.
    bool all_ended = !t_.own_look().ranks.empty();
    for (const auto& r : t_.own_look().ranks)
      all_ended = all_ended && static_cast<int64_t>(r.incarnation) <= t_.preempted_incarnation;
    if (all_ended) return false;
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
  if (scope_ == Scope::kNode && agent_.coord_) {
    return std::string(
        "coordination lost (etcd does not answer): paging only, no destructive action without a "
        "fenced write");
  }
  if (scope_ == Scope::kJob && !agent_.coord_->session.may_act(t_.now)) {
    return std::string("this node's lease is not fresh enough to order a preempt: waiting");
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
    if (scope_ == Scope::kJob) {
      // The job's preempt: every node proves and ends its own ranks (an order); these refs only
      // say which ranks it is for.
      out.processes.push_back(
          {{r.pid, r.pid_start_ticks}, fmt::format("rank {} on {}", r.rank, r.host)});
      continue;
    }
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
  t_.acted_on = {};
  t_.acted_on.state = v.state;  // what the incarnation's end records (not its ranks)
  t_.acted_on.cause = v.cause;
  t_.acted_on.culprits = v.culprits;
  if (scope_ == Scope::kJob) return agent_.order_preempt(t_, incident_id);
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
                                         grace = t_.spec.runbook.preempt_grace_ns, opts] {
    runbook::ActReport r;
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
  if (scope_ == Scope::kJob) return agent_.after_job_preempt(t_, report);
  agent_.end_history(t_, "preempted", &t_.acted_on, t_.now);
  // Closed only when every process is gone: survivors keep it open (and paged again).
  return {report.preempt.ok, "preempted by the agent: " + report.preempt.summary()};
}

void Agent::JobHost::recorded(int64_t, bool created) {
  if (created) t_.state.incidents_total++;
}

void Agent::JobHost::ledger_failed(const Error& e) {
  if (scope_ == Scope::kJob) {
    agent_.note_problem(fmt::format("job {}: its incident in etcd: {}", t_.job, e.message));
    return;
  }
  agent_.note_store_error(e);
}

void Agent::JobHost::counted(std::string_view action_kind) {
  t_.state.actions_total[std::string(action_kind)]++;
}

}  // namespace stepwatch::agent
