// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/incident.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "src/common/duration.h"
#include "src/trace/codec.h"

namespace stepwatch::runbook {

namespace {

bool recovered(detect::State s) {
  return s == detect::State::kHealthy || s == detect::State::kSlow;
}

bool ready(const auto& future) {
  return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

// ---- PageDeliveries ----

PageDeliveries::PageDeliveries(IncidentLedger& ledger, PagerOptions options, DeliverySink sink)
    : ledger_(ledger), options_(std::move(options)), sink_(std::move(sink)) {}

PageDeliveries::~PageDeliveries() {
  wait(SystemClock::instance().now());
}

void PageDeliveries::start(std::shared_ptr<IncidentRecord> record, Kind kind,
                           std::vector<spec::Pager> targets, PageMessage m) {
  Pending p{std::move(record), kind, {}};
  p.future =
      std::async(std::launch::async, [targets = std::move(targets), m = std::move(m),
                                      opts = options_] { return page_all(targets, m, opts); });
  pending_.push_back(std::move(p));
}

void PageDeliveries::reap(Stamp now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!ready(it->future)) {
      ++it;
      continue;
    }
    finish(*it, now);
    it = pending_.erase(it);
  }
  std::erase_if(unrecorded_, [&](Unrecorded& u) { return record(u); });
}

void PageDeliveries::wait(Stamp now) {
  for (auto& p : pending_) finish(p, now);
  pending_.clear();
}

bool PageDeliveries::record(Unrecorded& u) {
  std::erase_if(u.actions, [&](const store::Action& a) { return ledger_.record_action(a).ok(); });
  if (u.outcome) {
    const auto& [at_ns, out] = *u.outcome;
    if (ledger_.record_delivery(u.id, at_ns, out.summary, out.delivered)) {
      if (sink_.log)
        sink_.log(
            LogLevel::kInfo, u.job,
            fmt::format("incident {}: its page's outcome is recorded now: {}", u.id, out.summary));
      if (sink_.forget) sink_.forget(u.job, u.id);
      u.outcome.reset();
    }
  }
  return u.actions.empty() && !u.outcome;
}

bool PageDeliveries::delivered_unrecorded(int64_t id) {
  for (auto it = unrecorded_.begin(); it != unrecorded_.end(); ++it) {
    if (it->id != id || !it->outcome || !it->outcome->second.delivered) continue;
    if (sink_.log)
      sink_.log(LogLevel::kInfo, it->job,
                fmt::format("incident {}: its page was delivered from this node ({}), but that "
                            "could not be recorded then: recording it, not paging again",
                            id, it->outcome->second.summary));
    if (record(*it)) unrecorded_.erase(it);
    return true;
  }
  return false;
}

void PageDeliveries::keep(const std::string& job, int64_t id, int64_t at_ns,
                          DeliveryOutcome outcome) {
  if (sink_.keep) sink_.keep(job, id, at_ns, outcome);
  take_kept(job, id, at_ns, std::move(outcome));
}

void PageDeliveries::take_kept(const std::string& job, int64_t id, int64_t at_ns,
                               DeliveryOutcome outcome) {
  for (auto& u : unrecorded_) {
    if (u.id == id && u.outcome) return;  // kept here already
  }
  unrecorded_.push_back(Unrecorded{job, id, {}, std::make_pair(at_ns, std::move(outcome))});
}

void PageDeliveries::finish(Pending& p, Stamp now) {
  std::vector<PageResult> results = p.future.get();
  const IncidentRecord& rec = *p.record;
  const char* what = p.kind == Kind::kEscalation ? "escalation " : "";
  DeliveryOutcome out;
  Unrecorded left{rec.job, rec.id, {}, std::nullopt};
  out.delivered = results.empty();
  for (const auto& r : results) {
    out.delivered = out.delivered || r.ok;
    std::string line = fmt::format("{}: {} after {} attempt(s): {}", r.target,
                                   r.ok ? "sent" : "FAILED", r.attempts, r.detail);
    store::Action a;
    a.job = rec.job;
    if (rec.id > 0) a.incident_id = rec.id;
    a.at_ns = now.wall_ns;
    a.kind = std::string(r.ok ? store::action_kind::kPage : store::action_kind::kPageFailed);
    a.ok = r.ok;
    a.detail = what + line;
    Status st = ledger_.record_action(a);
    if (!st) left.actions.push_back(a);
    if (sink_.counted) sink_.counted(rec.job, a.kind);
    if (sink_.log) {
      sink_.log(r.ok ? LogLevel::kInfo : LogLevel::kWarn, rec.job,
                fmt::format("{}page {}", what, line));
      if (!st)
        sink_.log(LogLevel::kWarn, rec.job,
                  "cannot record the page (kept, and recorded once the ledger takes it): " +
                      st.error().message);
    }
    out.summary += (out.summary.empty() ? "" : "; ") + line;
  }
  if (results.empty()) {
    out.summary = "no pager configured: incident only recorded";
    if (sink_.log) sink_.log(LogLevel::kInfo, rec.job, out.summary);
  }
  if (p.kind == Kind::kPage) p.record->delivered = out.delivered;
  if (p.kind == Kind::kPage && rec.id == 0) {
    p.record->unrecorded = out;  // recorded with the incident, once the ledger takes it
  } else if (p.kind == Kind::kPage) {
    if (auto st = ledger_.record_delivery(rec.id, now.wall_ns, out.summary, out.delivered); !st) {
      left.outcome = std::make_pair(now.wall_ns, out);
      if (sink_.log)
        sink_.log(LogLevel::kWarn, rec.job,
                  fmt::format("incident {}: cannot record its page's outcome (kept, and recorded "
                              "once the ledger takes it): {}",
                              rec.id, st.error().message));
    }
  }
  if (left.id > 0 && (!left.actions.empty() || left.outcome)) {
    if (unrecorded_.size() >= kMaxUnrecorded) {
      const Unrecorded& oldest = unrecorded_.front();
      if (oldest.outcome && sink_.forget) sink_.forget(oldest.job, oldest.id);
      unrecorded_.erase(unrecorded_.begin());
    }
    if (left.outcome && sink_.keep) sink_.keep(left.job, left.id, left.outcome->first, out);
    unrecorded_.push_back(std::move(left));
  }
}

// ---- IncidentPolicy ----

IncidentPolicy IncidentPolicy::from_spec(const spec::JobSpec& spec) {
  IncidentPolicy p;
  p.pagers = spec.runbook.pagers;
  p.ack_timeout_ns = spec.runbook.ack_timeout_ns;
  p.ack_hold_limit_ns = spec.runbook.ack_hold_limit_ns;
  p.auto_preempt = spec.auto_preempt.enabled;
  p.misses = spec.auto_preempt.misses;
  return p;
}

// ---- Incident ----

Incident::Incident(IncidentScope scope, IncidentPolicy policy, IncidentLedger& ledger,
                   IncidentHost& host, PageDeliveries& deliveries)
    : scope_(std::move(scope)),
      policy_(std::move(policy)),
      ledger_(ledger),
      host_(host),
      deliveries_(deliveries),
      alert_(policy_.pagers, deliveries.options()) {}

std::optional<int64_t> Incident::id() const {
  if (!open_) return std::nullopt;
  return open_->record->id;
}

std::optional<std::string> Incident::delivered_key() const {
  if (!open_ || !open_->record->delivered) return std::nullopt;
  if (open_->joined) return open_->joined;
  if (open_->record->id <= 0) return std::nullopt;
  return std::to_string(open_->record->id);
}

void Incident::note(const Status& st) {
  if (st) return;
  host_.ledger_failed(st.error());
  say(LogLevel::kWarn, "cannot record: " + st.error().message);
}

void Incident::close_stale(const store::Incident& rec, Stamp now) {
  say(LogLevel::kInfo,
      fmt::format("incident {} (incarnation {}) is of an earlier run: closed, not joined", rec.id,
                  rec.incarnation));
  note(ledger_.close(rec.id, now.wall_ns, "no longer observed: a new run of the job started"));
}

bool Incident::stale(const store::Incident& rec) const {
  if (rec.incarnation != scope_.incarnation) return true;
  return scope_.run_started_wall_ns > 0 && rec.opened_at_ns < scope_.run_started_wall_ns;
}

void Incident::adopt(const detect::Verdict& v, Stamp now) {
  adopted_ = true;
  auto open = ledger_.open_for(scope_.job);
  if (!open) {
    host_.ledger_failed(open.error());
    say(LogLevel::kWarn, "cannot read the job's open incident: " + open.error().message);
    return;
  }
  if (!*open) return;
  const store::Incident& rec = **open;
  if (stale(rec)) {
    close_stale(rec, now);
    return;
  }
  Open o;
  o.record->job = scope_.job;
  o.record->id = rec.id;
  o.opened.job = rec.job;
  o.opened.incarnation = rec.incarnation;
  o.opened.at_ns = rec.opened_at_ns;
  o.opened.state = rec.state;
  o.opened.cause = rec.cause;
  o.state = rec.state;
  o.cause = rec.cause;
  o.opened_wall_ns = rec.opened_at_ns;
  o.opened_mono_ns = now.mono_ns;  // its deadlines count from this watcher's first look
  open_ = std::move(o);
  host_.recorded(rec.id, false);
  // The verdict it was opened (and so acted) on, as recorded.
  detect::Verdict acted_on = v;
  if (auto recorded = trace::verdict_from_json(rec.verdict_json); recorded) acted_on = *recorded;
  if (auto under_way = host_.act_under_way(rec.id, acted_on)) {
    open_->acted_on = std::move(acted_on);
    open_->acting = std::move(*under_way);
  }
}

void Incident::open_incident(const detect::Verdict& v, Stamp now) {
  Open o;
  o.record->job = scope_.job;
  o.opened.job = scope_.job;
  o.opened.incarnation = scope_.incarnation;
  o.opened.at_ns = now.wall_ns;
  o.opened.state = detect::state_name(v.state);
  o.opened.cause = detect::cause_name(v.cause);
  o.opened.summary = v.summary;
  o.opened.verdict_json = trace::verdict_to_json(v, scope_.job);
  o.state = o.opened.state;
  o.cause = o.opened.cause;
  o.opened_wall_ns = now.wall_ns;
  o.opened_mono_ns = now.mono_ns;
  open_ = std::move(o);
  if (!try_record(now)) {
    say(LogLevel::kWarn, fmt::format("incident ({}) not recorded: paging from memory; recording "
                                     "is tried again every poll",
                                     v.summary));
  } else {
    say(LogLevel::kInfo, fmt::format("incident {}: {}", open_->record->id, v.summary));
  }
  if (v.state != detect::State::kDead && policy_.auto_preempt && !host_.refuse_act()) {
    say(LogLevel::kInfo, fmt::format("acting in {} unless acked: stepwatch ack {}",
                                     format_duration(policy_.ack_timeout_ns), scope_.job));
  }
}

bool Incident::try_record(Stamp now) {
  Open& o = *open_;
  auto ref = ledger_.open(o.opened);
  if (!ref) {
    host_.ledger_failed(ref.error());
    say(LogLevel::kWarn, "cannot record the incident: " + ref.error().message);
    return false;
  }
  if (!ref->created) {
    // The job already has an open incident: joined, unless it is of another run (D8).
    auto rec = ledger_.get(ref->id);
    if (rec && *rec && stale(**rec)) {
      close_stale(**rec, now);
      ref = ledger_.open(o.opened);
      if (!ref) {
        host_.ledger_failed(ref.error());
        return false;
      }
    }
  }
  o.record->id = ref->id;
  host_.recorded(ref->id, ref->created);
  if (o.record->unrecorded) {
    // Paged from memory before the ledger took the incident: record that page now, claimed so
    // that no later watcher delivers it again.
    DeliveryOutcome out = *o.record->unrecorded;
    o.record->unrecorded.reset();
    if (auto claim = ledger_.claim_page(ref->id, o.opened_wall_ns); !claim) {
      host_.ledger_failed(claim.error());
    }
    note(ledger_.record_delivery(ref->id, now.wall_ns, out.summary, out.delivered));
  } else if (o.paged) {
    (void)ledger_.claim_page(ref->id, o.opened_wall_ns);  // its page is under way
  }
  return true;
}

PageMessage Incident::message(const detect::Verdict& v) const {
  PageMessage m = host_.page(v);
  int64_t id = open_->record->id;
  // Joined to a page delivered before: that page's key, in every later page and alert of it.
  // Unrecorded (the ledger failing): a key of its own, stable for this incident.
  m.incident_id = open_->joined ? *open_->joined
                  : id > 0      ? std::to_string(id)
                           : fmt::format("{}-{}", scope_.job, open_->opened_wall_ns / kNsPerMs);
  m.incarnation = static_cast<int>(scope_.incarnation);
  m.started_wall_ns = open_->opened_wall_ns;
  m.verdict_json = trace::verdict_to_json(v, scope_.job);  // only when paging: it can be large
  return m;
}

int64_t Incident::longest_delivery_ns() const {
  int64_t longest = 0;
  for (const auto& t : policy_.pagers) {
    int64_t ns = 0;
    for (int attempt = 1; attempt <= t.retries + 1; ++attempt) {
      ns += t.timeout_ns + (attempt <= t.retries ? backoff_ns(deliveries_.options(), attempt) : 0);
    }
    longest = std::max(longest, ns);
  }
  return longest;
}

void Incident::page(const detect::Verdict& v, Stamp now) {
  Open& o = *open_;
  int64_t id = o.record->id;
  // Delivered from here, while the ledger could not take it (E14; kept across a restart too):
  // recorded, never sent again, whatever the ledger answers now.
  if (id > 0 && deliveries_.delivered_unrecorded(id)) {
    o.paged = true;
    o.record->delivered = true;
    alert_.adopt(message(v));
    return;
  }
  if (id > 0) {
    auto claim = ledger_.claim_page(id, now.wall_ns);
    if (!claim) {
      host_.ledger_failed(claim.error());
      say(LogLevel::kWarn, fmt::format("incident {}: cannot claim its page ({}): paging anyway", id,
                                       claim.error().message));
    } else if (!*claim) {
      auto rec = ledger_.get(id);
      bool undelivered = rec && *rec && (*rec)->page_undelivered();
      if (!undelivered) {
        say(LogLevel::kInfo, fmt::format("incident {} was already paged: not paging again", id));
        o.paged = true;
        o.record->delivered = true;
        alert_.adopt(message(v));  // its Alertmanager alert may have gone unrefreshed meanwhile
        return;
      }
      // A claim is not a delivery (D3). One claimed moments ago may still be under way in the
      // watcher that claimed it; one older than the longest delivery was lost with it, unless
      // that watcher lives on and records it once it can (a multi-node leader that lost its
      // lease mid-delivery): it is given adopted_claim_wait from this watcher's first look.
      int64_t age = now.wall_ns - *(*rec)->paged_at_ns;
      if (age < longest_delivery_ns()) return;  // asked again next turn
      if (now.mono_ns - o.opened_mono_ns < policy_.adopted_claim_wait_ns) return;
      say(LogLevel::kWarn,
          fmt::format("incident {}: its page was claimed {} ago but never delivered (the watcher "
                      "that claimed it stopped): delivering it now",
                      id, format_duration(age)));
    }
  }
  o.paged = true;
  if (auto joined = host_.paged_as(v)) {
    // The same stall, paged already (E16): this incident joins that page under its key.
    o.joined = joined->key;
    o.record->delivered = true;
    std::string line = fmt::format("not paged again: joins the page of {} (dedup key {})",
                                   joined->why, joined->key);
    say(LogLevel::kInfo,
        fmt::format("incident {}: {}", id > 0 ? std::to_string(id) : "(unrecorded)", line));
    if (id > 0) {
      // Recorded as paged, so that no later watcher of this ledger pages it either.
      if (auto claim = ledger_.claim_page(id, now.wall_ns); !claim)
        host_.ledger_failed(claim.error());
      if (auto st = ledger_.record_delivery(id, now.wall_ns, line, true); !st) {
        note(st);
        // Kept and recorded at a later reap, as a delivery is: a claim left alone would be
        // delivered again by a next watcher (E14).
        deliveries_.keep(scope_.job, id, now.wall_ns, DeliveryOutcome{line, true});
      }
    } else {
      o.record->unrecorded = DeliveryOutcome{line, true};
    }
    record_action(store::action_kind::kNote, true, line, now);
    alert_.adopt(message(v));
    return;
  }
  PageMessage m = message(v);
  alert_.sent(m, now.mono_ns);
  deliveries_.start(o.record, PageDeliveries::Kind::kPage, policy_.pagers, std::move(m));
}

void Incident::record_action(std::string_view kind, bool ok, const std::string& detail, Stamp now) {
  store::Action a;
  a.job = scope_.job;
  if (open_ && open_->record->id > 0) a.incident_id = open_->record->id;
  a.at_ns = now.wall_ns;
  a.kind = std::string(kind);
  a.ok = ok;
  a.detail = detail;
  host_.counted(kind);
  note(ledger_.record_action(a));
}

void Incident::step(const detect::Verdict& v, Stamp now, bool running) {
  if (!adopted_) adopt(v, now);
  reap(now);
  bool fires = detect::fires_runbook(v.state);
  if (!open_) {
    if (!fires) {
      if (running) preempted_.reset();  // it recovered: a next stall is a new one
      return;
    }
    if (preempted_ && preempted_->incarnation == scope_.incarnation &&
        preempted_->state == detect::state_name(v.state) &&
        preempted_->cause == detect::cause_name(v.cause)) {
      return;  // this run was preempted on this very verdict: not a new incident (E7)
    }
    if (!host_.may_open(v, now)) return;
    open_incident(v, now);
  }
  Open& o = *open_;
  if (o.record->id == 0) (void)try_record(now);  // the ledger failed: tried again every turn
  int64_t id = o.record->id;
  if (fires) {
    std::string state = detect::state_name(v.state), cause = detect::cause_name(v.cause);
    if (id > 0 && (state != o.state || cause != o.cause)) {
      store::NewIncident says = o.opened;
      says.state = state;
      says.cause = cause;
      says.summary = v.summary;
      says.verdict_json = trace::verdict_to_json(v, scope_.job);
      note(ledger_.update(id, says));
      o.state = state;
      o.cause = cause;
    }
    if (!o.paged) page(v, now);
    if (auto failed = alert_.tick(now.mono_ns)) {
      say(LogLevel::kWarn, "re-sending the alert failed: " + *failed);
    }
    ++o.misses;
  } else {
    o.misses = 0;
  }
  if (o.acting) return;  // the preempt is under way: its report decides
  if (o.held) return;    // the host holds it open until it closes it (a restart storm)
  if (!fires && running && recovered(v.state)) {
    say(LogLevel::kInfo, fmt::format("incident {}: the job recovered ({})", id, v.summary));
    close(now, "recovered");
    return;
  }
  if (o.escalated) return;  // a preempt left survivors: paged again, never preempted twice
  if (!o.hold_until_mono_ns && id > 0) {
    auto rec = ledger_.get(id);  // an ack comes through the API, the ack route or the CLI
    if (rec && *rec && (*rec)->acked_at_ns) {
      o.hold_until_mono_ns = now.mono_ns + policy_.ack_hold_limit_ns;
      say(LogLevel::kInfo,
          fmt::format("incident {} acked by {}: holding for up to {}", id, (*rec)->acked_by,
                      format_duration(policy_.ack_hold_limit_ns)));
    }
  }
  // A dead rank cannot come back: nothing to wait for but an ack's hold.
  int64_t deadline = o.hold_until_mono_ns.value_or(v.state == detect::State::kDead
                                                       ? o.opened_mono_ns
                                                       : o.opened_mono_ns + policy_.ack_timeout_ns);
  if (running && (now.mono_ns < deadline || o.misses < policy_.misses)) return;
  std::optional<std::string> refused = host_.refuse_act();
  if (!refused && !policy_.auto_preempt)
    refused = "auto_preempt is off: leaving the job to its owner";
  if (refused) {
    if (!o.told_refused && !refused->empty()) say(LogLevel::kInfo, *refused);
    o.told_refused = true;
    return;
  }
  act(v, now, running);
}

void Incident::act(const detect::Verdict& v, Stamp now, bool running) {
  Open& o = *open_;
  PreemptTargets targets = host_.targets();
  if (targets.processes.empty() && running) {
    if (!o.told_refused) {
      std::string why = fmt::format("not preempted: no process proven to be the job's{}",
                                    targets.refused.empty() ? "" : " (" + targets.refused + ")");
      say(LogLevel::kWarn, why);
      record_action(store::action_kind::kNote, false, why, now);
    }
    o.told_refused = true;
    return;
  }
  if (running) {
    say(LogLevel::kWarn,
        fmt::format("incident {}: no ack and no step for {}: preempting {} proven process(es){}",
                    o.record->id, format_duration(now.mono_ns - o.opened_mono_ns),
                    targets.processes.size(),
                    targets.refused.empty() ? "" : "; not proven: " + targets.refused));
  }
  o.refused = targets.refused;
  o.acted_on = v;
  o.acted_running = running;
  o.acting = host_.act(v, o.record->id, std::move(targets));
  reap(now);
}

void Incident::reap(Stamp now) {
  if (open_ && open_->acting && ready(*open_->acting)) reap_act(now);
}

void Incident::reap_act(Stamp now) {
  Open& o = *open_;
  const detect::Verdict& v = o.acted_on;
  ActReport r = o.acting->get();
  o.acting.reset();
  if (r.artifact) {
    record_action(store::action_kind::kCollect, r.artifact_ok, *r.artifact, now);
    say(r.artifact_ok ? LogLevel::kInfo : LogLevel::kWarn, *r.artifact);
  }
  std::string detail = r.preempt.summary();
  if (!o.refused.empty()) detail += "; not proven, left alone: " + o.refused;
  record_action(store::action_kind::kPreempt, r.preempt.ok, detail, now);
  say(r.preempt.ok ? LogLevel::kInfo : LogLevel::kWarn, "preempt: " + detail);
  for (const auto& p : r.preempt.processes) {
    if (p.gone()) ended_pids_.insert(p.process.pid);
  }
  if (!r.preempt.ok) {
    // Survivors (a process in D state, a signal refused): the owner hears of it (D6).
    PageMessage m = message(v);
    m.summary = "preempt failed: " + r.preempt.summary() + " (" + v.summary + ")";
    for (const auto& s : r.preempt.processes) {
      if (!s.gone()) m.evidence.push_back("survivor: " + s.describe());
    }
    say(LogLevel::kWarn,
        fmt::format("incident {}: the preempt left survivors: paging again", o.record->id));
    deliveries_.start(o.record, PageDeliveries::Kind::kEscalation, policy_.pagers, std::move(m));
  }
  if (o.close_after) {  // the job finished or vanished meanwhile: nothing follows but the close
    std::string resolution = std::move(*o.close_after);
    close(now, resolution);
    return;
  }
  preempted_ =
      Preempted{scope_.incarnation, detect::state_name(v.state), detect::cause_name(v.cause)};
  // A preempt of a job whose records say it runs that ended nothing (every process of it had
  // ended already) closes nothing: the after-preempt sequence still runs (a dead job is
  // relaunched), and the incident stays open until the job recovers, a next run starts or the
  // job goes (E7: a dead job closed and re-opened its incident on every poll). A job that
  // exited by itself (`stepwatch run`'s child) closes as its host says.
  bool ended_any = std::any_of(
      r.preempt.processes.begin(), r.preempt.processes.end(),
      [](const ProcessOutcome& p) { return p.gone() && p.before != probe::Liveness::kGone; });
  AfterPreempt next = host_.after_preempt(r);
  if (next.close && !ended_any && r.preempt.ok && o.acted_running) {
    say(LogLevel::kWarn,
        fmt::format("incident {}: nothing left to preempt (no process of the job was running): "
                    "it stays open{}",
                    o.record->id, next.resolution.empty() ? "" : "; " + next.resolution));
    o.escalated = true;
  } else if (next.close) {
    close(now, next.resolution);
  } else {
    o.escalated = true;
    o.held = next.hold;
  }
}

void Incident::close(Stamp now, const std::string& resolution) {
  if (!open_) return;
  if (open_->acting) {
    open_->close_after = resolution;  // a preempt under way: its report comes first (reap)
    return;
  }
  alert_.resolve(now.wall_ns);
  if (open_->record->id > 0) note(ledger_.close(open_->record->id, now.wall_ns, resolution));
  open_.reset();
}

}  // namespace stepwatch::runbook
