// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The after-preempt sequence (runbook/resume.h) over a scripted owner, a recording host and an
// in-memory history, with a hand-moved clock: every path without a process, store or etcd.
#include "src/runbook/resume.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/fakes/resume_fakes.h"

namespace stepwatch::runbook {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = ResumePlan::Kind;

constexpr int64_t kMin = 60 * kNsPerSec;
constexpr int64_t kT0 = 1'700'000'000 * kNsPerSec;

class ResumeTest : public ::testing::Test {
 protected:
  ResumeTest() { policy_.job = "train"; }

  Resume& resume() {
    if (!resume_) resume_.emplace(policy_, owner_, host_);
    return *resume_;
  }
  // Incarnation 2 was preempted for incident 7; it resumes as 3 from step_20.
  static Preempted preempted(std::optional<int> without_progress = std::nullopt) {
    Preempted p;
    p.next.incarnation = 3;
    p.next.from = ResumePoint{"step_20", 20, "/ckpt/step_20"};
    p.next.incident = 7;
    p.done = "preempted";
    p.restarts_without_progress = without_progress;
    return p;
  }
  static Stamp at(int64_t wall) { return {wall, wall - kT0 + 1}; }
  // Three incarnations started in the last 30 minutes (a storm by the default rule), the last
  // two blamed on host b.
  void storm() {
    policy_.node_fault.storm_incarnations = 3;
    host_.memory.add_ended("train", 0, kT0 - 20 * kMin);
    host_.memory.add_ended("train", 1, kT0 - 12 * kMin, "b");
    host_.memory.add_ended("train", 2, kT0 - 5 * kMin, "b");
  }

  ResumePolicy policy_;
  test::FakeOwner owner_;
  test::FakeResumeHost host_;
  std::optional<Resume> resume_;
};

TEST(NextIncarnation, SaysWhereItStarts) {
  NextIncarnation n;
  n.incarnation = 3;
  EXPECT_EQ(n.describe(), "incarnation 3 from scratch (no committed checkpoint)");
  n.from = ResumePoint{"step_20", 20, ""};
  EXPECT_EQ(n.describe(), "incarnation 3 from step_20");
}

TEST(ResumePolicy, ComesFromTheSpec) {
  spec::JobSpec s = spec::default_spec();
  s.runbook.resume = false;
  s.runbook.restart_budget = 5;
  s.node_fault.drain = true;
  s.node_fault.storm_incarnations = 9;
  ResumePolicy p = ResumePolicy::from_spec("train", s);
  EXPECT_EQ(p.job, "train");
  EXPECT_FALSE(p.resume);
  EXPECT_EQ(p.restart_budget, 5);
  EXPECT_TRUE(p.drain);
  EXPECT_EQ(p.node_fault.storm_incarnations, 9);
}

TEST_F(ResumeTest, NoStormHandsTheNextIncarnationToTheOwnerAndTheHostAppliesItsPlan) {
  AfterPreempt a = resume().after_preempt(preempted(), at(kT0));
  EXPECT_TRUE(a.close);
  EXPECT_EQ(a.resolution, "preempted; applied");
  EXPECT_THAT(owner_.calls, ElementsAre("plan 3"));
  ASSERT_EQ(host_.applied.size(), 1u);
  EXPECT_EQ(host_.applied[0].plan.kind, Kind::kRelaunch);
  EXPECT_EQ(host_.applied[0].next.from->id, "step_20");
  EXPECT_EQ(host_.applied[0].next.from->path, "/ckpt/step_20");
  EXPECT_EQ(host_.applied[0].done, "preempted");
  EXPECT_TRUE(host_.holds.empty());
  EXPECT_FALSE(resume().holding());
  // The owner's notes go to the incident through the host.
  EXPECT_THAT(host_.notes, ElementsAre(std::make_pair(true, std::string("the owner's own note"))));
}

TEST_F(ResumeTest, ResumeOffStopsThroughTheOwnerWithoutReadingTheHistory) {
  policy_.resume = false;
  host_.memory.fail = Error{Errc::kIo, "would have been read"};
  owner_.stop_plan = ResumePlan::of(Kind::kCancelled, "Slurm job 77 cancelled");
  AfterPreempt a = resume().after_preempt(preempted(), at(kT0));
  EXPECT_THAT(owner_.calls, ElementsAre("stop"));
  ASSERT_EQ(host_.applied.size(), 1u);
  EXPECT_EQ(host_.applied[0].plan.kind, Kind::kCancelled);
  EXPECT_TRUE(a.close);
  EXPECT_TRUE(host_.logs.empty());
}

TEST_F(ResumeTest, TheRestartBudgetGivesUpBeforeTheOwnerIsAsked) {
  policy_.restart_budget = 2;
  AfterPreempt a = resume().after_preempt(preempted(/*without_progress=*/2), at(kT0));
  EXPECT_TRUE(owner_.calls.empty());
  ASSERT_EQ(host_.applied.size(), 1u);
  EXPECT_EQ(host_.applied[0].plan.kind, Kind::kGaveUp);
  const std::string why =
      "gave up: 2 incarnation(s) in a row without checkpoint progress (budget 2)";
  EXPECT_EQ(host_.applied[0].plan.detail, why);
  EXPECT_THAT(host_.notes, ElementsAre(std::make_pair(false, why)));
  EXPECT_TRUE(a.close);

  // One short of the budget goes on; a budget of 0 gives up at once; no count, no budget.
  for (auto [budget, count, gives_up] :
       {std::tuple{2, std::optional<int>(1), false}, std::tuple{0, std::optional<int>(0), true},
        std::tuple{1, std::optional<int>(), false}}) {
    policy_.restart_budget = budget;
    resume_.reset();
    host_.applied.clear();
    resume().after_preempt(preempted(count), at(kT0));
    ASSERT_EQ(host_.applied.size(), 1u);
    EXPECT_EQ(host_.applied[0].plan.kind == Kind::kGaveUp, gives_up) << budget;
  }
}

TEST_F(ResumeTest, ARestartStormHoldsUntilAnAckAfterTheHoldBegan) {
  storm();
  AfterPreempt a = resume().after_preempt(preempted(), at(kT0));
  EXPECT_FALSE(a.close);
  EXPECT_TRUE(a.hold);
  EXPECT_TRUE(resume().holding());
  EXPECT_TRUE(owner_.calls.empty()) << "nothing is handed over while held";
  ASSERT_EQ(host_.holds.size(), 1u);
  const std::string& why = host_.holds[0].why;
  EXPECT_THAT(why, HasSubstr("restart storm: 3 incarnations started in"));
  EXPECT_THAT(why, HasSubstr("automatic resume held until acked (stepwatch ack train), then "
                             "incarnation 3 from step_20"));
  EXPECT_EQ(host_.holds[0].next.incident, 7);
  EXPECT_EQ(host_.notes.front(), std::make_pair(true, why));

  // An ack given before the hold (to the stall) does not release it; nor does time alone.
  host_.ack_times = {kT0 - kNsPerSec};
  resume().poll(at(kT0 + kMin));
  resume().poll(at(kT0 + 2 * kMin));
  EXPECT_TRUE(resume().holding());
  EXPECT_THAT(host_.acked_since_asked, ElementsAre(kT0, kT0));
  EXPECT_TRUE(host_.closes.empty());

  host_.ack_times.push_back(kT0 + 3 * kMin);
  resume().poll(at(kT0 + 3 * kMin));
  EXPECT_FALSE(resume().holding());
  EXPECT_THAT(owner_.calls, ElementsAre("plan 3"));
  ASSERT_EQ(host_.closes.size(), 1u);
  EXPECT_EQ(host_.closes[0], std::make_pair(int64_t{7}, std::string("acked restart storm; "
                                                                    "preempted; applied")));
  // The ack is said, then the owner's own note (logged as well as recorded).
  EXPECT_THAT(host_.logs, ElementsAre(HasSubstr("restart storm: 3 incarnations"),
                                      HasSubstr("restart storm: acked; starting the next "
                                                "incarnation"),
                                      "the owner's own note"));
}

TEST_F(ResumeTest, AnIncidentThatIsNotRecordedIsNeverHeld) {
  storm();
  Preempted p = preempted();
  p.next.incident = 0;  // nothing could ack it
  AfterPreempt a = resume().after_preempt(p, at(kT0));
  EXPECT_TRUE(a.close);
  EXPECT_TRUE(host_.holds.empty());
  EXPECT_THAT(owner_.calls, ElementsAre("plan 3"));
}

TEST_F(ResumeTest, AHistoryThatCannotBeReadResumesAsIfNoStormAndSaysSo) {
  storm();
  host_.memory.fail = Error{Errc::kIo, "disk gone"};
  AfterPreempt a = resume().after_preempt(preempted(), at(kT0));
  EXPECT_TRUE(a.close);
  EXPECT_TRUE(host_.holds.empty());
  ASSERT_FALSE(host_.logs.empty());
  EXPECT_EQ(host_.logs[0], "node-fault history not read: disk gone");
}

TEST_F(ResumeTest, AHeldIncidentClosedMeanwhileDropsTheHold) {
  storm();
  resume().after_preempt(preempted(), at(kT0));
  host_.incident_open = false;
  resume().poll(at(kT0 + kMin));
  EXPECT_FALSE(resume().holding());
  EXPECT_TRUE(host_.closes.empty());
  EXPECT_TRUE(owner_.calls.empty());
}

TEST_F(ResumeTest, ANextIncarnationStartedMeanwhileEndsTheHold) {
  storm();
  resume().after_preempt(preempted(), at(kT0));
  host_.started = "incarnation 3 started while the restart storm held it";
  resume().poll(at(kT0 + kMin));
  EXPECT_FALSE(resume().holding());
  ASSERT_EQ(host_.closes.size(), 1u);
  EXPECT_EQ(host_.closes[0].second, "incarnation 3 started while the restart storm held it");
  EXPECT_TRUE(owner_.calls.empty());
}

TEST_F(ResumeTest, AnAckThatCannotBeReadKeepsTheHoldAndSaysWhy) {
  storm();
  resume().after_preempt(preempted(), at(kT0));
  host_.ack_error = Error{Errc::kIo, "etcd timed out"};
  resume().poll(at(kT0 + kMin));
  EXPECT_TRUE(resume().holding());
  EXPECT_THAT(host_.logs.back(), HasSubstr("incident 7: whether it was acked: etcd timed out"));
}

TEST_F(ResumeTest, AHoldTakenUpIsReleasedByAnAckAfterItsOwnStart) {
  resume().take_up(preempted().next, kT0 - kMin, "preempted under a previous leader");
  EXPECT_TRUE(resume().holding());
  host_.ack_times = {kT0 - 2 * kMin};
  resume().poll(at(kT0));
  EXPECT_TRUE(resume().holding());
  host_.ack_times.push_back(kT0);
  resume().poll(at(kT0 + kNsPerSec));
  EXPECT_FALSE(resume().holding());
  ASSERT_EQ(host_.closes.size(), 1u);
  EXPECT_EQ(host_.closes[0].second,
            "acked restart storm; preempted under a previous leader; applied");
  resume().take_up(preempted().next, kT0, "x");
  resume().drop();
  EXPECT_FALSE(resume().holding());
}

TEST_F(ResumeTest, AHandOverTheHostCannotApplyNowIsTriedAgainWithoutAnAck) {
  host_.outcomes = {{false, "", true}, {false, "", true}};
  AfterPreempt a = resume().after_preempt(preempted(), at(kT0));
  EXPECT_FALSE(a.close);
  EXPECT_TRUE(a.hold);
  EXPECT_TRUE(resume().holding());
  resume().poll(at(kT0 + kNsPerSec));  // still not
  EXPECT_TRUE(resume().holding());
  resume().poll(at(kT0 + 2 * kNsPerSec));
  EXPECT_FALSE(resume().holding());
  EXPECT_TRUE(host_.acked_since_asked.empty()) << "no ack is waited for";
  EXPECT_THAT(owner_.calls, ElementsAre("plan 3", "plan 3", "plan 3"));
  ASSERT_EQ(host_.closes.size(), 1u);
  EXPECT_EQ(host_.closes[0].second, "preempted; applied");
}

TEST_F(ResumeTest, AHostThatKeepsTheIncidentOpenIsNotHeld) {
  host_.outcomes = {{false, ""}};  // a failed requeue: the incident stays open
  AfterPreempt a = resume().after_preempt(preempted(), at(kT0));
  EXPECT_FALSE(a.close);
  EXPECT_FALSE(a.hold);
  EXPECT_FALSE(resume().holding());
}

TEST_F(ResumeTest, DrainComesBeforeThePlanWhereTheSpecOptsInAndTheOwnerCan) {
  policy_.drain = true;
  policy_.node_fault.suspect_of_last = 2;
  policy_.node_fault.suspect_culprit_min = 2;
  host_.memory.add_ended("train", 1, kT0 - 12 * kMin, "b");
  host_.memory.add_ended("train", 2, kT0 - 5 * kMin, "b");
  owner_.drains = true;
  resume().after_preempt(preempted(), at(kT0));
  EXPECT_THAT(owner_.calls, ElementsAre("drain", "plan 3"));
  EXPECT_THAT(owner_.drain_hosts, ElementsAre("b"));
  EXPECT_EQ(host_.notes.front(), std::make_pair(true, std::string("drained b for train")));

  // Not opted in, or an owner that cannot drain: nothing drained.
  for (auto [drain, can] : {std::pair{false, true}, std::pair{true, false}}) {
    policy_.drain = drain;
    owner_.drains = can;
    owner_.calls.clear();
    resume_.reset();
    resume().after_preempt(preempted(), at(kT0));
    EXPECT_THAT(owner_.calls, ElementsAre("plan 3"));
  }
}

TEST_F(ResumeTest, TheBatchJobIsAskedOnlyByOwnersThatActOnOne) {
  resume().after_preempt(preempted(), at(kT0));
  EXPECT_EQ(host_.batch_asked, 0);
  EXPECT_FALSE(owner_.requests[0].batch.ok());
  owner_.batch = true;
  resume_.reset();
  resume().after_preempt(preempted(), at(kT0));
  EXPECT_EQ(host_.batch_asked, 1);
  ASSERT_TRUE(owner_.requests[1].batch.ok());
  EXPECT_EQ(owner_.requests[1].batch->id, "77");
  EXPECT_EQ(owner_.requests[1].job, "train");
  EXPECT_EQ(owner_.requests[1].incarnation, 3);
}

}  // namespace
}  // namespace stepwatch::runbook
