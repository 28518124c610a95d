// The agent's runbook for one job: verdict transitions, the incident, its page and Alertmanager
// alert, and preemption of proven processes for jobs that opted in (docs/api.md).
#include <fmt/format.h>

#include <chrono>

#include "src/agent/agent.h"
#include "src/agent/proof.h"
#include "src/agent/tracked.h"
#include "src/common/duration.h"
#include "src/common/log.h"
#include "src/contract/names.h"
#include "src/detect/trace.h"
#include "src/probe/liveness.h"
#include "src/runbook/proven.h"
#include "src/supervise/page_message.h"

namespace stepwatch::agent {

namespace {

bool recovered(detect::State s) {
  return s == detect::State::kHealthy || s == detect::State::kSlow;
}

}  // namespace

void Agent::transition(Tracked& t, const detect::Verdict& v, Stamp now) {
  if (v.state == t.last_state && v.cause == t.last_cause) return;
  store::Transition tr;
  tr.job = t.job;
  tr.incarnation = t.incarnation;
  tr.at_ns = now.wall_ns;
  tr.from_state = detect::state_name(t.last_state);
  tr.to_state = detect::state_name(v.state);
  tr.cause = detect::cause_name(v.cause);
  tr.summary = v.summary;
  if (auto r = store_.record_transition(tr); !r) note_problem(r.error().message);
  if (may_log(t, now)) log_info("agent: job {}: {} -> {}", t.job, tr.from_state, v.summary);
  t.last_state = v.state;
  t.last_cause = v.cause;
}

void Agent::runbook_step(Tracked& t, const detect::Verdict& v, Stamp now) {
  finish_paging(t, false);
  finish_preempt(t, now, false);
  if (!t.incident_id) {
    if (!detect::fires_runbook(v.state)) return;
    if (preempted_by_us(t)) return;  // the agent ended these processes: not a new stall
    // One user's job directories open at most so many incidents an hour (they could be forged
    // by the thousand); the verdict stays in the API, the incident opens once there is room.
    if (t.dir_uid && !incident_rate_.allow(*t.dir_uid, now.mono_ns)) {
      if (incident_rate_.first_refusal(*t.dir_uid, now.mono_ns)) {
        log_warn(
            "agent: uid {}: {} incidents opened in the last hour (incidents_per_user_per_hour): "
            "job {} is {} but no incident is opened or paged for now",
            *t.dir_uid, incident_rate_.limit(), t.job, detect::state_name(v.state));
      }
      return;
    }
    store::NewIncident ni;
    ni.job = t.job;
    ni.incarnation = t.incarnation;
    ni.at_ns = now.wall_ns;
    ni.state = detect::state_name(v.state);
    ni.cause = detect::cause_name(v.cause);
    ni.summary = v.summary;
    ni.verdict_json =
        detect::verdict_to_json(v, t.job);  // only when recorded: 10,000 ranks are costly
    auto ref = store_.open_incident(ni);
    if (!ref) {
      note_problem(
          fmt::format("job {}: cannot record the incident: {}", t.job, ref.error().message));
      return;
    }
    t.incident_id = ref->id;
    t.incident_state = ni.state;
    t.incident_cause = ni.cause;
    t.claim_tried = false;
    t.incident_mono_ns = now.mono_ns;
    t.misses = 0;
    t.hold_until_mono_ns.reset();
    t.preempt_noted = false;
    if (ref->created) t.state.incidents_total++;
    if (may_log(t, now)) log_info("agent: job {}: incident {}: {}", t.job, ref->id, v.summary);
  }
  if (detect::fires_runbook(v.state)) {
    std::string state = detect::state_name(v.state), cause = detect::cause_name(v.cause);
    if (state != t.incident_state || cause != t.incident_cause) {
      (void)store_.update_incident(*t.incident_id, state, cause, v.summary,
                                   detect::verdict_to_json(v, t.job));
      t.incident_state = state;
      t.incident_cause = cause;
    }
    if (!t.claim_tried) {
      auto claim = store_.claim_page(*t.incident_id, now.wall_ns);
      if (!claim) {
        note_problem(
            fmt::format("job {}: cannot claim the page: {}", t.job, claim.error().message));
        return;  // tried again next poll
      }
      t.claim_tried = true;
      runbook::PageMessage m = page_message(t, v, now);
      if (!*claim) {
        log_info("agent: job {}: incident {} was already paged: not paging again", t.job,
                 *t.incident_id);
        t.alert->adopt(m);  // its Alertmanager alert may have gone unrefreshed meanwhile
      } else {
        t.alert->sent(m, now.mono_ns);
        // Delivery retries with backoff; the poll loop keeps watching every job meanwhile.
        t.paging = std::async(std::launch::async,
                              [targets = t.spec.runbook.pagers, m, opts = deps_.pager] {
                                return runbook::page_all(targets, m, opts);
                              });
      }
    }
    if (auto failed = t.alert->tick(now.mono_ns)) {
      note_problem(fmt::format("job {}: re-sending its alert failed: {}", t.job, *failed));
    }
    ++t.misses;
    maybe_preempt(t, v, now);
    return;
  }
  t.misses = 0;
  if (recovered(v.state)) {
    log_info("agent: job {}: incident {} closed: recovered ({})", t.job, *t.incident_id, v.summary);
    close_incident(t, now, "recovered");
  }
}

void Agent::close_incident(Tracked& t, Stamp now, const std::string& resolution) {
  finish_paging(t, true);
  t.alert->resolve(now.wall_ns);
  (void)store_.close_incident(*t.incident_id, now.wall_ns, resolution);
  t.incident_id.reset();
}

void Agent::record_action(const Tracked& t, std::string_view kind, bool ok,
                          const std::string& detail, int64_t at_ns) {
  store::Action a;
  a.job = t.job;
  if (t.incident_id) a.incident_id = *t.incident_id;
  a.at_ns = at_ns;
  a.kind = std::string(kind);
  a.ok = ok;
  a.detail = detail;
  (void)store_.record_action(a);
}

bool Agent::preempted_by_us(const Tracked& t) const {
  if (t.preempted_pids.empty()) return false;
  bool any = false;
  for (const auto& r : t.state.observation.ranks) {
    if (r.pid <= 0) continue;
    if (!t.preempted_pids.count(r.pid)) return false;
    any = true;
  }
  return any;
}

void Agent::maybe_preempt(Tracked& t, const detect::Verdict& v, Stamp now) {
  if (t.preempting || !may_preempt(config_, t.job)) return;
  if (t.spec.source.empty() || !t.spec.auto_preempt.enabled) {
    if (!t.preempt_noted) {
      log_info(
          "agent: job {}: listed in preempt_jobs, but {}: observing and paging only", t.job,
          t.spec.source.empty() ? "it has no spec" : "its spec sets auto_preempt.enabled = false");
    }
    t.preempt_noted = true;
    return;
  }
  if (t.incident_mono_ns == 0) t.incident_mono_ns = now.mono_ns;  // joined after a restart
  const auto& rb = t.spec.runbook;
  if (!t.hold_until_mono_ns) {
    auto inc = store_.incident(*t.incident_id);  // an ack comes through the API or the CLI
    if (inc && *inc && (*inc)->acked_at_ns) {
      t.hold_until_mono_ns = now.mono_ns + rb.ack_hold_limit_ns;
      log_info("agent: job {}: incident {} acked by {}: holding for up to {}", t.job,
               *t.incident_id, (*inc)->acked_by, format_duration(rb.ack_hold_limit_ns));
    }
  }
  // A dead rank cannot come back: nothing to wait for but an ack's hold.
  int64_t deadline = t.hold_until_mono_ns.value_or(v.state == detect::State::kDead
                                                       ? t.incident_mono_ns
                                                       : t.incident_mono_ns + rb.ack_timeout_ns);
  if (now.mono_ns < deadline || t.misses < t.spec.auto_preempt.misses) return;

  // Only processes proven to be the job's are ever signalled (src/agent/proof.h).
  std::vector<runbook::ProcessRef> refs;
  std::string refused;
  std::string dir = contract::job_dir(t.root, t.job);
  for (const auto& r : t.state.observation.ranks) {
    if (r.status != contract::RankStatus::kRunning || r.pid <= 0) continue;
    Proof p = prove_rank_process(config_.proc_root, dir, r);
    if (p.proven) {
      refs.push_back(p.process);
    } else if (!probe::ended(
                   probe::inspect(config_.proc_root, {r.pid, r.pid_start_ticks}).liveness)) {
      refused += (refused.empty() ? "" : "; ") + p.why;  // only the living need a reason
    }
  }
  if (refs.empty()) {
    if (!t.preempt_noted) {
      std::string why = fmt::format("not preempted: no process proven to be the job's{}",
                                    refused.empty() ? "" : " (" + refused + ")");
      log_warn("agent: job {}: {}", t.job, why);
      record_action(t, store::action_kind::kNote, false, why, now.wall_ns);
    }
    t.preempt_noted = true;
    return;
  }
  log_warn(
      "agent: job {}: incident {}: no ack and no step for {}: preempting {} proven process(es){}",
      t.job, *t.incident_id, format_duration(now.mono_ns - t.incident_mono_ns), refs.size(),
      refused.empty() ? "" : "; not proven: " + refused);
  t.preempt_refused = refused;
  runbook::PreemptOptions opts;
  opts.proc_root = config_.proc_root;
  t.preempting = std::async(std::launch::async, [refs, grace = rb.preempt_grace_ns, opts] {
    return runbook::preempt_processes(refs, grace, opts);
  });
}

void Agent::finish_preempt(Tracked& t, Stamp now, bool wait) {
  if (!t.preempting) return;
  if (!wait && t.preempting->wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  runbook::PreemptReport report = t.preempting->get();
  t.preempting.reset();
  for (const auto& o : report.processes) t.preempted_pids.insert(o.process.pid);
  std::string detail = report.summary();
  if (!t.preempt_refused.empty()) detail += "; not proven, left alone: " + t.preempt_refused;
  record_action(t, store::action_kind::kPreempt, report.ok, detail, wall_now_ns());
  t.state.actions_total[std::string(store::action_kind::kPreempt)]++;
  log_info("agent: job {}: preempted: {}", t.job, detail);
  if (t.incident_id) close_incident(t, now, "preempted by the agent: " + report.summary());
}

runbook::PageMessage Agent::page_message(const Tracked& t, const detect::Verdict& v,
                                         Stamp now) const {
  runbook::PageMessage m = supervise::page_for_verdict(t.job, t.spec.owner, v);
  m.incident_id = std::to_string(*t.incident_id);
  m.incarnation = static_cast<int>(t.incarnation);
  m.host = deps_.host;
  m.started_wall_ns = now.wall_ns;
  m.ack_command = fmt::format("stepwatch ack {} --state-dir {}", t.job, config_.state_dir);
  m.verdict_json = detect::verdict_to_json(v, t.job);  // only when paging: 10,000 ranks are costly
  return m;
}

void Agent::finish_paging(Tracked& t, bool wait) {
  if (!t.paging) return;
  auto& f = *t.paging;
  if (!wait && f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  std::vector<runbook::PageResult> results = f.get();
  t.paging.reset();
  std::string summary;
  for (const auto& r : results) {
    std::string line = fmt::format("{}: {} after {} attempt(s): {}", r.target,
                                   r.ok ? "sent" : "FAILED", r.attempts, r.detail);
    auto kind = r.ok ? store::action_kind::kPage : store::action_kind::kPageFailed;
    record_action(t, kind, r.ok, line, wall_now_ns());
    t.state.actions_total[std::string(kind)]++;
    log_info("agent: job {}: page {}", t.job, line);
    summary += (summary.empty() ? "" : "; ") + line;
  }
  if (results.empty()) summary = "no pager configured: incident only recorded";
  if (t.incident_id) (void)store_.mark_paged(*t.incident_id, wall_now_ns(), summary);
}

void Agent::retire(Tracked& t, Stamp now, const char* why) {
  t.retired_at_wall_ns = now.wall_ns;
  log_info("agent: job {} retired: {}; listed for {} more", t.job, why,
           format_duration(config_.retire_after_ns));
  if (t.incident_id) close_incident(t, now, why);
}

}  // namespace stepwatch::agent
