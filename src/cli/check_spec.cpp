// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/cli/check_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/runbook/resume_owner.h"
#include "src/spec/size.h"
#include "src/spec/spec.h"

namespace stepwatch::cli {

namespace {

using spec::JobSpec;
using spec::SpecCheck;
using spec::SpecIssue;

std::string plural(int64_t n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

std::string argv_text(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv)
    out += (out.empty() ? "" : " ") + (a.find(' ') == std::string::npos ? a : "'" + a + "'");
  return out;
}

// Five lines that answer "what will stepwatch do with this job?".
std::string summary(const JobSpec& s) {
  std::string out;
  std::string who;
  if (!s.owner.empty()) who += "owner " + s.owner;
  if (!s.job_class.empty()) who += (who.empty() ? "" : ", ") + std::string("class ") + s.job_class;
  if (s.world_size > 0) who += (who.empty() ? "" : ", ") + plural(s.world_size, "rank");
  if (!s.users.empty())
    who += (who.empty() ? "" : ", ") + fmt::format("for users {}", fmt::join(s.users, " "));
  out += fmt::format("  job       {}{}\n", s.job.empty() ? "(from --job / STEPWATCH_JOB)" : s.job,
                     who.empty() ? "" : " (" + who + ")");

  std::string interval =
      s.expected_interval_ns
          ? fmt::format("{} expected; stalled after {:g} intervals without a step ({})",
                        format_duration(*s.expected_interval_ns), s.grace_intervals,
                        format_duration(*s.stall_after_ns()))
          : fmt::format(
                "learned (warmup {}, window {}); stalled after {:g} intervals without a step",
                plural(s.learn.warmup_steps, "step"), s.learn.window, s.grace_intervals);
  out += fmt::format("  interval  {}; slow above {:g}x\n", interval, s.slow_factor);
  out += fmt::format(
      "  endings   a rank gone without a word is dead once another runs on {} after it\n",
      format_duration(s.exit_grace_ns));

  std::string phases;
  for (const auto& [name, budget] : s.phases) {
    if (name == "compile_warm") continue;  // shown with compile
    phases +=
        fmt::format("{}{} {}", phases.empty() ? "" : ", ", name, format_duration(budget.budget_ns));
    if (name == "compile") {
      if (const auto* warm = s.phase("compile", true); warm != nullptr && warm != &budget) {
        phases += fmt::format(" (warm {})", format_duration(warm->budget_ns));
      }
    }
    if (budget.beats_renew) phases += " (beats renew)";
  }
  out += fmt::format("  phases    {}\n", phases);

  const auto& r = s.runbook;
  std::string pagers;
  for (const auto& p : r.pagers) {
    pagers +=
        fmt::format("{}{} {}", pagers.empty() ? "" : ", ", spec::pager_kind_name(p.kind),
                    p.kind == spec::PagerKind::kCommand ? argv_text(p.command) : redact_url(p.url));
  }
  out += fmt::format("  paging    {}; ack within {}; an acked incident waits up to {}\n",
                     pagers.empty() ? "nobody" : pagers, format_duration(r.ack_timeout_ns),
                     format_duration(r.ack_hold_limit_ns));

  std::string preempt =
      !s.auto_preempt.enabled
          ? "never preempt"
          : fmt::format("preempt after {} ({}, kill after {})",
                        plural(s.auto_preempt.misses, "stalled verdict"),
                        r.preempt_command.empty() ? "SIGTERM" : argv_text(r.preempt_command),
                        format_duration(r.preempt_grace_ns));
  std::string checkpoints = s.checkpoint.source == spec::CheckpointSource::kMarker
                                ? s.checkpoint.dir + "/" + s.checkpoint.marker
                                : "as the beacons report them";
  std::string resume = r.resume ? runbook::make_resume_owner(s)->describe() : "off";
  out += fmt::format("  recovery  {}; checkpoints {}; resume {}; restart budget {}\n", preempt,
                     checkpoints, resume, r.restart_budget);
  return out;
}

nlohmann::json optional_ns(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

nlohmann::json effective(const JobSpec& s) {
  nlohmann::json phases = nlohmann::json::object();
  for (const auto& [name, b] : s.phases) {
    phases[name] = {{"budget_ns", b.budget_ns},
                    {"budget", format_duration(b.budget_ns)},
                    {"beats_renew", b.beats_renew}};
  }
  nlohmann::json pagers = nlohmann::json::array();
  for (const auto& p : s.runbook.pagers) {
    pagers.push_back({{"kind", spec::pager_kind_name(p.kind)},
                      {"url", redact_url(p.url)},
                      {"command", p.command},
                      {"timeout_ns", p.timeout_ns},
                      {"retries", p.retries}});
  }
  const auto& r = s.runbook;
  const auto& c = r.collect;
  const auto& f = s.node_fault;
  return {
      {"job", s.job},
      {"owner", s.owner},
      {"users", s.users},
      {"class", s.job_class},
      {"world_size", s.world_size},
      {"expected_interval",
       s.expected_interval_ns ? format_duration(*s.expected_interval_ns) : "learn"},
      {"expected_interval_ns", optional_ns(s.expected_interval_ns)},
      {"grace_intervals", s.grace_intervals},
      {"slow_factor", s.slow_factor},
      {"stall_after_ns", optional_ns(s.stall_after_ns())},
      {"poll_interval_ns", optional_ns(s.poll_interval_ns)},
      {"learn", {{"warmup_steps", s.learn.warmup_steps}, {"window", s.learn.window}}},
      {"phases", phases},
      {"auto_preempt", {{"enabled", s.auto_preempt.enabled}, {"misses", s.auto_preempt.misses}}},
      {"log",
       {{"preset", spec::log_preset_name(s.log.preset)},
        {"step_pattern", s.log.step_pattern},
        {"phase_start", s.log.phase_start},
        {"phase_end", s.log.phase_end},
        {"noise", s.log.noise}}},
      {"checkpoint",
       {{"dir", s.checkpoint.dir},
        {"marker", s.checkpoint.marker},
        {"source", spec::checkpoint_source_name(s.checkpoint.source)}}},
      {"runbook",
       {{"ack_timeout_ns", r.ack_timeout_ns},
        {"ack_hold_limit_ns", r.ack_hold_limit_ns},
        {"pagers", pagers},
        {"collect",
         {{"python_stacks", c.python_stacks},
          {"native_stacks", c.native_stacks},
          {"gpu", c.gpu},
          {"log_lines", c.log_lines},
          {"max_bytes", c.max_bytes},
          {"time_limit_ns", c.time_limit_ns}}},
        {"preempt_command", r.preempt_command},
        {"preempt_grace_ns", r.preempt_grace_ns},
        {"resume", r.resume},
        {"resume_command", r.resume_command},
        {"restart_budget", r.restart_budget},
        {"resume_owner", spec::resume_owner_name(r.resume_owner)}}},
      {"slurm",
       {{"requeue", spec::slurm_requeue_name(s.slurm.requeue)},
        {"requeue_exit_code", s.slurm.requeue_exit_code},
        {"scontrol", s.slurm.scontrol},
        {"scancel", s.slurm.scancel},
        {"command_timeout_ns", s.slurm.command_timeout_ns}}},
      {"kubernetes", {{"requeue_exit_code", s.kubernetes.requeue_exit_code}}},
      {"node_fault",
       {{"storm_incarnations", f.storm_incarnations},
        {"storm_window_ns", f.storm_window_ns},
        {"suspect_of_last", f.suspect_of_last},
        {"suspect_culprit_min", f.suspect_culprit_min},
        {"short_run_count", f.short_run_count},
        {"short_run_ns", f.short_run_ns},
        {"cross_job_min", f.cross_job_min},
        {"cross_job_window_ns", f.cross_job_window_ns},
        {"drain", f.drain}}},
  };
}

nlohmann::json issues_json(const std::vector<SpecIssue>& issues) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& i : issues) {
    out.push_back({{"line", i.line},
                   {"column", i.column},
                   {"key", i.key},
                   {"message", i.message},
                   {"text", i.text()}});
  }
  return out;
}

std::string warning_text(const SpecIssue& w) {
  return fmt::format("{}: warning: {}{}\n", w.where(), w.key.empty() ? "" : w.key + ": ",
                     w.message);
}

}  // namespace

int check_spec_report(const std::vector<std::string>& paths, bool json, std::string* out) {
  int rc = kCheckSpecOk;
  nlohmann::json files = nlohmann::json::array();
  for (const auto& path : paths) {
    auto check = spec::check_spec_file(path);
    if (!check) {
      rc = kCheckSpecUnreadable;
      if (json) {
        files.push_back(
            {{"file", path},
             {"status", "unreadable"},
             {"errors",
              {{{"line", 0}, {"column", 0}, {"key", ""}, {"message", check.error().message}}}},
             {"warnings", nlohmann::json::array()}});
      } else {
        *out += check.error().message + "\n";
      }
      continue;
    }
    if (!check->ok() && rc == kCheckSpecOk) rc = kCheckSpecInvalid;
    if (json) {
      nlohmann::json entry = {{"file", path},
                              {"status", check->ok() ? "ok" : "invalid"},
                              {"errors", issues_json(check->errors)},
                              {"warnings", issues_json(check->warnings)}};
      if (check->ok()) entry["spec"] = effective(check->spec);
      files.push_back(std::move(entry));
      continue;
    }
    for (const auto& e : check->errors) *out += e.text() + "\n";
    for (const auto& w : check->warnings) *out += warning_text(w);
    if (check->ok()) {
      *out += fmt::format("{}: ok\n{}", path, summary(check->spec));
    } else {
      *out += fmt::format("{}: invalid ({})\n", path,
                          plural(static_cast<int64_t>(check->errors.size()), "error"));
    }
  }
  if (json) *out += nlohmann::json{{"ok", rc == kCheckSpecOk}, {"files", files}}.dump(2) + "\n";
  return rc;
}

int run_check_spec(const std::vector<std::string>& paths, bool json) {
  std::string out;
  int rc = check_spec_report(paths, json, &out);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return rc;
}

}  // namespace stepwatch::cli
