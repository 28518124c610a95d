// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The job leader as the host of the after-preempt sequence (runbook/resume.h) of a multi-node
// job: the next incarnation moves in etcd. The incarnation key is moved N -> N+1 once (fenced
// CAS), and every node's `stepwatch run --coord` relaunches from it, or exits with the code its
// scheduler restarts on; a Slurm requeue is recorded there after the fact (docs/slurm.md,
// "Multi-node jobs": requeue first, record second, so a leader lost in between leaves a requeue
// that the restart-count fence refuses to repeat). A restart storm's hold is marked in the same
// key, for the launchers (they wait without their resume_wait limit) and for a next leader,
// which takes it up. Launchers that can start at the start barrier (every one of the run) get
// the next incarnation with "barrier": the leader writes the start key once every node is ready
// for it (its old processes gone, its cleanup passed), and keeps the incident open until then; a
// next leader takes a barrier left unreleased up. It reaches the job only through what it is given
// here: no Agent, no etcd client of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/agent/config.h"
#include "src/coord/etcd_ledger.h"
#include "src/coord/incarnation.h"
#include "src/coord/orders.h"
#include "src/runbook/incident.h"
#include "src/runbook/resume.h"

namespace stepwatch::agent {

// The newest checkpoint every rank of the job committed: where all of them can resume from
// (none when a rank has none).
std::optional<runbook::ResumePoint> committed_by_every_rank(const detect::Observation& obs);

struct LeaderResumeDeps {
  std::string job;
  std::string node;                 // this node, the leader
  coord::JobOrders& orders;         // the job's keys: incarnation, launchers
  coord::EtcdLedger& ledger;        // the job's incident in etcd
  runbook::HistoryLedger& history;  // the node-fault history (every job's, in etcd)
  runbook::PageDeliveries& deliveries;
  std::vector<spec::Pager> pagers;
  std::function<int64_t()> fence;        // the leader's fence; 0: it no longer leads
  std::function<int64_t()> incarnation;  // the incarnation running now
  // The page for the verdict the job was preempted on (the storm page is made from it).
  std::function<runbook::PageMessage()> page;
  // The job's incident as this leader runs it (notes and closes go to the open one).
  std::function<runbook::Incident*()> incident;
  std::function<void(const std::string&)> problem;  // a read or write of etcd failed
  std::optional<uint32_t> owner_uid;  // the job directory's owner (runbook::BatchJob::owner_uid)
  // Every node with ranks of the running incarnation: each must have its launcher before the
  // incarnation moves, and be ready at the start barrier before it starts.
  std::function<std::vector<std::string>()> nodes;
  // How long the next incarnation waits for a node (its launcher missing, or its cleanup not
  // done) before the leader pages that the job cannot restart whole ([coord] restart_wait); it
  // waits on after the page.
  int64_t restart_wait_ns = kDefaultRestartWaitNs;
  // runbook.resume_owner = "kubernetes": the controller acts on the launchers' exit status, so a
  // stop (resume = false) and a spent restart budget are exit statuses too (75, 76), written in
  // the incarnation key for every launcher; elsewhere the launchers exit with the job's status.
  bool stop_by_exit = false;
};

class LeaderResume final : public runbook::ResumeHost {
 public:
  explicit LeaderResume(LeaderResumeDeps deps) : d_(std::move(deps)) {}

  // The next incarnation after `incident` from `checkpoint` (the newest every rank committed).
  runbook::NextIncarnation next(int64_t incident,
                                std::optional<runbook::ResumePoint> checkpoint) const;
  // The hold a previous leader marked in the incarnation key, if it holds the running one.
  std::optional<coord::IncarnationRecord> marked_hold();

  void log(LogLevel level, const std::string& line) override;
  void note(bool ok, const std::string& line) override;
  runbook::HistoryLedger& history() override { return d_.history; }
  std::string ack_hint() const override;
  Result<runbook::BatchJob> batch_job() override;
  void hold(const runbook::NextIncarnation& next, const std::string& why, Stamp now) override;
  Result<std::optional<bool>> acked_since(int64_t incident, int64_t since_wall_ns) override;
  std::optional<std::string> started_meanwhile(const runbook::NextIncarnation& next) override;
  runbook::AfterPreempt apply(const runbook::ResumePlan& plan, const runbook::NextIncarnation& next,
                              const std::string& done, Stamp now) override;
  void close(int64_t incident, Stamp now, const std::string& resolution) override;

  // A start barrier a previous leader set and did not release (nullopt: none): the incarnation
  // record that set it.
  std::optional<coord::IncarnationRecord> pending_barrier();
  // What the next incarnation waits for now, for the job's verdict: "incarnation 1 waits for
  // node(s) b (cleaning up: ...)"; "" while it waits for nothing. Since (monotonic) when.
  const std::string& waiting() const { return waiting_; }
  int64_t waiting_since_mono_ns() const { return missing_since_mono_ns_.value_or(0); }

 private:
  // A stop or a spent budget under a controller that acts on exit statuses: every launcher
  // exits with `code` (the incarnation key moves with it, fenced, once).
  runbook::AfterPreempt exit_every_launcher(int code, const runbook::NextIncarnation& next,
                                            const std::string& resolution, Stamp now);
  // Moves the incarnation key from `from` to `to` (fenced CAS); false, said in the log, when the
  // counter moved meanwhile, the fence failed or etcd did not answer.
  bool advance(const coord::JobIncarnation& from, const coord::IncarnationRecord& to);
  // Every node of the job must have its `stepwatch run --coord` (a launcher key under its lease)
  // before the incarnation moves: a node without one would be missing from the next
  // incarnation until its rendezvous timed out. nullopt: every one has (`barrier`: and every
  // one starts at the start barrier); else the hold, waiting (wait_on).
  std::optional<runbook::AfterPreempt> wait_for_launchers(const runbook::NextIncarnation& next,
                                                          Stamp now, bool& barrier);
  // The moved incarnation `at` starts once every node of the run is ready at the barrier: the
  // start key is written and the incident closes; until then the hold, waiting (wait_on).
  runbook::AfterPreempt start_together(const coord::IncarnationRecord& at,
                                       const runbook::NextIncarnation& next,
                                       const std::string& done, Stamp now);
  // The next incarnation waits for `missing` ("b (cleaning up)"): said when the set changes,
  // paged once past restart_wait ("restart-blocked"), and shown in waiting(). Returns the hold.
  runbook::AfterPreempt wait_on(const runbook::NextIncarnation& next,
                                const std::vector<std::string>& missing, LogLevel level, Stamp now);
  void waited_for_none();

  LeaderResumeDeps d_;
  std::optional<int64_t> missing_since_mono_ns_;
  std::string said_missing_;
  bool paged_missing_ = false;
  std::string waiting_;
};

}  // namespace stepwatch::agent
