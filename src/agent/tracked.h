// The agent's per-job record (private to src/agent/agent*.cpp): its watch (observer, detector),
// published state, and where its incident and runbook stand.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/agent/agent.h"
#include "src/agent/leader_resume.h"
#include "src/coord/etcd_client.h"
#include "src/coord/etcd_history.h"
#include "src/coord/etcd_ledger.h"
#include "src/coord/job_coord.h"
#include "src/coord/orders.h"
#include "src/coord/session.h"
#include "src/detect/detector.h"
#include "src/runbook/incident.h"
#include "src/runbook/resume.h"
#include "src/runbook/resume_owner.h"
#include "src/spec/spec.h"
#include "src/watch/job_state.h"
#include "src/watch/job_watch.h"

namespace stepwatch::agent {

// The runbook's host for one job (agent_runbook.cpp): pages name this node, only processes
// proven to be the job's are collected from and preempted, on a thread of their own, and a
// preempt is followed by nothing but the incident's close (the agent never restarts a job).
class Agent::JobHost final : public runbook::IncidentHost {
 public:
  // kNode: this node's incident (single node, or a multi-node job while etcd is unreachable);
  // kJob: a multi-node job's one incident in etcd, which this node runs while it leads the job.
  enum class Scope { kNode, kJob };
  JobHost(Agent& agent, Tracked& job, Scope scope = Scope::kNode)
      : agent_(agent), t_(job), scope_(scope) {}
  runbook::PageMessage page(const detect::Verdict& v) override;
  void log(LogLevel level, const std::string& line) override;
  bool may_open(const detect::Verdict& v, Stamp now) override;
  std::optional<std::string> refuse_act() override;
  runbook::PreemptTargets targets() override;
  std::future<runbook::ActReport> act(const detect::Verdict& v, int64_t incident_id,
                                      runbook::PreemptTargets targets) override;
  runbook::AfterPreempt after_preempt(const runbook::ActReport& report) override;
  void recorded(int64_t id, bool created) override;
  void ledger_failed(const Error& e) override;
  void counted(std::string_view action_kind) override;
  // Whether this node's own rules let it preempt the job's processes (preempt_jobs, the spec's
  // auto_preempt): nullopt, they do; "" no, silently; else why not.
  std::optional<std::string> may_carry_out() const;

 private:
  Agent& agent_;
  Tracked& t_;
  Scope scope_;
};

struct Agent::Coordination {
  // kv: null, an EtcdClient per thread over c.endpoints; else every call goes to it (tests).
  Coordination(const CoordConfig& c, std::shared_ptr<coord::Kv> kv);
  CoordConfig config;
  std::shared_ptr<coord::Kv> poll_kv, api_kv;  // what etcd and api_etcd are
  coord::Kv& etcd;                             // the poll thread's
  coord::NodeSession session;
  std::mutex api_mu;
  coord::Kv& api_etcd;        // the API threads' (guarded by api_mu)
  uint64_t puts_retired = 0;  // summaries published for jobs no longer tracked
  // Every job's node-fault history and every host's implications, read on the poll thread
  // (unfenced: it writes nothing; a job's leader writes through the job's own, fenced).
  coord::EtcdHistory history;
  coord::LedgerKeys keys(const std::string& job) const;
};

struct Agent::Tracked {
  std::string job;
  std::string root;
  std::optional<uint32_t> dir_uid;  // the job directory's owner when first seen
  spec::JobSpec spec = spec::default_spec();
  std::unique_ptr<watch::JobWatch> watch;  // its observer and detector
  watch::JobState state;
  int64_t incarnation = 0;
  int64_t run_started_wall_ns = 0;  // the earliest beacon's creation: when this run began
  Stamp now;                        // of the poll under way
  std::unique_ptr<JobHost> host;
  std::unique_ptr<runbook::Incident> runbook;  // its incident, page and preempt
  std::optional<int64_t> retired_at_wall_ns;
  bool vanished = false;  // retired because its directory is gone
  bool hidden = false;    // retired longer than retire_after, but its (finished) directory remains
  size_t ranks = 0;       // at the last observation
  size_t due = 0;         // ranks that wanted process details at the last observation
  bool observed = false;  // observed in this poll: `state` holds a new observation to publish
  std::shared_ptr<const watch::JobState> published;  // what the API sees of this job

  // The node-fault history (agent_history.cpp): the incarnation whose start is recorded and
  // whose end is not yet, the highest one handled, and what ends it: the last verdict (state,
  // cause, culprits only), the verdict the runbook preempted on, the newest committed checkpoint.
  std::optional<int64_t> history_open;
  std::set<std::string> history_hosts;  // the hosts recorded for history_open
  int64_t history_seen = -1;
  detect::Verdict last_verdict;
  detect::Verdict acted_on;
  std::optional<int64_t> checkpoint_step;

  // Multi-node ([coord]): its coordination, and the job's incident while this node leads it
  // (declared in the order they are built: each outlives what uses it).
  std::unique_ptr<coord::JobCoord> coord;
  std::unique_ptr<coord::EtcdLedger> job_ledger;
  std::unique_ptr<runbook::PageDeliveries> job_deliveries;
  std::unique_ptr<JobHost> job_host;
  std::unique_ptr<runbook::Incident> job_runbook;
  std::unique_ptr<coord::JobOrders> orders;
  // The job's node-fault history in etcd, written while this node leads it (fenced).
  std::unique_ptr<coord::EtcdHistory> history;
  // What follows the job's preempt (the after-preempt sequence, with this node as its host
  // while it leads the job): the resume owner, the host and the sequence, made with job_runbook.
  std::unique_ptr<runbook::ResumeOwner> job_owner;
  std::unique_ptr<LeaderResume> job_resume_host;
  std::unique_ptr<runbook::Resume> job_resume;
  // Orders of the job's incidents: those this node reported on, and the one it carries out now.
  std::set<int64_t> orders_done;
  std::optional<coord::Order> order_running;
  std::optional<std::future<runbook::ActReport>> order_act;
  // The leader, once it ordered a preempt: every node's report completes the runbook's act.
  struct JobAct {
    int64_t incident = 0;
    std::vector<std::string> nodes;  // the nodes with ranks when it ordered
    int64_t ordered_mono_ns = 0;
    std::promise<runbook::ActReport> done;
  };
  std::optional<JobAct> job_act;
  int64_t preempted_incarnation = -1;  // the highest incarnation an order preempted here
  std::set<int> ended_by_orders;       // pids this node ended as ordered: not a new stall
  std::map<std::string, std::vector<int>> roster_written;  // what the leader last wrote
  // A follower shows its leader's view of the whole job in `state`; its own look at its own
  // ranks (which only it may prove and preempt) stays here meanwhile.
  detect::Observation own;
  bool showing_view = false;
  const detect::Observation& own_look() const { return showing_view ? own : state.observation; }
  std::string view_written;  // the verdict summary of the view last written
  std::optional<int64_t> view_written_mono_ns;
};

}  // namespace stepwatch::agent
