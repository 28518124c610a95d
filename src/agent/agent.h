// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The node agent: one daemon per node watching every job whose beacons appear under its beacon
// roots. Each poll discovers jobs, observes each one (beacons + /proc + GPU), runs its detector,
// records verdict changes in the store, and pages once when a job turns stalled or dead.
// It observes and pages; it preempts only jobs listed in preempt_jobs whose spec enables
// auto_preempt, and only processes proven to be the job's (src/agent/proof.h). It never
// restarts a job (that is `stepwatch run`'s, or the scheduler's).
//
// A facade over workers: a WatchedJob per job (watched_job.h) and, with [coord], each job's
// JobLeader (job_leader.h), which decides everything multi-node. Its files: agent.cpp
// (discovery, per-user bounds, the poll loop), agent_api.cpp (serve::JobSource),
// agent_runbook.cpp (this node's side of each job: NodeJobHost), agent_history.cpp (the
// node-fault history).
//
// Threads: poll_once()/run() on one thread; jobs(), job(), health(), ack() and incidents() from
// any thread (the HTTP API's).
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "src/agent/config.h"
#include "src/agent/per_user.h"
#include "src/common/result.h"
#include "src/detect/detector.h"
#include "src/runbook/incident.h"
#include "src/runbook/ledger.h"
#include "src/runbook/node_fault_history.h"
#include "src/runbook/pager.h"
#include "src/serve/job_source.h"
#include "src/serve/node_fault_view.h"
#include "src/spec/spec.h"
#include "src/store/store.h"
#include "src/watch/job_state.h"
#include "src/watch/job_watch.h"

namespace stepwatch::coord {
class Kv;
}  // namespace stepwatch::coord

namespace stepwatch::agent {

class JobLeader;
class NodeJobHost;
struct NodeCoord;
struct WatchedJob;

// What the agent is given besides its configuration (test seams and shared probes).
struct AgentDeps {
  std::shared_ptr<probe::GpuProbe> gpu;  // null: no GPU evidence
  runbook::PagerOptions pager;           // delivery seams and backoff
  std::string host;                      // this node's name; empty: short_hostname()
  // [coord]'s store: null, etcd at its endpoints (an EtcdClient per thread); set, every call
  // goes to it (tests: one tests/fakes/memory_kv.h shared by several agents, on a fake clock).
  std::shared_ptr<coord::Kv> kv;
};

class Agent : public serve::JobSource {
 public:
  // Opens the store under config.state_dir. Errors name the directory.
  static Result<std::unique_ptr<Agent>> open(AgentConfig config, AgentDeps deps = {});
  ~Agent() override;  // waits for pages in flight
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // One look at every job, as of `now` (injected: tests move time by hand). Fails only when no
  // beacon root could be listed at all; per-job problems are counted in health().
  Status poll_once(Stamp now);
  // Polls every poll_interval until `stop` becomes true. Never throws.
  void run(const std::atomic<bool>& stop);

  // Snapshots for the API, sorted by job id. Jobs retired longer than retire_after are gone.
  std::vector<watch::JobState> jobs() const override;
  std::optional<watch::JobState> job(const std::string& id) const override;
  watch::AgentHealth health() const override;
  int64_t last_poll_wall_ns() const override;

  // Acks the job's open incident. nullopt: no open incident.
  Result<std::optional<store::Incident>> ack(const std::string& job, const std::string& by,
                                             const std::string& note) override;
  // Newest first; job "" for every job.
  Result<std::vector<store::Incident>> incidents(const std::string& job, int limit) override;

  // The node-fault rules over the jobs' incarnation history (agent_history.cpp), as of the last
  // poll that computed them: after a change of history, else once a minute.
  std::shared_ptr<const serve::NodeFaultSnapshot> node_faults() const override;

  const AgentConfig& config() const { return config_; }
  std::string proc_root() const override { return config_.proc_root; }

 private:
  class JobHost;  // this node's side of one job (agent_runbook.cpp)

  Agent(AgentConfig config, AgentDeps deps, store::Store poll_store, store::Store api_store);
  std::unique_ptr<WatchedJob> start_tracking(const std::string& root, const std::string& job,
                                             std::optional<uint32_t> dir_uid, Stamp now);
  // The job's node host, and with [coord] its leader (agent_runbook.cpp).
  std::unique_ptr<NodeJobHost> make_host(WatchedJob& t);
  std::unique_ptr<JobLeader> make_leader(WatchedJob& t);
  // The spec for a job directory owned by dir_uid: <specs_dir>/<job>.toml when it names that
  // user (key `users`; by default the spec file's owner), else the defaults, said once.
  spec::JobSpec spec_for(const std::string& job, std::optional<uint32_t> dir_uid);
  // Whether a line about this job may be logged now (log_lines_per_user_per_minute).
  bool may_log(const WatchedJob& t, Stamp now);
  // Prunes the store at the first poll and every hour after (keep_history, max_store_size).
  void maybe_prune(Stamp now);
  void observe(WatchedJob& t, Stamp now, const Result<probe::GpuSnapshot>* gpus, uint64_t* beacons,
               uint64_t* errors);
  // Records and logs a change of the job's verdict state or cause.
  void transition(WatchedJob& t, detect::State from, const detect::Verdict& v, Stamp now);
  // Steps the runbook that owns the job's incident now: the node's own (single node, or
  // coordination lost: paging only), or, through its leader, the job's in etcd.
  void step_runbook(WatchedJob& t, const detect::Verdict& v, Stamp now);
  // Whether every rank here with a pid (in `own`: this node's look; by default the last one)
  // was ended by this node's preempt or the job's order.
  bool preempted_by_us(const WatchedJob& t, const detect::Observation* own = nullptr) const;
  // The verdict as the job's own preempt leaves it: held while the preempt is under way, and
  // `preempted` once it ended every rank here (watch::LookInputs::settle; `obs`: this poll's).
  void settle_preempt(const WatchedJob& t, const detect::Observation& obs,
                      detect::Verdict& v) const;
  // Whether the job's ranks end under a preempt of ours: they have not finished.
  bool preempting(const WatchedJob& t) const;
  // At the first poll: the open incidents of jobs no longer there (their beacons vanished while
  // the agent was down) are closed as no longer observed.
  void close_unobserved(const std::set<std::string>& seen, Stamp now);
  void note_store_error(const Error& e);
  runbook::DeliverySink delivery_sink();
  void retire(WatchedJob& t, Stamp now, const char* why);
  void note_problem(const std::string& message);
  // ---- the node-fault history (agent_history.cpp) ----
  // Where it is kept: this node's store; for a multi-node job, etcd, written by the job's
  // leader (history_writer is null on the other nodes: they record nothing).
  runbook::HistoryLedger& history_reader();
  runbook::HistoryLedger* history_writer(WatchedJob& t);
  // A history read or write failed: the store's error, or a coordination problem.
  void note_history_error(const Error& e);
  // After each observation of the job: records the start of an incarnation it has not seen (its
  // end is recorded when the next one appears), and keeps what its verdict says.
  void note_history(WatchedJob& t, const detect::Observation& obs, const detect::Verdict& v,
                    Stamp now);
  // Records the end of the job's open incarnation, once: `reason`, and the cause and culprits
  // of `v` (null: none).
  void end_history(WatchedJob& t, std::string_view reason, const detect::Verdict* v, Stamp now);
  // The same, as the job's last verdict says: "finished", "failed" (stalled or dead, with its
  // cause and culprits), else `otherwise`.
  void end_history_as_seen(WatchedJob& t, std::string_view otherwise, Stamp now);
  // Recomputes node_faults() when the history changed, or a minute has passed (windows slide).
  void refresh_node_faults(Stamp now);

  // After each poll of run(): counts the polls in a row that failed as a whole.
  void note_poll_outcome(bool ok);

  // This node's name: [coord] node_name, else the host's.
  const std::string& node_name() const;
  void coord_health(watch::AgentHealth& h, Stamp now) const;

  AgentConfig config_;
  AgentDeps deps_;
  store::Store store_;  // the poll thread's connection
  runbook::StoreLedger ledger_{store_};
  runbook::StoreHistory store_history_{store_};
  runbook::PageDeliveries deliveries_;  // every job's pages under way
  bool first_poll_ = true;
  uint64_t store_errors_this_poll_ = 0;  // poll thread only
  std::string last_store_error_;         // poll thread only

  std::unique_ptr<NodeCoord> coord_;  // null without [coord]; outlives the jobs' leaders
  uint64_t polls_ = 0;                // poll thread only
  std::map<std::string, std::unique_ptr<WatchedJob>> tracked_;  // poll thread only
  std::set<std::string> logged_problems_;                       // poll thread only
  PerUserRate incident_rate_;                                   // poll thread only
  PerJobRate job_incident_rate_;                                // poll thread only
  PerUserRate log_rate_;                                        // poll thread only
  std::optional<int64_t> next_prune_mono_ns_;                   // poll thread only
  bool node_faults_dirty_ = true;                               // poll thread only
  std::optional<int64_t> next_node_faults_mono_ns_;             // poll thread only
  // Across all jobs at the last poll, to share the detail budget (poll thread only).
  size_t ranks_last_poll_ = 0, due_last_poll_ = 0;

  mutable std::mutex mu_;  // guards what follows
  // Shared, never modified once published: a poll swaps in new states without copying the
  // ranks of every job, and readers copy only what they ask for.
  std::map<std::string, std::shared_ptr<const watch::JobState>> published_;
  std::map<std::string, uint64_t> acks_total_;  // by job, since the agent started
  watch::AgentHealth health_;
  int64_t last_poll_wall_ns_ = 0;
  int64_t poll_started_mono_ns_ = 0;  // guarded by mu_: when the last poll began
  std::shared_ptr<const serve::NodeFaultSnapshot> node_faults_;

  std::mutex api_store_mu_;
  store::Store api_store_;  // the API threads' connection
};

}  // namespace stepwatch::agent
