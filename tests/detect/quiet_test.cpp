// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The early rule (quiet.h) on a fake clock: a hang seen inside a step, from progress evidence.
#include "src/detect/quiet.h"

#include <gtest/gtest.h>

#include "src/detect/detector.h"
#include "src/detect/spec_adapter.h"
#include "tests/detect/sim.h"

namespace stepwatch::detect {
namespace {

using contract::WaitKind;
using testing::kSec;
using testing::SimJob;

constexpr int64_t kMin = 60 * kSec;
constexpr int64_t kPoll = 5 * kSec;

// An 18-minute-step job: the step-time rule would wait 36 minutes.
Config long_steps() {
  Config c = default_config();
  c.expected_interval_ns = 18 * kMin;
  c.init_budget_ns = 30 * kMin;
  return c;
}

// Every rank computes: the sampler sees it move at each poll.
struct Trainer {
  SimJob job;
  Detector det;
  uint64_t pos = 1;
  Trainer(int world, Config c) : job(world), det(std::move(c)) {}

  Verdict poll() { return det.observe(job.observe()); }
  // Advances `dt` in polls; `each` samples at the start of every poll period (the sampler
  // runs every second, so what it saw is in the beacon when the poll comes).
  Verdict run(int64_t dt, const std::function<void()>& each) {
    Verdict v;
    for (int64_t t = 0; t < dt; t += kPoll) {
      each();
      job.advance(kPoll);
      v = poll();
    }
    return v;
  }
  void compute_all() {
    ++pos;
    for (int r = 0; r < world(); ++r) job.sample(r, pos * 10 + r);
  }
  int world() const { return static_cast<int>(job.observe().ranks.size()); }
  // `n` healthy steps of `step` each, the last `wait` of every step spent in one all-reduce.
  void steps(int n, int64_t step, int64_t wait = 0) {
    for (int i = 0; i < n; ++i) {
      run(step - wait, [&] { compute_all(); });
      run(wait, [&] {
        for (int r = 0; r < world(); ++r)
          job.sample(r, 7, WaitKind::kCollective, "all_reduce (distributed_c10d.py:1536)");
      });
      job.step_all(next_step++);
      poll();
    }
  }
  int64_t next_step = 0;
};

TEST(QuietRule, ARankQuietOutsideAnyWaitWhileTheOthersWaitIsTheCulpritWithinTheFloor) {
  Trainer t(4, long_steps());
  t.steps(3, 18 * kMin);
  // Rank 2 stops in its data loader; the others reach the all-reduce.
  t.job.sample(2, 999, WaitKind::kNone, "__next__ (dataloader.py:628)");
  Verdict v;
  int64_t waited = 0;
  while (waited < 5 * kMin) {
    waited += kPoll;
    v = t.run(kPoll, [&] {
      t.job.sample(2, 999, WaitKind::kNone, "__next__ (dataloader.py:628)");
      for (int r : {0, 1, 3})
        t.job.sample(r, 7, WaitKind::kCollective, "all_reduce (distributed_c10d.py:1536)");
    });
    if (v.state == State::kStalled) break;
  }
  ASSERT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_EQ(v.cause, Cause::kCollective);
  // The floor (30 s) plus at most one poll: not a minute earlier, not 36 minutes later.
  EXPECT_GT(waited, 30 * kSec);
  EXPECT_LE(waited, 30 * kSec + kPoll);
  ASSERT_EQ(v.culprits.size(), 1u) << v.summary;
  EXPECT_EQ(v.culprits[0].rank, 2);
  EXPECT_NE(v.culprits[0].reason.find("`__next__ (dataloader.py:628)` unchanged"),
            std::string::npos)
      << v.culprits[0].reason;
  EXPECT_NE(v.culprits[0].reason.find("ranks 0-1,3 in `all_reduce"), std::string::npos)
      << v.culprits[0].reason;
  EXPECT_NE(v.culprits[0].reason.find("(the floor)"), std::string::npos);
  EXPECT_EQ(v.ranks[0].state, State::kSuspect);
  EXPECT_NE(v.ranks[0].note.find("waiting on rank 2"), std::string::npos) << v.ranks[0].note;
}

TEST(QuietRule, NothingEarlyUntilTwoStepsRanWithTheSampler) {
  Trainer t(2, long_steps());
  t.steps(1, 18 * kMin);
  Verdict v = t.run(5 * kMin, [&] {
    t.job.sample(0, 999);
    t.job.sample(1, 7, WaitKind::kCollective);
  });
  EXPECT_NE(v.state, State::kStalled) << v.summary;
  EXPECT_FALSE(t.det.quiet().own_budget().has_value());
}

TEST(QuietRule, EvidenceOfAnyKindKeepsARankOutOfIt) {
  for (const char* evidence : {"io", "cpu", "beat", "moves"}) {
    Trainer t(2, long_steps());
    t.steps(3, 18 * kMin);
    Verdict v = t.run(5 * kMin, [&] {
      std::string e = evidence;
      t.job.sample(0, e == "moves" ? ++t.pos : 999, WaitKind::kNone, "save (serialization.py:1)");
      t.job.sample(1, 7, WaitKind::kCollective);
      if (e == "beat") t.job.beat(0);
      Observation o = t.job.observe();
      ProcessFacts p;
      p.rank = 0;
      p.io_delta_bytes = e == "io" ? (1 << 20) : 0;
      p.main_cpu_delta_ns = e == "cpu" ? kSec : 0;
      o.procs.push_back(p);
      t.det.observe(o);
    });
    Verdict last = t.det.observe(t.job.observe());
    // (The last bare poll has no process facts: evidence from the poll before stands.)
    EXPECT_NE(last.state, State::kStalled) << evidence << ": " << last.summary;
  }
}

TEST(QuietRule, AFewKilobytesOfIoAreNoiseNotProgress) {
  // A beacon on a disk is written back and dirtied again by the next sample: 4-8 KiB now and
  // then, from a rank that is hung. It must neither end the quiet nor teach the budget.
  Trainer t(2, long_steps());
  t.steps(3, 18 * kMin);
  Verdict v;
  int64_t waited = 0;
  while (v.state != State::kStalled && waited < 5 * kMin) {
    t.job.sample(0, 7, WaitKind::kCollective);
    t.job.sample(1, 999, WaitKind::kNone, "hang_forever (train_ddp.py:170)");
    t.job.advance(kPoll);
    waited += kPoll;
    Observation o = t.job.observe();
    ProcessFacts p;
    p.rank = 1;
    p.main_cpu_delta_ns = 0;
    p.io_delta_bytes = waited % (15 * kSec) == 0 ? 8192 : 0;
    o.procs.push_back(p);
    v = t.det.observe(o);
  }
  ASSERT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_LE(waited, 30 * kSec + kPoll);
  EXPECT_EQ(*t.det.quiet().own_budget(), 30 * kSec);
}

TEST(QuietRule, CpuInsideAKnownWaitIsSpinningNotWork) {
  // NCCL and cudaStreamSynchronize spin the main thread at 100%: every rank waiting in the
  // same all-reduce with its CPU burning is still a hang with no rank standing out.
  Trainer t(3, long_steps());
  t.steps(3, 18 * kMin);
  Verdict v;
  int64_t waited = 0;
  while (v.state != State::kStalled && waited < 5 * kMin) {
    Observation o;
    for (int r = 0; r < 3; ++r)
      t.job.sample(r, 7, WaitKind::kDevice, "synchronize (__init__.py:566)");
    waited += kPoll;
    t.job.advance(kPoll);
    o = t.job.observe();
    for (int r = 0; r < 3; ++r) {
      ProcessFacts p;
      p.rank = r;
      p.main_cpu_delta_ns = kPoll;  // 100%
      p.io_delta_bytes = 0;
      o.procs.push_back(p);
    }
    v = t.det.observe(o);
  }
  ASSERT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_EQ(v.cause, Cause::kCollective);
  EXPECT_TRUE(v.culprits.empty()) << v.summary;
  EXPECT_LE(waited, 30 * kSec + kPoll);
  bool said = false;
  for (const auto& e : v.evidence)
    said = said || e.value.find("no rank stands out") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(QuietRule, TheWaitingBudgetIsLearnedFromHealthyAllReduces) {
  // Every step ends in a 45 s all-reduce in which nothing moves: learned, times 2.
  Trainer t(2, long_steps());
  t.steps(3, 18 * kMin, 45 * kSec);
  ASSERT_TRUE(t.det.quiet().wait_budget().has_value());
  EXPECT_GE(t.det.quiet().longest_wait_quiet(), 45 * kSec);
  EXPECT_GE(*t.det.quiet().wait_budget(), 90 * kSec);
  // The floor still governs a rank quiet outside a wait.
  EXPECT_EQ(*t.det.quiet().own_budget(), 30 * kSec);
  // A 60 s all-reduce is within it; a hang in one is stalled past it.
  auto in_all_reduce = [&] {
    for (int r = 0; r < 2; ++r) t.job.sample(r, 7, WaitKind::kCollective, "all_reduce (c10d.py:1)");
  };
  t.run(18 * kMin - 60 * kSec, [&] { t.compute_all(); });
  Verdict v = t.run(60 * kSec, in_all_reduce);
  EXPECT_NE(v.state, State::kStalled) << v.summary;
  v = t.run(*t.det.quiet().wait_budget(), in_all_reduce);
  EXPECT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_EQ(v.cause, Cause::kCollective);
}

TEST(QuietRule, ASamplerThatStoppedIsTheCulpritItself) {
  // A C extension holding the GIL: rank 1's sampler cannot run, its CPU is idle.
  Trainer t(2, long_steps());
  t.steps(3, 18 * kMin);
  Verdict v = t.run(2 * kMin, [&] { t.job.sample(0, 7, WaitKind::kCollective); });
  ASSERT_EQ(v.state, State::kStalled) << v.summary;
  ASSERT_EQ(v.culprits.size(), 1u);
  EXPECT_EQ(v.culprits[0].rank, 1);
  EXPECT_NE(v.culprits[0].reason.find("sampler stopped"), std::string::npos)
      << v.culprits[0].reason;
}

TEST(QuietRule, LabeledPhasesKeepTheirBudgets) {
  Trainer t(2, long_steps());
  t.steps(3, 18 * kMin);
  t.job.set_phase(0, "checkpoint");  // budget 10m in the default spec
  Verdict v = t.run(5 * kMin, [&] {
    t.job.sample(0, 999, WaitKind::kNone, "save (serialization.py:1)");
    t.job.sample(1, 7, WaitKind::kCollective);
  });
  EXPECT_NE(v.state, State::kStalled) << v.summary;
}

TEST(QuietRule, EveryRankWaitingInRendezvousIsHungAtInit) {
  Trainer t(3, long_steps());
  auto rendezvous = [&] {
    for (int r = 0; r < 3; ++r)
      t.job.sample(r, 5, WaitKind::kStore, "init_process_group (distributed_c10d.py:754)");
  };
  Verdict v = t.run(30 * kSec, rendezvous);
  EXPECT_EQ(v.state, State::kStarting) << v.summary;
  v = t.run(kPoll, rendezvous);
  ASSERT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_EQ(v.cause, Cause::kInit);
  EXPECT_EQ(v.culprits.size(), 3u);
  EXPECT_NE(v.ranks[0].note.find("with all 3 ranks present"), std::string::npos) << v.ranks[0].note;
}

TEST(QuietRule, ARankWhoseStoreCallHoldsTheGilCountsAsWaitingInRendezvous) {
  // torch 1.13's TCPStore keeps the GIL while rank 0 waits for the others: its sampler stops.
  Trainer t(2, long_steps());
  t.job.sample(0, 5, WaitKind::kStore, "init_process_group (distributed_c10d.py:754)");
  Verdict v = t.run(40 * kSec, [&] {
    t.job.sample(1, 5, WaitKind::kStore, "init_process_group (distributed_c10d.py:754)");
  });
  ASSERT_EQ(v.state, State::kStalled) << v.summary;
  EXPECT_EQ(v.cause, Cause::kInit);
  EXPECT_NE(v.ranks[0].note.find("sampler stopped"), std::string::npos) << v.ranks[0].note;
  // Stopped samplers alone, with no rank saying rendezvous, are not enough.
  Trainer u(2, long_steps());
  u.job.sample(0, 5);
  u.job.sample(1, 6);
  v = u.run(5 * kMin, [] {});
  EXPECT_NE(v.state, State::kStalled) << v.summary;
}

TEST(QuietRule, ARendezvousWaitingForAnImportingRankOrAMissingOneIsNotHung) {
  {
    Trainer t(3, long_steps());
    Verdict v = t.run(5 * kMin, [&] {
      t.job.sample(0, 5, WaitKind::kStore);
      t.job.sample(1, 5, WaitKind::kStore);
      t.job.sample(2, ++t.pos);  // still importing torch: it moves
    });
    EXPECT_NE(v.state, State::kStalled) << v.summary;
  }
  {
    Trainer t(3, long_steps());
    Verdict v;
    for (int i = 0; i < 60; ++i) {
      t.job.advance(kPoll);
      for (int r = 0; r < 3; ++r) t.job.sample(r, 5, WaitKind::kStore);
      Observation o = t.job.observe();
      o.world_size = 4;  // rank 3 has not started yet
      v = t.det.observe(o);
    }
    EXPECT_NE(v.state, State::kStalled) << v.summary;
  }
}

TEST(QuietRule, ASpecBudgetAppliesAtOnceAndOffTurnsTheRuleOff) {
  Config fixed = long_steps();
  fixed.quiet_budget_ns = 10 * kSec;
  Config off = long_steps();
  off.early = false;
  for (bool on : {true, false}) {
    Trainer t(2, on ? fixed : off);
    t.steps(1, 18 * kMin);  // no learning needed with a fixed budget
    Verdict v = t.run(20 * kSec, [&] {
      t.job.sample(0, 999);
      t.job.sample(1, 7, WaitKind::kCollective);
    });
    EXPECT_EQ(v.state == State::kStalled, on) << v.summary;
    if (on) {
      ASSERT_FALSE(v.culprits.empty());
      EXPECT_NE(v.culprits[0].reason.find("(spec)"), std::string::npos);
    }
  }
}

TEST(QuietRule, ARankWithoutASamplerLeavesTheJobToStepTime) {
  Trainer t(2, long_steps());
  t.steps(3, 18 * kMin);
  t.job.rank(1).sample.reset();
  Verdict v = t.run(5 * kMin, [&] {
    t.job.sample(0, 999);
    t.job.rank(1).sample.reset();
  });
  EXPECT_NE(v.state, State::kStalled) << v.summary;
}

}  // namespace
}  // namespace stepwatch::detect
