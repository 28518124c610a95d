// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The incident state machine: the runbook's one sequence, whichever front end runs it
// (`stepwatch run`'s supervisor, the node agent; the multi-node job leader next).
//
//   a firing verdict (stalled, dead) opens an incident, or joins the job's open one
//   -> claim the page and deliver it (retries with backoff, off the turn's thread)
//   -> keep its Alertmanager alert alive; update the record when the verdict changes
//   -> wait for an ack (then hold up to ack_hold_limit) or the ack deadline (none for a dead
//      rank), and for auto_preempt.misses firing verdicts in a row
//   -> collect an artifact and preempt the processes the host proves are the job's
//   -> all gone: what follows is the host's (stepwatch run resumes; the agent closes);
//      survivors: a second page says who survived and why (and the agent keeps it open).
//   A recovery (healthy or slow) closes the incident at any point before the preempt.
//
// Faults it is built against (reviews/reliability.md):
//   D3  a claim is not a delivery: a claimed page without a recorded delivery is delivered
//       again by the next watcher, the incident id as its dedup key;
//   D4  a ledger that cannot be written never silences a page: the incident lives in memory,
//       the page goes out, and recording is retried every turn;
//   D6  a preempt that leaves survivors is never reported as done: it escalates;
//   D8  an open incident of an earlier run or incarnation is closed as no longer observed,
//       never joined;
//   D10 page deliveries never block a turn (PageDeliveries).
// Time comes only from each turn's Stamp (an injected clock), so tests drive every path.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/clock.h"
#include "src/common/log.h"
#include "src/common/result.h"
#include "src/detect/verdict.h"
#include "src/runbook/alert_keeper.h"
#include "src/runbook/ledger.h"
#include "src/runbook/pager.h"
#include "src/runbook/preempt.h"
#include "src/spec/spec.h"

namespace stepwatch::runbook {

// What one delivery of a page came to, as recorded.
struct DeliveryOutcome {
  std::string summary;     // one line per target, "; "-joined
  bool delivered = false;  // a target took it, or there was none to send to
};

// Where a page's incident is recorded. Shared with its deliveries, which may finish after the
// incident closed, or before the ledger could record it (then the outcome waits here).
struct IncidentRecord {
  std::string job;
  int64_t id = 0;  // 0: not recorded yet
  std::optional<DeliveryOutcome> unrecorded;
  // Its page reached someone: delivered (here or, by its record, elsewhere), or joined to a page
  // delivered before (IncidentHost::paged_as).
  bool delivered = false;
};

// Where the deliveries tell what happened (the front end's log and counters).
struct DeliverySink {
  std::function<void(LogLevel, const std::string& job, const std::string& line)> log;
  std::function<void(const std::string& job, std::string_view action_kind)> counted;
  // A page's outcome the ledger did not take, kept where it outlives this process (the node's
  // store), and forgotten once the ledger took it: PageDeliveries::take_kept after a restart.
  std::function<void(const std::string& job, int64_t id, int64_t at_ns, const DeliveryOutcome&)>
      keep;
  std::function<void(const std::string& job, int64_t id)> forget;
};

// Page deliveries under way. Each runs on a thread of its own; reap() records the finished
// ones (actions, and the page's outcome on its incident) on the caller's thread and never
// waits, so a slow pager holds up no poll, even once its incident has closed (D10).
class PageDeliveries {
 public:
  enum class Kind { kPage, kEscalation };
  // ledger must outlive it.
  PageDeliveries(IncidentLedger& ledger, PagerOptions options = {}, DeliverySink sink = {});
  ~PageDeliveries();  // waits for the deliveries still under way: a page is never dropped
  PageDeliveries(const PageDeliveries&) = delete;
  PageDeliveries& operator=(const PageDeliveries&) = delete;

  void start(std::shared_ptr<IncidentRecord> record, Kind kind, std::vector<spec::Pager> targets,
             PageMessage m);
  // Records each delivery that has finished, and again what the ledger did not take before.
  void reap(Stamp now);
  // Whether this node delivered incident `id`'s page and the ledger has not taken that yet (etcd
  // did not answer, or this node no longer led the job): it is recorded now, and is never sent
  // again (review E14). Said, with why, on the sink.
  bool delivered_unrecorded(int64_t id);
  // An outcome the ledger did not take that was not a delivery of these (a page joined to one
  // sent before): kept as theirs are (DeliverySink::keep), recorded at a later reap.
  void keep(const std::string& job, int64_t id, int64_t at_ns, DeliveryOutcome outcome);
  // An outcome kept before this process started (DeliverySink::keep): recorded at the next reap,
  // and meanwhile the page is not sent again from here (delivered_unrecorded).
  void take_kept(const std::string& job, int64_t id, int64_t at_ns, DeliveryOutcome outcome);
  // Waits for every delivery and records it (shutdown).
  void wait(Stamp now);
  size_t in_flight() const { return pending_.size(); }
  const PagerOptions& options() const { return options_; }

 private:
  struct Pending {
    std::shared_ptr<IncidentRecord> record;
    Kind kind;
    std::future<std::vector<PageResult>> future;
  };
  void finish(Pending& p, Stamp now);
  // What finished but the ledger did not take: the page's actions and its outcome, kept (and
  // recorded at each reap) until it does.
  struct Unrecorded {
    std::string job;
    int64_t id = 0;
    std::vector<store::Action> actions;
    std::optional<std::pair<int64_t, DeliveryOutcome>> outcome;  // at_ns, outcome
  };
  // Records `u` as far as the ledger takes it: true when all of it is recorded.
  bool record(Unrecorded& u);

  IncidentLedger& ledger_;
  PagerOptions options_;
  DeliverySink sink_;
  std::vector<Pending> pending_;
  std::vector<Unrecorded> unrecorded_;
  static constexpr size_t kMaxUnrecorded = 64;  // a ledger down for good: the oldest go
};

// The runbook's settings of one job (from its spec: [runbook], [auto_preempt]).
struct IncidentPolicy {
  std::vector<spec::Pager> pagers;  // empty: incidents are only recorded
  int64_t ack_timeout_ns = 0;
  int64_t ack_hold_limit_ns = 0;
  bool auto_preempt = false;
  int misses = 1;  // firing verdicts in a row before acting
  // How long a watcher that adopted an incident whose page another watcher claimed waits, from
  // its first look, before it delivers that page itself (a multi-node job's leader: the lease
  // TTL, so that the node that claimed it has had the time to record its delivery; 0 alone).
  int64_t adopted_claim_wait_ns = 0;

  static IncidentPolicy from_spec(const spec::JobSpec& spec);
};

// The processes a preempt may end (proven to be the job's), and those it leaves alone.
struct PreemptTargets {
  std::vector<ProcessRef> processes;
  std::string refused;  // "rank 1: pid 12 is not the beacon's writer; ..."; "" when none
  bool collect = true;  // collect an artifact first (an order may say not to)
};

// What follows a preempt, decided by the host once its report is in.
struct AfterPreempt {
  bool close = true;       // false: the incident stays open
  std::string resolution;  // when it closes
  // With close = false: the host holds it open (a restart storm waits for an ack) and closes it
  // itself; meanwhile a recovery does not close it and nothing is acted on.
  bool hold = false;
};

// What differs between the front ends. Called on the turn's thread, except act()'s work.
class IncidentHost {
 public:
  virtual ~IncidentHost() = default;
  // The page for this verdict with what only the host knows: the host name, the ack command,
  // evidence of its own (leftovers of the last incarnation). The incident adds its id, the
  // incarnation and when it began.
  virtual PageMessage page(const detect::Verdict& v) = 0;
  virtual void log(LogLevel level, const std::string& line) = 0;
  // Why no incident may open for this verdict now (the host's own preempt ended these
  // processes; the owner's hourly incident budget is spent): the host says why itself.
  virtual bool may_open(const detect::Verdict& /*v*/, Stamp /*now*/) { return true; }
  // Why this host may not act on the job: nullopt, it may; "" it may not, silently; else a
  // line said once per incident.
  virtual std::optional<std::string> refuse_act() { return std::nullopt; }
  // The processes to preempt: only those proven to be the job's.
  virtual PreemptTargets targets() = 0;
  // Collects (if the host does) and preempts. The agent runs it on a thread of its own,
  // `stepwatch run` in place (a ready future).
  virtual std::future<ActReport> act(const detect::Verdict& v, int64_t incident_id,
                                     PreemptTargets targets) = 0;
  virtual AfterPreempt after_preempt(const ActReport& report) = 0;
  // An incident was opened (created) or joined in the ledger.
  virtual void recorded(int64_t /*id*/, bool /*created*/) {}
  // A ledger write failed: the host makes it visible (health, metrics). The incident goes on.
  virtual void ledger_failed(const Error& /*e*/) {}
  // An action of this kind was recorded (or tried): counters.
  virtual void counted(std::string_view /*action_kind*/) {}
  // The dedup key of a page already delivered for this stall by another runbook (a multi-node
  // job's incident, paged through etcd before this node lost it; this node's own page while etcd
  // did not answer it), with the line that says so: this incident then joins that page, under
  // its key, instead of paging the same stall again (review E16). nullopt: none, it pages.
  struct PagedElsewhere {
    std::string key;
    std::string why;  // "incident 17 of the job, paged through etcd by node a"
  };
  virtual std::optional<PagedElsewhere> paged_as(const detect::Verdict& /*v*/) {
    return std::nullopt;
  }
  // The act on this incident that an earlier watcher started and did not see through (a
  // multi-node job's preempt order, left by a leader that lost its lease): the host takes it up
  // as its own act, `acted_on` being what it was for, and the incident waits on its report as on
  // act()'s. nullopt: none under way (or the host may not act); the incident goes its usual way.
  virtual std::optional<std::future<ActReport>> act_under_way(int64_t /*incident_id*/,
                                                              const detect::Verdict& /*acted_on*/) {
    return std::nullopt;
  }
};

// Who the incident is about. An open incident of an earlier incarnation, or opened before the
// run began, is of another run: it is closed as no longer observed, never joined (D8).
struct IncidentScope {
  std::string job;
  int64_t incarnation = 0;
  int64_t run_started_wall_ns = 0;  // 0: unknown (the incarnation alone decides)
};

// One job's runbook. Lives as long as the job is watched; holds at most one open incident.
class Incident {
 public:
  // ledger, host and deliveries must outlive it.
  Incident(IncidentScope scope, IncidentPolicy policy, IncidentLedger& ledger, IncidentHost& host,
           PageDeliveries& deliveries);
  Incident(const Incident&) = delete;
  Incident& operator=(const Incident&) = delete;

  // One verdict. `running`: false once the job's processes are known to have exited (then
  // there is nothing to wait for). The verdict's JSON is made only when something records it.
  void step(const detect::Verdict& v, Stamp now, bool running = true);
  // Closes the open incident (the job finished, vanished or ended by itself). None: nothing.
  // Never waits: with a preempt under way the incident closes once its report is in (reap).
  void close(Stamp now, const std::string& resolution);
  // Records a preempt that has finished meanwhile; step() does it too. For a job that is no
  // longer stepped (retired), so its last preempt is recorded and its incident closed.
  void reap(Stamp now);
  // The run now watched (its incarnation; when its earliest beacon was created).
  void set_run(int64_t incarnation, int64_t run_started_wall_ns) {
    scope_.incarnation = incarnation;
    scope_.run_started_wall_ns = run_started_wall_ns;
  }

  bool is_open() const { return open_.has_value(); }
  // The open incident's id; 0 while it could not be recorded; nullopt when none is open.
  std::optional<int64_t> id() const;
  bool acting() const { return open_ && open_->acting.has_value(); }
  // The dedup key of the open incident's page once it reached someone (its id, or the key of
  // the page it joined); nullopt while none did, or none is open.
  std::optional<std::string> delivered_key() const;
  // The open incident's record (its id, whether its page was delivered: a delivery under way
  // sets that when it finishes, even once this runbook is gone); null when none is open.
  std::shared_ptr<const IncidentRecord> record() const { return open_ ? open_->record : nullptr; }
  // Pids this runbook's own preempts ended: their silence is not a new stall.
  const std::set<int>& ended_pids() const { return ended_pids_; }

 private:
  struct Open {
    std::shared_ptr<IncidentRecord> record = std::make_shared<IncidentRecord>();
    store::NewIncident opened;  // what opened it (kept to record it later, D4)
    std::string state, cause;   // what the record says now
    int64_t opened_mono_ns = 0;
    int64_t opened_wall_ns = 0;
    bool paged = false;                 // the page was sent, or found already delivered, or joined
    std::optional<std::string> joined;  // the key of the page it joined (paged_as)
    int misses = 0;                     // firing verdicts in a row
    std::optional<int64_t> hold_until_mono_ns;  // acked: the owner has until then
    bool told_refused = false;
    std::optional<std::future<ActReport>> acting;
    detect::Verdict acted_on;                // the verdict the preempt was for
    bool acted_running = true;               // the job ran (by its records) when it was acted on
    std::optional<std::string> close_after;  // closed while acting: its resolution
    std::string refused;                     // of the preempt under way
    bool escalated = false;  // a preempt left survivors: paged again, not acting again
    bool held = false;       // the host holds it open after its preempt (AfterPreempt::hold)
  };

  // At the first turn: adopts the job's open incident from the ledger (a restarted watcher) if
  // it belongs to this run, and closes it as no longer observed if not. A preempt of it left under
  // way is taken up (IncidentHost::act_under_way); `v` stands for what it acted on when the
  // record's verdict does not read.
  void adopt(const detect::Verdict& v, Stamp now);
  void open_incident(const detect::Verdict& v, Stamp now);
  bool try_record(Stamp now);
  bool stale(const store::Incident& rec) const;
  // Closes the open incident `rec` of an earlier run as no longer observed.
  void close_stale(const store::Incident& rec, Stamp now);
  void page(const detect::Verdict& v, Stamp now);
  void reap_act(Stamp now);
  void act(const detect::Verdict& v, Stamp now, bool running);
  int64_t longest_delivery_ns() const;
  PageMessage message(const detect::Verdict& v) const;
  void record_action(std::string_view kind, bool ok, const std::string& detail, Stamp now);
  void note(const Status& st);
  void say(LogLevel level, const std::string& line) { host_.log(level, line); }

  IncidentScope scope_;
  IncidentPolicy policy_;
  IncidentLedger& ledger_;
  IncidentHost& host_;
  PageDeliveries& deliveries_;
  AlertKeeper alert_;     // one per job: an alert re-post outlives the incident it was for
  bool adopted_ = false;  // the ledger was asked for the job's open incident
  std::optional<Open> open_;
  std::set<int> ended_pids_;
  // The verdict this run was last preempted on: the same verdict of the same run opens no new
  // incident; a recovery, or a next run, does.
  struct Preempted {
    int64_t incarnation = 0;
    std::string state, cause;
  };
  std::optional<Preempted> preempted_;
};

}  // namespace stepwatch::runbook
