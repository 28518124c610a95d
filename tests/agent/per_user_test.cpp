// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// PerUserRate: a sliding window per uid on a clock the test moves by hand.
#include "src/agent/per_user.h"

#include <gtest/gtest.h>

#include "src/common/clock.h"

namespace stepwatch::agent {
namespace {

TEST(PerUserRate, AllowsTheLimitInAWindowThenRefusesUntilTheOldestLeaves) {
  PerUserRate r(3, 60 * kNsPerSec);
  EXPECT_TRUE(r.allow(1000, 0));
  EXPECT_TRUE(r.allow(1000, 10 * kNsPerSec));
  EXPECT_TRUE(r.allow(1000, 20 * kNsPerSec));
  EXPECT_FALSE(r.allow(1000, 30 * kNsPerSec));
  EXPECT_FALSE(r.allow(1000, 59 * kNsPerSec));  // a refusal is not counted
  EXPECT_TRUE(r.allow(1000, 60 * kNsPerSec));   // the event at 0 has left the window
  EXPECT_FALSE(r.allow(1000, 65 * kNsPerSec));
  EXPECT_TRUE(r.allow(1000, 70 * kNsPerSec));
}

TEST(PerUserRate, EachUserHasAWindowOfTheirOwn) {
  PerUserRate r(1, kNsPerSec);
  EXPECT_TRUE(r.allow(1000, 0));
  EXPECT_FALSE(r.allow(1000, 1));
  EXPECT_TRUE(r.allow(1001, 1));  // another user's flood costs this one nothing
  EXPECT_TRUE(r.allow(0, 1));
}

TEST(PerUserRate, ARefusalIsToldOncePerWindow) {
  PerUserRate r(1, 60 * kNsPerSec);
  EXPECT_TRUE(r.first_refusal(1000, 0));
  EXPECT_FALSE(r.first_refusal(1000, 30 * kNsPerSec));
  EXPECT_TRUE(r.first_refusal(1001, 30 * kNsPerSec));
  EXPECT_TRUE(r.first_refusal(1000, 60 * kNsPerSec));
}

// E7: one job that loops spends its own budget, not its owner's other jobs'.
TEST(PerJobRate, OneLoopingJobCostsAnotherJobNothing) {
  PerJobRate jobs(2, 3600 * kNsPerSec);
  EXPECT_TRUE(jobs.allow("mj6", 0));
  EXPECT_TRUE(jobs.allow("mj6", 1));
  EXPECT_FALSE(jobs.allow("mj6", 2));
  EXPECT_TRUE(jobs.allow("fb", 3));
  EXPECT_TRUE(jobs.allow("mj6", 3600 * kNsPerSec));  // the window moved on
}

}  // namespace
}  // namespace stepwatch::agent
