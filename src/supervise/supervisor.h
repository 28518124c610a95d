// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch run`: launch a training job, watch its step contract, and execute the runbook when
// it breaks — page, wait for an ack, collect an artifact, preempt, resume from the last
// committed checkpoint — with restart hygiene before every launch. docs/run.md.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/detect/detector.h"
#include "src/runbook/artifact.h"
#include "src/runbook/incident.h"
#include "src/runbook/ledger.h"
#include "src/runbook/node_fault_history.h"
#include "src/runbook/resume.h"
#include "src/runbook/resume_owner.h"
#include "src/runbook/scheduler.h"
#include "src/spec/spec.h"
#include "src/store/store.h"
#include "src/supervise/child.h"
#include "src/supervise/log_feed.h"
#include "src/trace/trace_file.h"
#include "src/watch/job_watch.h"

namespace stepwatch::serve {
class AckServer;
}

namespace stepwatch::supervise {

// Exit statuses of `stepwatch run` besides the job's own (docs/run.md).
inline constexpr int kExitUsage = 2;         // bad arguments or spec: nothing was launched
inline constexpr int kExitLaunchFailed = 3;  // the command could not be started
// 75 and 76 (the watchdog stopped it; the restart budget is used up) are spec::kExitStopped and
// spec::kExitGaveUp: schedulers' requeue rules are written against them.

struct RunOptions {
  std::vector<std::string> argv;
  std::string spec_path;    // empty: the defaults
  std::string spec_text;    // the spec file's text, recorded in the trace
  std::string job;          // the job id (spec, --job or STEPWATCH_JOB)
  std::string beacon_root;  // STEPWATCH_DIR for the job
  std::string state_dir;    // the SQLite store, traces and incident artifacts
  std::string trace_path;   // empty: <state_dir>/traces/<job>-<unix time>.jsonl
  std::string ack_host = "127.0.0.1";
  int ack_port = 0;                // 0: an ephemeral port (written to <state_dir>/<job>.ack-port)
  std::string nvml_lib;            // empty: the system's libnvidia-ml
  std::optional<int> master_port;  // the rendezvous port checked before every launch
  std::string proc_root = "/proc";
  int64_t poll_ns = 0;  // 0: from the spec, else derived from the expected interval
  // Where it runs (Slurm, Kubernetes, none): the incarnation and who resumes the job.
  runbook::SchedulerContext scheduler;
  // Who starts the next incarnation; null: the spec's runbook.resume_owner (a test seam).
  std::function<std::unique_ptr<runbook::ResumeOwner>(const spec::JobSpec&)> resume_owner;
};

// The supervisor is the runbook's host for its one job (runbook/incident.h): it collects an
// artifact with the job's log, preempts its process tree, and resumes from the last committed
// checkpoint.
class Supervisor final : private runbook::IncidentHost, private runbook::ResumeHost {
 public:
  Supervisor(RunOptions options, spec::JobSpec spec);
  ~Supervisor() override;
  // Runs the job to its end; returns the exit status of `stepwatch run`.
  int run();

 private:
  // What the loop does after a turn of the runbook.
  enum class Next { kContinue, kRelaunched, kExit };

  Status setup();
  // One turn of the runbook over this verdict.
  Next runbook_turn(const detect::Verdict& v, const detect::Observation& obs,
                    const watch::PollReport& report, Stamp now);
  void wait_for_port();
  int ended(int status,
            const detect::Verdict& v);  // the job ended by itself, nothing firing: its status
  void join_output();                   // the child's, and says what of its output was dropped
  Status launch(const std::optional<std::pair<std::string, int64_t>>& checkpoint,
                const std::string& checkpoint_path);
  void hygiene();
  int64_t poll_interval() const;
  int shutdown(int sig);
  int stand_down();  // a later incarnation owns the job: end what is left here, and exit
  void record_processes(const watch::PollReport& report);
  void on_verdict(const watch::Look& look);

  // The runbook's host (runbook_host.cpp).
  runbook::PageMessage page(const detect::Verdict& v) override;
  void log(LogLevel level, const std::string& line) override;
  runbook::PreemptTargets targets() override;
  std::vector<runbook::JobProcess> job_processes() const;
  std::future<runbook::ActReport> act(const detect::Verdict& v, int64_t incident_id,
                                      runbook::PreemptTargets targets) override;
  runbook::AfterPreempt after_preempt(const runbook::ActReport& report) override;
  std::string collect(const detect::Verdict& v, int64_t incident_id, bool* ok);
  runbook::PreemptReport preempt(const runbook::PreemptTargets& targets);
  // After a preempt: the after-preempt sequence (runbook/resume.h) over the last committed
  // checkpoint; what it ends in is next_ and exit_code_.
  runbook::AfterPreempt resume(const detect::Observation& obs, std::optional<int> own_exit);
  // The sequence's host (resume_host.cpp): the store's history, the storm page, and the plan of
  // the resume owner applied (relaunch the child, or exit for the scheduler).
  runbook::HistoryLedger& history() override;
  void note(bool ok, const std::string& line) override;
  std::string ack_hint() const override;
  Result<runbook::BatchJob> batch_job() override;
  void hold(const runbook::NextIncarnation& next, const std::string& why, Stamp now) override;
  Result<std::optional<bool>> acked_since(int64_t incident, int64_t since_wall_ns) override;
  runbook::AfterPreempt apply(const runbook::ResumePlan& plan, const runbook::NextIncarnation& next,
                              const std::string& done, Stamp now) override;
  void close(int64_t incident, Stamp now, const std::string& resolution) override;
  // Relaunches the command as `next` (resume owner "stepwatch").
  runbook::AfterPreempt relaunch(const runbook::NextIncarnation& next);
  // Has the scheduler restarted the job since this incarnation started (Slurm: requeued)? Then
  // this run is a leftover of an earlier incarnation and stands down (no incident, no page, no
  // requeue): says so, and sets stood_down_.
  bool superseded();
  // The node-fault history (history_host.cpp).
  std::string node_name() const;
  void history_started(int64_t started_ns);
  void history_ended(std::string_view reason, const detect::Verdict* v);
  void add_node_fault(runbook::PageMessage& m);
  bool may_open(const detect::Verdict& v, Stamp now) override;
  // The checkpoint the next incarnation starts from after a preempt: the newest committed in the
  // catalog (checkpoint.source = "marker"), else the newest any rank reported; its directory in
  // *path when the catalog knows it.
  std::optional<std::pair<std::string, int64_t>> last_checkpoint(const detect::Observation& obs,
                                                                 std::string* path);
  // The newest committed generation of the spec's catalog (nullopt: none committed), its
  // directory in *path. Says the catalog's problems, and a newer generation passed over (a
  // marker without data) by name. An error: the catalog cannot be read.
  Result<std::optional<std::pair<std::string, int64_t>>> newest_committed(std::string* path);
  // The checkpoint this process's first launch starts from, whoever restarted the job (a
  // scheduler's requeue, an operator, a node failure, an outer supervisor): the newest committed
  // one in the catalog. What the last preempt saved is a hint only: it never makes the job go
  // back, and is taken alone only where there is no catalog (checkpoint.source = "beacon") or it
  // cannot be read. Says which it took and why.
  std::optional<std::pair<std::string, int64_t>> launch_checkpoint(std::string* path);
  void record_action(std::string_view kind, bool ok, const std::string& detail);
  void say(const std::string& line) const;

  RunOptions opt_;
  spec::JobSpec spec_;
  std::optional<store::Store> store_;
  store::SupervisorState state_;
  std::shared_ptr<probe::GpuProbe> gpu_;
  std::unique_ptr<LogFeed> log_;
  std::unique_ptr<Child> child_;
  std::unique_ptr<watch::JobWatch> watch_;
  std::optional<trace::TraceWriter> trace_;
  std::unique_ptr<serve::AckServer> ack_;
  std::optional<runbook::StoreLedger> ledger_;
  std::optional<runbook::PageDeliveries> deliveries_;
  std::optional<runbook::Incident> runbook_;
  std::optional<runbook::StoreHistory> history_;
  std::unique_ptr<runbook::ResumeOwner> owner_;  // runbook.resume_owner
  std::optional<runbook::Resume> resume_;
  // This turn's observation and report, for the runbook's host calls; null between turns.
  const detect::Observation* turn_obs_ = nullptr;
  const watch::PollReport* turn_report_ = nullptr;
  Next next_ = Next::kContinue;
  int exit_code_ = 0;                            // with Next::kExit
  std::set<std::pair<int, uint64_t>> recorded_;  // (pid, start) already in the store
  std::string last_verdict_json_;
  int launches_ = 0;  // by this stepwatch run
  std::optional<detect::Learned> saved_learned_;
  std::optional<int> own_exit_;         // its status if it exited before the runbook acted
  std::optional<int> exit_status_;      // of the current incarnation, once it exited
  std::vector<std::string> leftovers_;  // what hygiene found before this incarnation's launch
  detect::Verdict acted_on_;            // the verdict of the preempt under way (the history's)
  bool stood_down_ = false;             // a later incarnation owns the job: exit after this turn
};

}  // namespace stepwatch::supervise
