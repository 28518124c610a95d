// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch run`'s supervisor over a real child (a shell trainer writing the JSONL contract),
// its real store, and a scripted resume owner (tests/fakes/resume_fakes.h): after the preempt
// the owner's plan is what the supervisor applies (relaunch, exit with a code, stop, give up).
// The trainer commits checkpoint step_2 at step 2, takes step 3, then hangs; resumed
// (STEPWATCH_RESUME_CHECKPOINT set) it says so and finishes.
#include "src/supervise/supervisor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "src/common/clock.h"
#include "src/store/store.h"
#include "tests/fakes/resume_fakes.h"

namespace stepwatch::supervise {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = runbook::ResumePlan::Kind;

constexpr const char* kTrainer = R"(
d="$STEPWATCH_DIR/$STEPWATCH_JOB"; mkdir -p "$d"; f="$d/progress.jsonl"
say() { echo "{\"job\":\"$STEPWATCH_JOB\",\"rank\":0,\"world_size\":1,\"pid\":$$,\"incarnation\":$STEPWATCH_INCARNATION,\"time\":$(date +%s.%N)$1}" >> "$f"; }
if [ -n "$STEPWATCH_RESUME_CHECKPOINT" ]; then
  echo "resumed from $STEPWATCH_RESUME_CHECKPOINT at $STEPWATCH_RESUME_STEP"
  say ",\"step\":4"; say ",\"status\":\"finished\""; exit 0
fi
say ",\"step\":1"; sleep 0.05
say ",\"step\":2,\"checkpoint\":\"step_2\""; sleep 0.05
say ",\"step\":3"
exec sleep 600
)";

class SupervisorTest : public ::testing::Test {
 protected:
  SupervisorTest()
      : dir_(fs::temp_directory_path() /
             ("sw-supervisor-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    spec_ = spec::default_spec();
    spec_.expected_interval_ns = 100 * kNsPerMs;
    spec_.grace_intervals = 2;
    spec_.learn.warmup_steps = 0;  // step 3 is judged in step time, not by the init budget
    spec_.poll_interval_ns = 50 * kNsPerMs;
    spec_.runbook.ack_timeout_ns = 200 * kNsPerMs;
    spec_.runbook.preempt_grace_ns = kNsPerSec;
    spec_.runbook.collect.python_stacks = false;
    spec_.runbook.collect.native_stacks = false;
    spec_.auto_preempt.enabled = true;
  }
  ~SupervisorTest() override { fs::remove_all(dir_); }

  int run() {
    RunOptions o;
    o.argv = {"/bin/sh", "-c", kTrainer};
    o.job = "train";
    o.beacon_root = (dir_ / "beacons").string();
    o.state_dir = (dir_ / "state").string();
    o.nvml_lib = (dir_ / "no-nvml.so").string();
    o.resume_owner = [this](const spec::JobSpec&) {
      return std::make_unique<test::BorrowedOwner>(owner_);
    };
    Supervisor s(std::move(o), spec_);
    return s.run();
  }
  // The job's actions of this kind, oldest first.
  std::vector<store::Action> actions(std::string_view kind) {
    auto st = store::Store::open((dir_ / "state").string());
    EXPECT_TRUE(st.ok()) << st.error().message;
    std::vector<store::Action> out;
    if (!st) return out;
    auto all = st->job_actions("train", 100);
    EXPECT_TRUE(all.ok());
    for (auto it = all->rbegin(); it != all->rend(); ++it) {
      if (it->kind == kind) out.push_back(*it);
    }
    return out;
  }
  std::vector<store::Incident> incidents() {
    auto st = store::Store::open((dir_ / "state").string());
    auto i = st->incidents("train", 10);
    EXPECT_TRUE(i.ok());
    return i.ok() ? *i : std::vector<store::Incident>{};
  }

  fs::path dir_;
  spec::JobSpec spec_;
  test::FakeOwner owner_;
};

TEST_F(SupervisorTest, ARelaunchPlanStartsTheNextIncarnationFromTheCommittedCheckpoint) {
  EXPECT_EQ(run(), 0);
  EXPECT_THAT(owner_.calls, ElementsAre("plan 1"));
  auto resumes = actions(store::action_kind::kResume);
  ASSERT_EQ(resumes.size(), 1u);
  EXPECT_EQ(resumes[0].detail, "resumed from step_2 (step 2) as incarnation 1");
  auto inc = incidents();
  ASSERT_EQ(inc.size(), 1u);
  EXPECT_EQ(inc[0].resolution, "resumed from step_2 (step 2) as incarnation 1");
}

TEST_F(SupervisorTest, AnExitPlanIsTheRunsExitStatusAndNothingIsRelaunched) {
  owner_.next_plan = runbook::ResumePlan::of(Kind::kExit, "restart it");
  owner_.next_plan.exit_code = 42;
  owner_.next_plan.by = "the fake scheduler";
  EXPECT_EQ(run(), 42);
  EXPECT_THAT(owner_.calls, ElementsAre("plan 1"));
  auto resumes = actions(store::action_kind::kResume);
  ASSERT_EQ(resumes.size(), 1u);
  EXPECT_EQ(resumes[0].detail,
            "exiting with 42 for the fake scheduler to restart it (next incarnation from step_2 "
            "(step 2))");
  // The owner's own line is an action of the incident too.
  auto notes = actions(store::action_kind::kNote);
  ASSERT_FALSE(notes.empty());
  EXPECT_EQ(notes.back().detail, "the owner's own note");
}

TEST_F(SupervisorTest, AFailedRequeueEndsTheRunWith75AndSaysWhy) {
  owner_.next_plan = runbook::ResumePlan::of(Kind::kFailed, "not requeued: scontrol: timed out");
  EXPECT_EQ(run(), spec::kExitStopped);
  auto resumes = actions(store::action_kind::kResume);
  ASSERT_EQ(resumes.size(), 1u);
  EXPECT_FALSE(resumes[0].ok);
  EXPECT_EQ(resumes[0].detail, "not requeued: scontrol: timed out");
  auto inc = incidents();
  ASSERT_EQ(inc.size(), 1u);
  EXPECT_FALSE(inc[0].is_open());
  EXPECT_EQ(inc[0].resolution, "not requeued: scontrol: timed out");
}

TEST_F(SupervisorTest, ResumeOffAsksTheOwnerToStopAndEndsWith75) {
  spec_.runbook.resume = false;
  owner_.stop_plan = runbook::ResumePlan::of(Kind::kCancelled, "batch job cancelled");
  EXPECT_EQ(run(), spec::kExitStopped);
  EXPECT_THAT(owner_.calls, ElementsAre("stop"));
  auto inc = incidents();
  ASSERT_EQ(inc.size(), 1u);
  EXPECT_EQ(inc[0].resolution, "preempted; resume is off; batch job cancelled");
}

TEST_F(SupervisorTest, ASpentRestartBudgetGivesUpWith76BeforeTheOwnerIsAsked) {
  spec_.runbook.restart_budget = 0;
  EXPECT_EQ(run(), spec::kExitGaveUp);
  EXPECT_TRUE(owner_.calls.empty());
  auto inc = incidents();
  ASSERT_EQ(inc.size(), 1u);
  EXPECT_THAT(inc[0].resolution, HasSubstr("gave up: "));
}

}  // namespace
}  // namespace stepwatch::supervise
