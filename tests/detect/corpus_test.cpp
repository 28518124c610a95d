// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// stepwatch's detection targets on the whole labeled corpus, asserted scenario by scenario:
// no false page, every stall found within its allowance, culprits right where the truth names
// them. The same corpus prints the comparison table in `make bench`.
#include <gtest/gtest.h>

#include "tests/support/scenarios/scenarios.h"
#include "tests/support/scenarios/score.h"

namespace stepwatch::bench {
namespace {

class Corpus : public ::testing::TestWithParam<size_t> {
 protected:
  static const std::vector<Scenario>& scenarios() {
    static const std::vector<Scenario> all = make_scenarios();
    return all;
  }
};

TEST_P(Corpus, MeetsTargets) {
  const Scenario& s = scenarios().at(GetParam());
  auto score = score_stepwatch(s);
  ASSERT_TRUE(score.ok()) << score.error().message;
  EXPECT_FALSE(score->false_page) << s.name << ": " << score->verdict;
  if (s.truth.stall) {
    EXPECT_FALSE(score->missed) << s.name;
    EXPECT_TRUE(score->within_target) << s.name << ": latency " << score->latency_ns.value_or(-1)
                                      << " ns, allowed " << s.truth.allowed_ns;
    if (!s.truth.culprits.empty()) {
      ASSERT_TRUE(score->culprit_ok.has_value())
          << s.name << ": no culprit named; " << score->verdict;
      EXPECT_TRUE(*score->culprit_ok) << s.name << ": " << score->verdict;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, Corpus, ::testing::Range<size_t>(0, 24));

TEST(CorpusShape, CoversTheIssuesScenarios) {
  auto all = make_scenarios();
  ASSERT_EQ(all.size(), 24u);  // keep the Range above in step
  int stalls = 0;
  for (const auto& s : all) {
    EXPECT_FALSE(s.observations.empty()) << s.name;
    stalls += s.truth.stall;
  }
  EXPECT_EQ(stalls, 12);
}

TEST(CorpusShape, TheEarlyRuleBurnsAtMostItsTargetAndTheStepTimeRuleMore) {
  // Issue 27: a verdict inside the step. The whole corpus burns at most kGpuMinutesTarget
  // GPU-minutes between stall and page; the step-time rule alone, on the same observations,
  // burns far more (the 18-minute-step hangs wait 2 x 18 min) and still pages nothing false.
  double early = 0, step_only = 0;
  for (const auto& s : make_scenarios()) {
    auto a = score_stepwatch(s);
    auto b = score_stepwatch(s, /*early=*/false);
    ASSERT_TRUE(a.ok() && b.ok());
    early += a->gpu_minutes;
    step_only += b->gpu_minutes;
    EXPECT_FALSE(b->false_page) << s.name;
    if (s.name == "18min-hang-in-step" || s.name == "hung-at-init") {
      ASSERT_TRUE(a->latency_ns.has_value()) << s.name;
      EXPECT_LE(*a->latency_ns, 70 * kNsPerSec) << s.name;  // 60 s + one 10 s poll
      ASSERT_TRUE(b->latency_ns.has_value()) << s.name;
      EXPECT_GT(*b->latency_ns, 10 * 60 * kNsPerSec) << s.name;
    }
  }
  EXPECT_LE(early, kGpuMinutesTarget);
  EXPECT_GT(step_only, 4 * kGpuMinutesTarget);
}

TEST(CorpusShape, BaselinesDisagreeWhereTheyShould) {
  // The scoring is not vacuous: the 10-minute timeout pages the 18-minute-step job, and the
  // SM-idle detector misses a collective hang that keeps the GPUs spinning.
  for (const auto& s : make_scenarios()) {
    auto base = score_baselines(s);
    if (s.name == "18min-steps") {
      EXPECT_TRUE(base[0].false_page);
    }
    if (s.name == "collective-hang-data") {
      EXPECT_TRUE(base[2].missed);
    }
  }
}

}  // namespace
}  // namespace stepwatch::bench
