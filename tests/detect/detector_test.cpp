// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/detect/detector.h"

#include <gtest/gtest.h>

#include <random>

#include "src/detect/spec_adapter.h"
#include "tests/detect/sim.h"

namespace stepwatch::detect {
namespace {

using testing::kSec;
using testing::SimJob;

Config configured(int64_t interval) {
  Config c = default_config();
  c.expected_interval_ns = interval;
  c.init_budget_ns = 60 * kSec;
  c.warmup_steps = 0;
  return c;
}

// Runs `steps` steps of `interval` on every rank, observing after each.
void train(SimJob& job, Detector& d, int64_t first, int steps, int64_t interval) {
  for (int i = 0; i < steps; ++i) {
    job.advance(interval);
    job.step_all(first + i);
    d.observe(job.observe());
  }
}

TEST(Detector, StartingThenHealthy) {
  SimJob job(2);
  Detector d(configured(2 * kSec));
  EXPECT_EQ(d.observe(job.observe()).state, State::kStarting);
  train(job, d, 0, 5, 2 * kSec);
  Verdict v = d.observe(job.observe());
  EXPECT_EQ(v.state, State::kHealthy) << v.summary;
  EXPECT_EQ(v.interval_source, IntervalSource::kSpec);
  EXPECT_EQ(v.expected_interval_ns, 2 * kSec);
  ASSERT_TRUE(v.last_step.has_value());
  EXPECT_EQ(*v.last_step, 4);
  EXPECT_EQ(v.phase, "train");
}

TEST(Detector, SuspectAfterOneIntervalStalledAfterGrace) {
  SimJob job(2);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 10, 2 * kSec);
  job.advance(2500 * kNsPerMs);
  Verdict v = d.observe(job.observe());
  EXPECT_EQ(v.state, State::kSuspect) << v.summary;
  job.advance(1000 * kNsPerMs);  // 3.5 s: still inside grace 2 x 2 s
  EXPECT_EQ(d.observe(job.observe()).state, State::kSuspect);
  job.advance(1000 * kNsPerMs);  // 4.5 s
  v = d.observe(job.observe());
  EXPECT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_EQ(v.since_wall_ns, job.now().wall_ns);
  // Since stays at the transition.
  job.advance(kSec);
  EXPECT_EQ(d.observe(job.observe()).since_wall_ns, v.since_wall_ns);
}

TEST(Detector, CollectiveHangNamesTheRankStuckInData) {
  SimJob job(4);
  Config c = configured(2 * kSec);
  c.phases["data"] = {120 * kSec, false};
  Detector d(c);
  train(job, d, 0, 10, 2 * kSec);
  job.advance(kSec);
  job.set_phase(2, "data");  // rank 2 waits on its loader; the others block in allreduce
  job.advance(5 * kSec);
  Verdict v = d.observe(job.observe());
  // Inside the data budget the others are waiting on rank 2, not stalled.
  ASSERT_EQ(v.state, State::kSuspect) << v.summary;
  EXPECT_NE(v.ranks[0].note.find("waiting on rank 2"), std::string::npos) << v.ranks[0].note;
  job.advance(116 * kSec);
  v = d.observe(job.observe());
  ASSERT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_EQ(v.cause, Cause::kCollective);
  ASSERT_EQ(v.culprits.size(), 1u) << v.summary;
  EXPECT_EQ(v.culprits[0].rank, 2);
  EXPECT_NE(v.culprits[0].reason.find("phase data"), std::string::npos) << v.culprits[0].reason;
  EXPECT_NE(v.culprits[0].reason.find("others wait"), std::string::npos) << v.culprits[0].reason;
}

TEST(Detector, CheckpointOnRankZeroWhileOthersWaitIsNotAStall) {
  SimJob job(4);
  Config c = configured(2 * kSec);
  c.phases["checkpoint"] = {300 * kSec, false};
  Detector d(c);
  train(job, d, 0, 10, 2 * kSec);
  job.set_phase(0, "checkpoint");
  for (int i = 0; i < 90; ++i) {
    job.advance(kSec);
    Verdict v = d.observe(job.observe());
    ASSERT_NE(v.state, State::kStalled) << v.summary;
  }
  job.set_phase(0, "train");
  job.advance(kSec);
  job.step_all(10);
  EXPECT_EQ(d.observe(job.observe()).state, State::kHealthy);
  // A save that hangs past its budget is found, with rank 0 named.
  job.set_phase(0, "checkpoint");
  job.advance(301 * kSec);
  Verdict v = d.observe(job.observe());
  ASSERT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_EQ(v.cause, Cause::kCollective);
  ASSERT_EQ(v.culprits.size(), 1u);
  EXPECT_EQ(v.culprits[0].rank, 0);
}

TEST(Detector, CulpritBehindOnStep) {
  SimJob job(3);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 10, 2 * kSec);
  job.advance(2 * kSec);
  job.step(0, 10);
  job.step(2, 10);  // rank 1 never commits step 10
  job.advance(5 * kSec);
  Verdict v = d.observe(job.observe());
  ASSERT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_EQ(v.cause, Cause::kCollective);
  ASSERT_FALSE(v.culprits.empty());
  EXPECT_EQ(v.culprits[0].rank, 1);
  EXPECT_NE(v.culprits[0].reason.find("behind"), std::string::npos);
}

TEST(Detector, SlowButLiveNeverStalls) {
  SimJob job(2);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 10, 2 * kSec);
  // Storage degrades: each step a little slower, up to 5x, but every step completes.
  int64_t interval = 2 * kSec;
  State worst = State::kHealthy;
  for (int i = 10; i < 60; ++i) {
    interval = std::min<int64_t>(10 * kSec, interval * 13 / 10);
    for (int64_t t = 0; t < interval; t += kSec / 2) {
      job.advance(kSec / 2);
      Verdict v = d.observe(job.observe());
      if (severity(v.state) > severity(worst)) worst = v.state;
      ASSERT_NE(v.state, State::kStalled) << "step " << i << ": " << v.summary;
    }
    job.step_all(i);
  }
  Verdict v = d.observe(job.observe());
  EXPECT_EQ(v.state, State::kSlow) << v.summary;
  EXPECT_NE(v.ranks[0].note.find("5.0x"), std::string::npos) << v.ranks[0].note;
}

TEST(Detector, LabeledEvalUsesItsBudget) {
  SimJob job(2);
  Config c = configured(2 * kSec);
  c.phases["eval"] = {120 * kSec, false};
  Detector d(c);
  train(job, d, 0, 10, 2 * kSec);
  job.phase_all("eval");
  job.advance(60 * kSec);  // 30 intervals: fine inside eval
  Verdict v = d.observe(job.observe());
  EXPECT_EQ(v.state, State::kHealthy) << v.summary;
  EXPECT_EQ(v.phase, "eval");
  ASSERT_TRUE(v.phase_budget_ns.has_value());
  EXPECT_EQ(*v.phase_budget_ns, 120 * kSec);
  job.advance(40 * kSec);
  EXPECT_EQ(d.observe(job.observe()).state, State::kSuspect);
  job.advance(21 * kSec);
  v = d.observe(job.observe());
  EXPECT_EQ(v.state, State::kStalled);
  EXPECT_EQ(v.cause, Cause::kPhaseOverrun);
  EXPECT_EQ(v.culprits.size(), 2u);
}

TEST(Detector, PhaseEndRestartsTheStepClock) {
  SimJob job(1);
  Config c = configured(2 * kSec);
  c.phases["eval"] = {120 * kSec, false};
  Detector d(c);
  train(job, d, 0, 10, 2 * kSec);
  job.set_phase(0, "eval");
  job.advance(100 * kSec);
  job.set_phase(0, "train");
  job.advance(kSec);
  EXPECT_EQ(d.observe(job.observe()).state, State::kHealthy);
  job.advance(4 * kSec);
  EXPECT_EQ(d.observe(job.observe()).state, State::kStalled);
}

TEST(Detector, BeatsRenewOnlyWhenTheSpecSaysSo) {
  for (bool renew : {false, true}) {
    SimJob job(1);
    Config c = configured(2 * kSec);
    c.phases["checkpoint"] = {30 * kSec, renew};
    Detector d(c);
    train(job, d, 0, 5, 2 * kSec);
    job.set_phase(0, "checkpoint");
    for (int i = 0; i < 8; ++i) {
      job.advance(5 * kSec);
      job.beat(0);
    }
    Verdict v = d.observe(job.observe());
    EXPECT_EQ(v.state, renew ? State::kHealthy : State::kStalled)
        << "renew=" << renew << ": " << v.summary;
  }
}

TEST(Detector, NoFirstStepInsideInitBudgetIsStalledInit) {
  SimJob job(2);
  Detector d(configured(2 * kSec));
  job.advance(40 * kSec);
  EXPECT_EQ(d.observe(job.observe()).state, State::kStarting);
  job.advance(10 * kSec);
  EXPECT_EQ(d.observe(job.observe()).state, State::kSuspect);
  job.advance(11 * kSec);
  Verdict v = d.observe(job.observe());
  EXPECT_EQ(v.state, State::kStalled);
  EXPECT_EQ(v.cause, Cause::kInit);
  EXPECT_EQ(v.culprits.size(), 2u);
}

TEST(Detector, ColdCompileMayTakeLongWarmCompileMayNot) {
  Config c = configured(2 * kSec);
  c.phases["compile"] = {15 * 60 * kSec, false};
  c.compile_warm = PhaseRule{3 * 60 * kSec, false};
  {
    SimJob cold(2, {1'700'000'000 * kSec, 5'000 * kSec}, /*incarnation=*/0);
    Detector d(c);
    cold.phase_all("compile");
    cold.advance(8 * 60 * kSec);
    Verdict v = d.observe(cold.observe());
    EXPECT_EQ(v.state, State::kStarting) << v.summary;
  }
  {
    SimJob warm(2, {1'700'000'000 * kSec, 5'000 * kSec}, /*incarnation=*/1);
    Detector d(c);
    warm.phase_all("compile");
    warm.advance(4 * 60 * kSec);
    Verdict v = d.observe(warm.observe());
    EXPECT_EQ(v.state, State::kStalled) << v.summary;
    EXPECT_EQ(v.cause, Cause::kPhaseOverrun);
    EXPECT_NE(v.culprits[0].reason.find("warm restart"), std::string::npos);
  }
}

TEST(Detector, OneRankSilentWhileOthersAdvance) {
  SimJob job(3);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 5, 2 * kSec);
  for (int i = 5; i < 10; ++i) {
    job.advance(2 * kSec);
    job.step(0, i);
    job.step(2, i);
    d.observe(job.observe());
  }
  Observation o = job.observe();
  ProcessFacts alive;
  alive.rank = 1;  // alive, same process
  o.procs.push_back(alive);
  Verdict v = d.observe(o);
  ASSERT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_EQ(v.cause, Cause::kRankSilent);
  ASSERT_EQ(v.culprits.size(), 1u);
  EXPECT_EQ(v.culprits[0].rank, 1);
  EXPECT_NE(v.culprits[0].reason.find("process alive"), std::string::npos);
}

TEST(Detector, ProcessGoneIsDeadWithTheRankNamed) {
  SimJob job(2);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 5, 2 * kSec);
  job.advance(kSec);
  Observation o = job.observe();
  ProcessFacts gone;
  gone.rank = 1;
  gone.alive = false;
  gone.exit_code = 137;
  o.procs.push_back(gone);
  Verdict v = d.observe(o);
  EXPECT_EQ(v.state, State::kDead);
  ASSERT_EQ(v.culprits.size(), 1u);
  EXPECT_EQ(v.culprits[0].rank, 1);
  EXPECT_NE(v.culprits[0].reason.find("137"), std::string::npos);

  // A reused pid is a gone process: ended at first, dead once rank 1 runs on past the grace.
  Detector d2(configured(2 * kSec));
  SimJob job2(2);
  train(job2, d2, 0, 5, 2 * kSec);
  ProcessFacts reused;
  reused.rank = 0;
  reused.same_process = false;
  Observation first = job2.observe();
  first.procs = {reused};
  Verdict w = d2.observe(first);
  EXPECT_NE(w.state, State::kDead) << w.summary;
  EXPECT_TRUE(w.ranks[0].exited);
  job2.advance(6 * kSec);
  Observation later = job2.observe();
  later.procs = {reused};
  w = d2.observe(later);
  EXPECT_EQ(w.state, State::kDead) << w.summary;
  ASSERT_EQ(w.culprits.size(), 1u);
  EXPECT_EQ(w.culprits[0].rank, 0);
  EXPECT_NE(w.culprits[0].reason.find("now belongs to another process"), std::string::npos);
}

// Endings: a process that is gone is not dead by that fact alone.
ProcessFacts gone_fact(int rank) {
  ProcessFacts p;
  p.rank = rank;
  p.alive = false;
  return p;
}

ProcessFacts alive_fact(int rank) {
  ProcessFacts p;
  p.rank = rank;
  return p;
}

Observation with_procs(const SimJob& job, std::vector<ProcessFacts> procs) {
  Observation o = job.observe();
  o.procs = std::move(procs);
  return o;
}

TEST(DetectorEndings, RanksThatAllExitTogetherFinished) {
  SimJob job(2);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 5, 2 * kSec);
  job.advance(300 * kNsPerMs);
  Verdict v = d.observe(with_procs(job, {gone_fact(0), gone_fact(1)}));
  EXPECT_EQ(v.state, State::kFinished) << v.summary;
  EXPECT_TRUE(v.culprits.empty());
  for (const auto& rv : v.ranks) {
    EXPECT_TRUE(rv.exited);
    EXPECT_NE(rv.note.find("ended with the others"), std::string::npos) << rv.note;
  }
  // And it stays finished however long nobody is there (the agent's case: no launcher).
  job.advance(3600 * kSec);
  EXPECT_EQ(d.observe(with_procs(job, {gone_fact(0), gone_fact(1)})).state, State::kFinished);
}

TEST(DetectorEndings, RanksThatExitSecondsApartWithinTheGraceFinished) {
  SimJob job(3);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 5, 2 * kSec);
  job.advance(kSec);
  Verdict v = d.observe(with_procs(job, {alive_fact(0), gone_fact(1), alive_fact(2)}));
  EXPECT_EQ(v.state, State::kHealthy) << v.summary;
  EXPECT_NE(v.ranks[1].note.find("still running"), std::string::npos) << v.ranks[1].note;
  job.advance(2 * kSec);
  v = d.observe(with_procs(job, {alive_fact(0), gone_fact(1), gone_fact(2)}));
  EXPECT_NE(v.state, State::kDead) << v.summary;
  job.advance(1500 * kNsPerMs);  // rank 0 last, 4.5 s after rank 1: inside the 5 s grace
  v = d.observe(with_procs(job, {gone_fact(0), gone_fact(1), gone_fact(2)}));
  EXPECT_EQ(v.state, State::kFinished) << v.summary;
}

TEST(DetectorEndings, ARankGoneWhileAnotherBlocksIsDeadAfterTheGraceAndStaysDead) {
  SimJob job(2);
  Config c = configured(60 * kSec);  // a long step: only the exit grace can act in seconds
  c.exit_grace_ns = 3 * kSec;
  Detector d(c);
  train(job, d, 0, 5, 60 * kSec);
  job.advance(kSec);
  Verdict v = d.observe(with_procs(job, {alive_fact(0), gone_fact(1)}));
  EXPECT_EQ(v.state, State::kHealthy) << v.summary;
  job.advance(2 * kSec);
  EXPECT_EQ(d.observe(with_procs(job, {alive_fact(0), gone_fact(1)})).state, State::kHealthy);
  job.advance(1500 * kNsPerMs);  // 3.5 s after rank 1 went, rank 0 still blocks
  v = d.observe(with_procs(job, {alive_fact(0), gone_fact(1)}));
  ASSERT_EQ(v.state, State::kDead) << v.summary;
  ASSERT_EQ(v.culprits.size(), 1u);
  EXPECT_EQ(v.culprits[0].rank, 1);
  EXPECT_NE(v.culprits[0].reason.find("while rank 0 still runs"), std::string::npos)
      << v.culprits[0].reason;
  // The launcher then tears rank 0 down: both gone, still a death, still rank 1's.
  job.advance(kSec);
  v = d.observe(with_procs(job, {gone_fact(0), gone_fact(1)}));
  EXPECT_EQ(v.state, State::kDead) << v.summary;
  ASSERT_FALSE(v.culprits.empty());
  EXPECT_EQ(v.culprits[0].rank, 1);
}

TEST(DetectorEndings, ARankFinishingInALabeledPhaseOrStillWritingIsNotAHoldout) {
  SimJob job(2);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 5, 2 * kSec);
  job.set_phase(0, "checkpoint");  // rank 0's final save, labeled
  job.advance(kSec);
  d.observe(with_procs(job, {alive_fact(0), gone_fact(1)}));
  job.advance(20 * kSec);
  Verdict v = d.observe(with_procs(job, {alive_fact(0), gone_fact(1)}));
  EXPECT_NE(v.state, State::kDead) << v.summary;
  job.advance(kSec);
  EXPECT_EQ(d.observe(with_procs(job, {gone_fact(0), gone_fact(1)})).state, State::kFinished);

  // Unlabeled, but beating after the other went: it is visibly doing something.
  SimJob job2(2);
  Detector d2(configured(2 * kSec));
  train(job2, d2, 0, 5, 2 * kSec);
  job2.advance(kSec);
  d2.observe(with_procs(job2, {alive_fact(0), gone_fact(1)}));
  job2.advance(4 * kSec);
  job2.beat(0);
  job2.advance(2 * kSec);
  v = d2.observe(with_procs(job2, {alive_fact(0), gone_fact(1)}));
  EXPECT_NE(v.state, State::kDead) << v.summary;
}

TEST(DetectorEndings, TheLauncherDecides) {
  // Exit 0 after its ranks went: finished.
  SimJob job(2);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 5, 2 * kSec);
  job.advance(kSec);
  d.observe(with_procs(job, {gone_fact(0), gone_fact(1)}));
  job.advance(8 * kSec);  // a launcher that outlives its ranks by seconds
  Observation o = with_procs(job, {gone_fact(0), gone_fact(1)});
  EXPECT_EQ(d.observe(o).state, State::kFinished);
  o.job_exit_code = 0;
  EXPECT_EQ(d.observe(o).state, State::kFinished);

  // Non-zero with ranks that vanished (it killed them, or they crashed): dead, ranks named.
  SimJob job2(2);
  Detector d2(configured(2 * kSec));
  train(job2, d2, 0, 5, 2 * kSec);
  job2.advance(kSec);
  Observation o2 = with_procs(job2, {gone_fact(0), gone_fact(1)});
  o2.job_exit_code = 1;
  Verdict v = d2.observe(o2);
  EXPECT_EQ(v.state, State::kDead) << v.summary;
  EXPECT_EQ(v.culprits.size(), 2u) << v.summary;
  EXPECT_NE(v.ranks[0].note.find("launcher exited with status 1"), std::string::npos)
      << v.ranks[0].note;

  // Non-zero, but every rank said it finished: the ranks' word stands.
  SimJob job3(2);
  Detector d3(configured(2 * kSec));
  train(job3, d3, 0, 5, 2 * kSec);
  job3.finish(0);
  job3.finish(1);
  Observation o3 = with_procs(job3, {gone_fact(0), gone_fact(1)});
  o3.job_exit_code = 2;
  EXPECT_EQ(d3.observe(o3).state, State::kFinished);
}

TEST(DetectorEndings, AKnownNonZeroExitOrAReportedFailureIsDeadAtOnce) {
  SimJob job(2);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 5, 2 * kSec);
  ProcessFacts crashed = gone_fact(1);
  crashed.exit_code = 139;
  Verdict v = d.observe(with_procs(job, {alive_fact(0), crashed}));
  EXPECT_EQ(v.state, State::kDead) << v.summary;
  EXPECT_EQ(v.culprits.at(0).rank, 1);

  SimJob job2(2);
  Detector d2(configured(2 * kSec));
  train(job2, d2, 0, 5, 2 * kSec);
  job2.fail(0);
  v = d2.observe(with_procs(job2, {gone_fact(0), alive_fact(1)}));
  EXPECT_EQ(v.state, State::kDead) << v.summary;
  EXPECT_EQ(v.culprits.at(0).rank, 0);
}

TEST(DetectorEndings, TheRankThatEndedFirstIsTheCulpritNotTheOnesTheLauncherKilledLater) {
  // Rank 1 raises and says so; seconds later the launcher tears rank 0 down without a word.
  SimJob job(2);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 5, 2 * kSec);
  job.fail(1);
  Verdict v = d.observe(with_procs(job, {alive_fact(0), gone_fact(1)}));
  ASSERT_EQ(v.state, State::kDead);
  job.advance(5 * kSec);
  v = d.observe(with_procs(job, {gone_fact(0), gone_fact(1)}));
  ASSERT_EQ(v.state, State::kDead);
  ASSERT_EQ(v.culprits.size(), 1u) << v.summary;
  EXPECT_EQ(v.culprits[0].rank, 1);
}

TEST(DetectorEndings, UninstrumentedRanksFollowTheSameRule) {
  // Ranks known only as processes (no record): gone together is an ending, not a death.
  Detector d(configured(2 * kSec));
  Observation o;
  o.now = {1'700'000'000 * kSec, 5'000 * kSec};
  o.procs = {alive_fact(0), alive_fact(1)};
  EXPECT_NE(d.observe(o).state, State::kDead);
  o.now.mono_ns += kSec;
  o.now.wall_ns += kSec;
  o.procs = {gone_fact(0), gone_fact(1)};
  EXPECT_EQ(d.observe(o).state, State::kFinished);

  Detector d2(configured(2 * kSec));
  o.procs = {alive_fact(0), gone_fact(1)};
  EXPECT_NE(d2.observe(o).state, State::kDead);
  o.now.mono_ns += 6 * kSec;
  o.now.wall_ns += 6 * kSec;
  Verdict v = d2.observe(o);
  EXPECT_EQ(v.state, State::kDead) << v.summary;
}

TEST(DetectorEndings, ARankThatRunsOnAfterTheOthersFinishedIsFinishingNotStalled) {
  SimJob job(2);
  Config c = configured(2 * kSec);
  c.phases["finish"] = {60 * kSec, false};
  Detector d(c);
  train(job, d, 0, 5, 2 * kSec);
  job.finish(1);  // rank 1 said it finished; rank 0 saves the final checkpoint, unlabeled
  job.advance(kSec);
  d.observe(with_procs(job, {alive_fact(0), gone_fact(1)}));
  job.advance(29 * kSec);  // 15 expected intervals without a step
  Verdict v = d.observe(with_procs(job, {alive_fact(0), gone_fact(1)}));
  EXPECT_EQ(v.state, State::kHealthy) << v.summary;
  EXPECT_NE(v.ranks[0].note.find("finishing"), std::string::npos) << v.ranks[0].note;
  job.advance(32 * kSec);  // past the finish budget
  v = d.observe(with_procs(job, {alive_fact(0), gone_fact(1)}));
  EXPECT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_EQ(v.ranks[0].cause, Cause::kPhaseOverrun);
  // A rank behind the finished one is not finishing: step time applies (here: stalled).
  SimJob job2(2);
  Detector d2(c);
  train(job2, d2, 0, 5, 2 * kSec);
  job2.step(1, 5);
  job2.finish(1);
  job2.advance(10 * kSec);
  v = d2.observe(with_procs(job2, {alive_fact(0), gone_fact(1)}));
  EXPECT_EQ(v.state, State::kStalled) << v.summary;
}

TEST(DetectorEndings, ZeroGraceActsOnTheNextPoll) {
  SimJob job(2);
  Config c = configured(2 * kSec);
  c.exit_grace_ns = 0;
  Detector d(c);
  train(job, d, 0, 5, 2 * kSec);
  d.observe(with_procs(job, {alive_fact(0), gone_fact(1)}));
  job.advance(100 * kNsPerMs);
  EXPECT_EQ(d.observe(with_procs(job, {alive_fact(0), gone_fact(1)})).state, State::kDead);
}

TEST(Detector, TheRankThatVanishedIsTheCulpritNotTheOnesThatFailedAfterIt) {
  SimJob job(3);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 5, 2 * kSec);
  job.advance(kSec);
  job.rank(0).status = contract::RankStatus::kFailed;  // its allreduce raised: peer closed
  job.rank(2).status = contract::RankStatus::kFailed;
  Observation o = job.observe();
  ProcessFacts gone;
  gone.rank = 1;
  gone.alive = false;
  o.procs.push_back(gone);
  Verdict v = d.observe(o);
  ASSERT_EQ(v.state, State::kDead);
  ASSERT_EQ(v.culprits.size(), 1u) << v.summary;
  EXPECT_EQ(v.culprits[0].rank, 1);
  // When every dead rank said it failed, they are all named.
  Observation all_failed = job.observe();
  Verdict w = d.observe(all_failed);
  EXPECT_EQ(w.culprits.size(), 2u) << w.summary;
}

TEST(Detector, FinishedOnlyWhenEveryRankFinished) {
  SimJob job(2);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 5, 2 * kSec);
  job.finish(0);
  EXPECT_EQ(d.observe(job.observe()).state, State::kHealthy);
  job.finish(1);
  job.advance(60 * kSec);
  EXPECT_EQ(d.observe(job.observe()).state, State::kFinished);
}

TEST(Detector, JobExitNonZeroIsDead) {
  SimJob job(1);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 3, 2 * kSec);
  Observation o = job.observe();
  o.job_exit_code = 1;
  EXPECT_EQ(d.observe(o).state, State::kDead);
  o.job_exit_code = 0;
  Detector d2(configured(2 * kSec));
  EXPECT_EQ(d2.observe(o).state, State::kFinished);
}

TEST(Detector, CauseFromEvidence) {
  struct Case {
    const char* name;
    ProcessFacts p0, p1;
    std::optional<double> sm;
    Cause want;
  };
  ProcessFacts idle;
  idle.rank = 0;
  idle.state = 'S';
  idle.cpu_delta_ns = 0;
  idle.io_delta_bytes = 0;
  idle.wchan = "futex_wait";
  ProcessFacts idle1 = idle;
  idle1.rank = 1;
  ProcessFacts dstate = idle1;
  dstate.state = 'D';
  dstate.threads_in_d = 2;
  dstate.wchan = "nfs_wait";
  ProcessFacts busy = idle;
  busy.cpu_delta_ns = 900 * kNsPerMs;
  Case cases[] = {
      {"io", idle, dstate, std::nullopt, Cause::kIo},
      {"host", idle, idle1, std::nullopt, Cause::kHost},
      {"gpu busy", idle, idle1, 98.0, Cause::kCollective},
      {"cpu busy, no split", busy, idle1, std::nullopt, Cause::kUnknown},
  };
  for (const auto& c : cases) {
    SimJob job(2);
    Detector d(configured(2 * kSec));
    train(job, d, 0, 10, 2 * kSec);
    job.advance(5 * kSec);
    Observation o = job.observe();
    o.procs = {c.p0, c.p1};
    for (int r = 0; r < 2 && c.sm; ++r) {
      GpuFacts g;
      g.rank = r;
      g.sm_util_pct = c.sm;
      o.gpus.push_back(g);
    }
    Verdict v = d.observe(o);
    ASSERT_EQ(v.state, State::kStalled) << c.name;
    EXPECT_EQ(v.cause, c.want) << c.name << ": " << v.summary;
    bool has_process_evidence = false;
    for (const auto& e : v.evidence)
      has_process_evidence = has_process_evidence || e.name == "process";
    EXPECT_TRUE(has_process_evidence) << c.name;
  }
}

TEST(Detector, LearnsTheIntervalAndIgnoresHeavyTails) {
  SimJob job(2);
  Config c = default_config();
  c.init_budget_ns = 120 * kSec;
  Detector d(c);
  std::mt19937 rng(7);
  std::lognormal_distribution<double> dist(std::log(2.0), 0.35);
  Verdict v;
  for (int i = 0; i < 400; ++i) {
    int64_t interval = static_cast<int64_t>(dist(rng) * kSec);
    for (int64_t t = 0; t < interval; t += kSec / 4) {
      job.advance(std::min<int64_t>(kSec / 4, interval - t));
      v = d.observe(job.observe());
      ASSERT_NE(v.state, State::kStalled) << "step " << i << ": " << v.summary;
    }
    job.step_all(i);
  }
  EXPECT_EQ(v.interval_source, IntervalSource::kLearned);
  ASSERT_TRUE(d.learned().has_value());
  EXPECT_NEAR(static_cast<double>(d.learned()->median_ns) / kSec, 2.0, 0.4);
  // And a real stall is still found.
  job.advance(60 * kSec);
  EXPECT_EQ(d.observe(job.observe()).state, State::kStalled);
}

TEST(Detector, RestoredLearningSkipsRelearning) {
  SimJob job(1);
  Config c = default_config();
  c.init_budget_ns = 30 * kSec;
  Detector d(c);
  d.restore_learned({2 * kSec, 3 * kSec, 32});
  train(job, d, 0, 6, 2 * kSec);
  Verdict v = d.observe(job.observe());
  EXPECT_EQ(v.interval_source, IntervalSource::kLearned);
  job.advance(7 * kSec);
  EXPECT_EQ(d.observe(job.observe()).state, State::kStalled);
}

TEST(Detector, WallClockJumpDoesNotFire) {
  SimJob job(2);
  Detector d(configured(2 * kSec));
  train(job, d, 0, 10, 2 * kSec);
  job.jump_wall(3600 * kSec);
  job.advance(kSec);
  EXPECT_EQ(d.observe(job.observe()).state, State::kHealthy);
}

TEST(Detector, EighteenMinuteStepsAreNotStalledAtMinuteNineteen) {
  SimJob job(2);
  Config c = configured(18 * 60 * kSec);
  c.init_budget_ns = 30 * 60 * kSec;
  Detector d(c);
  train(job, d, 0, 4, 18 * 60 * kSec);
  job.advance(19 * 60 * kSec);
  Verdict v = d.observe(job.observe());
  EXPECT_NE(v.state, State::kStalled) << v.summary;
  job.advance(18 * 60 * kSec);
  EXPECT_EQ(d.observe(job.observe()).state, State::kStalled);
}

TEST(Detector, WarmupIntervalsUseTheInitBudgetAsFloor) {
  SimJob job(1);
  Config c = default_config();
  c.expected_interval_ns = 2 * kSec;
  c.init_budget_ns = 60 * kSec;
  c.warmup_steps = 3;
  Detector d(c);
  job.advance(5 * kSec);
  job.step_all(0);
  job.advance(30 * kSec);  // the second step takes long (allocator warmup, autotuning)
  EXPECT_NE(d.observe(job.observe()).state, State::kStalled);
}

// The detector has no defaults of its own: an empty spec configures it, with the values the
// detector had when it kept its own copy (docs/spec.md).
TEST(DetectorConfig, DefaultsComeFromTheSpec) {
  const int64_t min = 60 * kSec;
  Config c = default_config();
  EXPECT_FALSE(c.expected_interval_ns.has_value());
  EXPECT_EQ(c.grace_intervals, 2.0);
  EXPECT_EQ(c.slow_factor, 1.5);
  EXPECT_EQ(c.exit_grace_ns, 5 * kSec);
  EXPECT_EQ(c.init_budget_ns, 10 * min);
  std::map<std::string, int64_t> budgets;
  for (const auto& [name, rule] : c.phases) {
    budgets[name] = rule.budget_ns;
    EXPECT_FALSE(rule.beats_renew) << name;
  }
  EXPECT_EQ(budgets, (std::map<std::string, int64_t>{{"checkpoint", 15 * min},
                                                     {"compile", 30 * min},
                                                     {"data", 10 * min},
                                                     {"eval", 30 * min},
                                                     {"finish", 10 * min}}));
  ASSERT_TRUE(c.compile_warm.has_value());
  EXPECT_EQ(c.compile_warm->budget_ns, 10 * min);
  EXPECT_EQ(c.warmup_steps, 3);
  EXPECT_EQ(c.learn_window, 32);
  EXPECT_EQ(c.learn_min_samples, 5);

  // And what a spec changes, the detector sees.
  spec::JobSpec s = spec::default_spec();
  s.grace_intervals = 3;
  s.learn.window = 8;
  s.phases["init"].budget_ns = 2 * min;
  s.phases.erase("compile_warm");
  s.phases["train"] = {min, true};
  Config d = config_from_spec(s);
  EXPECT_EQ(d.grace_intervals, 3.0);
  EXPECT_EQ(d.learn_window, 8);
  EXPECT_EQ(d.init_budget_ns, 2 * min);
  EXPECT_FALSE(d.compile_warm.has_value());
  EXPECT_EQ(d.phases.count("train"), 0u) << "train runs on the expected interval";
  EXPECT_EQ(d.phases.count("init"), 0u);
}

}  // namespace
}  // namespace stepwatch::detect
