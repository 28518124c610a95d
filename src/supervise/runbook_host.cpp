// The runbook, executed without debate: page -> wait for an ack -> collect -> preempt -> resume.
// Each step is recorded in the store, so a restarted supervisor joins the open incident and
// never pages twice.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/probe/checkpoint_catalog.h"
#include "src/runbook/alert_keeper.h"
#include "src/runbook/artifact.h"
#include "src/runbook/preempt.h"
#include "src/spec/command_template.h"
#include "src/supervise/page_message.h"
#include "src/supervise/supervisor.h"

namespace stepwatch::supervise {

namespace {

std::string gpu_text(const probe::GpuSnapshot& s) {
  std::string out;
  for (const auto& d : s.devices) {
    out += fmt::format("gpu {} {}: sm {} mem {} power {}{}\n", d.index, d.name.value_or("?"),
                       d.sm_util_pct ? fmt::format("{}%", *d.sm_util_pct) : "n/a",
                       d.mem_used_bytes ? fmt::format("{} MiB", *d.mem_used_bytes >> 20) : "n/a",
                       d.power_w ? fmt::format("{:.0f} W", *d.power_w) : "n/a",
                       d.error ? " error: " + *d.error : "");
    if (d.processes) {
      for (const auto& p : *d.processes) {
        out += fmt::format("  pid {} {}\n", p.pid,
                           p.used_bytes ? fmt::format("{} MiB", *p.used_bytes >> 20) : "");
      }
    }
  }
  return out;
}

}  // namespace

runbook::PageMessage Supervisor::page_message(const detect::Verdict& v) const {
  runbook::PageMessage m = page_for_verdict(opt_.job, spec_.owner, v);
  // A restart stuck at init is usually what the last incarnation left behind: say what was found.
  if (v.cause == detect::Cause::kInit) {
    for (const auto& l : leftovers_) m.evidence.push_back("leftover: " + l);
    if (leftovers_.empty()) m.evidence.push_back("leftover: none found before this launch");
  }
  m.incident_id = std::to_string(incident_->id);
  m.incarnation = static_cast<int>(state_.incarnation);
  m.host = short_hostname();
  m.started_wall_ns = wall_now_ns();
  m.ack_command = fmt::format("stepwatch ack {} --state-dir {}", opt_.job, opt_.state_dir);
  m.verdict_json = last_verdict_json_;
  return m;
}

void Supervisor::start_paging(const detect::Verdict& v) {
  runbook::PageMessage m = page_message(v);
  incident_->alert->sent(m, mono_now_ns());
  auto targets = spec_.runbook.pagers;
  // Paging retries with backoff; the loop keeps watching meanwhile.
  incident_->paging =
      std::async(std::launch::async, [targets, m] { return runbook::page_all(targets, m); });
}

void Supervisor::close_incident(const std::string& resolution) {
  incident_->alert->resolve(wall_now_ns());
  (void)store_->close_incident(incident_->id, wall_now_ns(), resolution);
  incident_.reset();
}

void Supervisor::finish_paging(bool wait) {
  if (!incident_ || !incident_->paging) return;
  auto& f = *incident_->paging;
  if (!wait && f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  std::vector<runbook::PageResult> results = f.get();
  incident_->paging.reset();
  std::string summary;
  bool any_ok = results.empty();
  for (const auto& r : results) {
    any_ok = any_ok || r.ok;
    std::string line = fmt::format("{}: {} after {} attempt(s): {}", r.target,
                                   r.ok ? "sent" : "FAILED", r.attempts, r.detail);
    action(r.ok ? store::action_kind::kPage : store::action_kind::kPageFailed, r.ok, line);
    say("page " + line);
    summary += (summary.empty() ? "" : "; ") + line;
  }
  if (results.empty()) {
    summary = "no pager configured: incident only recorded";
    say(summary);
  }
  (void)store_->mark_paged(incident_->id, wall_now_ns(), summary);
}

Supervisor::Step Supervisor::runbook_step(const detect::Verdict& v, const detect::Observation& obs,
                                          const PollReport& report, int* exit) {
  int64_t now = mono_now_ns();
  if (!incident_) {
    if (!detect::fires_runbook(v.state)) return Step::kContinue;
    store::NewIncident ni;
    ni.job = opt_.job;
    ni.incarnation = state_.incarnation;
    ni.at_ns = obs.now.wall_ns;
    ni.state = detect::state_name(v.state);
    ni.cause = detect::cause_name(v.cause);
    ni.summary = v.summary;
    ni.verdict_json = last_verdict_json_;
    auto ref = store_->open_incident(ni);
    if (!ref) {
      say(fmt::format("cannot record the incident: {}", ref.error().message));
      return Step::kContinue;
    }
    incident_.emplace();
    incident_->id = ref->id;
    incident_->state = ni.state;
    incident_->cause = ni.cause;
    incident_->opened_mono_ns = now;
    incident_->alert = std::make_unique<runbook::AlertKeeper>(spec_.runbook.pagers);
    // A dead rank cannot come back: nothing to wait for (not even gloo's 30-minute timeout).
    incident_->ack_deadline_mono_ns =
        v.state == detect::State::kDead ? now : now + spec_.runbook.ack_timeout_ns;
    say(fmt::format("incident {}: {}", incident_->id, v.summary));
    if (v.cause == detect::Cause::kInit) {
      for (const auto& l : leftovers_) say("  found before this launch: " + l);
    }
    auto claim = store_->claim_page(incident_->id, obs.now.wall_ns);
    if (claim && *claim) {
      start_paging(v);
    } else {
      say(fmt::format("incident {} was already paged (supervisor restarted): not paging again",
                      incident_->id));
      incident_->alert->adopt(page_message(v));  // its Alertmanager alert may have gone unrefreshed
    }
    if (v.state != detect::State::kDead) {
      say(fmt::format("acting in {} unless acked: stepwatch ack {}",
                      format_duration(spec_.runbook.ack_timeout_ns), opt_.job));
    }
  }
  finish_paging(false);
  if (auto failed = incident_->alert->tick(now)) say("re-sending the alert failed: " + *failed);
  incident_->misses = detect::fires_runbook(v.state) ? incident_->misses + 1 : 0;

  bool running = !exit_status_;
  if (!detect::fires_runbook(v.state) && running &&
      (v.state == detect::State::kHealthy || v.state == detect::State::kSlow)) {
    finish_paging(true);
    say(fmt::format("incident {}: the job recovered ({})", incident_->id, v.summary));
    close_incident("recovered");
    return Step::kContinue;
  }
  if (!incident_->hold_deadline_mono_ns) {
    auto open = store_->incident(incident_->id);
    if (open && *open && (*open)->acked_at_ns) {
      incident_->hold_deadline_mono_ns = now + spec_.runbook.ack_hold_limit_ns;
      say(fmt::format("incident {} acked by {}: holding for up to {}", incident_->id,
                      (*open)->acked_by, format_duration(spec_.runbook.ack_hold_limit_ns)));
    }
  }
  int64_t deadline = incident_->hold_deadline_mono_ns.value_or(incident_->ack_deadline_mono_ns);
  if (now < deadline && running) return Step::kContinue;
  if (incident_->misses < spec_.auto_preempt.misses && running) return Step::kContinue;
  if (!spec_.auto_preempt.enabled) {
    if (!incident_->told_disabled) say("auto_preempt is off: leaving the job to its owner");
    incident_->told_disabled = true;
    return Step::kContinue;
  }
  finish_paging(true);
  std::optional<int> own_exit = exit_status_;  // it ended before the watchdog acted
  collect(v, obs, report);
  bool gone = preempt(report);
  if (!gone)
    say("some processes of the incarnation survived the preempt: the next launch's hygiene checks "
        "them");
  return resume(obs, own_exit, exit);
}

void Supervisor::collect(const detect::Verdict& v, const detect::Observation& obs,
                         const PollReport& report) {
  runbook::ArtifactRequest req;
  req.dir = fmt::format("{}/incidents/{}-{}", opt_.state_dir, opt_.job, incident_->id);
  req.job = opt_.job;
  req.beacon_root = opt_.beacon_root;
  req.proc_root = opt_.proc_root;
  req.settings = spec_.runbook.collect;
  req.verdict_json = detect::verdict_to_json(v, opt_.job);
  std::map<int, int> rank_of;
  for (const auto& [rank, pid] : report.rank_pids) rank_of[pid] = rank;
  if (report.tree) {
    for (const auto& [pid, p] : report.tree->procs) {
      runbook::JobProcess jp;
      jp.process = {pid, p.start_ticks,
                    rank_of.count(pid) ? fmt::format("rank {}", rank_of[pid]) : p.comm};
      jp.rank = rank_of.count(pid) ? rank_of[pid] : -1;
      req.processes.push_back(jp);
    }
  }
  if (report.gpus) req.gpu_text = gpu_text(*report.gpus);
  req.log_lines = log_->recent();
  (void)obs;
  auto rep = runbook::collect_artifact(req);
  std::string detail =
      fmt::format("artifact {}: {} files, {} bytes in {}{}{}", rep.dir, rep.files.size(), rep.bytes,
                  format_duration(rep.elapsed_ns), rep.truncated ? ", truncated" : "",
                  rep.timed_out ? ", time limit reached" : "");
  action(store::action_kind::kCollect, !rep.error, rep.error ? rep.error->message : detail);
  say(rep.error ? "artifact failed: " + rep.error->message : detail);
}

bool Supervisor::preempt(const PollReport& report) {
  std::vector<runbook::ProcessRef> procs;
  if (report.tree) {
    for (const auto& [pid, p] : report.tree->procs) procs.push_back({pid, p.start_ticks, p.comm});
  }
  runbook::PreemptOptions po;
  po.proc_root = opt_.proc_root;
  if (gpu_) {
    std::set<int> mine;
    for (const auto& p : procs) mine.insert(p.pid);
    po.gpu_holders = [this, mine] {
      std::vector<int> holding;
      if (auto s = gpu_->poll()) {
        for (const auto& d : s->devices) {
          if (!d.processes) continue;
          for (const auto& gp : *d.processes) {
            if (mine.count(gp.pid)) holding.push_back(gp.pid);
          }
        }
      }
      return holding;
    };
  }
  runbook::PreemptReport rep;
  if (!spec_.runbook.preempt_command.empty()) {
    spec::TemplateValues vars = {{"job", opt_.job},
                                 {"incarnation", std::to_string(state_.incarnation)},
                                 {"pgid", std::to_string(child_->pid())}};
    rep = runbook::preempt_with_command(spec::expand_command(spec_.runbook.preempt_command, vars),
                                        procs, spec_.runbook.preempt_grace_ns, po);
  } else {
    rep = runbook::preempt_processes(procs, spec_.runbook.preempt_grace_ns, po);
  }
  // Our own child: reap it, and whatever is left of its group goes too (the group is ours).
  if (!child_->poll_exit()) child_->signal_group(SIGKILL);
  for (int i = 0; i < 500 && !child_->poll_exit(); ++i) ::usleep(10'000);
  exit_status_ = child_->poll_exit();
  join_output();
  action(store::action_kind::kPreempt, rep.ok, rep.summary());
  say("preempt: " + rep.summary());
  return rep.ok;
}

std::optional<std::pair<std::string, int64_t>> Supervisor::last_checkpoint(
    const detect::Observation& obs, std::string* path) {
  const auto& c = spec_.checkpoint;
  if (c.source == spec::CheckpointSource::kMarker && !c.dir.empty()) {
    auto cat = probe::scan_checkpoints(c.dir, c.marker);
    if (!cat) {
      say(fmt::format("checkpoint catalog: {}", cat.error().message));
      return std::nullopt;
    }
    for (const auto& p : cat->problems) say("checkpoint catalog: " + p);
    if (const auto* g = cat->latest()) {
      *path = g->path;
      return std::make_pair(g->id, g->step.value_or(0));
    }
    return std::nullopt;
  }
  // The trainer's own word: the newest checkpoint any rank reported committed.
  std::optional<std::pair<std::string, int64_t>> best;
  for (const auto& r : obs.ranks) {
    if (r.checkpoint && (!best || r.checkpoint->step > best->second))
      best = {{r.checkpoint->id, r.checkpoint->step}};
  }
  return best;
}

Supervisor::Step Supervisor::resume(const detect::Observation& obs, std::optional<int> own_exit,
                                    int* exit) {
  if (!spec_.runbook.resume) {
    // 75 only when the watchdog stopped it; a job that died by itself keeps its own status.
    close_incident(own_exit ? fmt::format("ended with status {}; resume is off", *own_exit)
                            : "preempted; resume is off");
    *exit = own_exit.value_or(kExitStoppedByWatchdog);
    return Step::kExit;
  }
  std::string path;
  auto ckpt = last_checkpoint(obs, &path);
  bool progress = ckpt && (!state_.checkpoint_step || ckpt->second > *state_.checkpoint_step);
  state_.restarts_without_progress = progress ? 0 : state_.restarts_without_progress + 1;
  if (ckpt) {
    state_.checkpoint_id = ckpt->first;
    state_.checkpoint_step = ckpt->second;
  }
  if (spec_.runbook.restart_budget == 0 ||
      state_.restarts_without_progress >= spec_.runbook.restart_budget) {
    std::string why =
        fmt::format("gave up: {} incarnation(s) in a row without checkpoint progress (budget {})",
                    state_.restarts_without_progress, spec_.runbook.restart_budget);
    say(why);
    (void)store_->save_state(state_);
    action(store::action_kind::kNote, false, why);
    close_incident(why);
    *exit = kExitBudgetExhausted;
    return Step::kExit;
  }
  ++state_.incarnation;
  ++state_.restarts;
  std::string from = ckpt ? fmt::format("{} (step {})", ckpt->first, ckpt->second)
                          : "scratch (no committed checkpoint)";
  auto st = launch(ckpt, path);
  std::string resolution =
      fmt::format("resumed from {} as incarnation {}", from, state_.incarnation);
  action(store::action_kind::kResume, st.ok(), st.ok() ? resolution : st.error().message);
  close_incident(st.ok() ? resolution : "resume failed: " + st.error().message);
  if (!st) {
    say(st.error().message);
    *exit = kExitLaunchFailed;
    return Step::kExit;
  }
  say(resolution);
  return Step::kRelaunched;
}

}  // namespace stepwatch::supervise
