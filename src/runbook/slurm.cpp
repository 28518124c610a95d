// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/slurm.h"

#include <fmt/format.h>

#include <charconv>
#include <map>

#include "src/common/duration.h"
#include "src/contract/names.h"
#include "src/runbook/command.h"

namespace stepwatch::runbook {

namespace {

// `scontrol show job -o` is one line of Key=Value pairs separated by spaces. A few values hold
// spaces themselves (Reason=..., Comment=...); a token without '=' belongs to the value before it.
std::map<std::string, std::string, std::less<>> fields(std::string_view text) {
  std::map<std::string, std::string, std::less<>> out;
  std::string last;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
    size_t end = text.find_first_of(" \n\t", i);
    if (end == std::string_view::npos) end = text.size();
    std::string_view token = text.substr(i, end - i);
    i = end;
    if (token.empty()) continue;
    size_t eq = token.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      if (!last.empty()) out[last] += " " + std::string(token);
      continue;
    }
    last = std::string(token.substr(0, eq));
    out[last] = std::string(token.substr(eq + 1));
  }
  return out;
}

std::optional<int64_t> whole(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

Result<SlurmJob> parse_slurm_job(std::string_view text, std::string_view job_id) {
  auto f = fields(text);
  auto bad = [&](std::string_view key, std::string_view why) {
    return Error{Errc::kParse, fmt::format("scontrol show job {}: {}: {}", job_id, key, why)};
  };
  SlurmJob j;
  auto id = f.find("JobId");
  if (id == f.end()) return bad("JobId", "missing (is this `scontrol show job -o` output?)");
  j.id = id->second;
  auto state = f.find("JobState");
  if (state == f.end()) return bad("JobState", "missing");
  j.state = state->second;
  auto restarts = f.find("Restarts");
  if (restarts == f.end()) return bad("Restarts", "missing");
  auto n = whole(restarts->second);
  if (!n || *n < 0) return bad("Restarts", fmt::format("\"{}\" is not a count", restarts->second));
  j.restarts = *n;
  if (auto r = f.find("Requeue"); r != f.end()) j.requeue = r->second == "1";
  // UserId=alice(1000)
  if (auto u = f.find("UserId"); u != f.end()) {
    size_t open = u->second.rfind('(');
    size_t close = u->second.rfind(')');
    if (open != std::string::npos && close != std::string::npos && close > open) {
      if (auto uid = whole(std::string_view(u->second).substr(open + 1, close - open - 1)))
        j.user_id = *uid;
    }
  }
  if (auto b = f.find("BatchHost"); b != f.end()) j.batch_host = b->second;
  if (auto l = f.find("NodeList"); l != f.end() && l->second != "(null)") j.node_list = l->second;
  return j;
}

Result<std::string> SlurmControl::run(const std::string& program,
                                      const std::vector<std::string>& args) const {
  std::vector<std::string> argv{program};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions o;
  o.timeout_ns = s_.command_timeout_ns;
  o.max_output = 64 << 10;
  CommandResult r = run_command(argv, o);
  std::string line = fmt::format("{}", fmt::join(argv, " "));
  auto out = [&] {
    std::string t = r.output;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
    return t.empty() ? std::string() : ": " + t;
  };
  if (!r.started || r.exec_errno != 0) {
    return Error{Errc::kNotFound,
                 fmt::format("{}: cannot run {} ({}); is slurm-client installed and on PATH?", line,
                             program, r.error.empty() ? "exec failed" : r.error)};
  }
  if (r.timed_out) {
    return Error{Errc::kIo, fmt::format("{}: no answer within {}", line,
                                        format_duration(s_.command_timeout_ns))};
  }
  if (r.exit_code != 0) {
    bool denied = r.output.find("ccess denied") != std::string::npos ||
                  r.output.find("not authorized") != std::string::npos ||
                  r.output.find("Invalid user") != std::string::npos;
    return Error{denied ? Errc::kPermission : Errc::kIo,
                 fmt::format("{}: exit status {}{}", line, r.exit_code, out())};
  }
  return r.output;
}

// "--" before the command: both tools read their options with getopt_long, which takes none
// after it. Before the command word and not before the id, since with POSIXLY_CORRECT set
// getopt stops at "requeue" and would hand a later "--" to scontrol as a job id.
Result<SlurmJob> SlurmControl::show(const std::string& job) const {
  // Every id reaches show() first (requeue and cancel check the owner through it).
  if (auto st = contract::validate_slurm_job_id(job); !st)
    return Error{st.error().code, st.error().message + ": nothing was run"};
  auto text = run(s_.scontrol, {"-o", "--", "show", "job", job});
  if (!text) return text.error();
  return parse_slurm_job(*text, job);
}

Result<SlurmJob> SlurmControl::owned(const std::string& job,
                                     std::optional<uint32_t> owner_uid) const {
  if (!owner_uid) {
    return Error{Errc::kPermission,
                 fmt::format("the job directory's owner is unknown, so Slurm job {} is not known "
                             "to be its: nothing was run",
                             job)};
  }
  auto j = show(job);
  if (!j) return j.error();
  if (j->user_id < 0) {
    return Error{Errc::kPermission,
                 fmt::format("scontrol gives no UserId for Slurm job {}, so it is not known to "
                             "belong to uid {} (the job directory's owner): nothing was done to it",
                             job, *owner_uid)};
  }
  if (j->user_id != static_cast<int64_t>(*owner_uid)) {
    return Error{Errc::kPermission,
                 fmt::format("Slurm job {} belongs to uid {} (UserId), not to uid {} (the job "
                             "directory's owner): nothing was done to it",
                             job, j->user_id, *owner_uid)};
  }
  return j;
}

Result<RequeueOutcome> SlurmControl::requeue(const std::string& job, int64_t expected_restarts,
                                             std::optional<uint32_t> owner_uid) const {
  auto before = owned(job, owner_uid);
  if (!before) return before.error();
  RequeueOutcome o;
  o.restarts_seen = before->restarts;
  if (before->restarts != expected_restarts) {
    o.detail = fmt::format(
        "not requeued: Slurm job {} was requeued already (Restarts={}, this incarnation started at "
        "{}); the next incarnation is someone else's",
        job, before->restarts, expected_restarts);
    return o;
  }
  if (!before->requeue) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("Slurm job {} does not allow requeue (Requeue=0): submit it with "
                             "sbatch --requeue, or set JobRequeue=1",
                             job)};
  }
  auto done = run(s_.scontrol, {"--", "requeue", job});
  if (!done) return done.error();
  o.requeued = true;
  o.detail = fmt::format("requeued Slurm job {} (Restarts {} -> {})", job, expected_restarts,
                         expected_restarts + 1);
  return o;
}

Status SlurmControl::cancel(const std::string& job, std::optional<uint32_t> owner_uid) const {
  auto j = owned(job, owner_uid);
  if (!j) return j.error();
  auto r = run(s_.scancel, {"--", job});
  if (!r) return r.error();
  return {};
}

Status SlurmControl::drain(const std::string& node, const std::string& reason) const {
  // A culprit host from the node-fault history in etcd: one node, never a hostlist.
  if (auto st = contract::validate_node_name(node); !st)
    return Error{st.error().code, st.error().message + ": nothing was run"};
  auto r =
      run(s_.scontrol, {"--", "update", "NodeName=" + node, "State=DRAIN", "Reason=" + reason});
  if (!r) return r.error();
  return {};
}

std::vector<std::string> SlurmControl::permission_checks(const std::string& job, int64_t uid,
                                                         bool drain) const {
  std::vector<std::string> out;
  auto j = show(job);
  if (!j) {
    out.push_back("problem: " + j.error().message);
    return out;
  }
  out.push_back(fmt::format("ok: {} answers for job {} ({}, Restarts={})", s_.scontrol, job,
                            j->state, j->restarts));
  // Slurm lets a job's owner requeue and cancel it; anyone else needs operator rights.
  if (uid == 0 || j->user_id == uid) {
    out.push_back(fmt::format("ok: uid {} {} job {}: it may requeue and cancel it", uid,
                              uid == 0 ? "is root, and may act on" : "owns", job));
  } else {
    out.push_back(fmt::format(
        "problem: job {} belongs to uid {}, not to uid {}: scontrol requeue and scancel need its "
        "owner, or an Operator/Administrator AdminLevel",
        job, j->user_id, uid));
  }
  if (j->requeue) {
    out.push_back("ok: Requeue=1: Slurm may requeue the job");
  } else {
    out.push_back(fmt::format(
        "problem: Requeue=0: `scontrol requeue {}` will be refused; submit with sbatch --requeue "
        "or set JobRequeue=1 in slurm.conf",
        job));
  }
  CommandOptions version;
  version.timeout_ns = s_.command_timeout_ns;
  auto scancel = run_command({s_.scancel, "--version"}, version);
  out.push_back(scancel.succeeded()
                    ? fmt::format("ok: {} runs", s_.scancel)
                    : fmt::format("problem: {} does not run: {}", s_.scancel,
                                  scancel.error.empty() ? scancel.output : scancel.error));
  if (drain) {
    // Draining a node is an operator's act: root, SlurmUser, or AdminLevel Operator/Admin
    // (which needs accounting to check; said, not checked).
    out.push_back(uid == 0 ? "ok: node_fault.drain: root may drain nodes"
                           : "problem: node_fault.drain = true needs root, the SlurmUser, or an "
                             "Operator/Administrator AdminLevel (sacctmgr); a job owner may not "
                             "drain nodes");
  }
  return out;
}

}  // namespace stepwatch::runbook
