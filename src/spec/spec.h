// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The job spec: everything stepwatch needs to know about one job, loaded from TOML and
// validated in one place. Every field has a default, so an empty file is a valid spec.
// Errors name the file, line and key: "job.toml:12: grace_intervals: must be >= 1, got 0.5".
// docs/spec.md documents every field; keep the two in step.
#pragma once

#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/clock.h"
#include "src/common/result.h"
#include "src/spec/toml_reader.h"

namespace stepwatch::spec {

// Built-in log formats. Only the name is validated here; the probe owns the patterns. kAuto
// picks one of the others from the trainer's output (docs/log-contract.md#auto).
enum class LogPreset {
  kNone,
  kPlain,
  kHuggingface,
  kLightning,
  kMegatron,
  kTorchtitan,
  kNemo,
  kDeepspeed,
  kAuto
};

// The one list of preset names, indexed by LogPreset: the spec's reader, its "one of ..."
// messages and log_preset_name all read it. The probe's pattern table (probe/log_presets.cpp)
// has one row per name, in this order, under the same name (spec may not include probe, nor probe
// spec: tests/supervise/log_feed_test.cpp checks that the two agree). A new preset: a value
// above, its name here, its row there.
inline constexpr std::string_view kLogPresetNames[] = {"none",      "plain",     "huggingface",
                                                       "lightning", "megatron",  "torchtitan",
                                                       "nemo",      "deepspeed", "auto"};
static_assert(std::size(kLogPresetNames) == static_cast<size_t>(LogPreset::kAuto) + 1,
              "one name per LogPreset, in the enum's order");

// Where the last committed checkpoint is learned from.
enum class CheckpointSource {
  kMarker,  // scan checkpoint.dir for checkpoint.marker (an in-flight write has no marker yet)
  kBeacon,  // trust the checkpoint commits the trainer reports through its beacon / JSONL
};

enum class PagerKind { kWebhook, kAlertmanager, kCommand };

// Exit statuses of `stepwatch run` that tell a scheduler what the watchdog did (docs/run.md):
// clusters write their requeue rules against them (Slurm RequeueExit, pod failure policies).
inline constexpr int kExitStopped = 75;  // preempted, and not resumed (runbook.resume = false)
inline constexpr int kExitGaveUp = 76;   // restart budget used up: must never be requeued

// Who starts the job's next incarnation after a preempt: exactly one owner per job.
enum class ResumeOwner {
  kStepwatch,   // `stepwatch run` relaunches the command itself (runbook.resume_command)
  kSlurm,       // Slurm requeues the batch job under the same job id ([slurm])
  kKubernetes,  // the pod exits with [kubernetes] requeue_exit_code; JobSet/PyTorchJob restart it
};

// How stepwatch asks Slurm for the next incarnation (docs/slurm.md).
enum class SlurmRequeue {
  kScontrol,  // `scontrol requeue <job>`, only while the job's restart count has not moved
  kExit,      // exit with requeue_exit_code: the cluster's RequeueExit requeues the job
};

const char* log_preset_name(LogPreset preset);
const char* checkpoint_source_name(CheckpointSource source);
const char* pager_kind_name(PagerKind kind);
const char* resume_owner_name(ResumeOwner owner);
const char* slurm_requeue_name(SlurmRequeue how);

// The budget of one labeled phase (see JobSpec::phase()).
struct PhaseBudget {
  int64_t budget_ns = 0;     // longest one stay in the phase may last before `phase-overrun`
  bool beats_renew = false;  // true: every beat inside the phase restarts the budget
};

// Phases with a budget when the spec says nothing. `compile_warm` is the budget of `compile`
// in an incarnation > 0 or on a warm cache, where it only has to reload compiled code.
std::map<std::string, PhaseBudget, std::less<>> builtin_phases();

// How the expected interval is learned when expected_interval = "learn".
struct LearnSettings {
  int warmup_steps = 3;  // steps after each (re)start left out of learning (compile, cache fill)
  int window = 32;       // the learned interval is taken over this many recent intervals
};

struct AutoPreempt {
  bool enabled = true;  // false: a stalled verdict pages and collects, but never preempts
  int misses = 1;       // consecutive stalled verdicts before stepwatch preempts the job
};

// The log contract that `stepwatch run` applies to the trainer's output.
struct LogContract {
  // kAuto: a preset once a line is unmistakably one framework's; kNone: the log is not read.
  LogPreset preset = LogPreset::kAuto;
  std::string
      step_pattern;         // RE2 with (?P<step>\d+), optional (?P<loss>...); set: overrides preset
  std::string phase_start;  // RE2 with (?P<phase>...): the named phase begins
  std::string phase_end;    // RE2; (?P<phase>...) optional: without it, ends the current phase
  std::vector<std::string> noise;  // RE2 patterns; matching lines are never read as evidence
};

struct CheckpointSettings {
  std::string dir;  // where generations are written; empty: no catalog scan (source = beacon)
  std::string marker = "step_*/COMMITTED";  // glob under dir; a generation exists once it matches
  CheckpointSource source = CheckpointSource::kBeacon;  // default: kMarker when dir is set
};

struct Pager {
  PagerKind kind = PagerKind::kWebhook;
  std::string url;                     // webhook / alertmanager: http:// or https:// URL
  std::vector<std::string> command;    // command: argv, placeholder {job}
  int64_t timeout_ns = 5 * kNsPerSec;  // per delivery attempt
  int retries = 3;                     // further attempts after a failed one
};

// What the artifact of an incident holds.
struct CollectSettings {
  bool python_stacks = true;               // py-spy style Python stacks of every rank
  bool native_stacks = true;               // native (gdb/eu-stack) stacks of every rank
  bool gpu = true;                         // NVML snapshot of the job's devices
  int log_lines = 200;                     // last lines of the trainer's output
  int64_t max_bytes = int64_t{64} << 20;   // the whole artifact is truncated to this size
  int64_t time_limit_ns = 60 * kNsPerSec;  // collection stops after this long
};

struct Runbook {
  int64_t ack_timeout_ns = 10 * 60 * kNsPerSec;  // no ack within this: act without the owner
  int64_t ack_hold_limit_ns = 3600 * kNsPerSec;  // an acked incident waits at most this long
  std::vector<Pager> pagers;                     // empty: incidents are only logged and stored
  CollectSettings collect;
  std::vector<std::string> preempt_command;   // empty: SIGTERM, then SIGKILL, to the process group
  int64_t preempt_grace_ns = 30 * kNsPerSec;  // SIGTERM (or the command) to SIGKILL
  bool resume = true;  // false: after a preempt, stop and leave the restart to a human
  // The next incarnation's command; empty: the original command again, with the checkpoint in
  // STEPWATCH_RESUME_CHECKPOINT / STEPWATCH_RESUME_STEP (docs/spec.md).
  std::vector<std::string> resume_command;
  int restart_budget = 3;  // consecutive incarnations without checkpoint progress, then give up
  ResumeOwner resume_owner = ResumeOwner::kStepwatch;  // who starts the next incarnation
};

struct SlurmSettings {
  SlurmRequeue requeue = SlurmRequeue::kScontrol;
  int requeue_exit_code = 75;         // kExit: a code in the cluster's RequeueExit list
  std::string scontrol = "scontrol";  // the programs, for installs outside PATH
  std::string scancel = "scancel";
  int64_t command_timeout_ns = 30 * kNsPerSec;  // each scontrol / scancel call
};

struct KubernetesSettings {
  // The exit that asks the controller for a restart: 128-255, which PyTorchJob's ExitCode
  // policy retries (1-127 are permanent); distinct from 75 and 76, which mean "stop".
  int requeue_exit_code = 175;
};

// When a node, not the job, looks at fault (docs/node-fault.md). The defaults are other systems'
// numbers, not validated on our fleets (background: multinode.md section 4). 0 disables a rule.
struct NodeFaultSettings {
  // A restart storm: this many incarnations started within the window (nvrx-watch
  // restart_storm: >= 5 cycles started in 30 min).
  int storm_incarnations = 5;
  int64_t storm_window_ns = 30 * 60 * kNsPerSec;
  // A culprit in >= suspect_culprit_min of the job's last suspect_of_last ended incarnations
  // (the rule proposed in multinode.md: 2 of the last 3).
  int suspect_of_last = 3;
  int suspect_culprit_min = 2;
  // On the host in this many consecutive incarnations that each ended within short_run
  // (nvrx-watch suspect_node: 3 consecutive cycles that ended in < 10 min; correlation only).
  int short_run_count = 3;
  int64_t short_run_ns = 10 * 60 * kNsPerSec;
  // Implicated in this many distinct jobs within the window: the stronger, cross-job sign
  // (Meta RSC's lemon nodes; the numbers are ours).
  int cross_job_min = 3;
  int64_t cross_job_window_ns = 24 * 3600 * kNsPerSec;
  bool drain = false;  // opt-in: drain a suspect host through the scheduler (Slurm: DRAIN)
};

struct JobSpec {
  std::string source;     // the file it came from; empty for default_spec()
  std::string job;        // job id; empty: from --job or STEPWATCH_JOB
  std::string owner;      // who gets paged, as the pager should name them
  std::string job_class;  // key `class`: groups jobs for tuning and dashboards
  // The local users (names, or uids as decimal strings) whose job directories this spec is
  // for. The agent applies the spec (and its pagers) only to a job directory one of them
  // owns; empty: the spec file's own owner. `stepwatch run` ignores it (its job is its own).
  std::vector<std::string> users;
  int world_size = 0;                           // expected ranks; 0: whatever the beacons say
  std::optional<int64_t> expected_interval_ns;  // empty: learn it from the run ("learn")
  double grace_intervals = 2.0;  // stalled after this many expected intervals without a step
  double slow_factor = 1.5;      // slow when intervals exceed this multiple of the expected
  // A rank whose process is gone without saying how it ended is dead once another rank has
  // gone on running (and not finishing) this long after it; within it, ranks that exit
  // together have ended. docs/spec.md.
  int64_t exit_grace_ns = 5 * kNsPerSec;
  std::optional<int64_t> poll_interval_ns;  // empty: the supervisor derives one
  // The early rule (docs/detection.md "Inside a step"): how long a rank may show no progress
  // of any kind. Empty: learned from the job's healthy steps; quiet_early false: "off".
  std::optional<int64_t> quiet_budget_ns;
  bool quiet_early = true;
  int64_t quiet_floor_ns = 30 * kNsPerSec;  // the least a learned quiet budget may be
  LearnSettings learn;
  std::map<std::string, PhaseBudget, std::less<>> phases = builtin_phases();
  AutoPreempt auto_preempt;
  LogContract log;
  CheckpointSettings checkpoint;
  Runbook runbook;
  SlurmSettings slurm;
  KubernetesSettings kubernetes;
  NodeFaultSettings node_fault;

  // The budget for phase `name`; `warm` selects compile_warm for `compile`. nullptr: the
  // phase has no own budget (`train` and unknown names run on expected interval x grace).
  const PhaseBudget* phase(std::string_view name, bool warm) const;
  // expected_interval x grace_intervals, or empty while learning.
  std::optional<int64_t> stall_after_ns() const;
};

JobSpec default_spec();

// One problem found in a spec: "FILE:LINE: key: message" (toml_reader.h).
using SpecIssue = FileIssue;

// Everything known about one spec text: the spec (valid only if errors is empty), every error
// (not just the first) and warnings (legal, but probably not what was meant).
struct SpecCheck {
  JobSpec spec;
  std::vector<SpecIssue> errors;
  std::vector<SpecIssue> warnings;
  bool syntax_error = false;  // the TOML itself was malformed

  bool ok() const { return errors.empty(); }
};

SpecCheck check_spec(std::string_view text, const std::string& source_name);
// Fails only when the file cannot be read (kNotFound, kPermission, kIo, kInvalidArgument).
Result<SpecCheck> check_spec_file(const std::string& path);

// The same as a Result: the error message holds every error, one per line.
Result<JobSpec> parse_spec(std::string_view text, const std::string& source_name);
// text, when given, receives the file's text exactly as it was read and checked (for a record
// of the spec a run used: the file is read once).
Result<JobSpec> load_spec_file(const std::string& path, std::string* text = nullptr);

}  // namespace stepwatch::spec
