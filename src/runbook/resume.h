// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The after-preempt sequence: the runbook's second half, the sibling of Incident (incident.h),
// whichever front end runs it (`stepwatch run`'s supervisor, a multi-node job's leader).
//
//   every process of the job is gone (Incident asks its host's after_preempt)
//   -> resume = false: the owner stops the job (Slurm cancels it) and the incident closes
//   -> the restart budget is spent (incarnations in a row without checkpoint progress): give up
//   -> the next incarnation starts from the last committed checkpoint (the host chose it);
//      a restart storm (runbook/node_fault.h) holds it until the incident is acked: paged once
//      as a warning, the hold marked where the other watchers look, the incident kept open;
//   -> [node_fault] drain: suspect hosts are drained where the owner can (Slurm);
//   -> the resume owner (resume_owner.h) answers with a plan, and the host applies it.
// Time comes only from the Stamp each call is given (an injected clock), so a test drives every
// path with a fake owner and host.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "src/common/clock.h"
#include "src/common/log.h"
#include "src/common/result.h"
#include "src/runbook/incident.h"
#include "src/runbook/node_fault_history.h"
#include "src/runbook/resume_owner.h"
#include "src/spec/spec.h"

namespace stepwatch::runbook {

// A committed checkpoint the next incarnation starts from.
struct ResumePoint {
  std::string id;  // "step_20"
  int64_t step = 0;
  std::string path;  // its directory, when the checkpoint catalog knows it
};

struct NextIncarnation {
  int64_t incarnation = 0;
  std::optional<ResumePoint> from;  // nullopt: from scratch
  int64_t incident = 0;             // the incident it follows; 0: not recorded (no hold then)
  // "incarnation 3 from step_20"; "incarnation 3 from scratch (no committed checkpoint)".
  std::string describe() const;
};

// What the preempt left, as the host saw it.
struct Preempted {
  NextIncarnation next;
  // What the preempt did, where the resolution starts: "preempted on 2 node(s) (a, b)".
  std::string done;
  // Incarnations in a row without checkpoint progress, this one counted, where the host keeps
  // the count (stepwatch run); nullopt: no restart budget applies.
  std::optional<int> restarts_without_progress;
};

// The sequence's settings of one job (its spec: [runbook], [node_fault]).
struct ResumePolicy {
  std::string job;
  bool resume = true;
  int restart_budget = 3;
  bool drain = false;
  NodeFaultPolicy node_fault;

  static ResumePolicy from_spec(const std::string& job, const spec::JobSpec& spec);
};

// What differs between the front ends. Called on the caller's thread.
class ResumeHost : public OwnerNotes {
 public:
  // note(ok, line) (OwnerNotes): an action of the job's incident, recorded only (Resume logs it).
  virtual void log(LogLevel level, const std::string& line) = 0;
  // The node-fault history the storm and suspect rules read.
  virtual HistoryLedger& history() = 0;
  // How the owner acks here: "stepwatch ack JOB --state-dir DIR".
  virtual std::string ack_hint() const = 0;
  // The scheduler's batch job the ending incarnation runs in (asked only by owners that act on
  // one, ResumeOwner::needs_batch_job).
  virtual Result<BatchJob> batch_job() = 0;
  // A restart storm holds `next`: page it (send_storm_page) and mark the hold where the other
  // watchers look (the leader's incarnation key). `why` is recorded already.
  virtual void hold(const NextIncarnation& next, const std::string& why, Stamp now) = 0;
  // Whether the held incident was acked since `since_wall_ns`: nullopt when it is no longer
  // open (closed meanwhile); an error is tried again next turn.
  virtual Result<std::optional<bool>> acked_since(int64_t incident, int64_t since_wall_ns) = 0;
  // A held next incarnation someone else started meanwhile: why nothing is held any longer.
  virtual std::optional<std::string> started_meanwhile(const NextIncarnation& /*next*/) {
    return std::nullopt;
  }
  // Applies the owner's plan for `next` (relaunch, exit, record a requeue, stop) and says what
  // follows for the incident. AfterPreempt::hold: not now (a read failed), try again next turn.
  virtual AfterPreempt apply(const ResumePlan& plan, const NextIncarnation& next,
                             const std::string& done, Stamp now) = 0;
  // Closes the incident a released hold kept open.
  virtual void close(int64_t incident, Stamp now, const std::string& resolution) = 0;
};

// One job's after-preempt sequence. Holds at most one held next incarnation.
class Resume : private OwnerNotes {
 public:
  // owner and host must outlive it.
  Resume(ResumePolicy policy, ResumeOwner& owner, ResumeHost& host);
  Resume(const Resume&) = delete;
  Resume& operator=(const Resume&) = delete;

  // After a preempt that left no survivor: what follows for the incident.
  AfterPreempt after_preempt(const Preempted& p, Stamp now);
  // Each turn while holding(): once the incident is acked the next incarnation is handed over
  // and the incident closed ("acked restart storm; ...").
  void poll(Stamp now);
  bool holding() const { return hold_.has_value(); }
  // A hold another watcher marked (a previous leader): it stands until an ack after `since`.
  void take_up(NextIncarnation next, int64_t since_wall_ns, std::string done);
  // A hand-over another watcher began and did not finish (a previous leader's start barrier):
  // tried again each turn until the host's apply() closes the incident.
  void take_up_hand_over(NextIncarnation next, std::string done);
  // Forgets the hold (this host no longer owns the job: the next one takes it up).
  void drop() { hold_.reset(); }
  const ResumeOwner& owner() const { return owner_; }

 private:
  struct Hold {
    NextIncarnation next;
    int64_t since_wall_ns = 0;  // an ack after this releases it
    std::string done;
    bool released = false;  // acked (or never held): the hand-over is tried again next turn
    bool storm = true;      // held by a restart storm (false: only a hand-over to try again)
  };
  // Pages and holds when a restart storm says so.
  bool storm_holds(const Preempted& p, Stamp now);
  // Drain, then the owner's plan, applied by the host.
  AfterPreempt hand_over(const NextIncarnation& next, const std::string& done, Stamp now);
  OwnerRequest request(const NextIncarnation& next);
  // A line of the sequence or of its owner: logged, and an action of the incident.
  void say(LogLevel level, bool ok, const std::string& line);
  void note(bool ok, const std::string& line) override;

  ResumePolicy policy_;
  ResumeOwner& owner_;
  ResumeHost& host_;
  std::optional<Hold> hold_;
  std::set<std::string> drained_;  // hosts drained for this job (each once)
};

}  // namespace stepwatch::runbook
