// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The scheduler a run is under, from its environment; the one-owner rule; and what Slurm's
// `scontrol show job -o` says, parsed from records Slurm 22.05 printed (tests/e2e/test_slurm.py
// runs the same parser against a real slurmctld).
#include "src/runbook/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "src/runbook/slurm.h"

namespace stepwatch::runbook {
namespace {

GetEnv env_of(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

// One rule for the job id of every command (issue 30): given, spec, STEPWATCH_JOB, then the Slurm
// job's; each source checked, and none named in the error of none.
TEST(JobIdFor, GivenThenSpecThenEnvironmentThenTheSlurmJob) {
  auto slurm_env = env_of({{"SLURM_JOB_ID", "4242"}});
  auto slurm = scheduler_from_env(slurm_env);
  ASSERT_TRUE(slurm.ok());
  auto both = env_of({{"SLURM_JOB_ID", "4242"}, {"STEPWATCH_JOB", "from-env"}});
  EXPECT_EQ(*job_id_for({"given", "--job", "spec-job"}, *slurm, both), "given");
  EXPECT_EQ(*job_id_for({"", "--job", "spec-job"}, *slurm, both), "spec-job");
  EXPECT_EQ(*job_id_for({"", "--job", ""}, *slurm, both), "from-env");
  EXPECT_EQ(*job_id_for({"", "--job", std::nullopt}, *slurm, slurm_env), "slurm-4242");
  SchedulerContext none;
  auto nothing = job_id_for({"", "--job", ""}, none, env_of({}));
  ASSERT_FALSE(nothing.ok());
  EXPECT_EQ(nothing.error().message,
            "no job id: give --job, set job in the spec, set STEPWATCH_JOB, or run inside a Slurm "
            "job (slurm-<SLURM_JOB_ID>)");
  // A command that reads no spec (run --coord, ack) does not offer one.
  auto no_spec = job_id_for({"", "the job argument", std::nullopt}, none, env_of({}));
  ASSERT_FALSE(no_spec.ok());
  EXPECT_EQ(no_spec.error().message,
            "no job id: give the job argument, set STEPWATCH_JOB, or run inside a Slurm job "
            "(slurm-<SLURM_JOB_ID>)");
  auto bad = job_id_for({"", "--job", ""}, none, env_of({{"STEPWATCH_JOB", "../etc"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("STEPWATCH_JOB: ", 0), 0u) << bad.error().message;
  auto bad_flag = job_id_for({"a b", "--job", ""}, none, env_of({}));
  ASSERT_FALSE(bad_flag.ok());
  EXPECT_EQ(bad_flag.error().message.rfind("--job: ", 0), 0u) << bad_flag.error().message;
}

// `status` and `incidents` without a job: the job the shell is inside, by the same rule, else
// every job ("" is no error); a bad one is still an error.
TEST(JobIdFor, AListingCommandTakesTheJobItIsInsideElseEveryJob) {
  auto slurm_env = env_of({{"SLURM_JOB_ID", "4242"}});
  auto slurm = scheduler_from_env(slurm_env);
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(*job_id_for({"", "the job argument", std::nullopt, false}, *slurm, slurm_env),
            "slurm-4242");
  SchedulerContext none;
  EXPECT_EQ(*job_id_for({"", "the job argument", std::nullopt, false}, none,
                        env_of({{"STEPWATCH_JOB", "llm-7b"}})),
            "llm-7b");
  auto every = job_id_for({"", "the job argument", std::nullopt, false}, none, env_of({}));
  ASSERT_TRUE(every.ok()) << every.error().message;
  EXPECT_EQ(*every, "");
  auto bad = job_id_for({"", "the job argument", std::nullopt, false}, none,
                        env_of({{"STEPWATCH_JOB", "a/b"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("STEPWATCH_JOB: ", 0), 0u) << bad.error().message;
}

TEST(SchedulerFromEnv, SlurmGivesJobIdAndRestartCount) {
  auto first = scheduler_from_env(env_of({{"SLURM_JOB_ID", "1234"}, {"SLURMD_NODENAME", "n2"}}));
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->kind, spec::ResumeOwner::kSlurm);
  EXPECT_EQ(first->job_id, "1234");
  EXPECT_EQ(first->restart_count, 0);  // unset on the first run
  EXPECT_EQ(first->node, "n2");
  EXPECT_EQ(first->describe(), "Slurm job 1234");
  auto again = scheduler_from_env(env_of({{"SLURM_JOB_ID", "1234"}, {"SLURM_RESTART_COUNT", "2"}}));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->restart_count, 2);
}

// SLURM_JOB_ID reaches scontrol and scancel, and through the launcher key the root agent's: an
// option there ("--state=RUNNING") would act on every job of the cluster. Refused where it is read.
TEST(SchedulerFromEnv, ASlurmJobIdIsDigitsOrAnArrayTask) {
  for (const char* bad :
       {"--state=RUNNING", "--user=alice", "--partition=gpu", "1234abc", "12_3x"}) {
    auto r = scheduler_from_env(env_of({{"SLURM_JOB_ID", bad}}));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Errc::kInvalidArgument);
    EXPECT_EQ(r.error().message, std::string("SLURM_JOB_ID: Slurm job id \"") + bad +
                                     "\" must be digits, or digits_digits for an array task (at "
                                     "most 10 digits each)");
  }
  for (const char* good : {"123", "123_4"}) {
    auto r = scheduler_from_env(env_of({{"SLURM_JOB_ID", good}}));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->job_id, good);
    ASSERT_TRUE(r->batch_job().ok());
    EXPECT_EQ(r->batch_job()->id, good);
  }
}

TEST(SchedulerFromEnv, KubernetesTakesTheIncarnationFromTheDownwardApi) {
  auto k = scheduler_from_env(
      env_of({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"STEPWATCH_INCARNATION", "3"}}));
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->kind, spec::ResumeOwner::kKubernetes);
  EXPECT_EQ(k->restart_count, 3);
  auto none = scheduler_from_env(env_of({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->restart_count.has_value());  // PyTorchJob: no counter
  auto plain = scheduler_from_env(env_of({}));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->kind, spec::ResumeOwner::kStepwatch);
  EXPECT_EQ(plain->describe(), "no scheduler");
}

TEST(SchedulerFromEnv, ABadCounterIsAnErrorNamingIt) {
  for (const char* bad : {"x", "-1", "1.5", "3 "}) {
    auto r = scheduler_from_env(env_of({{"SLURM_JOB_ID", "7"}, {"SLURM_RESTART_COUNT", bad}}));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message, std::string("SLURM_RESTART_COUNT=") + bad +
                                     " is not a restart count (a whole number >= 0)");
  }
}

TEST(ResumeOwner, AnOwnerThatIsNotThereIsRefused) {
  SchedulerContext none;
  SchedulerContext slurm;
  slurm.kind = spec::ResumeOwner::kSlurm;
  slurm.job_id = "9";
  EXPECT_TRUE(check_resume_owner(spec::ResumeOwner::kStepwatch, none).ok());
  EXPECT_TRUE(check_resume_owner(spec::ResumeOwner::kStepwatch, slurm).ok());
  EXPECT_TRUE(check_resume_owner(spec::ResumeOwner::kSlurm, slurm).ok());
  auto s = check_resume_owner(spec::ResumeOwner::kSlurm, none);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "runbook.resume_owner = \"slurm\", but SLURM_JOB_ID is not set (no scheduler): outside "
            "a Slurm batch job nothing would requeue it");
  auto k = check_resume_owner(spec::ResumeOwner::kKubernetes, slurm);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.error().message.find("KUBERNETES_SERVICE_HOST is not set (Slurm job 9)"),
            std::string::npos);
}

TEST(FirstIncarnation, TheSchedulersCounterButNeverBackwards) {
  SchedulerContext none;
  EXPECT_EQ(first_incarnation(none, std::nullopt), 0);
  EXPECT_EQ(first_incarnation(none, 4), 5);
  SchedulerContext slurm;
  slurm.kind = spec::ResumeOwner::kSlurm;
  slurm.restart_count = 1;
  EXPECT_EQ(first_incarnation(slurm, std::nullopt), 1);
  EXPECT_EQ(first_incarnation(slurm, 0), 1);  // requeued once: SLURM_RESTART_COUNT=1
  EXPECT_EQ(first_incarnation(slurm, 6), 7);  // a new batch job under a known job id
}

// Printed by `scontrol show job -o` of Slurm 22.05.8 (abridged: the keys stepwatch reads and
// the ones with spaces in their values).
constexpr const char* kRunning =
    "JobId=12 JobName=train.sh UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A Priority=1 "
    "Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 "
    "Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:07 NodeList=n1 BatchHost=n1 "
    "Command=/tmp/sw slurm/train.sh WorkDir=/tmp/sw slurm\n";

TEST(SlurmJob, ParsesTheFieldsStepwatchReads) {
  auto j = parse_slurm_job(kRunning, "12");
  ASSERT_TRUE(j.ok()) << j.error().message;
  EXPECT_EQ(j->id, "12");
  EXPECT_EQ(j->state, "RUNNING");
  EXPECT_EQ(j->restarts, 1);
  EXPECT_TRUE(j->requeue);
  EXPECT_EQ(j->user_id, 1000);
  EXPECT_EQ(j->batch_host, "n1");
  EXPECT_EQ(j->node_list, "n1");
}

TEST(SlurmJob, PendingWithoutNodesAndAReasonWithSpaces) {
  auto j = parse_slurm_job(
      "JobId=5 UserId=root(0) JobState=PENDING Reason=BeginTime Dependency=(null) Requeue=0 "
      "Restarts=0 NodeList=(null) Comment=held by the operator ExitCode=0:0",
      "5");
  ASSERT_TRUE(j.ok()) << j.error().message;
  EXPECT_EQ(j->state, "PENDING");
  EXPECT_FALSE(j->requeue);
  EXPECT_EQ(j->user_id, 0);
  EXPECT_EQ(j->node_list, "");
}

TEST(SlurmJob, WhatIsNotAJobRecordIsAnErrorNamingTheField) {
  auto none = parse_slurm_job("slurm_load_jobs error: Invalid job id specified", "99");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message,
            "scontrol show job 99: JobId: missing (is this `scontrol show job -o` output?)");
  auto bad = parse_slurm_job("JobId=3 JobState=RUNNING Restarts=many", "3");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "scontrol show job 3: Restarts: \"many\" is not a count");
  auto missing = parse_slurm_job("JobId=3 JobState=RUNNING", "3");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "scontrol show job 3: Restarts: missing");
}

// The command line is checked before it runs too (defense in depth: the id came through etcd).
TEST(SlurmControl, AnIdThatIsNotASlurmJobIdRunsNothing) {
  spec::SlurmSettings s;
  s.scontrol = "/nonexistent/scontrol";  // an attempt to run it would say "cannot run"
  s.scancel = "/nonexistent/scancel";
  SlurmControl slurm(s);
  for (const char* bad : {"--state=RUNNING", "--user=alice", "1234abc", "12_3x"}) {
    const std::string why = std::string("Slurm job id \"") + bad +
                            "\" must be digits, or digits_digits for an array task (at most 10 "
                            "digits each): nothing was run";
    auto shown = slurm.show(bad);
    ASSERT_FALSE(shown.ok()) << bad;
    EXPECT_EQ(shown.error().message, why);
    auto requeued = slurm.requeue(bad, 0, 0);
    ASSERT_FALSE(requeued.ok()) << bad;
    EXPECT_EQ(requeued.error().message, why);
    auto cancelled = slurm.cancel(bad, 0);
    ASSERT_FALSE(cancelled.ok()) << bad;
    EXPECT_EQ(cancelled.error().message, why);
  }
}

TEST(SlurmControl, AMissingScontrolSaysWhichPackage) {
  spec::SlurmSettings s;
  s.scontrol = "/nonexistent/scontrol";
  auto j = SlurmControl(s).show("1");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.error().code, Errc::kNotFound);
  EXPECT_NE(j.error().message.find("is slurm-client installed"), std::string::npos)
      << j.error().message;
}

}  // namespace
}  // namespace stepwatch::runbook
