// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The incarnation and launcher records; nlohmann-json stays in this file (STYLE rule 11).
#include "src/coord/incarnation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "src/common/json_fields.h"
#include "src/contract/names.h"

namespace stepwatch::coord {

namespace {

using json = nlohmann::json;

using json_fields::as_int;
using json_fields::as_str;
using json_fields::need;
using json_fields::opt;

// "scheduler_job" reaches scontrol and scancel on the node that leads the job, as root: a Slurm
// job id (only Slurm writes one), checked where it is read.
std::string slurm_job_id(const json& v, const char* key) {
  std::string id = as_str(v, key);
  if (auto st = contract::validate_slurm_job_id(id); !st)
    throw json_fields::FieldError{Errc::kParse,
                                  fmt::format("field \"{}\": {}", key, st.error().message)};
  return id;
}

}  // namespace

std::string incarnation_key(std::string_view prefix, std::string_view job) {
  return fmt::format("{}/jobs/{}/incarnation", prefix, job);
}

std::string launchers_prefix(std::string_view prefix, std::string_view job) {
  return fmt::format("{}/jobs/{}/launchers/", prefix, job);
}

std::string launcher_key(std::string_view prefix, std::string_view job, std::string_view node) {
  return launchers_prefix(prefix, job) + std::string(node);
}

std::string start_key(std::string_view prefix, std::string_view job) {
  return fmt::format("{}/jobs/{}/start", prefix, job);
}

std::string checkpoint_key(std::string_view prefix, std::string_view job) {
  return fmt::format("{}/jobs/{}/checkpoint", prefix, job);
}

std::string incarnation_to_json(const IncarnationRecord& r) {
  json j{{"incarnation", r.incarnation},
         {"resume_from", r.resume_from},
         {"incident", r.incident},
         {"by", r.by},
         {"at_ns", r.at_ns}};
  if (r.resume_step) j["resume_step"] = *r.resume_step;
  if (!r.scheduler.empty()) j["scheduler"] = r.scheduler;
  if (!r.scheduler_job.empty()) j["scheduler_job"] = r.scheduler_job;
  if (r.exit_code) j["exit_code"] = *r.exit_code;
  if (r.hold_incident) {
    j["hold_incident"] = r.hold_incident;
    j["hold"] = r.hold;
    j["hold_resume_from"] = r.hold_resume_from;
    if (r.hold_resume_step) j["hold_resume_step"] = *r.hold_resume_step;
  }
  if (r.barrier) j["barrier"] = true;
  if (!r.nodes.empty()) j["nodes"] = r.nodes;
  return j.dump();
}

Result<IncarnationRecord> incarnation_from_json(std::string_view text, std::string_view source) {
  return json_fields::read_object<IncarnationRecord>(
      text, source, [](const json& j, IncarnationRecord& r) {
        need(j, "incarnation");
        opt(j, "incarnation", r.incarnation, as_int);
        opt(j, "resume_from", r.resume_from, as_str);
        opt(j, "incident", r.incident, as_int);
        opt(j, "by", r.by, as_str);
        opt(j, "at_ns", r.at_ns, as_int);
        opt(j, "scheduler", r.scheduler, as_str);
        opt(j, "scheduler_job", r.scheduler_job, slurm_job_id);
        opt(j, "hold_incident", r.hold_incident, as_int);
        opt(j, "hold", r.hold, as_str);
        opt(j, "hold_resume_from", r.hold_resume_from, as_str);
        std::optional<int64_t> code;
        opt(j, "exit_code", code, as_int);
        if (code && (*code < 1 || *code > 255)) {
          throw json_fields::FieldError{
              Errc::kParse, fmt::format("field \"exit_code\" must be 1-255, got {}", *code)};
        }
        if (code) r.exit_code = static_cast<int>(*code);
        opt(j, "resume_step", r.resume_step, as_int);
        opt(j, "hold_resume_step", r.hold_resume_step, as_int);
        opt(j, "barrier", r.barrier, json_fields::as_bool);
        opt(j, "nodes", r.nodes, json_fields::as_strs);
        if (r.incarnation < 0) {
          throw json_fields::FieldError{
              Errc::kParse,
              fmt::format("field \"incarnation\" must be >= 0, got {}", r.incarnation)};
        }
      });
}

std::string launcher_to_json(const LauncherRecord& r) {
  json j{{"node", r.node},
         {"pid", r.pid},
         {"incarnation", r.incarnation},
         {"started_at_ns", r.started_at_ns}};
  if (!r.scheduler.empty()) j["scheduler"] = r.scheduler;
  if (!r.scheduler_job.empty()) j["scheduler_job"] = r.scheduler_job;
  if (r.scheduler_restarts) j["scheduler_restarts"] = *r.scheduler_restarts;
  if (r.barrier) j["barrier"] = true;
  if (r.ready) j["ready"] = *r.ready;
  return j.dump();
}

Result<LauncherRecord> launcher_from_json(std::string_view text, std::string_view source) {
  return json_fields::read_object<LauncherRecord>(
      text, source, [](const json& j, LauncherRecord& r) {
        opt(j, "node", r.node, as_str);
        opt(j, "pid", r.pid,
            [](const json& v, const char* k) { return static_cast<int>(as_int(v, k)); });
        opt(j, "incarnation", r.incarnation, as_int);
        opt(j, "started_at_ns", r.started_at_ns, as_int);
        opt(j, "scheduler", r.scheduler, as_str);
        opt(j, "scheduler_job", r.scheduler_job, slurm_job_id);
        opt(j, "scheduler_restarts", r.scheduler_restarts, as_int);
        opt(j, "barrier", r.barrier, json_fields::as_bool);
        opt(j, "ready", r.ready, as_int);
      });
}

std::string start_to_json(const StartRecord& r) {
  return json{{"incarnation", r.incarnation}, {"by", r.by}, {"at_ns", r.at_ns}, {"nodes", r.nodes}}
      .dump();
}

Result<StartRecord> start_from_json(std::string_view text, std::string_view source) {
  return json_fields::read_object<StartRecord>(text, source, [](const json& j, StartRecord& r) {
    need(j, "incarnation");
    opt(j, "incarnation", r.incarnation, as_int);
    opt(j, "by", r.by, as_str);
    opt(j, "at_ns", r.at_ns, as_int);
    opt(j, "nodes", r.nodes, json_fields::as_strs);
  });
}

std::string checkpoint_to_json(const CheckpointRecord& r) {
  return json{{"id", r.id},
              {"step", r.step},
              {"incarnation", r.incarnation},
              {"by", r.by},
              {"at_ns", r.at_ns}}
      .dump();
}

Result<CheckpointRecord> checkpoint_from_json(std::string_view text, std::string_view source) {
  return json_fields::read_object<CheckpointRecord>(
      text, source, [](const json& j, CheckpointRecord& r) {
        // The id reaches every rank's environment (STEPWATCH_RESUME_CHECKPOINT).
        r.id = as_str(need(j, "id"), "id");
        if (auto st = contract::validate_checkpoint_id(r.id); !st)
          throw json_fields::FieldError{Errc::kParse,
                                        fmt::format("field \"id\": {}", st.error().message)};
        r.step = as_int(need(j, "step"), "step");
        if (r.step < 0)
          throw json_fields::FieldError{Errc::kParse,
                                        fmt::format("field \"step\" must be >= 0, got {}", r.step)};
        opt(j, "incarnation", r.incarnation, as_int);
        opt(j, "by", r.by, as_str);
        opt(j, "at_ns", r.at_ns, as_int);
      });
}

Result<SchedulerRun> slurm_run_of(const std::vector<LauncherRecord>& launchers,
                                  int64_t incarnation) {
  std::optional<SchedulerRun> run;
  std::string run_node;
  std::vector<std::string> without;
  for (const auto& l : launchers) {
    if (l.incarnation != incarnation) continue;  // an earlier run's, or one ahead: not this one's
    if (l.scheduler != "slurm" || l.scheduler_job.empty() || !l.scheduler_restarts) {
      without.push_back(l.node.empty() ? "?" : l.node);
      continue;
    }
    SchedulerRun r{l.scheduler_job, *l.scheduler_restarts};
    if (!run) {
      run = r;
      run_node = l.node;
    } else if (run->job != r.job || run->restarts != r.restarts) {
      return Error{
          Errc::kInvalidArgument,
          fmt::format("the launchers of incarnation {} disagree: {} runs in Slurm job {} "
                      "(restarts {}), {} in Slurm job {} (restarts {})",
                      incarnation, run_node, run->job, run->restarts, l.node, r.job, r.restarts)};
    }
  }
  if (!run) {
    return Error{Errc::kNotFound,
                 fmt::format("no launcher of incarnation {} carries a Slurm job id{}", incarnation,
                             without.empty() ? " (none is registered for it)"
                                             : fmt::format(" ({} run outside Slurm)",
                                                           fmt::join(without, ", ")))};
  }
  if (!without.empty()) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("the launchers of incarnation {} disagree: {} runs in Slurm job {}, "
                             "{} outside Slurm",
                             incarnation, run_node, run->job, fmt::join(without, ", "))};
  }
  return *run;
}

Result<JobIncarnation> read_incarnation(Kv& etcd, const std::string& key) {
  auto got = etcd.range(key);
  if (!got) return got.error();
  JobIncarnation out;
  if (got->kvs.empty()) return out;  // never bumped: incarnation 0
  auto r = incarnation_from_json(got->kvs.front().value, "etcd key " + key);
  if (!r) return r.error();
  out.record = std::move(*r);
  out.mod_revision = got->kvs.front().mod_revision;
  return out;
}

Result<bool> move_incarnation(Kv& etcd, const std::string& key, const JobIncarnation& from,
                              const IncarnationRecord& to, std::vector<Compare> also) {
  also.insert(also.begin(), from.mod_revision == 0 ? Compare::create_rev(key, 0)
                                                   : Compare::mod_rev(key, from.mod_revision));
  auto t = etcd.txn(also, {TxnOp::put(key, incarnation_to_json(to))});
  if (!t) return t.error();
  return t->succeeded;
}

}  // namespace stepwatch::coord
