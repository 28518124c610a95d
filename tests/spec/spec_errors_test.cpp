// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Every way a spec can be wrong, each with the exact "FILE:LINE: key: message" it must produce.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "src/spec/spec.h"

namespace stepwatch::spec {
namespace {

std::string all_text(const std::vector<SpecIssue>& issues) {
  std::string out;
  for (const auto& i : issues) out += i.text() + "\n";
  return out;
}

struct Case {
  const char* text;
  const char* want;  // a substring of the only error's text
};

void expect_one_error(const Case& c) {
  SpecCheck check = check_spec(c.text, "t.toml");
  ASSERT_EQ(check.errors.size(), 1u) << "input:\n"
                                     << c.text << "\nerrors:\n"
                                     << all_text(check.errors);
  EXPECT_NE(check.errors[0].text().find(c.want), std::string::npos)
      << "input:\n"
      << c.text << "\nwant: " << c.want << "\ngot:  " << check.errors[0].text();
}

TEST(SpecErrors, MalformedTomlNamesLineAndColumn) {
  const Case cases[] = {
      {"job = \n", "t.toml:1:"},
      {"job = \"a\"\n[phases\ninit = \"1m\"\n", "t.toml:2:"},
      {"a = 1\nb = 2\njob = \"x\"\njob = \"y\"\n", "t.toml:4:"},
      {"owner = \"unterminated\n", "t.toml:1:"},
  };
  for (const auto& c : cases) {
    expect_one_error(c);
    SpecCheck check = check_spec(c.text, "t.toml");
    EXPECT_TRUE(check.syntax_error);
    EXPECT_NE(check.errors[0].message.find("malformed TOML: "), std::string::npos)
        << check.errors[0].message;
    EXPECT_GT(check.errors[0].column, 0);
  }
}

TEST(SpecErrors, DurationsMustBePositiveAndWellFormed) {
  const Case cases[] = {
      {"expected_interval = -5\n",
       "t.toml:1: expected_interval: must be a positive duration, got -5"},
      {"expected_interval = 0\n",
       "t.toml:1: expected_interval: must be a positive duration, got 0"},
      {"expected_interval = \"0s\"\n",
       "expected_interval: must be a positive duration, got \"0s\""},
      {"expected_interval = -0.5\n", "must be a positive duration, got -0.5"},
      {"expected_interval = \"-2s\"\n",
       "t.toml:1: expected_interval: invalid duration \"-2s\": negative"},
      {"expected_interval = \"learnt\"\n",
       "expected_interval: \"learnt\" is neither a duration nor \"learn\""},
      {"expected_interval = \"Learn\"\n", "\"Learn\" is neither a duration nor \"learn\""},
      {"expected_interval = \"auto\"\n", "expected_interval: invalid duration \"auto\""},
      {"poll_interval = \"5 minutes\"\n",
       "t.toml:1: poll_interval: invalid duration \"5 minutes\""},
      {"poll_interval = \"5x\"\n", "unknown unit \"x\""},
      {"expected_interval = 1e12\n", "expected_interval: 1e+12 seconds is out of range"},
      {"[phases]\ninit = 0\n", "t.toml:2: phases.init: must be a positive duration, got 0"},
      {"[phases]\neval = { budget = \"-1m\" }\n",
       "t.toml:2: phases.eval.budget: invalid duration \"-1m\""},
      {"[runbook]\nack_timeout = \"0ms\"\n",
       "t.toml:2: runbook.ack_timeout: must be a positive duration"},
      {"[runbook]\npreempt_grace = -30\n",
       "runbook.preempt_grace: must be a positive duration, got -30"},
      {"[runbook.collect]\ntime_limit = \"\"\n",
       "runbook.collect.time_limit: invalid duration \"\": empty"},
      {"[[runbook.pager]]\nurl = \"http://h\"\ntimeout = 0\n",
       "t.toml:3: runbook.pager[0].timeout: must be a"},
      {"expected_interval = 00:00:02\n",
       "expected_interval: expected a duration (a string like \"15m\" or a "
       "number of seconds), got a time"},
  };
  for (const auto& c : cases) expect_one_error(c);
}

TEST(SpecErrors, UnknownKeysSuggestTheClosestKnownKey) {
  const Case cases[] = {
      {"grace_interval = 3\n",
       "t.toml:1: grace_interval: unknown key; did you mean \"grace_intervals\"?"},
      {"grace = 3\n", "grace: unknown key; did you mean \"grace_intervals\"?"},
      {"expected_intervall = \"2s\"\n", "did you mean \"expected_interval\"?"},
      {"\n\n[runbook.collect]\npython_stack = true\n",
       "t.toml:4: runbook.collect.python_stack: unknown key; did you mean \"python_stacks\"?"},
      {"ack_timeout = \"5m\"\n",
       "t.toml:1: ack_timeout: unknown key; \"ack_timeout\" belongs in [runbook]"},
      {"[runbook]\nslow_factor = 2\n",
       "runbook.slow_factor: unknown key; \"slow_factor\" is a top-level key"},
      {"[[runbook.pager]]\nurl = \"http://h\"\nheaders = 1\n",
       "t.toml:3: runbook.pager[0].headers: unknown key"},
      {"[phases.eval]\nbudgett = \"1m\"\n",
       "phases.eval.budgett: unknown key; did you mean \"budget\"?"},
      {"[learn]\nwindows = 3\n", "learn.windows: unknown key; did you mean \"window\"?"},
      {"[log]\npattern = 'x'\n", "log.pattern: unknown key"},
      {"[checkpoint]\ndirectory = \"/c\"\n",
       "checkpoint.directory: unknown key; did you mean \"dir\"?"},
      {"[autopreempt]\nmisses = 2\n", "autopreempt: unknown key; did you mean \"auto_preempt\"?"},
  };
  for (const auto& c : cases) expect_one_error(c);
  SpecCheck none = check_spec("colour = \"red\"\n", "t.toml");
  ASSERT_EQ(none.errors.size(), 1u);
  EXPECT_EQ(none.errors[0].text(), "t.toml:1: colour: unknown key");
}

TEST(SpecErrors, WrongTypesNameTheExpectedType) {
  const Case cases[] = {
      {"grace_intervals = \"3\"\n", "t.toml:1: grace_intervals: expected a number, got a string"},
      {"job = 5\n", "job: expected a string, got an integer"},
      {"world_size = 2.5\n", "world_size: expected an integer, got a float"},
      {"world_size = 99999999999\n", "world_size: 99999999999 is out of range"},
      {"[auto_preempt]\nenabled = \"yes\"\n",
       "t.toml:2: auto_preempt.enabled: expected true or false, got a string"},
      {"phases = 3\n", "phases: expected a table ([phases]), got an integer"},
      {"[phases]\neval = true\n", "phases.eval: expected a duration or a table"},
      {"[runbook]\npager = { kind = \"webhook\" }\n", "runbook.pager: expected an array of tables"},
      {"[runbook]\nresume_command = \"run.sh\"\n",
       "runbook.resume_command: expected an array of strings, got a string"},
      {"[runbook]\nresume_command = [\"a\",\n  1]\n",
       "t.toml:3: runbook.resume_command[1]: expected a string"},
      {"[log]\nnoise = 'x'\n", "log.noise: expected an array of strings"},
      {"[runbook.collect]\nmax_bytes = true\n",
       "max_bytes: expected a size (a string like \"64MiB\""},
      {"[runbook.collect]\nmax_bytes = \"64M\"\n",
       "runbook.collect.max_bytes: invalid size \"64M\": unknown unit"},
      {"[log]\npreset = 3\n", "log.preset: expected a string, one of none, plain, huggingface"},
      {"learn = 3\n", "learn: expected a table ([learn]), got an integer"},
  };
  for (const auto& c : cases) expect_one_error(c);
}

TEST(SpecErrors, RangesAndNames) {
  const Case cases[] = {
      {"grace_intervals = 0.5\n", "t.toml:1: grace_intervals: must be >= 1 and <= 1000"},
      {"grace_intervals = 0\n", "got 0"},
      {"slow_factor = 1\n", "t.toml:1: slow_factor: must be > 1 and <= 1000"},
      {"slow_factor = nan\n", "slow_factor: must be > 1"},
      {"exit_grace = \"2h\"\n", "t.toml:1: exit_grace: must be between 0s and 1h"},
      {"quiet_budget = \"0s\"\n", "t.toml:1: quiet_budget: must be a positive duration"},
      {"quiet_budget = \"25h\"\n", "t.toml:1: quiet_budget: must be between 1s and 24h"},
      {"quiet_floor = \"500ms\"\n", "t.toml:1: quiet_floor: must be between 1s and 24h"},
      {"quiet_budget = \"of\"\n",
       "t.toml:1: quiet_budget: \"of\" is neither a duration, \"learn\" nor \"off\""},
      {"exit_grace = \"soon\"\n", "t.toml:1: exit_grace:"},
      {"world_size = -1\n", "world_size: must be >= 0, got -1"},
      {"[auto_preempt]\nmisses = 0\n", "t.toml:2: auto_preempt.misses: must be >= 1, got 0"},
      {"[learn]\nwindow = 1\n", "learn.window: must be >= 2, got 1"},
      {"[learn]\nwarmup_steps = -1\n", "learn.warmup_steps: must be >= 0, got -1"},
      {"[runbook]\nrestart_budget = -1\n", "runbook.restart_budget: must be >= 0, got -1"},
      {"[runbook.collect]\nmax_bytes = 0\n", "runbook.collect.max_bytes: must be >= 1, got 0"},
      {"[runbook.collect]\nlog_lines = -3\n", "runbook.collect.log_lines: must be >= 0, got -3"},
      {"[[runbook.pager]]\nurl = \"http://h\"\nretries = 99\n",
       "t.toml:3: runbook.pager[0].retries: must be <= 20"},
      {"job = \"../etc\"\n", "t.toml:1: job: job id \"../etc\" may only hold [A-Za-z0-9._-]"},
      {"job = \"-x\"\n", "job: job id \"-x\" may not start with '.' or '-'"},
      {"class = \"\"\n", "class: job class \"\" must not be empty"},
      {"owner = \"a\\nb\"\n", "owner: must not hold control characters"},
      {"[log]\npreset = \"megatorn\"\n",
       "t.toml:2: log.preset: unknown value \"megatorn\"; one of none, plain, huggingface, "
       "lightning, megatron, torchtitan, nemo, deepspeed or auto (did you mean \"megatron\"?)"},
      {"[checkpoint]\nsource = \"disk\"\n",
       "checkpoint.source: unknown value \"disk\"; one of marker or beacon"},
  };
  for (const auto& c : cases) expect_one_error(c);
}

TEST(SpecErrors, Phases) {
  const Case cases[] = {
      {"[phases]\n\"bad name\" = \"5m\"\n",
       "t.toml:2: phases.bad name: a phase name may only hold [A-Za-z0-9._:/-]"},
      {"[phases]\n\"this-phase-name-is-far-too-long-x\" = \"5m\"\n", "must be 1 to 31 bytes long"},
      {"[phases]\ntrain = \"5m\"\n",
       "t.toml:2: phases.train: the train phase has no budget of its own"},
      {"[phases.tok]\nbeats_renew = true\n",
       "t.toml:1: phases.tok: a user-defined phase needs a budget"},
      {"[phases]\ncompile = \"20m\"\ncompile_warm = \"25m\"\n",
       "t.toml:3: phases.compile_warm: the warm compile budget (25m00s) must not exceed the cold "
       "one (20m00s, "
       "phases.compile)"},
      {"[phases]\ncompile = { budget = \"5m\" }\n",
       "t.toml:2: phases.compile: the cold compile budget (5m00s) is shorter than the warm one "
       "(10m00s, the default "
       "of phases.compile_warm); set phases.compile_warm too"},
      {"[phases]\ncompile_warm = \"31m\"\n",
       "phases.compile_warm: the warm compile budget (31m00s) must not exceed"},
  };
  for (const auto& c : cases) expect_one_error(c);
  // Equal budgets are fine: a warm cache that does not help is not an error.
  EXPECT_TRUE(check_spec("[phases]\ncompile = \"10m\"\ncompile_warm = \"10m\"\n", "t.toml").ok());
}

TEST(SpecErrors, LogPatternsCompileWithRe2) {
  const Case cases[] = {
      {"[log]\nstep_pattern = 'step (?P<step>\\d+'\n",
       "t.toml:2: log.step_pattern: invalid RE2 pattern \"step (?P<step>\\d+\": missing ): "},
      {"[log]\nstep_pattern = 'step (\\d+)'\n",
       "log.step_pattern: pattern \"step (\\d+)\" has no named group (?P<step>...)"},
      {"[log]\nphase_start = 'begin (\\w+)'\n",
       "log.phase_start: pattern \"begin (\\w+)\" has no named group (?P<phase>"},
      {"[log]\nphase_end = '[z-a]'\n",
       "log.phase_end: invalid RE2 pattern \"[z-a]\": invalid character class range"},
      {"[log]\nnoise = ['ok',\n  '(?<']\n", "t.toml:3: log.noise[1]: invalid RE2 pattern \"(?<\""},
  };
  for (const auto& c : cases) expect_one_error(c);
  EXPECT_TRUE(check_spec("[log]\nphase_end = 'done'\n", "t.toml").ok())
      << "phase_end needs no group";
}

TEST(SpecErrors, PagerUrlSecretsAreNeverEchoed) {
  for (const char* url : {"hooks.example/xoxb-SECRET", "http://bot:SECRET@hooks.example/x",
                          "http://hooks.example/xoxb-SECRET x", "ftp://hooks.example/SECRET"}) {
    SpecCheck check = check_spec(fmt::format("[[runbook.pager]]\nurl = \"{}\"\n", url), "t.toml");
    ASSERT_EQ(check.errors.size(), 1u) << url;
    EXPECT_EQ(check.errors[0].text().find("SECRET"), std::string::npos) << check.errors[0].text();
  }
}

// Found by fuzz/spec_fuzz.cpp: (?P<phase_>...) names no phase; the log contract refuses it.
TEST(SpecErrors, APhaseGroupMustNameAPhase) {
  expect_one_error(
      {"[log]\nphase_start = \"(?P<phase_>x)\"\n",
       "t.toml:2: log.phase_start: pattern \"(?P<phase_>x)\" has no named group (?P<phase>...)"});
  EXPECT_TRUE(check_spec("[log]\nphase_start = \"(?P<phase_eval>x)\"\n", "t.toml").errors.empty());
}

TEST(SpecErrors, Users) {
  const Case cases[] = {
      {"users = \"alice\"\n", "t.toml:1: users: expected an array of strings, got a string"},
      {"users = [1001]\n", "t.toml:1: users[0]: expected a string, got an integer"},
      {"users = [\"al ice\"]\n",
       "t.toml:1: users[0]: \"al ice\" is not a user name or uid (1-32 of [A-Za-z0-9._-])"},
      {"\nusers = [\"alice\", \"-rf\"]\n", "t.toml:2: users[1]: \"-rf\" is not a user name or uid"},
  };
  for (const auto& c : cases) expect_one_error(c);
}

TEST(SpecErrors, Pagers) {
  const Case cases[] = {
      {"[[runbook.pager]]\nkind = \"slack\"\nurl = \"http://x\"\n",
       "t.toml:2: runbook.pager[0].kind: unknown value \"slack\"; one of webhook, alertmanager or "
       "command"},
      {"[[runbook.pager]]\nkind = \"webhook\"\nurl = \"ftp://x\"\n",
       "t.toml:3: runbook.pager[0].url: \"ftp://x\" must start with http:// or https://"},
      {"[[runbook.pager]]\nurl = \"http:///x\"\n",
       "runbook.pager[0].url: \"http:///…\" has no host"},
      {"[[runbook.pager]]\nurl = \"http://?x\"\n",
       "runbook.pager[0].url: \"http:///…\" has no host"},
      // Not a URL at all: not echoed, it may be the secret pasted without its scheme.
      {"[[runbook.pager]]\nurl = \"hooks.example/xoxb-SECRET\"\n",
       "t.toml:2: runbook.pager[0].url: must start with http:// or https://"},
      {"[[runbook.pager]]\nurl = \"https://bot:hunter2@hooks.example/x\"\n",
       "t.toml:2: runbook.pager[0].url: carries credentials (user:password@host)"},
      {"[[runbook.pager]]\nurl = \"https://h/a b\"\n",
       "must not hold spaces or control characters"},
      {"\n[[runbook.pager]]\nkind = \"alertmanager\"\n",
       "t.toml:2: runbook.pager[0]: kind \"alertmanager\" needs a url"},
      {"[[runbook.pager]]\nkind = \"command\"\n",
       "runbook.pager[0]: kind \"command\" needs command = "},
      {"[[runbook.pager]]\nkind = \"command\"\ncommand = [\"p\"]\nurl = \"http://h\"\n",
       "t.toml:4: runbook.pager[0].url: kind \"command\" takes no url"},
      {"[[runbook.pager]]\nurl = \"http://h\"\ncommand = [\"p\"]\nkind = \"webhook\"\n",
       "t.toml:3: runbook.pager[0].command: kind \"webhook\" takes no command"},
      {"[[runbook.pager]]\ntimeout = \"1s\"\n",
       "t.toml:1: runbook.pager[0]: needs kind = \"webhook\" or \"alertmanager\" with a url, or "
       "kind = \"command\""},
      {"[[runbook.pager]]\nurl = \"http://h\"\n[[runbook.pager]]\nkind = \"command\"\ncommand = "
       "[\"\"]\n",
       "t.toml:5: runbook.pager[1].command[0]: the program name must not be empty"},
  };
  for (const auto& c : cases) expect_one_error(c);
}

TEST(SpecErrors, CommandPlaceholders) {
  const Case cases[] = {
      {"[runbook]\nresume_command = [\"train\", \"--from={checkpoint}\"]\n",
       "t.toml:2: runbook.resume_command[1]: unknown placeholder {checkpoint} in "
       "\"--from={checkpoint}\"; allowed "
       "here: {checkpoint_id}, {checkpoint_step}, {incarnation}, {job}"},
      {"[runbook]\npreempt_command = [\"kill-job\", \"{checkpoint_id}\"]\n",
       "runbook.preempt_command[1]: unknown placeholder {checkpoint_id}"},
      {"[[runbook.pager]]\ncommand = [\"page\", \"{owner}\"]\n",
       "runbook.pager[0].command[1]: unknown placeholder {owner}"},
  };
  for (const auto& c : cases) expect_one_error(c);
  EXPECT_TRUE(check_spec("[runbook]\nresume_command = [\"sh\", \"-c\", \"run ${HOME} {{literal}} "
                         "{checkpoint_step}\"]\n",
                         "t.toml")
                  .ok());
}

TEST(SpecErrors, CheckpointMarker) {
  const Case cases[] = {
      {"[checkpoint]\ndir = \"/c\"\nmarker = \"/abs/*/C\"\n",
       "t.toml:3: checkpoint.marker: \"/abs/*/C\" must be relative"},
      {"[checkpoint]\ndir = \"/c\"\nmarker = \"../*/C\"\n",
       "checkpoint.marker: \"../*/C\" must stay inside checkpoint.dir"},
      {"[checkpoint]\ndir = \"/c\"\nmarker = \"latest/COMMITTED\"\n", "has no '*'"},
      {"[checkpoint]\ndir = \"/c\"\nmarker = \"\"\n", "checkpoint.marker: must not be empty"},
      {"[checkpoint]\nsource = \"marker\"\n",
       "t.toml:2: checkpoint.source: source \"marker\" needs checkpoint.dir"},
  };
  for (const auto& c : cases) expect_one_error(c);
}

TEST(SpecErrors, EveryErrorOfAFileIsReportedInLineOrder) {
  SpecCheck check = check_spec(R"(job = "ok"
grace_intervals = 0
colour = "red"
[phases]
init = "-3m"
compile = "5m"
[log]
step_pattern = '(x'
[[runbook.pager]]
kind = "webhook"
url = "mailto:me"
)",
                               "many.toml");
  std::vector<std::string> want = {
      "many.toml:2: grace_intervals:",
      "many.toml:3: colour: unknown key",
      "many.toml:5: phases.init: invalid duration",
      "many.toml:6: phases.compile: the cold compile budget",
      "many.toml:8: log.step_pattern: invalid RE2",
      "many.toml:11: runbook.pager[0].url:",
  };
  ASSERT_EQ(check.errors.size(), want.size()) << all_text(check.errors);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(check.errors[i].text().rfind(want[i], 0), 0u) << check.errors[i].text();
  }
}

TEST(SpecErrors, WarningsDoNotFailTheSpec) {
  struct Warn {
    const char* text;
    const char* want;
  } cases[] = {
      {"grace_intervals = 2\nslow_factor = 3\n",
       "t.toml:2: slow_factor: slow_factor 3 >= grace_intervals 2: a step that slow stalls before "
       "it can be reported"},
      {"expected_interval = \"5s\"\n[learn]\nwindow = 8\n",
       "t.toml:2: learn: ignored: expected_interval is fixed"},
      {"expected_interval = \"2s\"\npoll_interval = \"5s\"\n",
       "t.toml:2: poll_interval: 5.0s is longer than"},
      {"[runbook]\nresume = false\nrestart_budget = 2\n",
       "runbook.restart_budget: has no effect with runbook.resume = false"},
      {"[runbook]\nack_timeout = \"5m\"\n", "runbook.ack_timeout: no [[runbook.pager]] is set"},
  };
  for (const auto& c : cases) {
    SpecCheck check = check_spec(c.text, "t.toml");
    EXPECT_TRUE(check.ok()) << all_text(check.errors);
    ASSERT_EQ(check.warnings.size(), 1u) << c.text << all_text(check.warnings);
    EXPECT_NE(check.warnings[0].text().find(c.want), std::string::npos) << check.warnings[0].text();
  }
}

TEST(SpecErrors, OneOwnerOfRestarts) {
  const Case cases[] = {
      {"[runbook]\nresume_owner = \"slurm\"\nresume_command = [\"python\", \"t.py\"]\n",
       "t.toml:3: runbook.resume_command: is stepwatch's own relaunch, but runbook.resume_owner = "
       "\"slurm\""},
      {"[runbook]\nresume_owner = \"kubernetes\"\nresume_command = [\"x\"]\n",
       "kubernetes restarts the job with its own command"},
      {"[runbook]\nresume_owner = \"slrum\"\n",
       "t.toml:2: runbook.resume_owner: unknown value \"slrum\"; one of stepwatch, slurm or "
       "kubernetes (did you mean \"slurm\"?)"},
      {"[runbook]\nresume_owner = \"slurm\"\n[slurm]\nrequeue = \"exit\"\nrequeue_exit_code = 76\n",
       "t.toml:5: slurm.requeue_exit_code: must be 1-255 and not 76"},
      {"[runbook]\nresume_owner = \"slurm\"\n[slurm]\nrequeue = \"sbatch\"\n",
       "slurm.requeue: unknown value \"sbatch\"; one of scontrol or exit"},
      {"[runbook]\nresume_owner = \"kubernetes\"\n[kubernetes]\nrequeue_exit_code = 75\n",
       "t.toml:4: kubernetes.requeue_exit_code: must be 128-255"},
      {"[slurm]\nrequeu = \"exit\"\n", "t.toml:2: slurm.requeu: unknown key"},
      {"[node_fault]\nsuspect_of_last = 3\nsuspect_culprit_min = 4\n",
       "node_fault.suspect_culprit_min: 4 can never be reached in the last 3"},
      {"[node_fault]\nstorm_window = \"soon\"\n", "node_fault.storm_window"},
      {"[node_fault]\nstorm_incarnations = -1\n", "node_fault.storm_incarnations: must be >= 0"},
  };
  for (const auto& c : cases) expect_one_error(c);
}

TEST(SpecErrors, SchedulerTablesOfAnotherOwnerAreWarnedAbout) {
  SpecCheck check =
      check_spec("[slurm]\nrequeue = \"exit\"\n[kubernetes]\nrequeue_exit_code = 143\n", "t.toml");
  ASSERT_TRUE(check.ok()) << all_text(check.errors);
  std::string w = all_text(check.warnings);
  EXPECT_NE(w.find("slurm: ignored: runbook.resume_owner is \"stepwatch\", not \"slurm\""),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("kubernetes: ignored"), std::string::npos) << w;
}

TEST(SpecErrors, SchedulerSettingsParse) {
  SpecCheck check = check_spec(
      "[runbook]\nresume_owner = \"slurm\"\n[slurm]\nrequeue = \"exit\"\n"
      "requeue_exit_code = 85\nscontrol = \"/opt/slurm/bin/scontrol\"\ncommand_timeout = \"5s\"\n"
      "[node_fault]\nstorm_incarnations = 4\nstorm_window = \"1h\"\nshort_run = \"5m\"\n"
      "cross_job_min = 0\ndrain = true\n",
      "t.toml");
  ASSERT_TRUE(check.ok()) << all_text(check.errors);
  EXPECT_TRUE(check.warnings.empty()) << all_text(check.warnings);
  const JobSpec& s = check.spec;
  EXPECT_EQ(s.runbook.resume_owner, ResumeOwner::kSlurm);
  EXPECT_EQ(s.slurm.requeue, SlurmRequeue::kExit);
  EXPECT_EQ(s.slurm.requeue_exit_code, 85);
  EXPECT_EQ(s.slurm.scontrol, "/opt/slurm/bin/scontrol");
  EXPECT_EQ(s.slurm.scancel, "scancel");
  EXPECT_EQ(s.slurm.command_timeout_ns, 5 * kNsPerSec);
  EXPECT_EQ(s.node_fault.storm_incarnations, 4);
  EXPECT_EQ(s.node_fault.storm_window_ns, 3600 * kNsPerSec);
  EXPECT_EQ(s.node_fault.short_run_ns, 300 * kNsPerSec);
  EXPECT_EQ(s.node_fault.cross_job_min, 0);
  EXPECT_TRUE(s.node_fault.drain);
  // The defaults are the anchors' numbers (docs/node-fault.md).
  JobSpec d = default_spec();
  EXPECT_EQ(d.runbook.resume_owner, ResumeOwner::kStepwatch);
  EXPECT_EQ(d.kubernetes.requeue_exit_code, 175);
  EXPECT_EQ(d.node_fault.storm_incarnations, 5);
  EXPECT_EQ(d.node_fault.storm_window_ns, 30 * 60 * kNsPerSec);
  EXPECT_EQ(d.node_fault.suspect_of_last, 3);
  EXPECT_EQ(d.node_fault.suspect_culprit_min, 2);
  EXPECT_FALSE(d.node_fault.drain);
}

}  // namespace
}  // namespace stepwatch::spec
