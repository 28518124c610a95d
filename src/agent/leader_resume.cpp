// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/agent/leader_resume.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "src/common/duration.h"
#include "src/common/log.h"
#include "src/spec/spec.h"

namespace stepwatch::agent {

namespace {

std::string from_text(const runbook::NextIncarnation& next) {
  return next.from ? " from " + next.from->id : "";
}

constexpr std::string_view kNoLauncher =
    " (no `stepwatch run --coord` under a lease: not started, dead, or gave up)";

// The live launchers (their keys under a lease), by node.
std::map<std::string, const coord::LauncherRecord*> live_by_node(
    const std::vector<coord::LauncherRecord>& launchers) {
  std::map<std::string, const coord::LauncherRecord*> live;
  for (const auto& l : launchers) {
    if (l.leased) live[l.node] = &l;
  }
  return live;
}

}  // namespace

std::optional<runbook::ResumePoint> committed_by_every_rank(const detect::Observation& obs) {
  std::optional<contract::CheckpointMark> common;
  for (const auto& r : obs.ranks) {
    if (!r.checkpoint) return std::nullopt;  // a rank without one: from scratch
    if (!common || r.checkpoint->step < common->step) common = r.checkpoint;
  }
  if (!common) return std::nullopt;
  return runbook::ResumePoint{common->id, common->step, ""};
}

runbook::NextIncarnation LeaderResume::next(int64_t incident,
                                            std::optional<runbook::ResumePoint> checkpoint) const {
  runbook::NextIncarnation n;
  n.incarnation = d_.incarnation() + 1;
  n.from = std::move(checkpoint);
  n.incident = incident;
  return n;
}

std::optional<coord::IncarnationRecord> LeaderResume::marked_hold() {
  auto at = d_.orders.incarnation();
  if (!at || at->record.hold_incident == 0 || at->record.incarnation != d_.incarnation())
    return std::nullopt;
  return at->record;
}

void LeaderResume::log(LogLevel level, const std::string& line) {
  if (log_level() <= level) log_line(level, fmt::format("agent: job {}: {}", d_.job, line));
}

void LeaderResume::note(bool ok, const std::string& line) {
  runbook::Incident* incident = d_.incident();
  if (!incident || !incident->id()) return;
  store::Action a;
  a.incident_id = *incident->id();
  a.job = d_.job;
  a.at_ns = wall_now_ns();
  a.kind = std::string(store::action_kind::kNote);
  a.ok = ok;
  a.detail = line;
  if (auto st = d_.ledger.record_action(a); !st)
    d_.problem(fmt::format("job {}: its incident in etcd: {}", d_.job, st.error().message));
}

std::string LeaderResume::ack_hint() const {
  return fmt::format("stepwatch ack {}, on any node of the job", d_.job);
}

Result<runbook::BatchJob> LeaderResume::batch_job() {
  auto launchers = d_.orders.launchers();
  if (!launchers) return launchers.error();
  auto run = coord::slurm_run_of(*launchers, d_.incarnation());
  if (!run) return run.error();
  return runbook::BatchJob{"slurm", run->job, run->restarts, d_.owner_uid};
}

void LeaderResume::hold(const runbook::NextIncarnation& next, const std::string& why, Stamp now) {
  // Marked in the incarnation key (fenced, the number unchanged): the launchers wait for the
  // ack without their resume_wait limit, and a next leader takes the hold up.
  auto from = d_.orders.incarnation();
  Result<bool> marked = from ? Result<bool>(false) : Result<bool>(from.error());
  if (from) {
    coord::IncarnationRecord held = from->record;
    held.hold_incident = next.incident;
    held.hold = why;
    held.hold_resume_from = next.from ? next.from->id : "";
    held.hold_resume_step =
        next.from ? std::optional<int64_t>(next.from->step) : std::optional<int64_t>();
    held.by = d_.node;
    held.at_ns = now.wall_ns;
    marked = d_.orders.advance(*from, held, d_.fence());
  }
  if (!marked || !*marked) {
    log(LogLevel::kWarn,
        fmt::format("the restart-storm hold was not marked in etcd ({}): the launchers wait only "
                    "their resume_wait for it",
                    marked ? "the counter moved or the fence failed" : marked.error().message));
  }
  runbook::send_storm_page(d_.deliveries, d_.pagers, d_.page(), d_.job, next.incident,
                           d_.incarnation(), why, now.wall_ns);
}

Result<std::optional<bool>> LeaderResume::acked_since(int64_t incident, int64_t since_wall_ns) {
  return d_.ledger.acked_since(incident, since_wall_ns);
}

std::optional<std::string> LeaderResume::started_meanwhile(const runbook::NextIncarnation& next) {
  if (d_.incarnation() < next.incarnation) return std::nullopt;
  return fmt::format("incarnation {} started while the restart storm held it", d_.incarnation());
}

void LeaderResume::close(int64_t incident, Stamp now, const std::string& resolution) {
  // A leader that took the hold up has not stepped (nor adopted) the incident: it closes in etcd.
  runbook::Incident* open = d_.incident();
  if (open && open->is_open()) return open->close(now, resolution);
  if (auto st = d_.ledger.close(incident, now.wall_ns, resolution); !st)
    d_.problem(fmt::format("job {}: its incident in etcd: {}", d_.job, st.error().message));
}

std::optional<coord::IncarnationRecord> LeaderResume::pending_barrier() {
  auto at = d_.orders.incarnation();
  if (!at || !at->record.barrier || at->record.incident == 0 || !at->record.scheduler.empty())
    return std::nullopt;
  auto started = d_.orders.start();
  if (!started || (*started && (*started)->incarnation >= at->record.incarnation))
    return std::nullopt;
  return at->record;
}

void LeaderResume::waited_for_none() {
  missing_since_mono_ns_.reset();
  said_missing_.clear();
  paged_missing_ = false;
  waiting_.clear();
}

runbook::AfterPreempt LeaderResume::wait_on(const runbook::NextIncarnation& next,
                                            const std::vector<std::string>& missing, LogLevel level,
                                            Stamp now) {
  const std::string names = fmt::format("{}", fmt::join(missing, ", "));
  if (!missing_since_mono_ns_) missing_since_mono_ns_ = now.mono_ns;
  const int64_t waited = now.mono_ns - *missing_since_mono_ns_;
  waiting_ = fmt::format("incarnation {} waits for node(s) {}", next.incarnation, names);
  if (names != said_missing_) {
    said_missing_ = names;
    std::string line =
        fmt::format("incarnation {} waits for node(s) {}; paging if not there within {}",
                    next.incarnation, names, format_duration(d_.restart_wait_ns));
    log(level, line);
    if (level >= LogLevel::kWarn) note(false, line);
  }
  if (!paged_missing_ && waited >= d_.restart_wait_ns) {
    paged_missing_ = true;
    std::string why = fmt::format(
        "job {} cannot restart whole: incarnation {} waits for node(s) {} for {}; it starts as "
        "soon as they are there",
        d_.job, next.incarnation, names, format_duration(waited));
    log(LogLevel::kError, why);
    note(false, why);
    runbook::send_after_preempt_page(d_.deliveries, d_.pagers, d_.page(), d_.job, next.incident,
                                     d_.incarnation(), "page", "restart-blocked", why, now.wall_ns);
  }
  return runbook::AfterPreempt{false, "", true};
}

std::optional<runbook::AfterPreempt> LeaderResume::wait_for_launchers(
    const runbook::NextIncarnation& next, Stamp now, bool& barrier) {
  auto launchers = d_.orders.launchers();
  if (!launchers) {
    d_.problem(fmt::format("job {}: its launchers in etcd: {}", d_.job, launchers.error().message));
    return runbook::AfterPreempt{false, "", true};  // tried again next turn
  }
  const auto live = live_by_node(*launchers);
  std::vector<std::string> missing;
  barrier = true;
  for (const auto& n : d_.nodes()) {
    auto it = live.find(n);
    if (it == live.end()) {
      missing.push_back(n + std::string(kNoLauncher));
    } else if (!it->second->barrier) {
      barrier = false;  // a launcher of an earlier version launches as soon as it reads the move
    }
  }
  if (missing.empty()) {
    if (missing_since_mono_ns_)
      log(LogLevel::kInfo, "every node of the job has its launcher again: the next incarnation");
    waited_for_none();
    return std::nullopt;
  }
  return wait_on(next, missing, LogLevel::kWarn, now);
}

runbook::AfterPreempt LeaderResume::start_together(const coord::IncarnationRecord& at,
                                                   const runbook::NextIncarnation& next,
                                                   const std::string& done, Stamp now) {
  const std::string resolved =
      fmt::format("{}; relaunched as incarnation {}{}; every node started it together", done,
                  at.incarnation, from_text(next));
  auto started = d_.orders.start();
  auto launchers =
      started ? d_.orders.launchers() : Result<std::vector<coord::LauncherRecord>>(started.error());
  if (!launchers) {
    d_.problem(
        fmt::format("job {}: its start barrier in etcd: {}", d_.job, launchers.error().message));
    return {false, "", true};
  }
  if (*started && (*started)->incarnation >= at.incarnation) {
    waited_for_none();
    return {true, resolved};  // released already (by a previous leader)
  }
  const auto live = live_by_node(*launchers);
  // The run's nodes as the move found them (the leader's own view shrinks as they clean up).
  std::vector<std::string> nodes = at.nodes.empty() ? d_.nodes() : at.nodes;
  std::vector<std::string> missing;
  for (const auto& n : nodes) {
    auto it = live.find(n);
    if (it == live.end()) {
      missing.push_back(n + std::string(kNoLauncher));
    } else if (it->second->ready != at.incarnation) {
      missing.push_back(n + " (cleaning up: its old processes, its rendezvous port)");
    }
  }
  if (!missing.empty()) return wait_on(next, missing, LogLevel::kInfo, now);
  coord::StartRecord s{at.incarnation, d_.node, now.wall_ns, nodes};
  auto released = d_.orders.release(s, d_.fence());
  if (!released || !*released) {
    log(LogLevel::kWarn,
        fmt::format("the start barrier of incarnation {} was not written ({}): tried again",
                    at.incarnation, released ? "the fence failed" : released.error().message));
    return {false, "", true};
  }
  const std::string took =
      missing_since_mono_ns_
          ? fmt::format(" after {}", format_duration(now.mono_ns - *missing_since_mono_ns_))
          : "";
  log(LogLevel::kInfo, fmt::format("incarnation {}: every node ({}) is ready{}: started together",
                                   at.incarnation, fmt::join(nodes, ", "), took));
  waited_for_none();
  return {true, resolved};
}

runbook::AfterPreempt LeaderResume::exit_every_launcher(int code,
                                                        const runbook::NextIncarnation& next,
                                                        const std::string& resolution, Stamp now) {
  auto from = d_.orders.incarnation();
  if (!from) {
    d_.problem(fmt::format("job {}: its incarnation in etcd: {}", d_.job, from.error().message));
    return {false, "", true};  // tried again next turn
  }
  if (from->record.incarnation != next.incarnation - 1) return {true, resolution};
  coord::IncarnationRecord to;
  to.incarnation = next.incarnation;
  to.incident = next.incident;
  to.by = d_.node;
  to.at_ns = now.wall_ns;
  to.scheduler = "kubernetes";
  to.exit_code = code;
  if (!advance(*from, to)) return {false, "", true};
  std::string said = fmt::format(
      "its launchers exit with {} so that Kubernetes does not restart it (its pod failure "
      "policy fails the job on {} and {})",
      code, spec::kExitStopped, spec::kExitGaveUp);
  log(LogLevel::kInfo, said);
  return {true, fmt::format("{}; {}", resolution, said)};
}

bool LeaderResume::advance(const coord::JobIncarnation& from, const coord::IncarnationRecord& to) {
  auto moved = d_.orders.advance(from, to, d_.fence());
  if (moved && *moved) return true;
  log(LogLevel::kWarn,
      fmt::format("moving it to incarnation {} failed ({}): the incident stays open",
                  to.incarnation,
                  moved ? "the counter moved or the fence failed" : moved.error().message));
  return false;
}

runbook::AfterPreempt LeaderResume::apply(const runbook::ResumePlan& plan,
                                          const runbook::NextIncarnation& next,
                                          const std::string& done, Stamp now) {
  using Kind = runbook::ResumePlan::Kind;
  switch (plan.kind) {
    case Kind::kStopped:
    case Kind::kCancelled: {
      if (!plan.detail.empty()) log(LogLevel::kInfo, "runbook.resume = false: " + plan.detail);
      std::string resolution = fmt::format("{}; runbook.resume = false: {}", done,
                                           plan.detail.empty() ? "left to its owner" : plan.detail);
      if (d_.stop_by_exit) return exit_every_launcher(spec::kExitStopped, next, resolution, now);
      return {true, resolution};
    }
    case Kind::kNotResumed:
      log(LogLevel::kInfo, plan.detail);
      return {true, fmt::format("{}; {}", done, plan.detail)};
    case Kind::kFailed:
      log(LogLevel::kWarn, plan.detail + ": the incident stays open");
      return {false, ""};
    case Kind::kGaveUp:
      if (d_.stop_by_exit) return exit_every_launcher(spec::kExitGaveUp, next, plan.detail, now);
      return {true, plan.detail};
    case Kind::kRelaunch:
    case Kind::kExit:
    case Kind::kRequeued:
      break;
  }
  // The incarnation key says what follows, once: a next leader that finds it moved does nothing.
  auto from = d_.orders.incarnation();
  if (!from) {
    d_.problem(fmt::format("job {}: its incarnation in etcd: {}", d_.job, from.error().message));
    if (plan.kind != Kind::kRequeued) return {false, "", true};  // tried again next turn
  } else if (plan.kind == Kind::kRelaunch && from->record.incarnation == next.incarnation &&
             from->record.barrier && from->record.incident == next.incident) {
    return start_together(from->record, next, done, now);  // moved here: the barrier follows
  } else if (from->record.incarnation != next.incarnation - 1) {
    return {true,
            fmt::format("{}; incarnation {} was started already", done, from->record.incarnation)};
  }
  coord::IncarnationRecord to;
  to.incarnation = next.incarnation;
  if (next.from) {
    to.resume_from = next.from->id;
    to.resume_step = next.from->step;
  }
  to.incident = next.incident;
  to.by = d_.node;
  to.at_ns = now.wall_ns;
  if (plan.kind == Kind::kRelaunch) {
    if (auto wait = wait_for_launchers(next, now, to.barrier)) return *wait;
    if (to.barrier) to.nodes = d_.nodes();
    if (!advance(*from, to)) return {false, ""};
    if (to.barrier) {
      // The incident stays open until every node is ready and the barrier is written.
      log(LogLevel::kInfo,
          fmt::format("incarnation {} -> {}{}: its `stepwatch run --coord` launchers clean up, "
                      "and start it together once every node is ready",
                      next.incarnation - 1, next.incarnation, from_text(next)));
      return {false, "", true};
    }
    log(LogLevel::kInfo,
        fmt::format("incarnation {} -> {}{}: its `stepwatch run --coord` launchers relaunch it "
                    "(as soon as each is clean: one of them starts no incarnation at a barrier)",
                    next.incarnation - 1, next.incarnation, from_text(next)));
    return {true, fmt::format("{}; relaunched as incarnation {}{}", done, next.incarnation,
                              from_text(next))};
  }
  to.scheduler = plan.scheduler;
  to.scheduler_job = plan.scheduler_job;
  if (plan.kind == Kind::kExit) {
    // Every launcher exits with the code, and the scheduler restarts the job on it.
    to.exit_code = plan.exit_code;
    if (!advance(*from, to)) return {false, ""};
    std::string said =
        fmt::format("its launchers exit with {} for {} to restart it as {}", plan.exit_code,
                    plan.by, fmt::format("incarnation {}{}", next.incarnation, from_text(next)));
    log(LogLevel::kInfo, said);
    return {true, fmt::format("{}; {}", done, said)};
  }
  // Requeued already: recorded as the next incarnation (the rerun's launchers record it from
  // SLURM_RESTART_COUNT if this fails, and the restart-count fence keeps a next leader from
  // requeueing again).
  Result<bool> recorded =
      from ? d_.orders.advance(*from, to, d_.fence()) : Result<bool>(from.error());
  if (!recorded || !*recorded) {
    log(LogLevel::kWarn,
        fmt::format("{}, but the requeue was not recorded as incarnation {} in etcd ({}): the "
                    "rerun's launchers record it from SLURM_RESTART_COUNT, and the restart-count "
                    "fence keeps a next leader from requeueing again",
                    plan.detail, next.incarnation,
                    recorded ? "the counter moved or the fence failed" : recorded.error().message));
  } else {
    log(LogLevel::kInfo, fmt::format("{}: Slurm starts incarnation {}{}", plan.detail,
                                     next.incarnation, from_text(next)));
  }
  return {true, fmt::format("{}; {}; next incarnation {}{}", done, plan.detail, next.incarnation,
                            from_text(next))};
}

}  // namespace stepwatch::agent
