// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The supervisor's side of the runbook (runbook/incident.h runs the sequence): what its page
// says, the artifact with the job's log, the preempt of the job's process tree, and the resume
// from the last committed checkpoint.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/probe/checkpoint_catalog.h"
#include "src/runbook/alert_keeper.h"
#include "src/runbook/artifact.h"
#include "src/runbook/page_message.h"
#include "src/runbook/preempt.h"
#include "src/spec/command_template.h"
#include "src/supervise/supervisor.h"
#include "src/watch/job_gpus.h"

namespace stepwatch::supervise {

runbook::PageMessage Supervisor::page(const detect::Verdict& v) {
  runbook::PageMessage m = runbook::page_for_verdict(opt_.job, spec_.owner, v);
  // A restart stuck at init is usually what the last incarnation left behind: say what was found.
  if (v.cause == detect::Cause::kInit) {
    for (const auto& l : leftovers_) m.evidence.push_back("leftover: " + l);
    if (leftovers_.empty()) m.evidence.push_back("leftover: none found before this launch");
  }
  m.host = node_name();
  add_node_fault(m);
  m.ack_command = fmt::format("stepwatch ack {} --state-dir {}", opt_.job, opt_.state_dir);
  return m;
}

void Supervisor::log(LogLevel, const std::string& line) {
  say(line);
}

std::vector<runbook::JobProcess> Supervisor::job_processes() const {
  // The job's whole process tree: the supervisor launched it, so every process of its session is
  // the job's (the observer selects by session id and parent).
  std::vector<runbook::JobProcess> out;
  if (!turn_report_ || !turn_report_->tree) return out;
  std::map<int, int> rank_of;
  for (const auto& [rank, pid] : turn_report_->rank_pids) rank_of[pid] = rank;
  for (const auto& [pid, p] : turn_report_->tree->procs) {
    runbook::JobProcess jp;
    bool ranked = rank_of.count(pid) > 0;
    jp.process = {pid, p.start_ticks, ranked ? fmt::format("rank {}", rank_of[pid]) : p.comm};
    jp.rank = ranked ? rank_of[pid] : -1;
    out.push_back(std::move(jp));
  }
  return out;
}

runbook::PreemptTargets Supervisor::targets() {
  runbook::PreemptTargets t;
  for (const auto& jp : job_processes()) t.processes.push_back(jp.process);
  return t;
}

std::future<runbook::ActReport> Supervisor::act(const detect::Verdict& v, int64_t incident_id,
                                                runbook::PreemptTargets targets) {
  // One job: collect and preempt in place, the loop has nothing else to watch meanwhile.
  acted_on_ = v;
  runbook::ActReport r;
  bool ok = true;
  r.artifact = collect(v, incident_id, &ok);
  r.artifact_ok = ok;
  r.preempt = preempt(targets);
  std::promise<runbook::ActReport> done;
  done.set_value(std::move(r));
  return done.get_future();
}

runbook::AfterPreempt Supervisor::after_preempt(const runbook::ActReport& report) {
  std::optional<int> own_exit = own_exit_;  // it ended before the watchdog acted
  if (!report.preempt.ok) {
    say("some processes of the incarnation survived the preempt: the next launch's hygiene "
        "checks them");
  }
  history_ended(own_exit ? "failed" : "preempted", &acted_on_);
  return resume(*turn_obs_, own_exit);
}

std::string Supervisor::collect(const detect::Verdict& v, int64_t incident_id, bool* ok) {
  runbook::ArtifactRequest req;
  req.dir = fmt::format("{}/incidents/{}-{}", opt_.state_dir, opt_.job, incident_id);
  req.job = opt_.job;
  req.beacon_root = opt_.beacon_root;
  req.proc_root = opt_.proc_root;
  req.settings = spec_.runbook.collect;
  req.verdict_json = trace::verdict_to_json(v, opt_.job);
  req.processes = job_processes();
  if (turn_report_ && turn_report_->gpus) req.gpu_text = runbook::gpu_text(*turn_report_->gpus);
  req.log_lines = log_->recent();
  auto rep = runbook::collect_artifact(req);
  *ok = !rep.error;
  if (rep.error) return "artifact failed: " + rep.error->message;
  return fmt::format("artifact {}: {} files, {} bytes in {}{}{}", rep.dir, rep.files.size(),
                     rep.bytes, format_duration(rep.elapsed_ns), rep.truncated ? ", truncated" : "",
                     rep.timed_out ? ", time limit reached" : "");
}

runbook::PreemptReport Supervisor::preempt(const runbook::PreemptTargets& targets) {
  const std::vector<runbook::ProcessRef>& procs = targets.processes;
  runbook::PreemptOptions po;
  po.proc_root = opt_.proc_root;
  if (gpu_) {
    std::set<int> mine;
    for (const auto& p : procs) mine.insert(p.pid);
    po.gpu_holders = [this, mine] {
      auto s = gpu_->poll();
      return s ? watch::gpu_holders(*s, mine) : std::vector<int>{};
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
  return rep;
}

Result<std::optional<std::pair<std::string, int64_t>>> Supervisor::newest_committed(
    std::string* path) {
  const auto& c = spec_.checkpoint;
  auto cat = probe::scan_checkpoints(c.dir, c.marker);
  if (!cat) return Error{cat.error().code, "checkpoint catalog: " + cat.error().message};
  for (const auto& p : cat->problems) say("checkpoint catalog: " + p);
  const probe::Generation* g = cat->latest();
  // A newer generation whose marker has no data beside it (a torn write) is passed over: said
  // by name, with the one resumed from instead.
  for (const auto& bad : cat->inconsistent) {
    if (bad.step && (!g || !g->step || *bad.step > *g->step)) {
      say(
          fmt::format("checkpoint catalog: {} has its marker but no data (a torn write?): "
                      "resuming from {} instead",
                      bad.id, g ? g->id : "scratch"));
    }
  }
  if (!g) return std::optional<std::pair<std::string, int64_t>>{};
  *path = g->path;
  return std::optional<std::pair<std::string, int64_t>>{std::make_pair(g->id, g->step.value_or(0))};
}

std::optional<std::pair<std::string, int64_t>> Supervisor::last_checkpoint(
    const detect::Observation& obs, std::string* path) {
  const auto& c = spec_.checkpoint;
  if (c.source == spec::CheckpointSource::kMarker && !c.dir.empty()) {
    auto newest = newest_committed(path);
    if (!newest) {
      say(newest.error().message);
      return std::nullopt;
    }
    return *newest;
  }
  // The trainer's own word: the newest checkpoint any rank reported committed.
  std::optional<std::pair<std::string, int64_t>> best;
  for (const auto& r : obs.ranks) {
    if (r.checkpoint && (!best || r.checkpoint->step > best->second))
      best = {{r.checkpoint->id, r.checkpoint->step}};
  }
  return best;
}

std::optional<std::pair<std::string, int64_t>> Supervisor::launch_checkpoint(std::string* path) {
  std::optional<std::pair<std::string, int64_t>> saved;
  if (state_.incarnation > 0 && !state_.checkpoint_id.empty() && state_.checkpoint_step)
    saved = std::make_pair(state_.checkpoint_id, *state_.checkpoint_step);
  const auto& c = spec_.checkpoint;
  if (c.source != spec::CheckpointSource::kMarker || c.dir.empty()) {
    // No catalog to read: the trainer's word at the last preempt is all there is.
    if (saved)
      say(
          fmt::format("resuming from {} (step {}), as the last preempt saved it "
                      "(no checkpoint catalog: checkpoint.source = \"beacon\")",
                      saved->first, saved->second));
    return saved;
  }
  auto newest = newest_committed(path);
  if (!newest) {
    say(newest.error().message);
    if (saved)
      say(fmt::format("resuming from {} (step {}), as the last preempt saved it", saved->first,
                      saved->second));
    return saved;
  }
  if (!*newest) {
    if (saved)
      say(
          fmt::format("no committed checkpoint in {}: starting from scratch, not from {} (the "
                      "last preempt's, no longer there)",
                      c.dir, saved->first));
    return std::nullopt;
  }
  const auto& [id, step] = **newest;
  if (saved && saved->second > step) {
    say(
        fmt::format("the last preempt saved {} (step {}), newer than any committed checkpoint "
                    "in {}: resuming from {} (step {})",
                    saved->first, saved->second, c.dir, id, step));
  } else if (saved && saved->first != id) {
    say(
        fmt::format("resuming from {} (step {}), the newest committed checkpoint, not {} "
                    "(step {}) that the last preempt saved",
                    id, step, saved->first, saved->second));
  } else {
    say(fmt::format("resuming from {} (step {}), the newest committed checkpoint in {}", id, step,
                    c.dir));
  }
  // The resume point now: the restart budget counts progress from here.
  state_.checkpoint_id = id;
  state_.checkpoint_step = step;
  return *newest;
}

runbook::AfterPreempt Supervisor::resume(const detect::Observation& obs,
                                         std::optional<int> own_exit) {
  runbook::Preempted p;
  p.done = own_exit ? fmt::format("ended with status {}", *own_exit) : "preempted";
  p.next.incarnation = state_.incarnation + 1;
  p.next.incident = runbook_->id().value_or(0);
  if (spec_.runbook.resume) {
    std::string path;
    auto ckpt = last_checkpoint(obs, &path);
    bool progress = ckpt && (!state_.checkpoint_step || ckpt->second > *state_.checkpoint_step);
    state_.restarts_without_progress = progress ? 0 : state_.restarts_without_progress + 1;
    if (ckpt) {
      state_.checkpoint_id = ckpt->first;
      state_.checkpoint_step = ckpt->second;
      p.next.from = runbook::ResumePoint{ckpt->first, ckpt->second, path};
    }
    p.restarts_without_progress = state_.restarts_without_progress;
    // Saved before the owner acts: a Slurm requeue ends this process, and the rerun resumes from
    // the checkpoint saved here.
    if (auto st = store_->save_state(state_); !st) say(st.error().message);
  }
  return resume_->after_preempt(p, SystemClock::instance().now());
}

}  // namespace stepwatch::supervise
