// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/cli/doctor.h"

#include <dirent.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "src/contract/beacon_reader.h"
#include "src/contract/names.h"
#include "src/probe/ports.h"
#include "src/runbook/resume_owner.h"
#include "src/runbook/scheduler.h"
#include "src/runbook/slurm.h"
#include "src/spec/spec.h"

namespace stepwatch::cli {

namespace {

using runbook::Leftover;
using runbook::LeftoverAction;

struct Plan {
  std::string job;
  std::string beacon_dir;
  std::vector<runbook::RecordedProcess> recorded;
  std::optional<int> port;
  std::string port_source;
  uint32_t incarnation = 0;
  int64_t grace_ns = 30 * kNsPerSec;
  std::optional<probe::GpuSnapshot> gpus;
  std::string slurm_job;  // "" when Slurm is not checked
  spec::SlurmSettings slurm;
  bool drain = false;
};

// The highest incarnation written in the job's readable beacons.
std::optional<uint32_t> beacon_incarnation(const std::string& dir, const std::string& job) {
  std::optional<uint32_t> best;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return best;
  while (dirent* e = ::readdir(d)) {
    if (contract::rank_from_beacon_name(e->d_name) < 0) continue;
    contract::ReadOptions ro;
    ro.expected_job = job;
    if (auto b = contract::read_beacon_file(dir + "/" + e->d_name, ro))
      best = std::max(best.value_or(0), b->incarnation);
  }
  ::closedir(d);
  return best;
}

std::optional<int> env_port(const char* value) {
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (*end != '\0' || v <= 0 || v > 65535) return std::nullopt;
  return static_cast<int>(v);
}

// Resolves every input; an error message is a usage error (exit 2).
Result<Plan> make_plan(const DoctorOptions& o) {
  auto getenv = o.getenv ? o.getenv : [](const char* n) -> const char* { return std::getenv(n); };
  Plan p;
  std::optional<spec::JobSpec> sp;
  if (!o.spec_path.empty()) {
    auto loaded = spec::load_spec_file(o.spec_path);
    if (!loaded) return Error{loaded.error().code, loaded.error().message};
    sp = std::move(*loaded);
    p.grace_ns = sp->runbook.preempt_grace_ns;
  }
  // The job id as `stepwatch run` decides it (inside a Slurm job: slurm-<SLURM_JOB_ID>).
  auto sched = runbook::scheduler_from_env(getenv);
  if (!sched) return sched.error();
  auto job =
      runbook::job_id_for({o.job, "--job", std::string_view(sp ? sp->job : "")}, *sched, getenv);
  if (!job) return job.error();
  p.job = std::move(*job);
  std::string root = o.dir;
  if (root.empty())
    root = getenv("STEPWATCH_DIR") && *getenv("STEPWATCH_DIR") ? getenv("STEPWATCH_DIR")
                                                               : contract::kDefaultDir;
  p.beacon_dir = contract::job_dir(root, p.job);

  if (o.port) {
    if (*o.port <= 0 || *o.port > 65535)
      return Error{Errc::kInvalidArgument, fmt::format("--port {}: not a TCP port", *o.port)};
    p.port = o.port;
    p.port_source = "--port";
  } else if (auto from_spec =
                 sp ? probe::port_from_command(sp->runbook.resume_command) : std::nullopt) {
    p.port = from_spec;
    p.port_source = "the spec's resume_command";
  } else if (auto from_env = env_port(getenv("MASTER_PORT"))) {
    p.port = from_env;
    p.port_source = "$MASTER_PORT";
  }

  p.recorded = o.recorded;
  if (o.load_recorded) {
    auto more = o.load_recorded(o.state_dir, p.job);
    if (!more)
      return Error{more.error().code, fmt::format("cannot load the job's recorded processes: {}",
                                                  more.error().message)};
    p.recorded.insert(p.recorded.end(), more->begin(), more->end());
  }
  if (o.incarnation) {
    p.incarnation = *o.incarnation;
  } else {
    for (const auto& r : p.recorded) p.incarnation = std::max(p.incarnation, r.incarnation);
    p.incarnation = std::max(p.incarnation, beacon_incarnation(p.beacon_dir, p.job).value_or(0));
  }
  if (o.grace_ns) p.grace_ns = *o.grace_ns;
  bool slurm_owned = sp && runbook::make_resume_owner(*sp)->needs_batch_job();
  if (!o.slurm_job.empty()) {
    if (auto st = contract::validate_slurm_job_id(o.slurm_job); !st)
      return Error{st.error().code, "--slurm-job: " + st.error().message};
  }
  p.slurm_job = !o.slurm_job.empty() ? o.slurm_job : sched->job_id;
  if (slurm_owned && p.slurm_job.empty()) {
    return Error{Errc::kInvalidArgument,
                 "the spec's resume_owner is \"slurm\": run inside the job (SLURM_JOB_ID) or give "
                 "--slurm-job ID"};
  }
  if (sp) {
    p.slurm = sp->slurm;
    p.drain = sp->node_fault.drain;
  }
  if (o.gpu_snapshot) p.gpus = o.gpu_snapshot();
  return p;
}

// "would kill pid 123 (rank 1 of incarnation 1, started ...): still alive; holds port 29500"
std::vector<std::string> intentions(const std::vector<Leftover>& found,
                                    const std::string& proc_root, bool fix) {
  const char* verb = fix ? "will" : "would";
  std::vector<std::string> out;
  std::map<int, std::pair<const Leftover*, std::vector<std::string>>> kills;  // by pid, first seen
  std::vector<int> order;
  for (const auto& l : found) {
    if (l.action == LeftoverAction::kKill && l.record) {
      auto [it, fresh] = kills.try_emplace(l.pid, &l, std::vector<std::string>{});
      if (fresh) order.push_back(l.pid);
      it->second.second.push_back(l.what);
    }
  }
  for (int pid : order) {
    const auto& [l, whats] = kills[pid];
    std::string reasons;
    for (const auto& w : whats) reasons += (reasons.empty() ? "" : "; ") + w;
    out.push_back(fmt::format("{} kill pid {} ({}): {}", verb, pid,
                              runbook::describe_record(*l->record, proc_root), reasons));
  }
  for (const auto& l : found) {
    if (l.action == LeftoverAction::kRemoveFile)
      out.push_back(fmt::format("{} remove {}: stale beacon", verb, l.path));
  }
  for (const auto& l : found) {
    if (l.provable) continue;
    std::string subject =
        l.pid > 0 ? fmt::format("pid {}{}", l.pid, l.comm.empty() ? "" : " (" + l.comm + ")")
                  : (l.path.empty() ? std::string("it") : l.path);
    out.push_back(
        fmt::format("will not touch {}: {}; not proven to be this job's", subject, l.what));
  }
  return out;
}

void print_findings(const std::vector<Leftover>& found, std::string* out) {
  for (const auto& l : found)
    *out += fmt::format("  [{}] {}\n", runbook::leftover_kind_name(l.kind), l.evidence);
}

}  // namespace

int doctor_report(const DoctorOptions& o, std::string* out) {
  auto plan = make_plan(o);
  if (!plan) {
    *out += fmt::format("stepwatch doctor: {}\n", plan.error().message);
    return kDoctorUsage;
  }
  const Plan& p = *plan;
  runbook::HygieneInput in;
  in.job = p.job;
  in.incarnation = p.incarnation;
  in.recorded = p.recorded;
  in.port = p.port;
  in.beacon_dir = p.beacon_dir;
  in.gpus = p.gpus;
  in.proc_root = o.proc_root;

  size_t earlier =
      static_cast<size_t>(std::count_if(p.recorded.begin(), p.recorded.end(), [&](const auto& r) {
        return r.incarnation < p.incarnation;
      }));
  *out += fmt::format(
      "stepwatch doctor: job {}, current incarnation {}, {} recorded process(es) of earlier "
      "incarnations\n",
      p.job, p.incarnation, earlier);
  *out += fmt::format("  checked: recorded processes; port {}; beacons in {}; GPU memory {}\n",
                      p.port ? fmt::format("{} (from {})", *p.port, p.port_source)
                             : "not checked (no --port, no MASTER_PORT)",
                      p.beacon_dir,
                      p.gpus ? "from the given snapshot" : "not checked (no GPU snapshot)");
  if (p.recorded.empty()) {
    *out +=
        "  note: no recorded processes, so no process can be proven to be this job's; nothing will "
        "be killed\n";
  }
  bool scheduler_problem = false;
  if (!p.slurm_job.empty()) {
    *out += fmt::format("  Slurm job {}: what the runbook will ask of Slurm\n", p.slurm_job);
    int64_t uid = o.uid >= 0 ? o.uid : static_cast<int64_t>(::getuid());
    for (const auto& line :
         runbook::SlurmControl(p.slurm).permission_checks(p.slurm_job, uid, p.drain)) {
      *out += "    " + line + "\n";
      if (line.rfind("problem:", 0) == 0) scheduler_problem = true;
    }
  }
  auto found = runbook::find_leftovers(in);
  if (found.empty()) {
    *out += "clean: nothing left over from earlier incarnations\n";
    return scheduler_problem ? kDoctorLeftovers : kDoctorClean;
  }
  *out += fmt::format("found {} leftover(s):\n", found.size());
  print_findings(found, out);
  for (const auto& line : intentions(found, o.proc_root, o.fix)) *out += line + "\n";
  if (!o.fix) {
    std::set<int> kills;
    size_t files = 0;
    for (const auto& l : found) {
      if (l.action == LeftoverAction::kKill && l.provable) kills.insert(l.pid);
      if (l.action == LeftoverAction::kRemoveFile && l.provable) ++files;
    }
    *out += fmt::format(
        "run with --fix to kill {} process(es) and remove {} file(s); what is not proven to be "
        "this "
        "job's is left for a person\n",
        kills.size(), files);
    return kDoctorLeftovers;
  }
  runbook::CleanupOptions co;
  co.grace_ns = p.grace_ns;
  if (o.gpu_snapshot) co.refresh_gpus = o.gpu_snapshot;
  runbook::CleanupReport rep = runbook::cleanup(found, in, co);
  for (const auto& d : rep.done) *out += fmt::format("done: {}\n", d);
  for (const auto& f : rep.failed) *out += fmt::format("FAILED: {}\n", f);
  if (rep.clean()) {
    *out += "clean after --fix\n";
    return kDoctorClean;
  }
  *out += fmt::format("still there after --fix ({} not proven to be this job's):\n",
                      rep.remaining.size() - rep.provable_remaining());
  print_findings(rep.remaining, out);
  return kDoctorLeftovers;
}

int run_doctor(const DoctorOptions& options) {
  std::string out;
  int rc = doctor_report(options, &out);
  std::fputs(out.c_str(), rc == kDoctorUsage ? stderr : stdout);
  return rc;
}

}  // namespace stepwatch::cli
