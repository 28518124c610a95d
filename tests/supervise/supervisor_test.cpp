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

  int run(const char* trainer = kTrainer) {
    RunOptions o;
    o.argv = {"/bin/sh", "-c", trainer};
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

// Issue 30: whoever restarted the job (an operator's requeue, a node failure, an outer
// supervisor), the first launch of `stepwatch run` resumes from the newest committed checkpoint.
// The trainer writes what it was given and finishes.
constexpr const char* kResumeRecorder = R"(
d="$STEPWATCH_DIR/$STEPWATCH_JOB"; mkdir -p "$d"
echo "${STEPWATCH_RESUME_CHECKPOINT:-none} ${STEPWATCH_RESUME_STEP:-none} ${STEPWATCH_RESUME_DIR:-none}" > "$STEPWATCH_DIR/../resumed"
echo "{\"job\":\"$STEPWATCH_JOB\",\"rank\":0,\"world_size\":1,\"pid\":$$,\"incarnation\":$STEPWATCH_INCARNATION,\"time\":$(date +%s.%N),\"step\":1,\"status\":\"finished\"}" >> "$d/progress.jsonl"
)";

class SupervisorResumeTest : public SupervisorTest {
 protected:
  SupervisorResumeTest() {
    spec_.checkpoint.dir = (dir_ / "ckpt").string();
    spec_.checkpoint.source = spec::CheckpointSource::kMarker;
  }
  // A generation step_N: its data, and its commit marker unless `committed` is false; a marker
  // without data when `data` is false (a torn write).
  void generation(int step, bool committed = true, bool data = true) {
    fs::path g = dir_ / "ckpt" / ("step_" + std::to_string(step));
    fs::create_directories(g);
    if (data) std::ofstream(g / "model.pt") << "weights " << step;
    if (committed) std::ofstream(g / "COMMITTED") << "";
  }
  // What an earlier run saved at its last preempt: the next incarnation from step_N.
  void saved(int incarnation, int step) {
    auto st = store::Store::open((dir_ / "state").string());
    ASSERT_TRUE(st.ok()) << st.error().message;
    store::SupervisorState s;
    s.job = "train";
    s.incarnation = incarnation;
    s.checkpoint_id = "step_" + std::to_string(step);
    s.checkpoint_step = step;
    ASSERT_TRUE(st->save_state(s).ok());
  }
  // "<checkpoint id> <step> <dir>" as the trainer was given them ("none" for each not given).
  std::string resumed() {
    std::ifstream in(dir_ / "resumed");
    std::string line;
    std::getline(in, line);
    return line;
  }
  std::string run_and_say() {
    ::testing::internal::CaptureStderr();
    int rc = run(kResumeRecorder);
    std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 0) << said;
    return said;
  }
  std::string dir_of(int step) {
    return (dir_ / "ckpt" / ("step_" + std::to_string(step))).string();
  }
};

TEST_F(SupervisorResumeTest, AnOperatorsRequeueOfAHealthyJobResumesFromTheNewestCommitted) {
  generation(10);
  generation(20);
  generation(30, /*committed=*/false);  // in flight when the job went: never a resume point
  std::string said = run_and_say();
  EXPECT_EQ(resumed(), "step_20 20 " + dir_of(20));
  EXPECT_THAT(said, HasSubstr("resuming from step_20 (step 20), the newest committed checkpoint"));
}

TEST_F(SupervisorResumeTest, ASavedResumePointNeverMakesTheJobGoBack) {
  // A stall once (step_10 saved), then the job ran on to step_40, then an operator requeued it.
  saved(1, 10);
  generation(10);
  generation(40);
  std::string said = run_and_say();
  EXPECT_EQ(resumed(), "step_40 40 " + dir_of(40));
  EXPECT_THAT(said, HasSubstr("resuming from step_40 (step 40), the newest committed checkpoint, "
                              "not step_10 (step 10) that the last preempt saved"));
}

TEST_F(SupervisorResumeTest, ATornNewestCheckpointFallsBackToTheNextAndSaysSo) {
  generation(30);
  generation(40, /*committed=*/true, /*data=*/false);  // the marker, and no data beside it
  std::string said = run_and_say();
  EXPECT_EQ(resumed(), "step_30 30 " + dir_of(30));
  EXPECT_THAT(said, HasSubstr("step_40 has its marker but no data (a torn write?): resuming from "
                              "step_30 instead"));
}

TEST_F(SupervisorResumeTest, ASavedPointThatIsGoneStartsFromScratchAndSaysSo) {
  saved(2, 50);  // the catalog was cleaned since: step_50 is no longer there
  fs::create_directories(dir_ / "ckpt");
  std::string said = run_and_say();
  EXPECT_EQ(resumed(), "none none none");
  EXPECT_THAT(said, HasSubstr("starting from scratch, not from step_50"));
}

TEST_F(SupervisorResumeTest, WithoutACatalogTheSavedPointIsTheResumePoint) {
  spec_.checkpoint.dir.clear();
  spec_.checkpoint.source = spec::CheckpointSource::kBeacon;
  saved(1, 10);
  run_and_say();
  EXPECT_EQ(resumed(), "step_10 10 none");
}

TEST_F(SupervisorResumeTest, AFirstRunWithNothingCommittedStartsFromScratch) {
  generation(10, /*committed=*/false);
  run_and_say();
  EXPECT_EQ(resumed(), "none none none");
}

}  // namespace
}  // namespace stepwatch::supervise
