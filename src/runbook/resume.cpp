// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/resume.h"

#include <fmt/format.h>

namespace stepwatch::runbook {

std::string NextIncarnation::describe() const {
  return fmt::format("incarnation {} from {}", incarnation,
                     from ? from->id : std::string("scratch (no committed checkpoint)"));
}

ResumePolicy ResumePolicy::from_spec(const std::string& job, const spec::JobSpec& spec) {
  ResumePolicy p;
  p.job = job;
  p.resume = spec.runbook.resume;
  p.restart_budget = spec.runbook.restart_budget;
  p.drain = spec.node_fault.drain;
  p.node_fault = spec.node_fault;
  return p;
}

Resume::Resume(ResumePolicy policy, ResumeOwner& owner, ResumeHost& host)
    : policy_(std::move(policy)), owner_(owner), host_(host) {}

void Resume::say(LogLevel level, bool ok, const std::string& line) {
  host_.log(level, line);
  host_.note(ok, line);
}

void Resume::note(bool ok, const std::string& line) {
  say(ok ? LogLevel::kInfo : LogLevel::kWarn, ok, line);
}

OwnerRequest Resume::request(const NextIncarnation& next) {
  OwnerRequest r;
  r.job = policy_.job;
  r.incarnation = next.incarnation;
  if (owner_.needs_batch_job()) r.batch = host_.batch_job();
  return r;
}

AfterPreempt Resume::after_preempt(const Preempted& p, Stamp now) {
  hold_.reset();
  if (!policy_.resume) return host_.apply(owner_.stop(request(p.next), *this), p.next, p.done, now);
  if (p.restarts_without_progress &&
      (policy_.restart_budget == 0 || *p.restarts_without_progress >= policy_.restart_budget)) {
    ResumePlan gave_up = ResumePlan::of(ResumePlan::Kind::kGaveUp);
    gave_up.detail =
        fmt::format("gave up: {} incarnation(s) in a row without checkpoint progress (budget {})",
                    *p.restarts_without_progress, policy_.restart_budget);
    say(LogLevel::kWarn, false, gave_up.detail);
    return host_.apply(gave_up, p.next, p.done, now);
  }
  if (storm_holds(p, now)) return {false, "", true};  // until acked
  AfterPreempt after = hand_over(p.next, p.done, now);
  if (!after.close && after.hold) {
    hold_ = Hold{p.next, now.wall_ns, p.done, /*released=*/true, /*storm=*/false};
  }
  return after;
}

bool Resume::storm_holds(const Preempted& p, Stamp now) {
  if (p.next.incident <= 0) return false;  // an incident not recorded cannot be acked
  auto report = read_node_fault(host_.history(), policy_.job, policy_.node_fault, now.wall_ns);
  if (!report) {
    host_.log(LogLevel::kWarn, "node-fault history not read: " + report.error().message);
    return false;  // the history cannot say: resume as if no storm
  }
  if (!report->storm) return false;
  std::string why =
      fmt::format("restart storm: {}; automatic resume held until acked ({}), then {}",
                  report->storm->evidence, host_.ack_hint(), p.next.describe());
  say(LogLevel::kWarn, true, why);
  host_.hold(p.next, why, now);
  hold_ = Hold{p.next, now.wall_ns, p.done};
  return true;
}

void Resume::take_up(NextIncarnation next, int64_t since_wall_ns, std::string done) {
  hold_ = Hold{std::move(next), since_wall_ns, std::move(done)};
}

void Resume::take_up_hand_over(NextIncarnation next, std::string done) {
  hold_ = Hold{std::move(next), 0, std::move(done), /*released=*/true, /*storm=*/false};
}

void Resume::poll(Stamp now) {
  if (!hold_) return;
  const int64_t incident = hold_->next.incident;
  if (!hold_->released) {
    auto acked = host_.acked_since(incident, hold_->since_wall_ns);  // one read a turn
    if (!acked) {
      host_.log(LogLevel::kWarn, fmt::format("incident {}: whether it was acked: {}", incident,
                                             acked.error().message));
      return;
    }
    if (!*acked) {  // no longer open: closed meanwhile (the job ended)
      hold_.reset();
      return;
    }
    if (auto why = host_.started_meanwhile(hold_->next)) {
      host_.log(LogLevel::kInfo, *why);
      host_.close(incident, now, *why);
      hold_.reset();
      return;
    }
    if (!**acked) return;
    host_.log(LogLevel::kInfo, fmt::format("restart storm: acked; starting the next incarnation "
                                           "(incident {}, {})",
                                           incident, hold_->next.describe()));
    hold_->released = true;
  }
  Hold h = std::move(*hold_);
  hold_.reset();
  AfterPreempt after = hand_over(h.next, h.done, now);
  if (!after.close) {
    if (after.hold) hold_ = std::move(h);  // not now: tried again next turn
    return;  // else the incident stays open (paged again by its survivors' rule)
  }
  if (!h.storm) return host_.close(incident, now, after.resolution);
  host_.close(incident, now,
              after.resolution.empty() ? "acked restart storm"
                                       : "acked restart storm; " + after.resolution);
}

AfterPreempt Resume::hand_over(const NextIncarnation& next, const std::string& done, Stamp now) {
  if (policy_.drain && owner_.can_drain()) {
    // First: the scheduler places the next incarnation elsewhere.
    auto report = read_node_fault(host_.history(), policy_.job, policy_.node_fault, now.wall_ns);
    if (!report) {
      host_.log(LogLevel::kWarn, "node-fault history not read: " + report.error().message);
    } else {
      for (const auto& d : owner_.drain(*report, policy_.job, drained_)) {
        say(d.ok ? LogLevel::kWarn : LogLevel::kError, d.ok, d.line);
      }
    }
  }
  return host_.apply(owner_.plan(request(next), *this), next, done, now);
}

}  // namespace stepwatch::runbook
