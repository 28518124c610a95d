// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The incident lifecycle: round trips, one open incident per job, the page claimed once, the
// first ack kept, close idempotent, newest-first listing, and reopening the file.
#include "src/store/store.h"

#include <gtest/gtest.h>

#include "tests/store/store_fixture.h"

namespace stepwatch::store {
namespace {

using testing::kSec;
using testing::kT0;
using testing::stall;
using testing::StoreTest;

TEST_F(StoreTest, IncidentRoundTrip) {
  auto ref = store().open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  EXPECT_TRUE(ref->created);
  EXPECT_GT(ref->id, 0);

  auto got = store().incident(ref->id);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  const Incident& i = **got;
  EXPECT_EQ(i.job, "llm");
  EXPECT_EQ(i.incarnation, 2);
  EXPECT_EQ(i.opened_at_ns, kT0);
  EXPECT_EQ(i.state, "stalled");
  EXPECT_EQ(i.cause, "collective");
  EXPECT_EQ(i.summary, "rank 3 stopped at step 1200");
  EXPECT_EQ(i.verdict_json, R"({"state":"stalled","culprits":[3]})");
  EXPECT_FALSE(i.paged_at_ns);
  EXPECT_FALSE(i.acked_at_ns);
  EXPECT_FALSE(i.closed_at_ns);
  EXPECT_TRUE(i.is_open());
  EXPECT_EQ(i.status(), "open");

  auto open = store().open_incident_for("llm");
  ASSERT_TRUE(open.ok());
  ASSERT_TRUE(open->has_value());
  EXPECT_EQ((*open)->id, ref->id);
  auto none = store().open_incident_for("other");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto missing = store().incident(9999);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TEST_F(StoreTest, OneOpenIncidentPerJob) {
  auto first = store().open_incident(stall("llm"));
  auto again = store().open_incident(stall("llm", kT0 + 5 * kSec));
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->id, first->id);
  auto other = store().open_incident(stall("vision"));
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->created);
  EXPECT_NE(other->id, first->id);

  ASSERT_TRUE(store().close_incident(first->id, kT0 + 60 * kSec, "recovered").ok());
  auto next = store().open_incident(stall("llm", kT0 + 120 * kSec));
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->created);
  EXPECT_GT(next->id, first->id);
}

TEST_F(StoreTest, OpenIncidentRejectsEmptyJob) {
  auto r = store().open_incident(stall(""));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kInvalidArgument);
}

TEST_F(StoreTest, ClaimPageOnlyOnce) {
  auto ref = store().open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  auto c1 = store().claim_page(ref->id, kT0 + kSec);
  ASSERT_TRUE(c1.ok()) << c1.error().message;
  EXPECT_TRUE(*c1);
  auto c2 = store().claim_page(ref->id, kT0 + 2 * kSec);
  ASSERT_TRUE(c2.ok());
  EXPECT_FALSE(*c2);

  auto i = store().incident(ref->id);
  ASSERT_TRUE(i.ok() && i->has_value());
  EXPECT_EQ((*i)->paged_at_ns, kT0 + kSec);
  EXPECT_EQ((*i)->page_result, "claimed");

  auto missing = store().claim_page(4242, kT0);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kNotFound);
  EXPECT_NE(missing.error().message.find("#4242"), std::string::npos);
}

TEST_F(StoreTest, ClosedIncidentIsNeverPaged) {
  auto ref = store().open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(store().close_incident(ref->id, kT0 + kSec, "recovered").ok());
  auto c = store().claim_page(ref->id, kT0 + 2 * kSec);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(*c);
}

TEST_F(StoreTest, AClaimIsNotADeliveryUntilOneIsRecorded) {
  auto ref = store().open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(*store().claim_page(ref->id, kT0 + kSec));
  auto at = [&] { return **store().incident(ref->id); };
  EXPECT_TRUE(at().page_undelivered());
  ASSERT_TRUE(store().mark_paged(ref->id, kT0 + 2 * kSec, "webhook: FAILED", false).ok());
  EXPECT_TRUE(at().page_undelivered());
  ASSERT_TRUE(store().mark_paged(ref->id, kT0 + 3 * kSec, "webhook: sent", true).ok());
  EXPECT_FALSE(at().page_undelivered());
  EXPECT_EQ(at().delivered_at_ns, kT0 + 3 * kSec);
  // A later failed re-delivery does not take the delivery back.
  ASSERT_TRUE(store().mark_paged(ref->id, kT0 + 4 * kSec, "webhook: FAILED", false).ok());
  EXPECT_EQ(at().delivered_at_ns, kT0 + 3 * kSec);
  EXPECT_EQ(at().page_result, "webhook: FAILED");
}

TEST_F(StoreTest, MarkPagedIsIdempotentAndKeepsTheClaimTime) {
  auto ref = store().open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(*store().claim_page(ref->id, kT0 + kSec));
  ASSERT_TRUE(store().mark_paged(ref->id, kT0 + 3 * kSec, "sent: webhook 200").ok());
  ASSERT_TRUE(store().mark_paged(ref->id, kT0 + 4 * kSec, "sent: webhook 200").ok());
  auto i = store().incident(ref->id);
  ASSERT_TRUE(i.ok() && i->has_value());
  EXPECT_EQ((*i)->paged_at_ns, kT0 + kSec);
  EXPECT_EQ((*i)->page_result, "sent: webhook 200");

  // Without a claim, mark_paged sets the time itself; it never claims twice either.
  auto other = store().open_incident(stall("vision"));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(store().mark_paged(other->id, kT0 + 7 * kSec, "sent").ok());
  auto j = store().incident(other->id);
  ASSERT_TRUE(j.ok() && j->has_value());
  EXPECT_EQ((*j)->paged_at_ns, kT0 + 7 * kSec);
  EXPECT_FALSE(*store().claim_page(other->id, kT0 + 8 * kSec));

  auto missing = store().mark_paged(777, kT0, "sent");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kNotFound);
}

TEST_F(StoreTest, ReleasedClaimCanBeClaimedAgain) {
  auto ref = store().open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(*store().claim_page(ref->id, kT0 + kSec));
  ASSERT_TRUE(store().release_page(ref->id, "failed: connection refused").ok());
  auto i = store().incident(ref->id);
  ASSERT_TRUE(i.ok() && i->has_value());
  EXPECT_FALSE((*i)->paged_at_ns);
  EXPECT_EQ((*i)->page_result, "failed: connection refused");
  EXPECT_TRUE(*store().claim_page(ref->id, kT0 + 30 * kSec));
  EXPECT_FALSE(*store().claim_page(ref->id, kT0 + 31 * kSec));
}

TEST_F(StoreTest, AckTakesTheOpenIncidentAndKeepsTheFirstAck) {
  auto none = store().ack("llm", kT0, "alice", "looking");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  auto ref = store().open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  auto a1 = store().ack("llm", kT0 + 10 * kSec, "alice", "looking");
  ASSERT_TRUE(a1.ok()) << a1.error().message;
  ASSERT_TRUE(a1->has_value());
  EXPECT_EQ((*a1)->id, ref->id);
  EXPECT_EQ((*a1)->acked_at_ns, kT0 + 10 * kSec);
  EXPECT_EQ((*a1)->acked_by, "alice");
  EXPECT_EQ((*a1)->ack_note, "looking");
  EXPECT_EQ((*a1)->status(), "acked");

  auto a2 = store().ack("llm", kT0 + 20 * kSec, "bob", "");
  ASSERT_TRUE(a2.ok() && a2->has_value());
  EXPECT_EQ((*a2)->acked_at_ns, kT0 + 10 * kSec);
  EXPECT_EQ((*a2)->acked_by, "alice");

  auto acts = store().actions(ref->id);
  ASSERT_TRUE(acts.ok());
  ASSERT_EQ(acts->size(), 2u);
  EXPECT_EQ((*acts)[0].kind, "ack");
  EXPECT_EQ((*acts)[0].detail, "alice: looking");
  EXPECT_EQ((*acts)[1].detail, "bob");

  ASSERT_TRUE(store().close_incident(ref->id, kT0 + 30 * kSec, "recovered").ok());
  auto after = store().ack("llm", kT0 + 40 * kSec, "carol", "");
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());
}

TEST_F(StoreTest, CloseIsIdempotentAndKeepsTheFirstResolution) {
  auto ref = store().open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(store().close_incident(ref->id, kT0 + 60 * kSec, "resumed from step_200").ok());
  ASSERT_TRUE(store().close_incident(ref->id, kT0 + 90 * kSec, "gave up").ok());
  auto i = store().incident(ref->id);
  ASSERT_TRUE(i.ok() && i->has_value());
  EXPECT_EQ((*i)->closed_at_ns, kT0 + 60 * kSec);
  EXPECT_EQ((*i)->resolution, "resumed from step_200");
  EXPECT_EQ((*i)->status(), "closed");

  auto missing = store().close_incident(31337, kT0, "x");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kNotFound);
}

TEST_F(StoreTest, UpdateIncidentWhileOpenOnly) {
  auto ref = store().open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(
      store().update_incident(ref->id, "dead", "", "rank 3 exited with signal 9", "{}").ok());
  auto i = store().incident(ref->id);
  ASSERT_TRUE(i.ok() && i->has_value());
  EXPECT_EQ((*i)->state, "dead");
  EXPECT_EQ((*i)->summary, "rank 3 exited with signal 9");
  ASSERT_TRUE(store().close_incident(ref->id, kT0 + kSec, "gave up").ok());
  auto closed = store().update_incident(ref->id, "stalled", "", "", "");
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.error().code, Errc::kInvalidArgument);
  auto missing = store().update_incident(999, "stalled", "", "", "");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kNotFound);
}

TEST_F(StoreTest, IncidentsNewestFirstWithFilterAndLimit) {
  for (int k = 0; k < 3; ++k) {
    auto a = store().open_incident(stall("llm", kT0 + k * 100 * kSec));
    auto b = store().open_incident(stall("vision", kT0 + k * 100 * kSec + kSec));
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(store().close_incident(a->id, kT0 + k * 100 * kSec + 50 * kSec, "recovered").ok());
    ASSERT_TRUE(store().close_incident(b->id, kT0 + k * 100 * kSec + 50 * kSec, "recovered").ok());
  }
  auto all = store().incidents("", 0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 6u);
  for (size_t k = 1; k < all->size(); ++k)
    EXPECT_GE((*all)[k - 1].opened_at_ns, (*all)[k].opened_at_ns);
  EXPECT_EQ(all->front().job, "vision");

  auto llm = store().incidents("llm", 2);
  ASSERT_TRUE(llm.ok());
  ASSERT_EQ(llm->size(), 2u);
  EXPECT_EQ((*llm)[0].job, "llm");
  EXPECT_EQ((*llm)[0].opened_at_ns, kT0 + 200 * kSec);
  EXPECT_EQ((*llm)[1].opened_at_ns, kT0 + 100 * kSec);
  auto nobody = store().incidents("nobody", 10);
  ASSERT_TRUE(nobody.ok());
  EXPECT_TRUE(nobody->empty());
}

TEST_F(StoreTest, EverythingSurvivesReopening) {
  auto ref = store().open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  ASSERT_TRUE(*store().claim_page(ref->id, kT0 + kSec));
  ASSERT_TRUE(store()
                  .save_state({"llm", 5, 4, 0, "step_300", 300, std::nullopt, std::nullopt, 0, kT0})
                  .ok());
  ASSERT_TRUE(store().record_process({"llm", 5, 123, 456, "launcher", kT0}).ok());
  store_.reset();

  auto again = Store::open(dir_ / "state");
  ASSERT_TRUE(again.ok()) << again.error().message;
  auto open = again->open_incident_for("llm");
  ASSERT_TRUE(open.ok() && open->has_value());
  EXPECT_EQ((*open)->paged_at_ns, kT0 + kSec);
  EXPECT_FALSE(*again->claim_page(ref->id, kT0 + 2 * kSec));
  auto st = again->load_state("llm");
  ASSERT_TRUE(st.ok() && st->has_value());
  EXPECT_EQ((*st)->checkpoint_id, "step_300");
  auto procs = again->processes("llm", 5);
  ASSERT_TRUE(procs.ok());
  EXPECT_EQ(procs->size(), 1u);
}

}  // namespace
}  // namespace stepwatch::store
