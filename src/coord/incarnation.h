// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The job's incarnation in etcd and the launchers that relaunch on it (docs/multinode.md, Keys):
//   <prefix>/jobs/<job>/incarnation {"incarnation":N,"resume_from","resume_step","incident","by",
//                                          "at_ns","scheduler","scheduler_job","exit_code",
//                                          "hold_incident","hold","hold_resume_from",
//                                          "hold_resume_step","barrier","nodes"}
//       written by the job's leader, by CAS on its mod revision; absent means 0. "scheduler":
//       "slurm" when the leader had Slurm requeue the job: the launchers leave the relaunch to
//       Slurm; with "exit_code" ([slurm] requeue = "exit") they exit with it, and Slurm's
//       RequeueExit requeues the batch job. "hold_incident" (N unchanged): a restart storm holds
//       the next incarnation until that incident is acked; the launchers wait for it without
//       their resume_wait limit. "barrier": the launchers start N together, once the start key
//       says N (below). Under Slurm a launcher whose SLURM_RESTART_COUNT is above N moves it up
//       (CAS);
//   <prefix>/jobs/<job>/launchers/<node>  {"node","pid","incarnation","started_at_ns",
//                                          "scheduler","scheduler_job","scheduler_restarts",
//                                          "barrier","ready"}
//       each node's `stepwatch run --coord`, under its own lease: while one exists, relaunching
//       the job is someone's job. Under Slurm it names the batch job and its restart count.
//       "barrier": it starts an incarnation at the start barrier; "ready": N, the incarnation it
//       waits at the barrier for, its cleanup done (the previous one's processes gone, the
//       rendezvous port free);
//   <prefix>/jobs/<job>/start               {"incarnation":N,"by","at_ns","nodes"}
//       the start barrier: written by the leader (fenced) once every node of the run is ready
//       for N; the launchers waiting for N launch it.
//   <prefix>/jobs/<job>/checkpoint          {"id","step","incarnation","by","at_ns"}
//       the newest checkpoint every rank of the job committed, as its leader last saw it
//       (fenced; it only moves forward). Every launch resumes from it or from the incarnation's
//       resume_from, whichever is newer: a restart the leader did not order (an operator's
//       requeue, a node failure, a controller's) resumes from the newest too (issue 30).
// Each is read leniently: only "incarnation" is required (a newer writer may add fields).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"
#include "src/coord/kv.h"

namespace stepwatch::coord {

struct IncarnationRecord {
  int64_t incarnation = 0;
  std::string resume_from;             // the checkpoint the next incarnation resumes from; "" none
  std::optional<int64_t> resume_step;  // its step, when known
  int64_t incident = 0;                // the incident that moved it; 0 none
  std::string by;                      // the leader node that wrote it
  int64_t at_ns = 0;                   // wall clock of the write
  std::string scheduler;      // "slurm": the scheduler restarts the job, not the launchers; "" none
  std::string scheduler_job;  // the scheduler's job id it requeued
  // Slurm with [slurm] requeue = "exit": the launchers exit with this code (RequeueExit).
  std::optional<int> exit_code;
  // A restart storm holds the next incarnation until this incident is acked (0: no hold), the
  // one line that says why, and the checkpoint the next incarnation resumes from once released
  // (so that a next leader, which may no longer see every rank, resumes from the same one).
  int64_t hold_incident = 0;
  std::string hold;
  std::string hold_resume_from;
  std::optional<int64_t> hold_resume_step;
  // The launchers start it at the start barrier (every launcher of the run said it can): each
  // waits, its cleanup done, until the start key names this incarnation. false (and every
  // record written before the barrier): each launches as soon as its own cleanup is done.
  bool barrier = false;
  // With barrier: every node of the run as the move found it, each of which must be ready (the
  // leader's own view of the run shrinks as the nodes clean their old ranks' beacons up).
  std::vector<std::string> nodes;
};

// The newest checkpoint every rank committed (the checkpoint key).
struct CheckpointRecord {
  std::string id;
  int64_t step = 0;
  int64_t incarnation = 0;  // the incarnation whose ranks reported it
  std::string by;           // the leader node that wrote it
  int64_t at_ns = 0;        // wall clock of the write
};

struct LauncherRecord {
  std::string node;
  int pid = 0;                // the launcher's own pid on that node
  int64_t incarnation = 0;    // the incarnation it launched last
  int64_t started_at_ns = 0;  // wall clock of that launch
  // Under a scheduler (runbook::scheduler_from_env): "slurm", its job id and SLURM_RESTART_COUNT
  // as this incarnation started; empty and nullopt elsewhere.
  std::string scheduler;
  std::string scheduler_job;
  std::optional<int64_t> scheduler_restarts;
  bool barrier = false;  // it starts an incarnation with "barrier" at the start key
  // The incarnation it waits at the start barrier for, its cleanup done; nullopt while it is not
  // waiting there.
  std::optional<int64_t> ready;
  // Not in the record: whether its key is under a lease (a live launcher's is; one put without
  // a lease is nobody's). Set where the key is read (JobOrders::launchers).
  bool leased = false;
};

// The start barrier (the start key): the incarnation the leader started, and the nodes that were
// ready for it.
struct StartRecord {
  int64_t incarnation = 0;
  std::string by;
  int64_t at_ns = 0;
  std::vector<std::string> nodes;
};

// The Slurm batch job that the launchers of `incarnation` run in, and the restart count they
// started with: what the leader's requeue is fenced by. Every launcher of that incarnation must
// agree; errors say which launchers lack a Slurm job id or disagree.
struct SchedulerRun {
  std::string job;
  int64_t restarts = 0;
};
Result<SchedulerRun> slurm_run_of(const std::vector<LauncherRecord>& launchers,
                                  int64_t incarnation);

std::string incarnation_key(std::string_view prefix, std::string_view job);
std::string launchers_prefix(std::string_view prefix, std::string_view job);  // ends with '/'
std::string launcher_key(std::string_view prefix, std::string_view job, std::string_view node);
std::string start_key(std::string_view prefix, std::string_view job);
std::string checkpoint_key(std::string_view prefix, std::string_view job);

std::string incarnation_to_json(const IncarnationRecord& r);
// Errors name `source` (the key) and the field at fault.
Result<IncarnationRecord> incarnation_from_json(std::string_view text, std::string_view source);
std::string launcher_to_json(const LauncherRecord& r);
Result<LauncherRecord> launcher_from_json(std::string_view text, std::string_view source);
std::string start_to_json(const StartRecord& r);
Result<StartRecord> start_from_json(std::string_view text, std::string_view source);
std::string checkpoint_to_json(const CheckpointRecord& r);
// "id" (a valid checkpoint id) and "step" (>= 0) are required.
Result<CheckpointRecord> checkpoint_from_json(std::string_view text, std::string_view source);

// The incarnation key as read: `mod_revision` 0 when the key is absent (incarnation 0), else
// what a CAS from this record compares.
struct JobIncarnation {
  IncarnationRecord record;
  int64_t mod_revision = 0;
};
// One range of the key. A value that does not parse is an error naming the key, never 0.
Result<JobIncarnation> read_incarnation(Kv& etcd, const std::string& key);
// Writes `to` only while the key is still as `from` read it (CAS on its mod revision, or on its
// absence) and every compare in `also` holds (the leader's fence). false: someone moved it first.
Result<bool> move_incarnation(Kv& etcd, const std::string& key, const JobIncarnation& from,
                              const IncarnationRecord& to, std::vector<Compare> also = {});

}  // namespace stepwatch::coord
