// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/spec/rules.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cmath>

#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/spec/command_template.h"

namespace stepwatch::spec {

namespace {

template <class Enum, size_t N>
std::optional<Enum> find_name(std::string_view name, const std::string_view (&names)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

std::string number(double v) {
  return fmt::format("{:g}", v);
}

}  // namespace

std::optional<LogPreset> parse_log_preset(std::string_view name) {
  return find_name<LogPreset>(name, kLogPresetNames);
}
std::optional<PagerKind> parse_pager_kind(std::string_view name) {
  return find_name<PagerKind>(name, kPagerKindNames);
}
std::optional<CheckpointSource> parse_checkpoint_source(std::string_view name) {
  return find_name<CheckpointSource>(name, kCheckpointSourceNames);
}
std::optional<ResumeOwner> parse_resume_owner(std::string_view name) {
  return find_name<ResumeOwner>(name, kResumeOwnerNames);
}
std::optional<SlurmRequeue> parse_slurm_requeue(std::string_view name) {
  return find_name<SlurmRequeue>(name, kSlurmRequeueNames);
}

std::string one_of(std::span<const std::string_view> names) {
  std::string out = "one of ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

std::string job_id_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  if (name.size() > 63) return fmt::format("is {} bytes, at most 63 allowed", name.size());
  for (char c : name) {
    if (!is_alnum(c) && c != '.' && c != '_' && c != '-') return "may only hold [A-Za-z0-9._-]";
  }
  if (name.front() == '.' || name.front() == '-') return "may not start with '.' or '-'";
  return "";
}

std::string phase_name_problem(std::string_view name) {
  // The same rule as the beacon's phase field (contract::validate_phase): 1..31 bytes.
  if (name.empty() || name.size() > 31) return "a phase name must be 1 to 31 bytes long";
  for (char c : name) {
    if (!is_alnum(c) && c != '.' && c != '_' && c != '-' && c != ':' && c != '/') {
      return "a phase name may only hold [A-Za-z0-9._:/-]";
    }
  }
  if (name == "train") {
    return "the train phase has no budget of its own: its pace is expected_interval x "
           "grace_intervals";
  }
  return "";
}

namespace {

// The per-field rules of one validate_spec() call.
class Rules {
 public:
  Rules(const JobSpec& spec, const KeyLines& lines, IssueSink& sink)
      : s_(spec), lines_(lines), sink_(sink) {}

  void all() {
    names();
    numbers();
    phases();
    log();
    checkpoint();
    runbook();
    restarts();
    warnings();
  }

 private:
  void int_range(const std::string& key, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo) sink_.error(key, fmt::format("must be >= {}, got {}", lo, v));
    if (v > hi) sink_.error(key, fmt::format("must be <= {}, got {}", hi, v));
  }

  void names() {
    if (!s_.job.empty()) {
      if (auto p = job_id_problem(s_.job); !p.empty())
        sink_.error("job", fmt::format("job id \"{}\" {}", s_.job, p));
    }
    if (lines_.has("class")) {
      if (auto p = job_id_problem(s_.job_class); !p.empty()) {
        sink_.error("class", fmt::format("job class \"{}\" {}", s_.job_class, p));
      }
    }
    for (size_t i = 0; i < s_.users.size(); ++i) {
      // A POSIX user name ([A-Za-z0-9._-], not starting with '-', at most 32) or a uid.
      const std::string& u = s_.users[i];
      bool ok =
          !u.empty() && u.size() <= 32 && u[0] != '-' &&
          std::all_of(u.begin(), u.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
          });
      if (!ok) {
        sink_.error(fmt::format("users[{}]", i),
                    fmt::format("\"{}\" is not a user name or uid (1-32 of [A-Za-z0-9._-])", u));
      }
    }
    if (s_.owner.size() > 200) sink_.error("owner", "must be at most 200 bytes");
    if (std::any_of(s_.owner.begin(), s_.owner.end(), [](char c) { return c >= 0 && c < 0x20; })) {
      sink_.error("owner", "must not hold control characters");
    }
  }

  void numbers() {
    int_range("world_size", s_.world_size, 0, 1'000'000);
    if (!std::isfinite(s_.grace_intervals) || s_.grace_intervals < 1 || s_.grace_intervals > 1000) {
      sink_.error(
          "grace_intervals",
          fmt::format("must be >= 1 and <= 1000 (intervals without a step before a stall), got {}",
                      number(s_.grace_intervals)));
    }
    if (!std::isfinite(s_.slow_factor) || s_.slow_factor <= 1 || s_.slow_factor > 1000) {
      sink_.error(
          "slow_factor",
          fmt::format("must be > 1 and <= 1000 (a multiple of the expected interval), got {}",
                      number(s_.slow_factor)));
    }
    if (s_.exit_grace_ns < 0 || s_.exit_grace_ns > 3600 * kNsPerSec) {
      sink_.error("exit_grace",
                  fmt::format("must be between 0s and 1h (how long ranks may exit apart), got {}",
                              format_duration(s_.exit_grace_ns)));
    }
    for (auto [key, ns] : {std::pair{"quiet_budget", s_.quiet_budget_ns.value_or(kNsPerSec)},
                           std::pair{"quiet_floor", s_.quiet_floor_ns}}) {
      if (ns < kNsPerSec || ns > 24 * 3600 * kNsPerSec) {
        sink_.error(key, fmt::format("must be between 1s and 24h (how long a rank may show no "
                                     "progress of any kind), got {}",
                                     format_duration(ns)));
      }
    }
    int_range("learn.warmup_steps", s_.learn.warmup_steps, 0, 100'000);
    int_range("learn.window", s_.learn.window, 2, 4096);
    int_range("auto_preempt.misses", s_.auto_preempt.misses, 1, 100);
    int_range("runbook.collect.log_lines", s_.runbook.collect.log_lines, 0, 100'000);
    int_range("runbook.collect.max_bytes", s_.runbook.collect.max_bytes, 1, int64_t{1} << 40);
    int_range("runbook.restart_budget", s_.runbook.restart_budget, 0, 1000);
    const auto& f = s_.node_fault;
    int_range("node_fault.storm_incarnations", f.storm_incarnations, 0, 10'000);
    int_range("node_fault.suspect_of_last", f.suspect_of_last, 0, 1000);
    int_range("node_fault.suspect_culprit_min", f.suspect_culprit_min, 0, 1000);
    int_range("node_fault.short_run_count", f.short_run_count, 0, 1000);
    int_range("node_fault.cross_job_min", f.cross_job_min, 0, 100'000);
    if (f.suspect_of_last > 0 && f.suspect_culprit_min > f.suspect_of_last) {
      sink_.error("node_fault.suspect_culprit_min",
                  fmt::format("{} can never be reached in the last {} incarnations "
                              "(node_fault.suspect_of_last)",
                              f.suspect_culprit_min, f.suspect_of_last));
    }
  }

  // Exactly one owner restarts a job: a scheduler that requeues it and a stepwatch that
  // relaunches it in place would run two incarnations at once.
  void restarts() {
    const auto& r = s_.runbook;
    const char* owner = resume_owner_name(r.resume_owner);
    if (r.resume_owner != ResumeOwner::kStepwatch && !r.resume_command.empty()) {
      sink_.error("runbook.resume_command",
                  fmt::format("is stepwatch's own relaunch, but runbook.resume_owner = \"{}\": {} "
                              "restarts the job with its own command. Remove one of the two",
                              owner, owner));
    }
    if (r.resume_owner != ResumeOwner::kSlurm && lines_.has("slurm")) {
      sink_.warning("slurm",
                    fmt::format("ignored: runbook.resume_owner is \"{}\", not \"slurm\"", owner));
    }
    if (r.resume_owner != ResumeOwner::kKubernetes && lines_.has("kubernetes")) {
      sink_.warning(
          "kubernetes",
          fmt::format("ignored: runbook.resume_owner is \"{}\", not \"kubernetes\"", owner));
    }
    const int slurm_code = s_.slurm.requeue_exit_code;
    if (slurm_code < 1 || slurm_code > 255 || slurm_code == kExitGaveUp) {
      sink_.error("slurm.requeue_exit_code",
                  fmt::format("must be 1-255 and not {} (restart budget exhausted: never "
                              "requeued), got {}",
                              kExitGaveUp, slurm_code));
    }
    if (lines_.has("slurm.requeue_exit_code") && s_.slurm.requeue != SlurmRequeue::kExit) {
      sink_.warning("slurm.requeue_exit_code",
                    "has no effect unless slurm.requeue = \"exit\" (scontrol requeues the job)");
    }
    if (s_.slurm.command_timeout_ns <= 0) {
      sink_.error("slurm.command_timeout", "must be above zero");
    }
    const int k8s_code = s_.kubernetes.requeue_exit_code;
    if (k8s_code < 128 || k8s_code > 255) {
      sink_.error("kubernetes.requeue_exit_code",
                  fmt::format("must be 128-255: PyTorchJob's ExitCode policy retries only those "
                              "(1-127 are permanent), got {}",
                              k8s_code));
    }
  }

  void phases() {
    for (const auto& [name, budget] : s_.phases) {
      if (auto p = phase_name_problem(name); !p.empty()) sink_.error("phases." + name, p);
    }
    const PhaseBudget* cold = s_.phase("compile", false);
    auto warm_it = s_.phases.find(std::string_view("compile_warm"));
    if (cold != nullptr && warm_it != s_.phases.end() &&
        warm_it->second.budget_ns > cold->budget_ns) {
      // A warm restart only reloads cached code, so it can never need longer than a cold one.
      std::string warm = format_duration(warm_it->second.budget_ns);
      std::string cold_text = format_duration(cold->budget_ns);
      if (lines_.has("phases.compile_warm") || lines_.has("phases.compile_warm.budget")) {
        sink_.error(
            budget_line("compile_warm"), "phases.compile_warm",
            fmt::format(
                "the warm compile budget ({}) must not exceed the cold one ({}, phases.compile)",
                warm, cold_text));
      } else {
        sink_.error(
            budget_line("compile"), "phases.compile",
            fmt::format(
                "the cold compile budget ({}) is shorter than the warm one ({}, the default of "
                "phases.compile_warm); set phases.compile_warm too",
                cold_text, warm));
      }
    }
  }

  int budget_line(const std::string& phase) const {
    std::string key = "phases." + phase;
    return lines_.has(key + ".budget") ? lines_.line(key + ".budget") : lines_.line(key);
  }

  void pattern(const std::string& key, const std::string& text, const char* required_group) {
    if (text.empty()) return;
    RE2::Options options;
    options.set_log_errors(false);
    RE2 re(text, options);
    if (!re.ok()) {
      sink_.error(key, fmt::format("invalid RE2 pattern \"{}\": {}", text, re.error()));
      return;
    }
    if (required_group == nullptr) return;
    // A phase pattern may also name the phase through its group: (?P<phase_eval>...) starts
    // "eval" (docs/log-contract.md); the log contract accepts either form.
    bool found = false;
    std::string prefix = std::string(required_group) + "_";
    for (const auto& [name, index] : re.NamedCapturingGroups()) {
      // (?P<phase_>...) names no phase: the log contract refuses it, so the spec does too.
      found = found || name == required_group ||
              (std::string(required_group) == "phase" && name.size() > prefix.size() &&
               name.rfind(prefix, 0) == 0);
    }
    if (!found) {
      sink_.error(
          key, fmt::format("pattern \"{}\" has no named group (?P<{}>...)", text, required_group));
    }
  }

  void log() {
    pattern("log.step_pattern", s_.log.step_pattern, "step");
    pattern("log.phase_start", s_.log.phase_start, "phase");
    pattern("log.phase_end", s_.log.phase_end, nullptr);
    for (size_t i = 0; i < s_.log.noise.size(); ++i) {
      pattern(fmt::format("log.noise[{}]", i), s_.log.noise[i], nullptr);
    }
  }

  void checkpoint() {
    const auto& c = s_.checkpoint;
    const std::string& m = c.marker;
    if (m.empty()) {
      sink_.error("checkpoint.marker", "must not be empty (default \"step_*/COMMITTED\")");
    } else if (m.front() == '/') {
      sink_.error("checkpoint.marker", fmt::format("\"{}\" must be relative to checkpoint.dir", m));
    } else if (m == ".." || m.starts_with("../") || m.find("/../") != std::string::npos ||
               m.ends_with("/..")) {
      sink_.error("checkpoint.marker",
                  fmt::format("\"{}\" must stay inside checkpoint.dir (no ..)", m));
    } else if (m.find('*') == std::string::npos) {
      sink_.error(
          "checkpoint.marker",
          fmt::format("\"{}\" has no '*': the glob must match one marker per generation", m));
    }
    if (c.source == CheckpointSource::kMarker && c.dir.empty()) {
      sink_.error("checkpoint.source", "source \"marker\" needs checkpoint.dir to scan");
    }
  }

  void command(const std::string& key, const std::vector<std::string>& argv,
               std::span<const std::string_view> allowed) {
    if (!argv.empty() && argv.front().empty())
      sink_.error(key + "[0]", "the program name must not be empty");
    for (size_t i = 0; i < argv.size(); ++i) {
      if (auto st = check_template(argv[i], allowed); !st) {
        std::string element = fmt::format("{}[{}]", key, i);
        sink_.error(lines_.has(element) ? lines_.line(element) : lines_.line(key), element,
                    st.error().message);
      }
    }
  }

  void url(const std::string& key, const std::string& u) {
    std::string_view rest = u;
    if (rest.starts_with("http://")) {
      rest.remove_prefix(7);
    } else if (rest.starts_with("https://")) {
      rest.remove_prefix(8);
    } else {
      // Echoed only as redact_url shows it: whatever it is, it may hold a secret.
      sink_.error(key,
                  u.find("://") == std::string::npos
                      ? std::string("must start with http:// or https://")
                      : fmt::format("\"{}\" must start with http:// or https://", redact_url(u)));
      return;
    }
    std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
    if (authority.empty() || authority.front() == ':') {
      sink_.error(key, fmt::format("\"{}\" has no host", redact_url(u)));
    } else if (authority.find('@') != std::string_view::npos) {
      // Not echoed: the point is to keep the secret out of files, logs and pages.
      sink_.error(key,
                  "carries credentials (user:password@host), which the pager refuses to send: use "
                  "a webhook "
                  "URL that holds its secret in the path, or kind = \"command\"");
    } else if (std::any_of(u.begin(), u.end(), [](char c) { return c <= 0x20 || c == 0x7f; })) {
      sink_.error(key,
                  fmt::format("\"{}\" must not hold spaces or control characters", redact_url(u)));
    }
  }

  void runbook() {
    const auto& r = s_.runbook;
    for (size_t i = 0; i < r.pagers.size(); ++i) {
      const Pager& p = r.pagers[i];
      std::string key = fmt::format("runbook.pager[{}]", i);
      const char* kind = pager_kind_name(p.kind);
      if (!lines_.has(key + ".kind") && p.url.empty() && p.command.empty()) {
        sink_.error(key,
                    "needs kind = \"webhook\" or \"alertmanager\" with a url, or kind = "
                    "\"command\" with a command");
      } else if (p.kind == PagerKind::kCommand) {
        if (p.command.empty())
          sink_.error(key, "kind \"command\" needs command = [\"program\", \"arg\", ...]");
        if (!p.url.empty()) sink_.error(key + ".url", "kind \"command\" takes no url");
        command(key + ".command", p.command, kPagerPlaceholders);
      } else {
        if (p.url.empty()) sink_.error(key, fmt::format("kind \"{}\" needs a url", kind));
        if (!p.command.empty())
          sink_.error(key + ".command", fmt::format("kind \"{}\" takes no command", kind));
        if (!p.url.empty()) url(key + ".url", p.url);
      }
      int_range(key + ".retries", p.retries, 0, 20);
    }
    command("runbook.preempt_command", r.preempt_command, kPreemptPlaceholders);
    command("runbook.resume_command", r.resume_command, kResumePlaceholders);
    if (s_.slurm.scontrol.empty()) sink_.error("slurm.scontrol", "must name a program");
    if (s_.slurm.scancel.empty()) sink_.error("slurm.scancel", "must name a program");
  }

  void warnings() {
    if (s_.slow_factor >= s_.grace_intervals && s_.grace_intervals >= 1 && s_.slow_factor > 1) {
      sink_.warning(
          lines_.has("slow_factor") ? "slow_factor" : "grace_intervals",
          fmt::format("slow_factor {} >= grace_intervals {}: a step that slow stalls before it can "
                      "be reported slow",
                      number(s_.slow_factor), number(s_.grace_intervals)));
    }
    if (lines_.has("learn") && s_.expected_interval_ns) {
      sink_.warning("learn", "ignored: expected_interval is fixed, nothing is learned");
    }
    if (s_.poll_interval_ns && s_.expected_interval_ns &&
        *s_.poll_interval_ns > *s_.expected_interval_ns) {
      sink_.warning("poll_interval",
                    fmt::format("{} is longer than expected_interval {}: stalls are seen late",
                                format_duration(*s_.poll_interval_ns),
                                format_duration(*s_.expected_interval_ns)));
    }
    if (lines_.has("runbook.restart_budget") && !s_.runbook.resume) {
      sink_.warning("runbook.restart_budget", "has no effect with runbook.resume = false");
    }
    if (lines_.has("runbook.ack_timeout") && s_.runbook.pagers.empty()) {
      sink_.warning("runbook.ack_timeout",
                    "no [[runbook.pager]] is set, so nobody is paged who could ack");
    }
  }

  const JobSpec& s_;
  const KeyLines& lines_;
  IssueSink& sink_;
};

}  // namespace

void validate_spec(const JobSpec& spec, const KeyLines& lines, IssueSink& sink) {
  Rules(spec, lines, sink).all();
}

}  // namespace stepwatch::spec
