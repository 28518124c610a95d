// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch run --coord`: the per-node launcher of a multi-node job (docs/run.md, "Multi-node:
// --coord"). It launches and relaunches, nothing else: detection and the runbook are the node
// agents' (their job leader preempts and then moves the job's incarnation in etcd).
//   - It reads the job's incarnation N (coord/incarnation.h; absent: 0), launches the command as
//     a Child (its own session and process group, output passed through) with
//     STEPWATCH_INCARNATION=N and STEPWATCH_RESUME_CHECKPOINT when the record names a checkpoint,
//     and registers <prefix>/jobs/<job>/launchers/<node> under a lease renewed from its loop.
//   - Each poll it reads the incarnation key. Moved past N while the job runs here (preempted and
//     relaunched elsewhere): it ends the local process group and relaunches. The job exited
//     non-zero (often: this node's agent preempted its ranks): it waits up to resume_wait for
//     the incarnation to move, then cleans what is left of the old group and relaunches; or, if
//     it never moves, exits with the job's status. Exit 0: the job finished here.
// It never relaunches without having read a moved incarnation from etcd: while etcd does not
// answer, the job runs on as it is.
// Under Slurm (runbook::scheduler_from_env; docs/slurm.md, "Multi-node jobs") its launcher key
// names the batch job and SLURM_RESTART_COUNT, which the leader's requeue is fenced by, and it
// launches incarnation max(etcd's, SLURM_RESTART_COUNT), moving etcd's up by CAS when it is
// below (the first launcher of a rerun wins, the others read it). A moved incarnation that says
// Slurm requeued the job is never relaunched here: the local incarnation ends (Slurm's requeue
// kills the step anyway) and the launcher exits; Slurm starts the next one. With [slurm] requeue
// = "exit" the record carries the exit code, and the launcher exits with it (RequeueExit). A
// record that holds the next incarnation (a restart storm, until its incident is acked) is
// waited for without the resume_wait limit. Until the leader has
// decided, a job that exited non-zero still waits, as above: an early exit would end the batch
// job before the leader could requeue it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/common/clock.h"
#include "src/common/process_id.h"
#include "src/coord/etcd_client.h"
#include "src/coord/incarnation.h"
#include "src/coord/session.h"
#include "src/runbook/scheduler.h"
#include "src/supervise/child.h"

namespace stepwatch::supervise {

struct LauncherOptions {
  std::vector<std::string> argv;
  std::vector<std::string> endpoints;  // etcd client URLs, "http://HOST:PORT", tried in order
  std::string prefix = "/stepwatch/v1";
  std::string job;
  std::string node;                       // this node's name in etcd (launchers/<node>)
  std::string beacon_root;                // STEPWATCH_DIR for the job
  int64_t lease_ttl_ns = 10 * kNsPerSec;  // the launcher key's lease; whole seconds
  // How long an incarnation that exited non-zero waits for the job's incarnation to move.
  int64_t resume_wait_ns = 10 * 60 * kNsPerSec;
  int64_t grace_ns = 30 * kNsPerSec;  // SIGTERM to SIGKILL when ending the local group
  int64_t poll_ns = 200 * kNsPerMs;
  int64_t request_timeout_ns = 2 * kNsPerSec;  // per etcd request and endpoint
  std::optional<int> master_port;              // checked free before every launch
  std::string proc_root = "/proc";
  runbook::SchedulerContext scheduler;  // where the launcher runs (Slurm: its job, restarts)
};

class Launcher {
 public:
  explicit Launcher(LauncherOptions options);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Runs the job on this node to its end; returns the exit status of `stepwatch run --coord`.
  int run();

 private:
  // The incarnation key read this poll; nullopt when etcd did not answer (or the key is bad).
  std::optional<coord::JobIncarnation> read();
  // Cleans up before `record`'s incarnation (hygiene()) and, when it starts at the barrier, waits
  // there until the leader's start key names it (or a higher incarnation moves in: `record`
  // becomes that one). nullopt: launch `record`; else the launcher's exit status (a signal, the
  // barrier not released within resume_wait, a scheduler restarting the job).
  std::optional<int> ready_for(coord::IncarnationRecord& record);
  // A launcher that starts after its incarnation was preempted (an order names it) waits for the
  // next one, as one whose incarnation exited does. nullopt: launch `record` (maybe moved on).
  std::optional<int> past_preempted(coord::IncarnationRecord& record);
  // One turn of a wait: the poll period, then the lease, the launcher key and the incarnation key
  // (nullopt: etcd did not answer). `signal`: a SIGINT or SIGTERM came instead (nothing read).
  struct Poll {
    int signal = 0;
    Stamp now;
    std::optional<coord::JobIncarnation> seen;
  };
  Poll poll_once();
  // Whether the start key names `incarnation` (or a later one); nullopt: etcd did not answer.
  std::optional<bool> started(int64_t incarnation);
  Status launch(const coord::IncarnationRecord& record);
  // The checkpoint `record`'s incarnation starts from: the record's resume_from or the job's
  // checkpoint key (the newest every rank committed, as its leader recorded it), whichever is
  // newer, so a restart nobody recorded (an operator's requeue, a controller's) never goes back.
  // Says which it took when the key decided; etcd not answering or a bad key: the record's.
  std::pair<std::string, std::optional<int64_t>> resume_point(
      const coord::IncarnationRecord& record);
  // Under Slurm: the incarnation to launch first, max(etcd's, SLURM_RESTART_COUNT), with etcd's
  // moved up to it when below.
  coord::IncarnationRecord catch_up(coord::JobIncarnation seen);
  // A moved incarnation that a scheduler restarts (Slurm's requeue, or the exit status Slurm's
  // RequeueExit or Kubernetes restarts on): ends what runs here and returns the exit status.
  int leave_to_scheduler(const coord::IncarnationRecord& moved);
  // Ends the running incarnation: its group gets SIGTERM, the grace, SIGKILL.
  void end_local();
  // What is left of the ended incarnation's session, proven by pid and start time, cleaned up
  // before the next launch (runbook/hygiene.h), then the rendezvous port.
  void hygiene(int64_t next_incarnation);
  void remember_session();  // the current child's session members, for hygiene()
  void publish();           // the launcher key, after each launch and each new lease
  void deregister();
  void join_output();
  int shutdown(int sig);
  void say(const std::string& line) const;

  LauncherOptions opt_;
  coord::EtcdClient etcd_;
  coord::NodeSession session_;
  std::string incarnation_key_, launcher_key_, start_key_, checkpoint_key_;
  std::unique_ptr<Child> child_;
  ProcessId child_id_;
  std::optional<int> exit_;           // of the current incarnation, once it exited
  std::optional<int64_t> failed_at_;  // monotonic ns when it was seen to exit non-zero
  int64_t incarnation_ = 0;
  int64_t started_at_ns_ = 0;
  std::vector<ProcessId> old_session_;  // the ended incarnation's processes
  int64_t old_incarnation_ = 0;
  bool published_ = false;
  std::optional<int64_t> ready_;  // the incarnation this node waits at the start barrier for
  uint64_t published_generation_ = 0;
  std::optional<int64_t> told_behind_;  // the lower incarnation already reported
  int64_t told_hold_ = 0;               // the restart-storm hold already reported (its incident)
  // Whether a restart-storm hold still stands: its incident is the job's open one in etcd.
  // Checked at most every kHoldCheckNs while it stands.
  bool hold_stands(int64_t incident, Stamp now);
  // Why a moved incarnation is not obeyed (nullopt: it is): it must name an incident of the job
  // (open, or closed since) and a node of the job under its lease, or, with no incident, a
  // restart of this launcher's own Slurm job. Checked once per value; an error: etcd failed.
  Result<std::optional<std::string>> unproven(const coord::JobIncarnation& seen);
  // unproven(), said once per value; false also when etcd did not answer.
  bool obeyed(const coord::JobIncarnation& seen);
  std::optional<std::pair<int64_t, std::optional<std::string>>> proof_checked_;
  std::optional<int64_t> told_unproven_;  // the mod revision said not obeyed
  static constexpr int64_t kHoldCheckNs = 5 * kNsPerSec;
  std::optional<std::pair<int64_t, int64_t>> hold_checked_;  // incident, when (mono ns)
  int64_t told_stale_hold_ = 0;
  std::optional<int64_t> told_bad_start_;  // the start key's mod revision said unreadable
};

}  // namespace stepwatch::supervise
