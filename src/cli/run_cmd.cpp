// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/cli/run_cmd.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>

#include "src/cli/agent_client.h"
#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/contract/names.h"
#include "src/coord/incarnation.h"
#include "src/probe/nvml.h"
#include "src/runbook/scheduler.h"
#include "src/spec/spec.h"
#include "src/store/store.h"
#include "src/supervise/launcher.h"
#include "src/supervise/supervisor.h"

namespace stepwatch::cli {

namespace {
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}
}  // namespace

std::string default_state_dir() {
  if (const char* d = env("STEPWATCH_STATE_DIR")) return d;
  if (const char* x = env("XDG_STATE_HOME")) return std::string(x) + "/stepwatch";
  if (const char* h = env("HOME")) return std::string(h) + "/.local/state/stepwatch";
  return fmt::format("/tmp/stepwatch-state-{}", ::getuid());
}

int run_supervisor(const RunArgs& a) {
  auto fail = [](const std::string& m) {
    fmt::print(stderr, "stepwatch run: {}\n", m);
    return supervise::kExitUsage;
  };
  if (a.argv.empty()) return fail("no command: stepwatch run [options] -- COMMAND [ARGS...]");
  if (!a.coord.empty()) return run_launcher(a);
  for (const auto& [flag, value] : {std::pair{"--node", &a.node},
                                    {"--prefix", &a.prefix},
                                    {"--lease-ttl", &a.lease_ttl},
                                    {"--resume-wait", &a.resume_wait},
                                    {"--grace", &a.grace}}) {
    if (!value->empty())
      return fail(fmt::format("{} is for the multi-node launcher: give --coord too", flag));
  }
  supervise::RunOptions o;
  o.argv = a.argv;
  spec::JobSpec spec = spec::default_spec();
  if (!a.spec_path.empty()) {
    auto s = spec::load_spec_file(a.spec_path, &o.spec_text);
    if (!s)
      return fail(fmt::format("the spec has errors; nothing was launched:\n{}", s.error().message));
    spec = std::move(*s);
    o.spec_path = a.spec_path;
  }
  auto sched = runbook::scheduler_from_env([](const char* n) { return std::getenv(n); });
  if (!sched) return fail(sched.error().message);
  if (auto st = runbook::check_resume_owner(spec.runbook.resume_owner, *sched); !st)
    return fail(fmt::format("{}: {}; nothing was launched",
                            a.spec_path.empty() ? "the spec" : a.spec_path, st.error().message));
  o.scheduler = *sched;
  auto job = runbook::job_id_for({a.job, "--job", spec.job}, *sched,
                                 [](const char* n) { return std::getenv(n); });
  if (!job) return fail(job.error().message);
  o.job = std::move(*job);
  o.beacon_root = !a.dir.empty()
                      ? a.dir
                      : (env("STEPWATCH_DIR") ? env("STEPWATCH_DIR") : contract::kDefaultDir);
  o.state_dir = !a.state_dir.empty() ? a.state_dir : default_state_dir();
  o.trace_path = a.trace;
  o.ack_port = a.ack_port;
  o.nvml_lib = a.nvml_lib;
  o.master_port = a.master_port;
  if (!o.master_port) {
    if (const char* p = env("MASTER_PORT")) o.master_port = std::atoi(p);
  }
  if (!a.poll.empty()) {
    auto p = parse_duration(a.poll);
    if (!p || *p <= 0) return fail(p ? "--poll must be above zero" : p.error().message);
    o.poll_ns = *p;
  }
  if (a.new_store) {  // an empty stepwatch.db becomes a store now; the supervisor then opens it
    store::OpenOptions fresh;
    fresh.fresh_if_empty = true;
    if (auto st = store::Store::open(o.state_dir, fresh); !st) return fail(st.error().message);
  }
  supervise::Supervisor s(std::move(o), std::move(spec));
  return s.run();
}

int run_launcher(const RunArgs& a) {
  auto fail = [](const std::string& m) {
    fmt::print(stderr, "stepwatch run --coord: {}\n", m);
    return supervise::kExitUsage;
  };
  if (a.argv.empty()) return fail("no command: stepwatch run --coord ... -- COMMAND [ARGS...]");
  // Detection and the runbook are the node agents' in this mode: the single-node supervisor's
  // flags would be silently ignored, so they are refused.
  for (const auto& [flag, given] : {std::pair{"--spec", !a.spec_path.empty()},
                                    {"--state-dir", !a.state_dir.empty()},
                                    {"--trace", !a.trace.empty()},
                                    {"--ack-port", a.ack_port != 0},
                                    {"--nvml-lib", !a.nvml_lib.empty()},
                                    {"--new-store", a.new_store}}) {
    if (given) {
      return fail(fmt::format(
          "{} has no place with --coord: the node agents watch the job and run its runbook; "
          "the launcher only launches and relaunches",
          flag));
    }
  }
  supervise::LauncherOptions o;
  o.argv = a.argv;
  for (size_t from = 0; from <= a.coord.size();) {
    size_t comma = a.coord.find(',', from);
    if (comma == std::string::npos) comma = a.coord.size();
    std::string e = a.coord.substr(from, comma - from);
    from = comma + 1;
    if (e.empty()) continue;
    if (e.rfind("http://", 0) != 0 || e.size() <= 7) {
      return fail(fmt::format(
          "--coord: \"{}\" is not an etcd client URL \"http://HOST:PORT\" (the gateway is "
          "spoken over plain HTTP; put TLS in front of it); separate several with commas",
          e));
    }
    o.endpoints.push_back(e);
  }
  if (o.endpoints.empty()) return fail("--coord: no etcd endpoint given");
  auto sched = runbook::scheduler_from_env([](const char* n) { return std::getenv(n); });
  if (!sched) return fail(sched.error().message);
  // A launcher reads no spec: the leader's agent has it.
  auto job = runbook::job_id_for({a.job, "--job", std::nullopt}, *sched,
                                 [](const char* n) { return std::getenv(n); });
  if (!job) return fail(job.error().message);
  o.job = std::move(*job);
  o.scheduler = *sched;
  // Under Slurm the node's name is Slurm's (SLURMD_NODENAME), as its agent is usually named.
  o.node = !a.node.empty() ? a.node : !sched->node.empty() ? sched->node : short_hostname();
  if (o.node.empty()) return fail("cannot read this host's name: give --node");
  if (!contract::validate_node_name(o.node)) {
    return fail(fmt::format(
        "--node \"{}\" must be 1-63 characters from [A-Za-z0-9._-], not starting with '-'",
        o.node));
  }
  if (!a.prefix.empty()) {
    if (a.prefix.size() < 2 || a.prefix[0] != '/' || a.prefix.back() == '/')
      return fail("--prefix must start with / and not end with one, e.g. /stepwatch/v1");
    o.prefix = a.prefix;
  }
  // A duration flag: its value, above zero (whole seconds when `whole`).
  auto duration = [](const char* flag, const std::string& text, bool whole,
                     int64_t* out) -> std::string {
    if (text.empty()) return {};
    auto d = parse_duration(text);
    if (!d) return fmt::format("{}: {}", flag, d.error().message);
    if (*d <= 0) return fmt::format("{} must be above zero, got {}", flag, text);
    if (whole && (*d < kNsPerSec || *d % kNsPerSec != 0)) {
      return fmt::format(
          "{} must be whole seconds, at least 1s (etcd grants leases in seconds), got {}", flag,
          text);
    }
    *out = *d;
    return {};
  };
  for (const auto& m : {duration("--lease-ttl", a.lease_ttl, true, &o.lease_ttl_ns),
                        duration("--resume-wait", a.resume_wait, false, &o.resume_wait_ns),
                        duration("--grace", a.grace, false, &o.grace_ns),
                        duration("--poll", a.poll, false, &o.poll_ns)}) {
    if (!m.empty()) return fail(m);
  }
  o.beacon_root = !a.dir.empty()
                      ? a.dir
                      : (env("STEPWATCH_DIR") ? env("STEPWATCH_DIR") : contract::kDefaultDir);
  o.master_port = a.master_port;
  if (!o.master_port) {
    if (const char* p = env("MASTER_PORT")) o.master_port = std::atoi(p);
  }
  supervise::Launcher launcher(std::move(o));
  return launcher.run();
}

int run_ack(const AckArgs& args) {
  // Inside the job (its STEPWATCH_JOB, its Slurm job) the job id may be left out.
  AckArgs a = args;
  auto sched = runbook::scheduler_from_env([](const char* n) { return std::getenv(n); });
  auto job = sched ? runbook::job_id_for({a.job, "the job argument", std::nullopt}, *sched,
                                         [](const char* n) { return std::getenv(n); })
                   : Result<std::string>(sched.error());
  if (!job) {
    fmt::print(stderr, "stepwatch ack: {}\n", job.error().message);
    return 2;
  }
  a.job = std::move(*job);
  std::string by = a.by;
  if (by.empty()) by = env("USER") ? env("USER") : fmt::format("uid {}", ::getuid());
  bool agent_said_none = false;
  if (a.state_dir.empty()) {
    // The node's agent owns the incidents of the jobs it watches; a supervisor's are in its store.
    auto agent = find_agent(a.agent);
    if (!agent) {
      fmt::print(stderr, "stepwatch ack: {}\n", agent.error().message);
      return 2;
    }
    if (*agent) {
      int rc = ack_through_agent(**agent, a.job, by, a.note);
      if (rc != 1) return rc;  // acked, or refused: the answer stands
      // The agent has no open incident for it: a `stepwatch run` supervisor may.
      agent_said_none = true;
    }
  }
  std::string dir = a.state_dir.empty() ? default_state_dir() : a.state_dir;
  store::OpenOptions oo;
  oo.create = false;
  auto st = store::Store::open(dir, oo);
  // No supervisor ever ran here: the agent's answer (no open incident) is the whole answer.
  if (!st && agent_said_none && st.error().code == Errc::kNotFound) return 1;
  if (!st) {
    fmt::print(stderr, "stepwatch ack: {}\n", st.error().message);
    return 2;
  }
  auto inc = st->ack(a.job, wall_now_ns(), by, a.note);
  if (!inc) {
    fmt::print(stderr, "stepwatch ack: {}\n", inc.error().message);
    return 2;
  }
  if (!*inc) {
    fmt::print("job {} has no open incident\n", a.job);
    return 1;
  }
  fmt::print("acked incident {} of job {} ({}/{}): {}\n", (*inc)->id, a.job, (*inc)->state,
             (*inc)->cause, (*inc)->summary);
  return 0;
}

Result<std::vector<runbook::RecordedProcess>> load_recorded_processes(const std::string& state_dir,
                                                                      const std::string& job) {
  std::vector<runbook::RecordedProcess> out;
  store::OpenOptions oo;
  oo.create = false;
  auto st = store::Store::open(state_dir, oo);
  if (!st) {
    if (st.error().code == Errc::kNotFound) return out;  // nothing was ever recorded here
    return st.error();
  }
  auto procs = st->processes(job);
  if (!procs) return procs.error();
  for (const auto& p : *procs) {
    out.push_back(
        {static_cast<int>(p.pid), p.start_ticks, static_cast<uint32_t>(p.incarnation), p.role});
  }
  return out;
}

std::optional<probe::GpuSnapshot> gpu_snapshot_now() {
  auto nvml = probe::Nvml::open();
  if (!nvml) return std::nullopt;
  probe::GpuProbe probe(std::shared_ptr<probe::Nvml>(std::move(*nvml)));
  auto snap = probe.poll();
  if (!snap) return std::nullopt;
  return *snap;
}

}  // namespace stepwatch::cli
