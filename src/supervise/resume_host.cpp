// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The supervisor as the host of the after-preempt sequence (runbook/resume.h): the store's
// node-fault history, the storm page, acks from the store, and the resume owner's plan applied:
// relaunch the command ("stepwatch"), or end with the status the scheduler restarts on (Slurm,
// Kubernetes). Under a scheduler it also stands down when the scheduler restarted the job behind
// its back (superseded).
#include <fmt/format.h>
#include <unistd.h>

#include "src/runbook/node_fault_history.h"
#include "src/supervise/supervisor.h"

namespace stepwatch::supervise {

namespace {

// "step_20 (step 20)", for the supervisor's messages.
std::string from_text(const runbook::NextIncarnation& next) {
  return next.from ? fmt::format("{} (step {})", next.from->id, next.from->step)
                   : "scratch (no committed checkpoint)";
}

}  // namespace

bool Supervisor::superseded() {
  if (!owner_->needs_batch_job()) return false;
  auto batch = opt_.scheduler.batch_job();
  if (!batch) return false;
  // One scheduler call per would-be incident or ending, not per poll: the controller serves the
  // whole cluster.
  auto moved = owner_->superseded(*batch);
  if (!moved) {
    say(moved.error().message + "; going on as its current incarnation");
    return false;
  }
  if (!*moved) return false;
  std::string why = fmt::format(
      "standing down: {}, so incarnation {} is a leftover; no incident, no page, no requeue (the "
      "fence). The next incarnation's hygiene ends what is left of it",
      **moved, state_.incarnation);
  say(why);
  record_action(store::action_kind::kNote, true, why);
  stood_down_ = true;
  return true;
}

bool Supervisor::may_open(const detect::Verdict&, Stamp) {
  return !superseded();
}

runbook::HistoryLedger& Supervisor::history() {
  return *history_;
}

void Supervisor::note(bool ok, const std::string& line) {
  record_action(store::action_kind::kNote, ok, line);
}

std::string Supervisor::ack_hint() const {
  return fmt::format("stepwatch ack {} --state-dir {}", opt_.job, opt_.state_dir);
}

Result<runbook::BatchJob> Supervisor::batch_job() {
  auto batch = opt_.scheduler.batch_job();
  // `stepwatch run` starts the job as its own user, whose trainer makes the job directory (a
  // beacon writer refuses another user's): that user owns it.
  if (batch) batch->owner_uid = ::geteuid();
  return batch;
}

void Supervisor::hold(const runbook::NextIncarnation& next, const std::string& why, Stamp now) {
  runbook::send_storm_page(*deliveries_, spec_.runbook.pagers, page(acted_on_), opt_.job,
                           next.incident, state_.incarnation, why, now.wall_ns);
}

Result<std::optional<bool>> Supervisor::acked_since(int64_t incident, int64_t since_wall_ns) {
  // Every ack is an action of the incident: one after the hold began releases it (an earlier
  // ack of the stall does not).
  auto actions = store_->actions(incident);
  if (!actions) return actions.error();
  bool acked = false;
  for (const auto& a : *actions)
    acked = acked || (a.kind == store::action_kind::kAck && a.at_ns >= since_wall_ns);
  return std::optional<bool>(acked);
}

void Supervisor::close(int64_t /*incident*/, Stamp now, const std::string& resolution) {
  runbook_->close(now, resolution);
}

runbook::AfterPreempt Supervisor::apply(const runbook::ResumePlan& plan,
                                        const runbook::NextIncarnation& next,
                                        const std::string& done, Stamp /*now*/) {
  using Kind = runbook::ResumePlan::Kind;
  if (plan.kind == Kind::kRelaunch) return relaunch(next);
  // Everything else ends this stepwatch run: the scheduler (or a human) starts what follows.
  next_ = Next::kExit;
  exit_code_ = spec::kExitStopped;
  std::string why;
  switch (plan.kind) {
    case Kind::kExit:
      exit_code_ = plan.exit_code;
      why = fmt::format("exiting with {} for {} to {} (next incarnation from {})", exit_code_,
                        plan.by, plan.detail, from_text(next));
      record_action(store::action_kind::kResume, true, why);
      break;
    case Kind::kRequeued:
      why = fmt::format("{}; next incarnation from {}", plan.detail, from_text(next));
      record_action(store::action_kind::kResume, true, why);
      break;
    case Kind::kNotResumed:
      why = plan.detail;
      record_action(store::action_kind::kNote, false, why);
      break;
    case Kind::kFailed:
      why = plan.detail;
      record_action(store::action_kind::kResume, false, why);
      break;
    case Kind::kStopped:
    case Kind::kCancelled:
      // 75 only when the watchdog stopped it; a job that died by itself keeps its own status.
      exit_code_ = own_exit_.value_or(spec::kExitStopped);
      why = done + "; resume is off" + (plan.detail.empty() ? "" : "; " + plan.detail);
      break;
    case Kind::kGaveUp:
      exit_code_ = spec::kExitGaveUp;
      why = plan.detail;  // said and recorded by the sequence
      break;
    case Kind::kRelaunch:
      break;
  }
  if (auto st = store_->save_state(state_); !st) say(st.error().message);
  if (plan.kind != Kind::kGaveUp && plan.kind != Kind::kStopped && plan.kind != Kind::kCancelled)
    say(why);
  return {true, why};
}

runbook::AfterPreempt Supervisor::relaunch(const runbook::NextIncarnation& next) {
  std::optional<std::pair<std::string, int64_t>> ckpt;
  if (next.from) ckpt = std::make_pair(next.from->id, next.from->step);
  ++state_.incarnation;
  ++state_.restarts;
  auto st = launch(ckpt, next.from ? next.from->path : "");
  std::string resolution =
      fmt::format("resumed from {} as incarnation {}", from_text(next), state_.incarnation);
  record_action(store::action_kind::kResume, st.ok(), st.ok() ? resolution : st.error().message);
  runbook_->set_run(state_.incarnation, 0);
  if (!st) {
    say(st.error().message);
    next_ = Next::kExit;
    exit_code_ = kExitLaunchFailed;
    return {true, "resume failed: " + st.error().message};
  }
  say(resolution);
  next_ = Next::kRelaunched;
  return {true, resolution};
}

}  // namespace stepwatch::supervise
