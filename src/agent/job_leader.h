// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// One multi-node job's coordination on this node ([coord] in agent.toml; docs/multinode.md): its
// summary in etcd, the merge where this node leads the job, the job's one incident in etcd
// (fenced writes) and its after-preempt sequence while it leads, the preempt orders every node
// carries out, the roster and the shared view. Which runbook owns the job's incident:
//   - etcd answers, this node leads the job: the job's one incident, in etcd, judged on every
//     node's ranks; one page per job, its id the dedup key;
//   - etcd answers, another node leads: nothing here opens or pages (the leader does), and this
//     node carries out the leader's orders on its own proven processes;
//   - etcd does not answer: the node's own incident (the agent's), paging only.
// It reaches the node only through JobNode (what the node sees, may prove and preempt) and etcd
// only through the coord::Kv it is given: tests/agent/job_leader_test.cpp drives it over the
// in-memory store on a hand-moved clock.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "src/agent/leader_resume.h"
#include "src/common/clock.h"
#include "src/common/log.h"
#include "src/coord/etcd_history.h"
#include "src/coord/etcd_ledger.h"
#include "src/coord/job_coord.h"
#include "src/coord/orders.h"
#include "src/coord/session.h"
#include "src/detect/verdict.h"
#include "src/runbook/incident.h"
#include "src/runbook/resume.h"
#include "src/runbook/resume_owner.h"
#include "src/spec/spec.h"
#include "src/store/records.h"
#include "src/watch/job_state.h"

namespace stepwatch::agent {

// What the job's leader, and a follower carrying out its orders, ask of this node about the job:
// the agent's side (agent_runbook.cpp); a fake in the leader's tests.
class JobNode {
 public:
  virtual ~JobNode() = default;
  // The page for the job's incident (every node's ranks; acked on any node).
  virtual runbook::PageMessage job_page(const detect::Verdict& v) = 0;
  // This node's rules on opening an incident for v (ranks it ended itself, the per-user bound).
  virtual bool may_open(const detect::Verdict& v, Stamp now) = 0;
  // A line about the job (rate-limited per user at kInfo).
  virtual void log(LogLevel level, const std::string& line) = 0;
  // Whether this node's rules let it preempt the job's processes here (preempt_jobs, the spec's
  // auto_preempt): nullopt, they do; "" no, silently; else why not.
  virtual std::optional<std::string> may_carry_out() const = 0;
  // This node's own processes of the job, each proven to be the job's; `refused` says why a
  // living one was not.
  virtual runbook::PreemptTargets targets() = 0;
  // Collects the artifact of `targets` and preempts them, on a thread of its own.
  virtual std::future<runbook::ActReport> act(const detect::Verdict& v, int64_t incident_id,
                                              runbook::PreemptTargets targets) = 0;
  // A preempt carried out here as ordered: kept in the node's store and counted.
  virtual void carried_out(const store::Action& a) = 0;
  // The job's incident was recorded (created: opened now, else adopted); an action was counted.
  virtual void recorded(int64_t id, bool created) = 0;
  virtual void counted(std::string_view action_kind) = 0;
  // The running incarnation ended (`reason`, with the verdict `v` it was acted on): its history.
  virtual void ended(std::string_view reason, const detect::Verdict& v, Stamp now) = 0;
  // A read or write of etcd failed, or a record in it was bad (the node logs each once).
  virtual void problem(const std::string& line) = 0;
  // A page delivered from this node whose outcome etcd did not take: kept in the node's store
  // until it does (it outlives an agent restart: E14), and forgotten once recorded; the ones kept
  // for this job. None where the node keeps nothing.
  virtual void keep_delivery(const store::KeptDelivery& /*d*/) {}
  virtual void forget_delivery(int64_t /*incident_id*/) {}
  virtual std::vector<store::KeptDelivery> kept_deliveries() { return {}; }
};

struct JobLeaderDeps {
  std::string job;
  const spec::JobSpec& spec;
  coord::Kv& etcd;                  // the poll thread's
  coord::NodeSession& session;      // this node's lease
  int64_t publish_interval_ns;      // [coord] publish_interval
  runbook::HistoryLedger& history;  // every job's node-fault history in etcd (read, unfenced)
  std::string prefix;               // [coord] prefix: the history's keys
  runbook::PagerOptions pager;      // delivery seams and backoff
  JobNode& node;
  // The job directory's owner (WatchedJob::dir_uid): the only user whose Slurm job the leader
  // requeues or cancels, whatever the launcher keys in etcd name; nullopt: unknown, none.
  std::optional<uint32_t> owner_uid = std::nullopt;
  // How long this node's steady summary vouches for its ranks (coord::JobCoord): two publish
  // intervals and two poll intervals; 0: it never vouches, and publishes every step.
  int64_t steady_window_ns = 0;
  // The poll thread's read ahead under `etcd` (null: none): a following node's reads of a poll
  // (its leader's key, the view, the orders) go to etcd as one request.
  coord::ReadAhead* read_ahead = nullptr;
  // [coord] restart_wait: how long the next incarnation waits for a node before the leader pages
  // that the job cannot restart whole (LeaderResumeDeps::restart_wait_ns).
  int64_t restart_wait_ns = kDefaultRestartWaitNs;
};

class JobLeader {
 public:
  explicit JobLeader(JobLeaderDeps deps);
  ~JobLeader();  // waits for nothing: wait_pages first
  JobLeader(const JobLeader&) = delete;
  JobLeader& operator=(const JobLeader&) = delete;

  // Publishes this node's look at the job (`obs`, its poll_seq-th poll) and, where this node leads
  // the job, replaces `obs` by the merge of every node's (the verdict is then the job's). Returns
  // the job's nodes as this node knows them.
  watch::ClusterState amend(detect::Observation& obs, uint64_t poll_seq, Stamp now);
  // Whether etcd answers this node (its lease), and whether it leads the job.
  bool connected() const { return session_.connected(); }
  bool leads() const { return coord_.leads(); }
  const std::string& leader() const { return coord_.leader(); }

  // After each look: carries out the leader's orders here, and steps the job's incident while
  // this node leads it. `v` is the job's verdict on `seen` (the merged ranks where it leads), of
  // incarnation `incarnation`, the highest the node has seen.
  void step(const detect::Verdict& v, const detect::Observation& seen, int64_t incarnation,
            Stamp now);
  // The leader writes its view of the whole job (on a change of verdict, and every publish
  // interval); another node shows the leader's view in `state` in place of its own ranks'.
  void share_view(watch::JobState& state, Stamp now);
  // This node's own look at its own ranks while `state` shows the leader's view; else null.
  const detect::Observation* own_look() const { return showing_view_ ? &own_ : nullptr; }

  // Whether this node, following, pages the job's stall itself: its verdict on its own ranks has
  // been stalled for longer than the lease TTL (counted from a TTL after its lease replaced an
  // expired one: a rejoining leader waits that long too), no order of this run was carried out
  // here, and the job still has no open incident in etcd (a leader that never opens one, a
  // phantom or a wedged node, must not mute a stall; E2). Ranks that ended are not: the job's
  // own preempt or requeue ends them after its incident closed.
  bool unattended(const detect::Verdict& v, Stamp now);
  // Whether the job's ranks end under a preempt of the job's (an order carried out here, the
  // job's incident waiting for every node's report, or a restart storm held): not finished.
  bool preempting() const;
  // Pids this node ended as ordered, and the highest incarnation an order preempted here.
  const std::set<int>& ended_by_orders() const { return ended_by_orders_; }
  int64_t preempted_incarnation() const { return preempted_incarnation_; }
  // Where the job's node-fault history is written: the leader's fenced writer while it leads
  // and etcd answers; else null (nobody else records).
  runbook::HistoryLedger* history_writer();

  // The page a stall of `incarnation` already has (review E16): the job's incident once its page
  // reached someone (as this node led it, or read it in the leader's view), or this node's own
  // page while etcd did not answer (paged_here); kept while etcd is gone or lost its data, until
  // the job steps again or that incident closes. A node's own incident and a next incident of
  // the job join it rather than paging the same stall again.
  std::optional<runbook::IncidentHost::PagedElsewhere> paged_as(int64_t incarnation);
  // This node's own incident of the job paged `key` and hands over to the job's leader (etcd
  // answers again): the job's incident joins it unless the job's own page came first.
  void paged_here(const std::string& key, int64_t incarnation);
  // The job finished or vanished: its incident (if this node runs it) closes.
  void close(Stamp now, const std::string& why);
  // The job is forgotten here: its summary goes.
  void forget() { coord_.retire(); }
  uint64_t puts() const { return coord_.puts(); }
  // Waits for the pages of the job's incident under way (before the node's sinks go).
  void wait_pages(Stamp now);

 private:
  class Host;  // the job's incident's host while this node leads it (job_leader.cpp)
  // The leader, once it ordered a preempt: every node's report completes the runbook's act.
  struct JobAct {
    int64_t incident = 0;
    std::vector<std::string> nodes;  // the nodes with ranks when it ordered
    int64_t ordered_mono_ns = 0;
    std::promise<runbook::ActReport> done;
  };

  // Every node with ranks of the running incarnation (the roster; the last look's before one).
  std::vector<std::string> run_nodes() const;
  void keep_roster(const detect::Observation& merged, bool took_over);
  // The leader moves the checkpoint key forward to the newest checkpoint every rank committed,
  // once its look holds every rank of the world: what a restart it did not order resumes from
  // (coord/incarnation.h).
  void keep_checkpoint(Stamp now);
  void follow_orders(const detect::Verdict& v, Stamp now);
  // Why this node does not carry out `o` (nullopt: it does). An order is carried out only when
  // the job's leader of now signed it with its fence (unsigned_by_leader, no etcd read) and it
  // names the job's open incident in etcd, written after that incident opened (unproven; an
  // error: etcd failed). Reliability review E1.
  std::optional<std::string> unsigned_by_leader(const coord::Order& o) const;
  Result<std::optional<std::string>> unproven(const coord::Order& o);
  void gather_reports(Stamp now);
  void lead(const detect::Verdict& v, Stamp now);
  // The job's incident ledger in etcd and its page deliveries (made once: led or not, a node
  // records the deliveries it sent), taking up `kept`: the deliveries the node's store kept.
  void make_ledger(std::vector<store::KeptDelivery> kept = {});
  // At the first turn (or the first question of this node's own incident): make_ledger() if the
  // node's store kept deliveries of the job.
  void take_up_kept();
  void stop_leading();
  // The leader's act: the order every node carries out; the future is its nodes' reports.
  std::future<runbook::ActReport> order_preempt(int64_t incident);
  // A new leader: the order of `incident` a previous leader wrote in etcd for this run, signed
  // again by this one (order_preempt), as the adopted incident's act. nullopt: there is none, or
  // this node may not carry out a preempt of the job.
  std::optional<std::future<runbook::ActReport>> take_up_order(int64_t incident,
                                                               const detect::Verdict& acted_on);
  // What the preempt under way acts on, as the incarnation's end records it (not its ranks).
  void note_acted_on(const detect::Verdict& v);
  // After every node's report: the after-preempt sequence (runbook/resume.h) over LeaderResume:
  // the next incarnation in etcd, or the close.
  runbook::AfterPreempt after_preempt(const runbook::ActReport& report);
  // A new leader: a hold a previous leader marked in the incarnation key stands (until the ack).
  void take_up_storm_hold();
  void take_up_storm_hold(const coord::IncarnationRecord& held, const std::string& done);
  // A new leader: a start barrier a previous leader set and did not release is released here
  // once every node is ready (the incident closes then).
  void take_up_barrier();
  const std::string& node_name() const { return keys_.node; }

  JobLeaderDeps d_;
  coord::NodeSession& session_;
  const coord::LedgerKeys keys_;  // the job's incident keys; keys_.node is this node
  coord::JobCoord coord_;
  coord::JobOrders orders_;
  coord::EtcdHistory history_;  // the job's history, written while this node leads (fenced)

  // Of the step under way.
  Stamp now_;
  int64_t incarnation_ = 0;
  // The verdict at this node's last step(): its own ranks' (the job's, leading). Healthy: the
  // next summary may vouch for them.
  detect::State last_state_ = detect::State::kStarting;
  const detect::Observation* seen_ = nullptr;
  detect::Verdict
      acted_on_;  // the verdict the job's incident preempted on (state, cause, culprits)

  // The job's incident while this node leads it (declared in the order they are built: each
  // outlives what uses it).
  std::unique_ptr<coord::EtcdLedger> ledger_;
  std::unique_ptr<runbook::PageDeliveries> deliveries_;
  std::unique_ptr<Host> host_;
  std::unique_ptr<runbook::Incident> incident_;
  std::unique_ptr<runbook::ResumeOwner> owner_;
  std::unique_ptr<LeaderResume> resume_host_;
  std::unique_ptr<runbook::Resume> resume_;
  std::optional<JobAct> act_;
  std::map<std::string, std::vector<int>> roster_written_;  // what the leader last wrote
  // The page a stall of an incarnation has (paged_as), and why; a view's key not believed, said.
  struct Paged {
    std::string key;
    int64_t incarnation = 0;
    std::string why;
    int64_t incident = 0;  // the job's incident in etcd that carries it (0: none yet)
  };
  std::optional<Paged> paged_;
  // The job's incident whose page is under way, and its incarnation: once delivered it is what
  // was paged, even if this node stopped leading meanwhile (etcd stopped mid-delivery: E14).
  std::shared_ptr<const runbook::IncidentRecord> paging_;
  int64_t paging_incarnation_ = 0;
  std::string told_unproven_paged_;
  void learn_paged(const coord::JobView& view);
  void learn_delivered();  // paging_ delivered: it is what was paged
  // The step of the checkpoint key as this leader last left it (written, or found as new).
  std::optional<int64_t> checkpoint_written_;

  // Orders of the job's incidents: those this node reported on, and the one it carries out now.
  std::set<int64_t> orders_done_;
  std::set<int64_t> orders_that_ended_ranks_here_;  // of those, the ones that ended a rank here
  bool looked_for_kept_ = false;  // the node's store was asked for deliveries it kept
  // A record at the incident key that does not read: its mod revision, and when first seen.
  std::pair<int64_t, int64_t> unreadable_seen_{0, 0};
  std::set<std::tuple<int64_t, std::string, int64_t>> orders_refused_;  // said once each
  std::optional<coord::Order> order_running_;
  std::optional<std::future<runbook::ActReport>> order_act_;
  int64_t preempted_incarnation_ = -1;
  std::set<int> ended_by_orders_;                // pids this node ended as ordered: not a new stall
  std::optional<int64_t> firing_since_mono_ns_;  // a follower's own verdict fires since
  bool told_rejoining_ = false;

  // A follower shows its leader's view of the whole job; its own look at its own ranks (which
  // only it may prove and preempt) stays here meanwhile.
  detect::Observation own_;
  bool showing_view_ = false;
  std::string view_written_;  // the verdict summary of the view last written
  std::optional<int64_t> view_written_mono_ns_;
};

}  // namespace stepwatch::agent
