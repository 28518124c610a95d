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

INSTANTIATE_TEST_SUITE_P(Scenarios, Corpus, ::testing::Range<size_t>(0, 17));

TEST(CorpusShape, CoversTheIssuesScenarios) {
  auto all = make_scenarios();
  ASSERT_EQ(all.size(), 17u);  // keep the Range above in step
  int stalls = 0;
  for (const auto& s : all) {
    EXPECT_FALSE(s.observations.empty()) << s.name;
    stalls += s.truth.stall;
  }
  EXPECT_EQ(stalls, 9);
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
