// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the job spec. Any text through check_spec and parse_spec. Nothing may crash
// or throw; every issue names the file; an accepted spec obeys docs/spec.md's ranges, passes
// the rules again, compiles into the log contract `stepwatch run` builds from it, and survives
// a round trip through TOML written back from its fields.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz/require.h"
#include "fuzz/toml_text.h"
#include "src/contract/names.h"
#include "src/probe/log_contract.h"
#include "src/spec/command_template.h"
#include "src/spec/rules.h"
#include "src/spec/spec.h"

namespace {

using stepwatch::spec::JobSpec;
using stepwatch::spec::SpecCheck;
using stepwatch::spec::SpecIssue;

constexpr const char* kSource = "fuzz.toml";
constexpr int64_t kHour = int64_t{3600} * stepwatch::kNsPerSec;

using stepwatch::fuzz::quoted;
using stepwatch::fuzz::strings;

std::string duration(int64_t ns) {
  return fmt::format("\"{}ns\"", ns);
}

const char* boolean(bool b) {
  return b ? "true" : "false";
}

// Every field of `s` as a spec file, each value in a form that reads back exactly.
std::string to_toml(const JobSpec& s) {
  using namespace stepwatch::spec;
  std::string t;
  if (!s.job.empty()) t += fmt::format("job = {}\n", quoted(s.job));
  t += fmt::format("owner = {}\nusers = {}\n", quoted(s.owner), strings(s.users));
  if (!s.job_class.empty()) t += fmt::format("class = {}\n", quoted(s.job_class));
  t += fmt::format("world_size = {}\n", s.world_size);
  t += fmt::format("expected_interval = {}\n",
                   s.expected_interval_ns ? duration(*s.expected_interval_ns) : "\"learn\"");
  t += fmt::format("grace_intervals = {}\nslow_factor = {}\n", s.grace_intervals, s.slow_factor);
  t += fmt::format("exit_grace = {}\n", duration(s.exit_grace_ns));
  if (s.poll_interval_ns) t += fmt::format("poll_interval = {}\n", duration(*s.poll_interval_ns));
  t += fmt::format("[learn]\nwarmup_steps = {}\nwindow = {}\n", s.learn.warmup_steps,
                   s.learn.window);
  t += fmt::format("[auto_preempt]\nenabled = {}\nmisses = {}\n", boolean(s.auto_preempt.enabled),
                   s.auto_preempt.misses);
  t += fmt::format(
      "[log]\npreset = \"{}\"\nstep_pattern = {}\nphase_start = {}\nphase_end = {}\nnoise = {}\n",
      log_preset_name(s.log.preset), quoted(s.log.step_pattern), quoted(s.log.phase_start),
      quoted(s.log.phase_end), strings(s.log.noise));
  t += fmt::format("[checkpoint]\ndir = {}\nmarker = {}\nsource = \"{}\"\n",
                   quoted(s.checkpoint.dir), quoted(s.checkpoint.marker),
                   checkpoint_source_name(s.checkpoint.source));
  t += "[phases]\n";
  for (const auto& [name, b] : s.phases) {
    t += fmt::format("{} = {{ budget = {}, beats_renew = {} }}\n", quoted(name),
                     duration(b.budget_ns), boolean(b.beats_renew));
  }
  const Runbook& r = s.runbook;
  t += fmt::format(
      "[runbook]\nack_timeout = {}\nack_hold_limit = {}\npreempt_command = {}\n"
      "preempt_grace = {}\nresume_command = {}\nrestart_budget = {}\nresume = {}\n",
      duration(r.ack_timeout_ns), duration(r.ack_hold_limit_ns), strings(r.preempt_command),
      duration(r.preempt_grace_ns), strings(r.resume_command), r.restart_budget, boolean(r.resume));
  const CollectSettings& c = r.collect;
  t += fmt::format(
      "[runbook.collect]\npython_stacks = {}\nnative_stacks = {}\ngpu = {}\nlog_lines = {}\n"
      "max_bytes = {}\ntime_limit = {}\n",
      boolean(c.python_stacks), boolean(c.native_stacks), boolean(c.gpu), c.log_lines, c.max_bytes,
      duration(c.time_limit_ns));
  for (const Pager& p : r.pagers) {
    t += fmt::format("[[runbook.pager]]\nkind = \"{}\"\n", pager_kind_name(p.kind));
    if (!p.url.empty()) t += fmt::format("url = {}\n", quoted(p.url));
    if (!p.command.empty()) t += fmt::format("command = {}\n", strings(p.command));
    t += fmt::format("timeout = {}\nretries = {}\n", duration(p.timeout_ns), p.retries);
  }
  return t;
}

void check_issue(const SpecIssue& i, bool syntax, const std::string& source) {
  FUZZ_REQUIRE(i.file == source);
  FUZZ_REQUIRE(i.text().starts_with(source));
  FUZZ_REQUIRE(!i.message.empty());
  FUZZ_REQUIRE(i.line >= 0);
  FUZZ_REQUIRE(syntax || i.column == 0);  // columns only for TOML syntax errors
  FUZZ_REQUIRE(!syntax || i.key.empty());
}

// The host[:port] of an http:// or https:// URL.
std::string_view authority(std::string_view url) {
  url.remove_prefix(url.starts_with("https://") ? 8 : 7);
  return url.substr(0, url.find_first_of("/?#"));
}

bool positive(int64_t ns) {
  return ns > 0;
}

// The documented ranges (docs/spec.md, src/spec/rules.cpp) of an accepted spec.
void check_accepted(const JobSpec& s) {
  using namespace stepwatch::spec;
  FUZZ_REQUIRE(s.source == kSource);
  FUZZ_REQUIRE(s.job.empty() || stepwatch::contract::validate_job_id(s.job).ok());
  FUZZ_REQUIRE(s.job_class.empty() || stepwatch::contract::validate_job_id(s.job_class).ok());
  FUZZ_REQUIRE(s.owner.size() <= 200);
  for (const auto& u : s.users) {
    FUZZ_REQUIRE(!u.empty() && u.size() <= 32 && u.front() != '-');
    for (char c : u) {
      FUZZ_REQUIRE((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '.' || c == '_' || c == '-');
    }
  }
  FUZZ_REQUIRE(s.world_size >= 0 && s.world_size <= 1'000'000);
  FUZZ_REQUIRE(!s.expected_interval_ns || positive(*s.expected_interval_ns));
  FUZZ_REQUIRE(!s.poll_interval_ns || positive(*s.poll_interval_ns));
  FUZZ_REQUIRE(std::isfinite(s.grace_intervals) && s.grace_intervals >= 1 &&
               s.grace_intervals <= 1000);
  FUZZ_REQUIRE(std::isfinite(s.slow_factor) && s.slow_factor > 1 && s.slow_factor <= 1000);
  FUZZ_REQUIRE(s.exit_grace_ns >= 0 && s.exit_grace_ns <= kHour);
  FUZZ_REQUIRE(s.learn.warmup_steps >= 0 && s.learn.warmup_steps <= 100'000);
  FUZZ_REQUIRE(s.learn.window >= 2 && s.learn.window <= 4096);
  FUZZ_REQUIRE(s.auto_preempt.misses >= 1 && s.auto_preempt.misses <= 100);
  for (const auto& [name, budget] : s.phases) {
    FUZZ_REQUIRE(stepwatch::contract::validate_phase(name).ok() && name != "train");
    FUZZ_REQUIRE(positive(budget.budget_ns));
  }
  const PhaseBudget* cold = s.phase("compile", false);
  const PhaseBudget* warm = s.phase("compile", true);
  FUZZ_REQUIRE(cold == nullptr || warm == nullptr || warm->budget_ns <= cold->budget_ns);
  const std::string& m = s.checkpoint.marker;
  FUZZ_REQUIRE(!m.empty() && m.front() != '/' && m.find('*') != std::string::npos);
  FUZZ_REQUIRE(m != ".." && !m.starts_with("../") && m.find("/../") == std::string::npos &&
               !m.ends_with("/.."));
  FUZZ_REQUIRE(s.checkpoint.source != CheckpointSource::kMarker || !s.checkpoint.dir.empty());
  const Runbook& r = s.runbook;
  FUZZ_REQUIRE(positive(r.ack_timeout_ns) && positive(r.ack_hold_limit_ns));
  FUZZ_REQUIRE(positive(r.preempt_grace_ns) && positive(r.collect.time_limit_ns));
  FUZZ_REQUIRE(r.collect.log_lines >= 0 && r.collect.log_lines <= 100'000);
  FUZZ_REQUIRE(r.collect.max_bytes >= 1 && r.collect.max_bytes <= (int64_t{1} << 40));
  FUZZ_REQUIRE(r.restart_budget >= 0 && r.restart_budget <= 1000);
  for (const Pager& p : r.pagers) {
    FUZZ_REQUIRE(p.retries >= 0 && p.retries <= 20);
    FUZZ_REQUIRE(positive(p.timeout_ns));
    if (p.kind == PagerKind::kCommand) {
      FUZZ_REQUIRE(!p.command.empty() && !p.command.front().empty() && p.url.empty());
      for (const auto& arg : p.command) FUZZ_REQUIRE(check_template(arg, kPagerPlaceholders).ok());
    } else {
      FUZZ_REQUIRE(p.command.empty());
      FUZZ_REQUIRE(p.url.starts_with("http://") || p.url.starts_with("https://"));
      std::string_view a = authority(p.url);
      FUZZ_REQUIRE(!a.empty() && a.front() != ':' && a.find('@') == std::string_view::npos);
      for (char c : p.url) FUZZ_REQUIRE(c > 0x20 && c != 0x7f);
    }
  }
  for (const auto& arg : r.preempt_command)
    FUZZ_REQUIRE(check_template(arg, kPreemptPlaceholders).ok());
  for (const auto& arg : r.resume_command)
    FUZZ_REQUIRE(check_template(arg, kResumePlaceholders).ok());
  FUZZ_REQUIRE(r.preempt_command.empty() || !r.preempt_command.front().empty());
  FUZZ_REQUIRE(r.resume_command.empty() || !r.resume_command.front().empty());
}

// `stepwatch run` compiles the accepted log section into the probe's contract
// (src/supervise/log_feed.cpp): a spec that check-spec accepts must not fail there.
void check_log_contract(const stepwatch::spec::LogContract& log) {
  using stepwatch::spec::LogPreset;
  bool configured =
      log.preset != LogPreset::kNone || !log.step_pattern.empty() || !log.phase_start.empty();
  if (!configured) return;
  stepwatch::probe::LogPatterns p;
  p.preset = stepwatch::spec::log_preset_name(log.preset);
  p.step = log.step_pattern;
  p.phase_start = log.phase_start;
  p.phase_end = log.phase_end;
  p.noise = log.noise;
  auto compiled = stepwatch::probe::LogContract::compile(p);
  FUZZ_REQUIRE(compiled.ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  SpecCheck check = stepwatch::spec::check_spec(text, kSource);
  for (const auto& e : check.errors) check_issue(e, check.syntax_error, kSource);
  for (const auto& w : check.warnings) check_issue(w, false, kSource);
  FUZZ_REQUIRE(!check.syntax_error || check.errors.size() == 1);

  auto parsed = stepwatch::spec::parse_spec(text, kSource);
  FUZZ_REQUIRE(parsed.ok() == check.ok());
  if (!parsed) {
    const auto& e = parsed.error();
    FUZZ_REQUIRE(e.code ==
                 (check.syntax_error ? stepwatch::Errc::kParse : stepwatch::Errc::kInvalidField));
    FUZZ_REQUIRE(e.message.starts_with(kSource));
    return 0;
  }
  const JobSpec& spec = *parsed;
  check_accepted(spec);
  check_log_contract(spec.log);

  // The rules again, on the spec alone (no key was "written"): still no error.
  stepwatch::spec::KeyLines no_lines;
  stepwatch::spec::IssueSink sink(kSource, &no_lines);
  stepwatch::spec::validate_spec(spec, no_lines, sink);
  FUZZ_REQUIRE(sink.take_errors().empty());

  // Written back as TOML, it reads as the same spec.
  std::string written = to_toml(spec);
  auto again = stepwatch::spec::parse_spec(written, kSource);
  FUZZ_REQUIRE(again.ok());
  FUZZ_REQUIRE(to_toml(*again) == written);
  return 0;
}
