// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Actions, transitions, supervisor state, process records and pruning (store_history.cpp).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "src/store/store.h"
#include "tests/store/store_fixture.h"

namespace stepwatch::store {
namespace {

using testing::kSec;
using testing::kT0;
using testing::stall;
using testing::StoreTest;

TEST_F(StoreTest, ActionsRoundTrip) {
  auto ref = store().open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  auto a1 = store().record_action({0, ref->id, "llm", kT0 + kSec, "page", true, "webhook 200"});
  auto a2 = store().record_action(
      {0, ref->id, "llm", kT0 + 2 * kSec, "preempt", false, "SIGTERM pgid 42: EPERM"});
  auto loose = store().record_action(
      {0, std::nullopt, "llm", kT0 + 3 * kSec, "restart", true, "incarnation 3"});
  ASSERT_TRUE(a1.ok() && a2.ok() && loose.ok()) << a1.error().message;
  EXPECT_LT(*a1, *a2);

  auto acts = store().actions(ref->id);
  ASSERT_TRUE(acts.ok());
  ASSERT_EQ(acts->size(), 2u);
  EXPECT_EQ((*acts)[0].id, *a1);
  EXPECT_EQ((*acts)[0].incident_id, ref->id);
  EXPECT_EQ((*acts)[0].kind, "page");
  EXPECT_TRUE((*acts)[0].ok);
  EXPECT_EQ((*acts)[1].kind, "preempt");
  EXPECT_FALSE((*acts)[1].ok);
  EXPECT_EQ((*acts)[1].detail, "SIGTERM pgid 42: EPERM");

  auto job = store().job_actions("llm", 0);
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(job->size(), 3u);
  EXPECT_EQ((*job)[0].kind, "restart");  // newest first
  EXPECT_FALSE((*job)[0].incident_id);

  auto dangling = store().record_action({0, 12345, "llm", kT0, "note", true, ""});
  ASSERT_FALSE(dangling.ok());
  EXPECT_NE(dangling.error().message.find("FOREIGN KEY"), std::string::npos)
      << dangling.error().message;
  auto no_kind = store().record_action({0, std::nullopt, "llm", kT0, "", true, ""});
  ASSERT_FALSE(no_kind.ok());
  EXPECT_EQ(no_kind.error().code, Errc::kInvalidArgument);
}

TEST_F(StoreTest, TransitionsRoundTrip) {
  ASSERT_TRUE(
      store().record_transition({0, "llm", 1, kT0, "starting", "healthy", "", "first step"}).ok());
  ASSERT_TRUE(store()
                  .record_transition(
                      {0, "llm", 1, kT0 + kSec, "healthy", "suspect", "host", "1 interval missed"})
                  .ok());
  ASSERT_TRUE(store().record_transition({0, "other", 1, kT0, "starting", "healthy", "", ""}).ok());
  auto t = store().transitions("llm", 0);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].from_state, "healthy");
  EXPECT_EQ((*t)[0].to_state, "suspect");
  EXPECT_EQ((*t)[0].cause, "host");
  EXPECT_EQ((*t)[0].summary, "1 interval missed");
  EXPECT_EQ((*t)[0].incarnation, 1);
  EXPECT_EQ((*t)[0].at_ns, kT0 + kSec);
  auto one = store().transitions("llm", 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
}

TEST_F(StoreTest, SupervisorStateRoundTrip) {
  auto none = store().load_state("llm");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  SupervisorState s{"llm", 3, 2, 1, "step_200", 200, 1'500'000'000, 2'100'000'000, 64, kT0};
  ASSERT_TRUE(store().save_state(s).ok());
  auto got = store().load_state("llm");
  ASSERT_TRUE(got.ok() && got->has_value());
  const SupervisorState& g = **got;
  EXPECT_EQ(g.incarnation, 3);
  EXPECT_EQ(g.restarts, 2);
  EXPECT_EQ(g.restarts_without_progress, 1);
  EXPECT_EQ(g.checkpoint_id, "step_200");
  EXPECT_EQ(g.checkpoint_step, 200);
  EXPECT_EQ(g.interval_median_ns, 1'500'000'000);
  EXPECT_EQ(g.interval_p90_ns, 2'100'000'000);
  EXPECT_EQ(g.interval_samples, 64);
  EXPECT_EQ(g.updated_at_ns, kT0);

  // Replaced, not appended; absent values stay absent.
  SupervisorState fresh{"llm",        4, 3,         0, "", std::nullopt, std::nullopt,
                        std::nullopt, 0, kT0 + kSec};
  ASSERT_TRUE(store().save_state(fresh).ok());
  got = store().load_state("llm");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->incarnation, 4);
  EXPECT_FALSE((*got)->checkpoint_step);
  EXPECT_FALSE((*got)->interval_median_ns);
  EXPECT_EQ((*got)->checkpoint_id, "");
}

TEST_F(StoreTest, ProcessRecordsPerIncarnation) {
  ASSERT_TRUE(store().record_process({"llm", 1, 100, 5000, "launcher", kT0}).ok());
  ASSERT_TRUE(store().record_process({"llm", 1, 101, 5001, "rank 0", kT0 + 1}).ok());
  ASSERT_TRUE(store().record_process({"llm", 2, 200, 9000, "launcher", kT0 + kSec}).ok());
  ASSERT_TRUE(store().record_process({"other", 1, 300, 1, "launcher", kT0}).ok());
  // The same process seen again: first_seen stays, a known role is not erased, a new one wins.
  ASSERT_TRUE(store().record_process({"llm", 1, 101, 5001, "", kT0 + 99 * kSec}).ok());
  ASSERT_TRUE(store().record_process({"llm", 1, 100, 5000, "child", kT0 + 99 * kSec}).ok());
  // A reused pid with another start time is another process.
  ASSERT_TRUE(store().record_process({"llm", 1, 101, 7777, "child", kT0 + 2 * kSec}).ok());

  auto all = store().processes("llm");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  auto first = store().processes("llm", 1);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 3u);
  EXPECT_EQ((*first)[0].pid, 100);
  EXPECT_EQ((*first)[0].role, "child");
  EXPECT_EQ((*first)[0].first_seen_ns, kT0);
  EXPECT_EQ((*first)[1].pid, 101);
  EXPECT_EQ((*first)[1].start_ticks, 5001u);
  EXPECT_EQ((*first)[1].role, "rank 0");
  EXPECT_EQ((*first)[2].start_ticks, 7777u);

  auto before = store().processes_before("llm", 2);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->size(), 3u);
  for (const auto& p : *before) EXPECT_EQ(p.incarnation, 1);

  auto forgotten = store().forget_processes_before("llm", 2);
  ASSERT_TRUE(forgotten.ok());
  EXPECT_EQ(*forgotten, 3);
  all = store().processes("llm");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].incarnation, 2);
  auto other = store().processes("other");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->size(), 1u);

  auto bad = store().record_process({"llm", 1, 0, 1, "", kT0});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::kInvalidArgument);
}

TEST_F(StoreTest, PruneKeepsTheNewestAndEveryOpenIncident) {
  for (int k = 0; k < 5; ++k) {
    auto ref = store().open_incident(stall("llm", kT0 + k * 100 * kSec));
    ASSERT_TRUE(ref.ok());
    ASSERT_TRUE(store()
                    .record_action({0, ref->id, "llm", kT0 + k * 100 * kSec + 1, "page", true, ""})
                    .ok());
    if (k < 4) {
      ASSERT_TRUE(
          store().close_incident(ref->id, kT0 + k * 100 * kSec + 50 * kSec, "recovered").ok());
    }
    ASSERT_TRUE(store().record_action({0, std::nullopt, "llm", kT0 + k, "note", true, ""}).ok());
    ASSERT_TRUE(
        store().record_transition({0, "llm", k, kT0 + k, "healthy", "stalled", "", ""}).ok());
    ASSERT_TRUE(store().record_process({"llm", k, 100 + k, 1, "launcher", kT0}).ok());
  }
  ASSERT_TRUE(store().open_incident(stall("other")).ok());  // another job's history is its own

  PruneLimits limits{2, 3, 1, 2};
  auto counts = store().prune(limits);
  ASSERT_TRUE(counts.ok()) << counts.error().message;
  EXPECT_EQ(counts->incidents, 2);    // 4 closed, keep 2; the open one stays
  EXPECT_EQ(counts->actions, 2 + 2);  // their two page actions, and 5 - 3 loose notes
  EXPECT_EQ(counts->transitions, 4);
  EXPECT_EQ(counts->processes, 3);  // incarnations 0..2 of 0..4

  auto left = store().incidents("llm", 0);
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 3u);
  EXPECT_TRUE(left->front().is_open());
  EXPECT_EQ(left->back().opened_at_ns, kT0 + 200 * kSec);
  auto other = store().incidents("other", 0);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->size(), 1u);
  auto procs = store().processes("llm");
  ASSERT_TRUE(procs.ok());
  ASSERT_EQ(procs->size(), 2u);
  EXPECT_EQ(procs->front().incarnation, 3);

  auto again = store().prune(limits);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->incidents + again->actions + again->transitions + again->processes, 0);
}

TEST_F(StoreTest, PruneByAgeDropsOldHistoryButNeverAnOpenIncident) {
  auto old = store().open_incident(stall("llm", kT0));
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(store().close_incident(old->id, kT0 + 10 * kSec, "recovered").ok());
  auto still_open = store().open_incident(stall("stuck", kT0));  // as old, but open
  ASSERT_TRUE(still_open.ok());
  ASSERT_TRUE(store().record_transition({0, "llm", 0, kT0, "healthy", "stalled", "", ""}).ok());
  ASSERT_TRUE(store().record_action({0, std::nullopt, "llm", kT0, "note", true, ""}).ok());
  auto recent = store().open_incident(stall("llm", kT0 + 1000 * kSec));
  ASSERT_TRUE(recent.ok());
  ASSERT_TRUE(store().close_incident(recent->id, kT0 + 1010 * kSec, "recovered").ok());
  ASSERT_TRUE(store()
                  .record_transition({0, "llm", 0, kT0 + 1000 * kSec, "healthy", "stalled", "", ""})
                  .ok());

  PruneLimits limits;  // counts far above what is there: only age prunes
  limits.older_than_ns = kT0 + 500 * kSec;
  auto counts = store().prune(limits);
  ASSERT_TRUE(counts.ok()) << counts.error().message;
  EXPECT_EQ(counts->incidents, 1);
  EXPECT_EQ(counts->transitions, 1);
  EXPECT_EQ(counts->actions, 1);
  auto llm = store().incidents("llm", 0);
  ASSERT_TRUE(llm.ok());
  ASSERT_EQ(llm->size(), 1u);
  EXPECT_EQ(llm->front().id, recent->id);
  auto stuck = store().incidents("stuck", 0);
  ASSERT_TRUE(stuck.ok());
  ASSERT_EQ(stuck->size(), 1u);
  EXPECT_TRUE(stuck->front().is_open());
}

TEST_F(StoreTest, UsedBytesGrowWithRowsAndFreedPagesAreNotCounted) {
  auto before = store().used_bytes();
  ASSERT_TRUE(before.ok()) << before.error().message;
  EXPECT_GT(*before, 0);
  for (int k = 0; k < 400; ++k) {
    auto ref = store().open_incident(stall(fmt::format("job-{}", k), kT0 + k));
    ASSERT_TRUE(ref.ok());
    ASSERT_TRUE(store().close_incident(ref->id, kT0 + k + 1, std::string(500, 'x')).ok());
  }
  auto full = store().used_bytes();
  ASSERT_TRUE(full.ok());
  EXPECT_GT(*full, *before + 400 * 500);
  PruneLimits limits;
  limits.keep_closed_incidents = 0;
  ASSERT_TRUE(store().prune(limits).ok());
  auto after = store().used_bytes();
  ASSERT_TRUE(after.ok());
  EXPECT_LT(*after, *full / 2);
}

}  // namespace
}  // namespace stepwatch::store
