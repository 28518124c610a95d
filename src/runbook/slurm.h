// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Slurm as the owner of a job's restarts, through its own commands (docs/slurm.md):
//   show     `scontrol -o -- show job ID`: state, Restarts, Requeue, nodes, owner
//   requeue  `scontrol -- requeue ID`, fenced: only while Restarts is still what this incarnation
//            started with. A moved count means someone (Slurm after a node failure, an operator,
//            another stepwatch) already started the next incarnation: requeueing again would kill
//            it. Slurm has no compare-and-swap, so a requeue between our read and our write can
//            still slip through; the window is one scontrol round trip.
//   cancel   `scancel -- ID`: a job that must stop (CANCELLED is never requeued)
//   drain    `scontrol -- update NodeName=N State=DRAIN Reason=...`: opt-in, needs operator rights
// Every command runs through run_command (no shell) with a timeout; its output is in the error.
// The id and the node name come from the environment or etcd, and the agent runs these as root:
// each is checked against its grammar (contract/names.h) before anything runs, "--" ends the
// options, and requeue and cancel act only on a job whose UserId is the job directory's owner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"
#include "src/spec/spec.h"

namespace stepwatch::runbook {

// What `scontrol show job -o` says of one job, the fields stepwatch reads.
struct SlurmJob {
  std::string id;
  std::string state;     // JobState: PENDING, RUNNING, REQUEUED, COMPLETED, ...
  int64_t restarts = 0;  // Restarts
  bool requeue = false;  // Requeue=1: Slurm may requeue the job (--requeue or JobRequeue=1)
  int64_t user_id = -1;  // UserId=name(uid): the uid
  std::string batch_host;
  std::string node_list;
};

// Parses the one-line (-o) record; errors name the job and the field at fault.
Result<SlurmJob> parse_slurm_job(std::string_view text, std::string_view job_id);

struct RequeueOutcome {
  bool requeued = false;  // false: the fence refused (the count had moved)
  int64_t restarts_seen = 0;
  std::string detail;  // one line for the incident's actions
};

class SlurmControl {
 public:
  explicit SlurmControl(spec::SlurmSettings settings) : s_(std::move(settings)) {}

  Result<SlurmJob> show(const std::string& job) const;
  // Requeues only while the job's Restarts equals `expected_restarts`. `owner_uid`: the job
  // directory's owner; requeue and cancel refuse a job whose UserId is another uid, or when it
  // is unknown (nullopt), and run nothing then.
  Result<RequeueOutcome> requeue(const std::string& job, int64_t expected_restarts,
                                 std::optional<uint32_t> owner_uid) const;
  Status cancel(const std::string& job, std::optional<uint32_t> owner_uid) const;
  Status drain(const std::string& node, const std::string& reason) const;

  // `what the job owner may do here`, for stepwatch doctor: one line per check, "ok: ..." or
  // "problem: ...". `uid` is the caller's.
  std::vector<std::string> permission_checks(const std::string& job, int64_t uid, bool drain) const;

 private:
  Result<std::string> run(const std::string& program, const std::vector<std::string>& args) const;
  // The job as show() reads it, once its UserId is `owner_uid`: an id read from etcd or the
  // environment could name any user's job, and root may act on every one.
  Result<SlurmJob> owned(const std::string& job, std::optional<uint32_t> owner_uid) const;

  spec::SlurmSettings s_;
};

}  // namespace stepwatch::runbook
