// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Reading specs that are valid: defaults, every field, shorthand forms, the shipped examples.
// Error paths are in spec_errors_test.cpp.
#include "src/spec/spec.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "src/common/clock.h"
#include "tests/support/temp_dir.h"

namespace stepwatch::spec {
namespace {

constexpr int64_t kSec = kNsPerSec;
constexpr int64_t kMin = 60 * kNsPerSec;

JobSpec parse_ok(const std::string& text) {
  auto check = check_spec(text, "t.toml");
  std::string all;
  for (const auto& e : check.errors) all += e.text() + "\n";
  EXPECT_TRUE(check.ok()) << all;
  EXPECT_TRUE(check.warnings.empty()) << check.warnings.front().text();
  return check.spec;
}

std::string source_dir() {
  const char* d = std::getenv("STEPWATCH_SOURCE_DIR");
  return d != nullptr ? d : ".";
}

TEST(Spec, EmptyFileGivesDefaults) {
  for (const char* text : {"", "# nothing but a comment\n", "\n\n"}) {
    JobSpec s = parse_ok(text);
    JobSpec d = default_spec();
    EXPECT_EQ(s.source, "t.toml");
    EXPECT_EQ(s.job, "");
    EXPECT_FALSE(s.expected_interval_ns.has_value()) << "learn is the default";
    EXPECT_DOUBLE_EQ(s.grace_intervals, 2.0);
    EXPECT_DOUBLE_EQ(s.slow_factor, 1.5);
    EXPECT_EQ(s.exit_grace_ns, 5 * kSec);
    EXPECT_TRUE(s.quiet_early) << "the early rule is on by default";
    EXPECT_FALSE(s.quiet_budget_ns.has_value()) << "and learns its budget";
    EXPECT_EQ(s.quiet_floor_ns, 30 * kSec);
    EXPECT_FALSE(s.poll_interval_ns.has_value());
    EXPECT_EQ(s.learn.warmup_steps, 3);
    EXPECT_EQ(s.learn.window, 32);
    EXPECT_EQ(s.phases.size(), d.phases.size());
    EXPECT_TRUE(s.auto_preempt.enabled);
    EXPECT_EQ(s.auto_preempt.misses, 1);
    EXPECT_EQ(s.log.preset, LogPreset::kAuto);
    EXPECT_EQ(s.checkpoint.marker, "step_*/COMMITTED");
    EXPECT_EQ(s.checkpoint.source, CheckpointSource::kBeacon);
    EXPECT_EQ(s.runbook.ack_timeout_ns, 10 * kMin);
    EXPECT_EQ(s.runbook.ack_hold_limit_ns, 60 * kMin);
    EXPECT_TRUE(s.runbook.pagers.empty());
    EXPECT_TRUE(s.runbook.collect.python_stacks);
    EXPECT_EQ(s.runbook.collect.log_lines, 200);
    EXPECT_EQ(s.runbook.collect.max_bytes, 64 << 20);
    EXPECT_EQ(s.runbook.collect.time_limit_ns, 60 * kSec);
    EXPECT_EQ(s.runbook.preempt_grace_ns, 30 * kSec);
    EXPECT_EQ(s.runbook.restart_budget, 3);
  }
}

TEST(Spec, BuiltinPhaseBudgetsAndLookup) {
  JobSpec s = default_spec();
  struct Case {
    const char* name;
    bool warm;
    int64_t budget;  // 0: no own budget
  } cases[] = {
      {"init", false, 10 * kMin},
      {"compile", false, 30 * kMin},
      {"compile", true, 10 * kMin},
      {"compile_warm", false, 10 * kMin},
      {"data", false, 10 * kMin},
      {"eval", false, 30 * kMin},
      {"eval", true, 30 * kMin},
      {"checkpoint", false, 15 * kMin},
      {"train", false, 0},
      {"my-phase", false, 0},
      {"", true, 0},
  };
  for (const auto& c : cases) {
    const PhaseBudget* b = s.phase(c.name, c.warm);
    if (c.budget == 0) {
      EXPECT_EQ(b, nullptr) << c.name;
    } else {
      ASSERT_NE(b, nullptr) << c.name;
      EXPECT_EQ(b->budget_ns, c.budget) << c.name << " warm=" << c.warm;
    }
  }
}

TEST(Spec, DurationsAreStringsOrSeconds) {
  struct Case {
    const char* value;
    int64_t ns;
  } cases[] = {
      {"\"2s\"", 2 * kSec},     {"\"250ms\"", kSec / 4}, {"\"1h30m\"", 90 * kMin},
      {"\"18min\"", 18 * kMin}, {"90", 90 * kSec},       {"1.5", 1500 * kNsPerMs},
      {"\"90\"", 90 * kSec},
  };
  for (const auto& c : cases) {
    JobSpec s = parse_ok(std::string("expected_interval = ") + c.value + "\n");
    ASSERT_TRUE(s.expected_interval_ns.has_value()) << c.value;
    EXPECT_EQ(*s.expected_interval_ns, c.ns) << c.value;
  }
  EXPECT_FALSE(parse_ok("expected_interval = \"learn\"\n").expected_interval_ns.has_value());
}

TEST(Spec, StallAfterIsIntervalTimesGrace) {
  JobSpec s = parse_ok("expected_interval = \"2s\"\ngrace_intervals = 3\n");
  EXPECT_EQ(s.stall_after_ns(), 6 * kSec);
  s = parse_ok("expected_interval = \"10s\"\ngrace_intervals = 2.5\n");
  EXPECT_EQ(s.stall_after_ns(), 25 * kSec);
  EXPECT_FALSE(default_spec().stall_after_ns().has_value());
}

TEST(Spec, QuietBudgetLearnOffOrADuration) {
  EXPECT_FALSE(parse_ok("quiet_budget = \"off\"\n").quiet_early);
  JobSpec learn = parse_ok("quiet_budget = \"learn\"\n");
  EXPECT_TRUE(learn.quiet_early);
  EXPECT_FALSE(learn.quiet_budget_ns.has_value());
  EXPECT_EQ(parse_ok("quiet_budget = \"90s\"\n").quiet_budget_ns,
            std::optional<int64_t>(90 * kSec));
}

TEST(Spec, ReadsEveryField) {
  JobSpec s = parse_ok(R"(
job = "j-1"
owner = "ml-oncall"
users = ["alice", "1001"]
class = "finetune"
world_size = 16
expected_interval = "45s"
grace_intervals = 2.5
slow_factor = 1.25
exit_grace = "2s"
quiet_budget = "45s"
quiet_floor = "20s"
poll_interval = "5s"

[phases]
init = "20m"
compile = { budget = "40m" }
compile_warm = "5m"
eval = { beats_renew = true }
"tok:shard/0" = { budget = "90s", beats_renew = true }

[auto_preempt]
enabled = false
misses = 3

[log]
preset = "huggingface"
step_pattern = 'it (?P<step>\d+) loss (?P<loss>\S+)'
phase_start = '>> (?P<phase>\w+)'
phase_end = '<< done'
noise = ['a', 'b+']

[checkpoint]
dir = "/ckpt"
marker = "global_step*/done"
source = "beacon"

[runbook]
ack_timeout = "3m"
ack_hold_limit = "30m"
preempt_command = ["scancel", "--signal=TERM", "{job}"]
preempt_grace = 45
resume_command = ["run.sh", "--step={checkpoint_step}", "--id={checkpoint_id}", "--n={incarnation}"]
restart_budget = 5

[[runbook.pager]]
kind = "alertmanager"
url = "https://am.example:9093"
timeout = "7s"
retries = 0

[[runbook.pager]]
command = ["notify", "{job}"]

[runbook.collect]
python_stacks = false
native_stacks = false
gpu = false
log_lines = 0
max_bytes = 1048576
time_limit = "2m"
)");
  EXPECT_EQ(s.job, "j-1");
  EXPECT_EQ(s.owner, "ml-oncall");
  EXPECT_EQ(s.users, (std::vector<std::string>{"alice", "1001"}));
  EXPECT_EQ(s.job_class, "finetune");
  EXPECT_EQ(s.world_size, 16);
  EXPECT_EQ(s.expected_interval_ns, 45 * kSec);
  EXPECT_DOUBLE_EQ(s.grace_intervals, 2.5);
  EXPECT_DOUBLE_EQ(s.slow_factor, 1.25);
  EXPECT_EQ(s.exit_grace_ns, 2 * kSec);
  EXPECT_EQ(s.quiet_budget_ns, std::optional<int64_t>(45 * kSec));
  EXPECT_EQ(s.quiet_floor_ns, 20 * kSec);
  EXPECT_TRUE(s.quiet_early);
  EXPECT_EQ(s.poll_interval_ns, 5 * kSec);

  EXPECT_EQ(s.phase("init", false)->budget_ns, 20 * kMin);
  EXPECT_EQ(s.phase("compile", false)->budget_ns, 40 * kMin);
  EXPECT_EQ(s.phase("compile", true)->budget_ns, 5 * kMin);
  EXPECT_EQ(s.phase("eval", false)->budget_ns, 30 * kMin)
      << "beats_renew alone keeps the built-in budget";
  EXPECT_TRUE(s.phase("eval", false)->beats_renew);
  EXPECT_FALSE(s.phase("data", false)->beats_renew);
  ASSERT_NE(s.phase("tok:shard/0", false), nullptr);
  EXPECT_EQ(s.phase("tok:shard/0", false)->budget_ns, 90 * kSec);
  EXPECT_TRUE(s.phase("tok:shard/0", false)->beats_renew);

  EXPECT_FALSE(s.auto_preempt.enabled);
  EXPECT_EQ(s.auto_preempt.misses, 3);
  EXPECT_EQ(s.log.preset, LogPreset::kHuggingface);
  EXPECT_EQ(s.log.step_pattern, "it (?P<step>\\d+) loss (?P<loss>\\S+)");
  EXPECT_EQ(s.log.phase_start, ">> (?P<phase>\\w+)");
  EXPECT_EQ(s.log.phase_end, "<< done");
  EXPECT_EQ(s.log.noise, (std::vector<std::string>{"a", "b+"}));
  EXPECT_EQ(s.checkpoint.dir, "/ckpt");
  EXPECT_EQ(s.checkpoint.marker, "global_step*/done");
  EXPECT_EQ(s.checkpoint.source, CheckpointSource::kBeacon) << "an explicit source wins over dir";

  const Runbook& r = s.runbook;
  EXPECT_EQ(r.ack_timeout_ns, 3 * kMin);
  EXPECT_EQ(r.ack_hold_limit_ns, 30 * kMin);
  EXPECT_EQ(r.preempt_command, (std::vector<std::string>{"scancel", "--signal=TERM", "{job}"}));
  EXPECT_EQ(r.preempt_grace_ns, 45 * kSec);
  EXPECT_EQ(r.resume_command.size(), 4u);
  EXPECT_EQ(r.restart_budget, 5);
  ASSERT_EQ(r.pagers.size(), 2u);
  EXPECT_EQ(r.pagers[0].kind, PagerKind::kAlertmanager);
  EXPECT_EQ(r.pagers[0].url, "https://am.example:9093");
  EXPECT_EQ(r.pagers[0].timeout_ns, 7 * kSec);
  EXPECT_EQ(r.pagers[0].retries, 0);
  EXPECT_EQ(r.pagers[1].kind, PagerKind::kCommand) << "kind follows from command";
  EXPECT_EQ(r.pagers[1].command, (std::vector<std::string>{"notify", "{job}"}));
  EXPECT_EQ(r.pagers[1].timeout_ns, 5 * kSec);
  EXPECT_EQ(r.pagers[1].retries, 3);
  EXPECT_FALSE(r.collect.python_stacks);
  EXPECT_FALSE(r.collect.native_stacks);
  EXPECT_FALSE(r.collect.gpu);
  EXPECT_EQ(r.collect.log_lines, 0);
  EXPECT_EQ(r.collect.max_bytes, 1 << 20);
  EXPECT_EQ(r.collect.time_limit_ns, 2 * kMin);
}

TEST(Spec, CheckpointSourceFollowsDir) {
  EXPECT_EQ(parse_ok("[checkpoint]\ndir = \"/c\"\n").checkpoint.source, CheckpointSource::kMarker);
  EXPECT_EQ(parse_ok("[checkpoint]\nmarker = \"s*/ok\"\n").checkpoint.source,
            CheckpointSource::kBeacon);
}

TEST(Spec, PagerKindFollowsTheFieldGiven) {
  JobSpec s =
      parse_ok("[[runbook.pager]]\nurl = \"http://h/x\"\n[[runbook.pager]]\ncommand = [\"p\"]\n");
  ASSERT_EQ(s.runbook.pagers.size(), 2u);
  EXPECT_EQ(s.runbook.pagers[0].kind, PagerKind::kWebhook);
  EXPECT_EQ(s.runbook.pagers[1].kind, PagerKind::kCommand);
  EXPECT_TRUE(parse_ok("[runbook]\npager = []\n").runbook.pagers.empty());
}

TEST(Spec, SizesAreStringsOrBytes) {
  EXPECT_EQ(parse_ok("[runbook.collect]\nmax_bytes = \"512KiB\"\n").runbook.collect.max_bytes,
            512 << 10);
  EXPECT_EQ(parse_ok("[runbook.collect]\nmax_bytes = \"1GiB\"\n").runbook.collect.max_bytes,
            1 << 30);
  EXPECT_EQ(parse_ok("[runbook.collect]\nmax_bytes = 4096\n").runbook.collect.max_bytes, 4096);
}

TEST(Spec, DottedKeysAndInlineTablesReadTheSame) {
  JobSpec a = parse_ok("runbook.collect.log_lines = 7\nlearn = { window = 8 }\n");
  EXPECT_EQ(a.runbook.collect.log_lines, 7);
  EXPECT_EQ(a.learn.window, 8);
}

TEST(Spec, ExamplesLoadAndDoNotShareGrace) {
  auto small = check_spec_file(source_dir() + "/examples/specs/debug-small.toml");
  auto large = check_spec_file(source_dir() + "/examples/specs/pretrain-large.toml");
  ASSERT_TRUE(small.ok()) << small.error().message;
  ASSERT_TRUE(large.ok()) << large.error().message;
  for (const auto* c : {&*small, &*large}) {
    for (const auto& e : c->errors) ADD_FAILURE() << e.text();
    for (const auto& w : c->warnings) ADD_FAILURE() << "warning: " << w.text();
  }
  const JobSpec& s = small->spec;
  const JobSpec& l = large->spec;
  EXPECT_NE(s.grace_intervals, l.grace_intervals);
  EXPECT_EQ(s.expected_interval_ns, 2 * kSec);
  EXPECT_EQ(s.world_size, 2);
  ASSERT_NE(s.phase("tokenize", false), nullptr);
  ASSERT_EQ(s.runbook.pagers.size(), 1u);
  EXPECT_EQ(s.runbook.pagers[0].kind, PagerKind::kWebhook);

  EXPECT_FALSE(l.expected_interval_ns.has_value());
  EXPECT_LT(l.phase("compile", true)->budget_ns, l.phase("compile", false)->budget_ns);
  EXPECT_EQ(l.checkpoint.source, CheckpointSource::kMarker);
  EXPECT_FALSE(l.runbook.resume_command.empty());
  ASSERT_GE(l.runbook.pagers.size(), 1u);
  EXPECT_EQ(l.runbook.pagers[0].kind, PagerKind::kAlertmanager);

  auto loaded = load_spec_file(source_dir() + "/examples/specs/pretrain-large.toml");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->job, "llm-70b-pretrain");
}

// Every ```toml block in docs/spec.md is a valid spec (excerpts may warn).
TEST(Spec, DocumentationExamplesAreValid) {
  std::ifstream in(source_dir() + "/docs/spec.md");
  ASSERT_TRUE(in) << "docs/spec.md not found under " << source_dir();
  std::string line;
  std::string block;
  bool inside = false;
  int blocks = 0;
  int start = 0;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!inside && line == "```toml") {
      inside = true;
      block.clear();
      start = n + 1;
    } else if (inside && line == "```") {
      inside = false;
      ++blocks;
      SpecCheck check = check_spec(block, "docs/spec.md block at line " + std::to_string(start));
      for (const auto& e : check.errors) ADD_FAILURE() << e.text();
    } else if (inside) {
      block += line + "\n";
    }
  }
  EXPECT_GE(blocks, 8);
}

class SpecFiles : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  test::TempDir tmp_;
  std::string dir_ = tmp_.path();
};

TEST_F(SpecFiles, LoadReportsUnreadableFiles) {
  auto missing = load_spec_file(dir_ + "/nope.toml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kNotFound);
  EXPECT_NE(missing.error().message.find("nope.toml"), std::string::npos)
      << missing.error().message;

  auto directory = load_spec_file(dir_);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.error().code, Errc::kInvalidArgument);
  EXPECT_NE(directory.error().message.find("is a directory"), std::string::npos);

  if (geteuid() != 0) {  // root reads anything
    std::string locked = write("locked.toml", "job = \"x\"\n");
    chmod(locked.c_str(), 0);
    auto denied = load_spec_file(locked);
    ASSERT_FALSE(denied.ok());
    EXPECT_EQ(denied.error().code, Errc::kPermission);
  }
}

TEST_F(SpecFiles, LoadNamesTheFileInEveryError) {
  std::string path = write("bad.toml", "grace_intervals = 0\nslow_factor = 0.5\n");
  auto r = load_spec_file(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kInvalidField);
  EXPECT_NE(r.error().message.find(path + ":1: grace_intervals: "), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("\n" + path + ":2: slow_factor: "), std::string::npos)
      << r.error().message;

  auto good = load_spec_file(write("good.toml", "job = \"ok-job\"\n"));
  ASSERT_TRUE(good.ok()) << good.error().message;
  EXPECT_EQ(good->job, "ok-job");
  EXPECT_EQ(good->source, dir_ + "/good.toml");
}

TEST(Spec, ParseSpecFailsWithEveryErrorAndACode) {
  auto syntax = parse_spec("job = \n", "s.toml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.error().code, Errc::kParse);
  auto invalid = parse_spec("world_size = -1\nlearn.window = 1\n", "s.toml");
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.error().code, Errc::kInvalidField);
  EXPECT_EQ(
      invalid.error().message,
      "s.toml:1: world_size: must be >= 0, got -1\ns.toml:2: learn.window: must be >= 2, got 1");
}

}  // namespace
}  // namespace stepwatch::spec

namespace stepwatch::spec {
namespace {

TEST(Spec, PhasePatternsMayNameThePhaseThroughTheGroup) {
  // (?P<phase_eval>...) starts "eval", as the log contract reads it (docs/log-contract.md).
  auto ok = check_spec("[log]\nphase_start = '(?P<phase_eval>Validation)'\n", "t.toml");
  EXPECT_TRUE(ok.ok()) << (ok.errors.empty() ? "" : ok.errors[0].text());
  auto bad = check_spec("[log]\nphase_start = '(?P<stage>Validation)'\n", "t.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.errors[0].text().find("has no named group (?P<phase>"), std::string::npos)
      << bad.errors[0].text();
}

}  // namespace
}  // namespace stepwatch::spec
