// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/spec/rules.h"

#include <gtest/gtest.h>

namespace stepwatch::spec {
namespace {

TEST(Closest, SuggestsTyposAndPrefixesOnly) {
  constexpr std::string_view keys[] = {"grace_intervals", "slow_factor", "poll_interval", "job",
                                       "class"};
  struct Case {
    const char* word;
    const char* want;
  } cases[] = {
      {"grace_interval", "grace_intervals"},
      {"grace", "grace_intervals"},
      {"slowfactor", "slow_factor"},
      {"pol_interval", "poll_interval"},
      {"jbo", "job"},
      {"clas", "class"},
      {"colour", ""},
      {"x", ""},
      {"", ""},
  };
  for (const auto& c : cases) EXPECT_EQ(closest(c.word, keys), c.want) << c.word;
}

TEST(OneOf, ReadsLikeASentence) {
  constexpr std::string_view two[] = {"marker", "beacon"};
  constexpr std::string_view three[] = {"a", "b", "c"};
  EXPECT_EQ(one_of(two), "one of marker or beacon");
  EXPECT_EQ(one_of(three), "one of a, b or c");
}

TEST(Names, JobIdsAndPhasesFollowTheBeaconRules) {
  EXPECT_EQ(job_id_problem("llm-70b_pretrain.v2"), "");
  EXPECT_NE(job_id_problem(""), "");
  EXPECT_NE(job_id_problem(".hidden"), "");
  EXPECT_NE(job_id_problem("a/b"), "");
  EXPECT_NE(job_id_problem(std::string(64, 'a')), "");
  EXPECT_EQ(job_id_problem(std::string(63, 'a')), "");

  EXPECT_EQ(phase_name_problem("moe:rebalance/0"), "");
  EXPECT_EQ(phase_name_problem(std::string(31, 'p')), "");
  EXPECT_NE(phase_name_problem(std::string(32, 'p')), "");
  EXPECT_NE(phase_name_problem("with space"), "");
  EXPECT_NE(phase_name_problem("train"), "");
}

TEST(EnumNames, RoundTrip) {
  for (auto name : kLogPresetNames) EXPECT_EQ(log_preset_name(*parse_log_preset(name)), name);
  for (auto name : kPagerKindNames) EXPECT_EQ(pager_kind_name(*parse_pager_kind(name)), name);
  for (auto name : kCheckpointSourceNames) {
    EXPECT_EQ(checkpoint_source_name(*parse_checkpoint_source(name)), name);
  }
  EXPECT_FALSE(parse_log_preset("Megatron").has_value())
      << "names are case-sensitive, like TOML keys";
}

}  // namespace
}  // namespace stepwatch::spec
