// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Incarnations and host implications: round trips, the upsert rules, order, idempotence,
// pruning, and the migration of a version 2 file.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

#include "src/store/schema.h"
#include "tests/store/store_fixture.h"

namespace stepwatch::store::testing {
namespace {

constexpr int64_t kMin = 60 * kSec;
constexpr int64_t kHour = 60 * kMin;

IncarnationRecord started(const std::string& job, int64_t n, int64_t at,
                          std::vector<std::string> hosts = {"gpu-01.rack_a", "gpu-02.rack_a"}) {
  IncarnationRecord r;
  r.job = job;
  r.incarnation = n;
  r.started_ns = at;
  r.hosts = std::move(hosts);
  r.scheduler_id = "slurm:1234";
  return r;
}

IncarnationRecord ended(const std::string& job, int64_t n, int64_t at, const std::string& reason) {
  IncarnationRecord r;
  r.job = job;
  r.incarnation = n;
  r.ended_ns = at;
  r.end_reason = reason;
  return r;
}

std::vector<IncarnationRecord> history(Store& s, const std::string& job, int limit = 0) {
  auto got = s.incarnations(job, limit);
  EXPECT_TRUE(got.ok()) << got.error().message;
  return got.ok() ? *got : std::vector<IncarnationRecord>{};
}

TEST_F(StoreTest, IncarnationRoundTripsEveryField) {
  IncarnationRecord r = started("llm", 4, kT0);
  r.ended_ns = kT0 + 7 * kMin;
  r.end_reason = "failed";
  r.cause = "collective";
  r.culprit_ranks = {3, 11, 0};
  r.culprit_hosts = {"gpu-02.rack_a", "we\"ird\\host\n"};  // escapes survive the JSON text
  r.hosts = {"gpu-01.rack_a", "gpu-02.rack_a", "node-7_b.example.com", "wè-ütf8"};
  r.checkpoint_step = 1200;
  ASSERT_TRUE(store().record_incarnation(r).ok());

  auto got = history(store(), "llm");
  ASSERT_EQ(got.size(), 1u);
  const auto& g = got[0];
  EXPECT_EQ(g.job, "llm");
  EXPECT_EQ(g.incarnation, 4);
  EXPECT_EQ(g.started_ns, kT0);
  EXPECT_EQ(g.ended_ns, kT0 + 7 * kMin);
  EXPECT_EQ(g.end_reason, "failed");
  EXPECT_EQ(g.cause, "collective");
  EXPECT_EQ(g.culprit_ranks, r.culprit_ranks);
  EXPECT_EQ(g.culprit_hosts, r.culprit_hosts);
  EXPECT_EQ(g.hosts, r.hosts);
  EXPECT_EQ(g.checkpoint_step, 1200);
  EXPECT_EQ(g.scheduler_id, "slurm:1234");
  EXPECT_TRUE(g.ended());
}

TEST_F(StoreTest, ARunningIncarnationHasNoEndAndEmptyLists) {
  IncarnationRecord r;
  r.job = "llm";
  r.incarnation = 1;
  r.started_ns = kT0;
  ASSERT_TRUE(store().record_incarnation(r).ok());
  auto got = history(store(), "llm");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].ended());
  EXPECT_EQ(got[0].end_reason, "");
  EXPECT_TRUE(got[0].culprit_ranks.empty());
  EXPECT_TRUE(got[0].culprit_hosts.empty());
  EXPECT_TRUE(got[0].hosts.empty());
  EXPECT_FALSE(got[0].checkpoint_step);
}

TEST_F(StoreTest, RecordingAgainUpdatesWhatIsGivenAndNeverClearsAnEnd) {
  ASSERT_TRUE(store().record_incarnation(started("llm", 2, kT0, {"a"})).ok());

  // The end, with the verdict's blame.
  IncarnationRecord end = ended("llm", 2, kT0 + 5 * kMin, "failed");
  end.cause = "io";
  end.culprit_ranks = {5};
  end.culprit_hosts = {"b"};
  end.hosts = {"b", "a"};
  end.checkpoint_step = 300;
  ASSERT_TRUE(store().record_incarnation(end).ok());

  // A late start record (another process, another host): no end, another start time.
  ASSERT_TRUE(store().record_incarnation(started("llm", 2, kT0 + kMin, {"c"})).ok());

  auto got = history(store(), "llm");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].started_ns, kT0);  // the first start stays
  EXPECT_EQ(got[0].ended_ns, kT0 + 5 * kMin);
  EXPECT_EQ(got[0].end_reason, "failed");
  EXPECT_EQ(got[0].cause, "io");
  EXPECT_EQ(got[0].culprit_ranks, std::vector<int>{5});
  EXPECT_EQ(got[0].culprit_hosts, std::vector<std::string>{"b"});
  EXPECT_EQ(got[0].hosts, (std::vector<std::string>{"a", "b", "c"}));  // union, first-seen order
  EXPECT_EQ(got[0].checkpoint_step, 300);
  EXPECT_EQ(got[0].scheduler_id, "slurm:1234");

  // A later end replaces the reason (the runbook gave up); the blame given earlier stays.
  ASSERT_TRUE(store().record_incarnation(ended("llm", 2, kT0 + 6 * kMin, "gave-up")).ok());
  got = history(store(), "llm");
  EXPECT_EQ(got[0].ended_ns, kT0 + 6 * kMin);
  EXPECT_EQ(got[0].end_reason, "gave-up");
  EXPECT_EQ(got[0].cause, "io");
  EXPECT_EQ(got[0].culprit_ranks, std::vector<int>{5});

  // The reason alone, for an incarnation whose end is recorded, is fine.
  IncarnationRecord reason_only;
  reason_only.job = "llm";
  reason_only.incarnation = 2;
  reason_only.end_reason = "preempted";
  ASSERT_TRUE(store().record_incarnation(reason_only).ok());
  EXPECT_EQ(history(store(), "llm")[0].end_reason, "preempted");
}

TEST_F(StoreTest, AnEndNeedsAReasonAndAJob) {
  IncarnationRecord r = started("llm", 1, kT0);
  r.ended_ns = kT0 + kSec;  // no end_reason
  auto st = store().record_incarnation(r);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Errc::kInvalidArgument);
  EXPECT_NE(st.error().message.find("incarnation 1 of job llm"), std::string::npos)
      << st.error().message;
  EXPECT_NE(st.error().message.find(store().path()), std::string::npos) << st.error().message;

  r = started("llm", 1, kT0);
  r.end_reason = "failed";  // a running incarnation with a reason
  EXPECT_FALSE(store().record_incarnation(r).ok());

  EXPECT_FALSE(store().record_incarnation(started("", 1, kT0)).ok());
  EXPECT_FALSE(store().record_incarnation(started("llm", 1, kT0, {"a", ""})).ok());
  EXPECT_TRUE(history(store(), "llm").empty());  // nothing half-written
}

TEST_F(StoreTest, IncarnationsAreNewestFirstPerJobWithALimit) {
  // Recorded out of order: the order is the incarnation number's.
  for (int64_t n : {3, 1, 5, 2, 4}) {
    ASSERT_TRUE(store().record_incarnation(started("llm", n, kT0 + n * kMin)).ok());
  }
  ASSERT_TRUE(store().record_incarnation(started("other", 9, kT0)).ok());
  auto got = history(store(), "llm");
  ASSERT_EQ(got.size(), 5u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].incarnation, 5 - int64_t(i));
  got = history(store(), "llm", 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].incarnation, 5);
  EXPECT_EQ(got[1].incarnation, 4);
  EXPECT_TRUE(history(store(), "nobody").empty());
}

TEST_F(StoreTest, AnImplicationIsRecordedOncePerHostJobAndIncarnation) {
  HostImplication i{"gpu-07", "llm", 3, kT0, "io", "culprit rank 5"};
  ASSERT_TRUE(store().record_implication(i).ok());
  HostImplication again = i;
  again.at_ns = kT0 + kHour;
  again.reason = "recorded twice";
  ASSERT_TRUE(store().record_implication(again).ok());  // not an error, and no change
  ASSERT_TRUE(store().record_implication({"gpu-07", "llm", 4, kT0 + kMin, "io", "r"}).ok());
  ASSERT_TRUE(store().record_implication({"gpu-07", "other", 3, kT0 + 2 * kMin, "", ""}).ok());
  ASSERT_TRUE(store().record_implication({"gpu-08", "llm", 3, kT0 + 3 * kMin, "", ""}).ok());

  auto got = store().implications(0);
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), 4u);
  EXPECT_EQ((*got)[0].host, "gpu-08");  // newest first
  EXPECT_EQ((*got)[3].host, "gpu-07");
  EXPECT_EQ((*got)[3].job, "llm");
  EXPECT_EQ((*got)[3].incarnation, 3);
  EXPECT_EQ((*got)[3].at_ns, kT0);  // the first record kept
  EXPECT_EQ((*got)[3].cause, "io");
  EXPECT_EQ((*got)[3].reason, "culprit rank 5");

  got = store().implications(kT0 + kMin);  // since is inclusive
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 3u);

  EXPECT_FALSE(store().record_implication({"", "llm", 1, kT0, "", ""}).ok());
  EXPECT_FALSE(store().record_implication({"h", "", 1, kT0, "", ""}).ok());
}

// A delivery kept for another ledger outlives the process (a reopened store has it), is kept
// once per incident (kept again: replaced), per job, and gone once forgotten.
TEST_F(StoreTest, AKeptDeliveryOutlivesTheStoreUntilItIsForgotten) {
  ASSERT_TRUE(store().keep_delivery({"llm", 1796000000000017, 2, kT0, "hook: sent", true}).ok());
  ASSERT_TRUE(
      store().keep_delivery({"llm", 1796000000000020, 2, kT0 + kMin, "hook: FAILED", false}).ok());
  ASSERT_TRUE(
      store().keep_delivery({"llm", 1796000000000017, 3, kT0, "hook: sent again", true}).ok());
  ASSERT_TRUE(store().keep_delivery({"other", 5, 0, kT0, "x", true}).ok());
  store_.reset();  // the process restarts
  auto reopened = Store::open(dir_ / "state");
  ASSERT_TRUE(reopened.ok()) << reopened.error().message;
  store_.emplace(std::move(*reopened));
  auto got = store().kept_deliveries("llm");
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].incident_id, 1796000000000017);
  EXPECT_EQ((*got)[0].summary, "hook: sent again");
  EXPECT_EQ((*got)[0].incarnation, 3);
  EXPECT_TRUE((*got)[0].delivered);
  EXPECT_EQ((*got)[1].incident_id, 1796000000000020);
  EXPECT_FALSE((*got)[1].delivered);
  ASSERT_TRUE(store().forget_delivery("llm", 1796000000000017).ok());
  ASSERT_TRUE(store().forget_delivery("llm", 999).ok()) << "none kept: nothing to do";
  got = store().kept_deliveries("llm");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(store().kept_deliveries("other")->size(), 1u);
  auto bad = store().keep_delivery({"", 3, 0, kT0, "", true});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("keep_delivery"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(store().keep_delivery({"llm", 0, 0, kT0, "", true}).ok());
}

TEST_F(StoreTest, PruneKeepsTheNewestIncarnationsAndRecentImplications) {
  for (int64_t n = 1; n <= 5; ++n) {
    IncarnationRecord r = started("llm", n, kT0 + n * kMin);
    if (n < 5) {
      r.ended_ns = kT0 + n * kMin + kSec;
      r.end_reason = "failed";
    }
    ASSERT_TRUE(store().record_incarnation(r).ok());
  }
  ASSERT_TRUE(store().record_incarnation(started("small", 1, kT0)).ok());
  ASSERT_TRUE(store().record_implication({"h1", "llm", 1, kT0 - 8 * 24 * kHour, "", ""}).ok());
  ASSERT_TRUE(store().record_implication({"h1", "llm", 2, kT0 - 6 * 24 * kHour, "", ""}).ok());
  ASSERT_TRUE(store().record_implication({"h2", "other", 1, kT0, "", ""}).ok());

  PruneLimits limits;
  limits.keep_incarnations = 3;
  limits.now_ns = kT0;  // the default max age is a week
  auto counts = store().prune(limits);
  ASSERT_TRUE(counts.ok()) << counts.error().message;
  EXPECT_EQ(counts->incarnations, 2);
  EXPECT_EQ(counts->implications, 1);
  auto got = history(store(), "llm");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].incarnation, 3);
  EXPECT_EQ(history(store(), "small").size(), 1u);  // per job
  auto imp = store().implications(0);
  ASSERT_TRUE(imp.ok());
  EXPECT_EQ(imp->size(), 2u);

  // By age: ended before older_than goes (3 and 4); the running newest stays, however old.
  limits.older_than_ns = kT0 + 10 * kMin;
  limits.implication_max_age_ns = 0;  // older_than_ns still applies to implications
  counts = store().prune(limits);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->incarnations, 2);  // llm 3 and 4; small's 1 is running
  got = history(store(), "llm");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].incarnation, 5);
  EXPECT_EQ(history(store(), "small").size(), 1u);
  imp = store().implications(0);
  ASSERT_TRUE(imp.ok());
  EXPECT_TRUE(imp->empty());
}

// What a version 2 database holds (no incarnation tables) migrates in place, keeping its rows.
TEST(StoreIncarnationsMigration, AVersion2FileGainsTheTablesAndKeepsItsIncidents) {
  test::TempDir tmp;
  const std::string dir = tmp / "state";
  int64_t id = 0;
  {
    auto s = Store::open(dir);
    ASSERT_TRUE(s.ok()) << s.error().message;
    auto ref = s->open_incident(stall("llm"));
    ASSERT_TRUE(ref.ok());
    id = ref->id;
  }
  {  // back to version 2, through a plain sqlite3 handle
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open_v2((dir + "/stepwatch.db").c_str(), &h, SQLITE_OPEN_READWRITE, nullptr),
              SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(h,
                           "DROP TABLE incarnations; DROP TABLE host_implications; "
                           "DROP TABLE kept_deliveries; "
                           "DELETE FROM schema_version WHERE version >= 3",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close_v2(h);
  }
  auto s = Store::open(dir);
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto inc = s->incident(id);
  ASSERT_TRUE(inc.ok() && inc->has_value());
  EXPECT_EQ((*inc)->job, "llm");
  ASSERT_TRUE(s->record_incarnation(started("llm", 1, kT0)).ok());
  ASSERT_TRUE(s->record_implication({"h", "llm", 1, kT0, "", ""}).ok());
  auto got = s->incarnations("llm", 0);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 1u);
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2((dir + "/stepwatch.db").c_str(), &h, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  int version = 0;
  sqlite3_exec(
      h, "SELECT MAX(version) FROM schema_version",
      [](void* out, int, char** vals, char**) {
        *static_cast<int*>(out) = std::stoi(vals[0]);
        return 0;
      },
      &version, nullptr);
  sqlite3_close_v2(h);
  EXPECT_EQ(version, kSchemaVersion);
}

}  // namespace
}  // namespace stepwatch::store::testing
