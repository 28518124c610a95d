// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The stepwatch binary: parses the command line and hands off to one subcommand.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>

#include "src/cli/agent_cmd.h"
#include "src/cli/check_spec.h"
#include "src/cli/doctor.h"
#include "src/cli/incidents.h"
#include "src/cli/replay.h"
#include "src/cli/run_cmd.h"
#include "src/cli/status_cmd.h"
#include "src/contract/names.h"
#include "src/runbook/scheduler.h"

namespace {

std::string default_dir() {
  const char* d = std::getenv("STEPWATCH_DIR");
  return d != nullptr && *d != '\0' ? d : stepwatch::contract::kDefaultDir;
}

constexpr const char* kNewStoreHelp =
    "Start a new incident store if stepwatch.db is empty (0 bytes, e.g. truncated), instead of "
    "refusing it: its history is gone and open incidents will page again";

// `status` and `incidents` given no job: inside one (STEPWATCH_JOB, a Slurm job) that job, by the
// rule every command follows (runbook::job_id_for), said on stderr; else, or with --all, every
// job. 0, or the exit status of a bad environment.
int job_inside(const char* cmd, bool all, std::string& job) {
  if (all || !job.empty()) return 0;
  auto getenv = [](const char* n) -> const char* { return std::getenv(n); };
  auto sched = stepwatch::runbook::scheduler_from_env(getenv);
  auto id = sched ? stepwatch::runbook::job_id_for({"", "the job argument", std::nullopt, false},
                                                   *sched, getenv)
                  : stepwatch::Result<std::string>(sched.error());
  if (!id) {
    fmt::print(stderr, "stepwatch {}: {} (--all: every job)\n", cmd, id.error().message);
    return 2;
  }
  if (!id->empty())
    fmt::print(stderr, "stepwatch {}: job {}, the one this shell runs in (--all: every job)\n", cmd,
               *id);
  job = std::move(*id);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stepwatch: is this training job still making progress?"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stepwatch " STEPWATCH_VERSION);

  stepwatch::cli::StatusArgs st;
  st.dir = default_dir();
  auto* status = app.add_subcommand(
      "status", "Every rank's step and phase beside its process, CPU, I/O and GPU");
  auto* status_dir =
      status->add_option("--dir", st.dir,
                         "Beacon root: read the beacons directly (default: the agent if one runs, "
                         "else $STEPWATCH_DIR or /dev/shm/stepwatch)");
  status->add_option(
      "--agent", st.agent,
      "The node's agent (default $STEPWATCH_AGENT, else http://127.0.0.1:9465 if it answers)");
  status->add_option("job", st.job,
                     "Only this job (default: the job this shell runs in, by $STEPWATCH_JOB or "
                     "$SLURM_JOB_ID; else every job)");
  bool status_all = false;
  status->add_flag("--all", status_all, "Every job, even inside one")->excludes("job");
  status->add_option("--spec", st.spec_path,
                     "Judge with this spec (expected interval, phase budgets)");
  status->add_option("--sample", st.sample,
                     "Window for CPU and I/O rates (default 500ms; 0: no probes)");
  status->add_option("--nvml-lib", st.nvml_lib, "libnvidia-ml to load (default: the system's)");

  std::vector<std::string> spec_files;
  bool spec_json = false;
  auto* check =
      app.add_subcommand("check-spec", "Validate job specs and show the values that will apply");
  check->add_option("files", spec_files, "Spec files (TOML)")->required();
  check->add_flag("--json", spec_json, "Machine-readable output");

  stepwatch::cli::ReplayOptions replay_opts;
  auto* replay = app.add_subcommand(
      "replay", "Run the detector over recorded traces and print the verdict timeline");
  replay->add_option("traces", replay_opts.traces, "Trace files (JSONL, docs/replay.md)")
      ->required();
  replay->add_option("--spec", replay_opts.spec_path,
                     "Judge with this spec instead of the recorded one");
  replay->add_flag("--json", replay_opts.json, "One JSON object per verdict");
  replay->add_flag("--all", replay_opts.all, "Every poll, not only changes of state");

  stepwatch::cli::RunArgs run_args;
  auto* run = app.add_subcommand(
      "run", "Launch a training job and keep it honest: watch, page, collect, preempt, resume");
  run->add_option("--spec", run_args.spec_path,
                  "Job spec (TOML); default: every default, interval learned");
  run->add_option("--job", run_args.job,
                  "Job id (default: the spec's, else $STEPWATCH_JOB, else slurm-<SLURM_JOB_ID>)");
  run->add_option("--dir", run_args.dir,
                  "Beacon root (default $STEPWATCH_DIR or /dev/shm/stepwatch)");
  run->add_option("--state-dir", run_args.state_dir, "Incident store, traces and artifacts");
  run->add_option("--trace", run_args.trace, "Record observations and verdicts to this file");
  run->add_option("--ack-port", run_args.ack_port,
                  "Loopback port of the ack endpoint (default: any free one)");
  run->add_option("--nvml-lib", run_args.nvml_lib, "libnvidia-ml to load (default: the system's)");
  run->add_option("--master-port", run_args.master_port,
                  "Rendezvous port to check before each launch (default $MASTER_PORT)");
  run->add_option("--poll", run_args.poll,
                  "Poll period (default: from the spec or the expected interval)");
  run->add_flag("--new-store", run_args.new_store, kNewStoreHelp);
  run->add_option("--coord", run_args.coord,
                  "Multi-node: be this node's launcher of the job, relaunching when its "
                  "incarnation in etcd moves; etcd endpoints, comma-separated http:// URLs");
  run->add_option(
      "--node", run_args.node,
      "With --coord: this node in etcd (default: SLURMD_NODENAME under Slurm, else host name)");
  run->add_option("--prefix", run_args.prefix, "With --coord: key prefix (default /stepwatch/v1)");
  run->add_option("--lease-ttl", run_args.lease_ttl,
                  "With --coord: the launcher key's lease, whole seconds (default 10s)");
  run->add_option("--resume-wait", run_args.resume_wait,
                  "With --coord: after the job exits non-zero, how long to wait for its "
                  "incarnation to move before giving up (default 10m)");
  run->add_option("--grace", run_args.grace,
                  "With --coord: SIGTERM to SIGKILL when ending the local job (default 30s)");
  run->add_option("command", run_args.argv, "The job: -- COMMAND [ARGS...]")->required();

  stepwatch::cli::AckArgs ack_args;
  auto* ack = app.add_subcommand(
      "ack", "Acknowledge a job's open incident: hold the runbook while you look");
  ack->add_option("job", ack_args.job,
                  "Job id (default: $STEPWATCH_JOB, else slurm-<SLURM_JOB_ID> inside a Slurm job)");
  ack->add_option("--state-dir", ack_args.state_dir,
                  "The supervisor's state directory (default: the agent if one runs)");
  ack->add_option(
      "--agent", ack_args.agent,
      "The node's agent (default $STEPWATCH_AGENT, else http://127.0.0.1:9465 if it answers)");
  ack->add_option("--by", ack_args.by, "Who acks (default $USER)");
  ack->add_option("--note", ack_args.note, "A note for the incident");

  std::string inc_state, inc_job;
  bool inc_json = false;
  int inc_limit = 20;
  auto* incidents =
      app.add_subcommand("incidents", "List incidents with their pages, acks and actions");
  incidents->add_option("job", inc_job,
                        "Only this job (default: the job this shell runs in, by $STEPWATCH_JOB "
                        "or $SLURM_JOB_ID; else every job)");
  bool inc_all = false;
  incidents->add_flag("--all", inc_all, "Every job, even inside one")->excludes("job");
  incidents->add_option("--state-dir", inc_state, "The supervisor's state directory");
  incidents->add_flag("--json", inc_json, "Machine-readable output");
  incidents->add_option("--limit", inc_limit, "At most this many incidents (default 20)");

  stepwatch::cli::DoctorOptions doc;
  bool doc_fix = false;
  std::optional<uint32_t> doc_incarnation;
  auto* doctor = app.add_subcommand(
      "doctor",
      "Check for leftovers of earlier incarnations (processes, GPU memory, port, beacons)");
  doctor->add_option("--spec", doc.spec_path, "Job spec (TOML)");
  doctor->add_option(
      "--job", doc.job,
      "Job id (default: the spec's, else $STEPWATCH_JOB, else slurm-<SLURM_JOB_ID>)");
  doctor->add_option("--dir", doc.dir,
                     "Beacon root (default $STEPWATCH_DIR or /dev/shm/stepwatch)");
  doctor->add_option("--state-dir", doc.state_dir,
                     "The supervisor's state directory (the recorded processes)");
  doctor->add_option("--port", doc.port,
                     "Rendezvous port to check (default: from the spec, else $MASTER_PORT)");
  doctor->add_option("--incarnation", doc_incarnation,
                     "The current incarnation: its processes are never touched");
  doctor->add_flag("--fix", doc_fix, "Clean up what is proven to be this job's leftovers");
  doctor->add_option("--slurm-job", doc.slurm_job,
                     "Check what the runbook needs of this Slurm job (default: $SLURM_JOB_ID)");

  std::string agent_config = "/etc/stepwatch/agent.toml";
  auto* agent = app.add_subcommand(
      "agent", "Watch every job on this node: detect, page, serve the JSON API and /metrics");
  agent->add_option("--config", agent_config,
                    "Agent configuration (TOML; default /etc/stepwatch/agent.toml)");
  bool agent_new_store = false;
  agent->add_flag("--new-store", agent_new_store, kNewStoreHelp);
  bool agent_check = false;
  agent->add_flag("--check-config", agent_check,
                  "Load and check the configuration, say what it sets up, and exit (0: valid, 2: "
                  "not; nothing is started)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (status->parsed()) {
      st.dir_given = status_dir->count() > 0;
      if (int rc = job_inside("status", status_all, st.job)) return rc;
      return stepwatch::cli::run_status(st);
    }
    if (check->parsed()) return stepwatch::cli::run_check_spec(spec_files, spec_json);
    if (replay->parsed()) return stepwatch::cli::run_replay(replay_opts);
    if (run->parsed()) return stepwatch::cli::run_supervisor(run_args);
    if (agent->parsed()) {
      if (agent_check) return stepwatch::cli::check_agent_config(agent_config);
      return stepwatch::cli::run_agent(agent_config, agent_new_store);
    }
    if (doctor->parsed()) {
      doc.fix = doc_fix;
      doc.incarnation = doc_incarnation;
      if (doc.state_dir.empty()) doc.state_dir = stepwatch::cli::default_state_dir();
      doc.load_recorded = stepwatch::cli::load_recorded_processes;
      doc.gpu_snapshot = stepwatch::cli::gpu_snapshot_now;
      return stepwatch::cli::run_doctor(doc);
    }
    if (ack->parsed()) return stepwatch::cli::run_ack(ack_args);
    if (incidents->parsed()) {
      if (int rc = job_inside("incidents", inc_all, inc_job)) return rc;
      return stepwatch::cli::run_incidents(
          inc_state.empty() ? stepwatch::cli::default_state_dir() : inc_state, inc_job, inc_json,
          inc_limit);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "stepwatch: internal error: {}\n", e.what());
    return 70;
  }
  return 2;
}
