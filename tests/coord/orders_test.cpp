// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A multi-node job's orders, reports, incarnation counter and roster in a real etcd: each
// written once, the leader's fenced by its node key.
#include "src/coord/orders.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "src/coord/etcd_client.h"
#include "tests/fakes/memory_kv.h"
#include "tests/support/etcd_server.h"

namespace stepwatch::coord {
namespace {

class OrdersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = std::make_unique<test::EtcdServer>();
    client_ = std::make_unique<EtcdClient>(EtcdOptions{{etcd_->endpoint()}, "", kNsPerSec});
    auto rev = client_->put("/sw/jobs/j/nodes/a", "{}");
    ASSERT_TRUE(rev.ok()) << rev.error().message;
    fence_ = *rev;
  }
  JobOrders on(const std::string& node) {
    return JobOrders(*client_, bad_, "/sw/jobs/j/", node, "/sw/jobs/j/nodes/" + node);
  }
  BadRecords bad_;
  std::unique_ptr<test::EtcdServer> etcd_;
  std::unique_ptr<EtcdClient> client_;
  int64_t fence_ = 0;
};

TEST_F(OrdersTest, AnOrderIsWrittenOnceAndOnlyByTheLeader) {
  JobOrders a = on("a");
  Order o{42, 3, true, "a", 1000};
  auto first = a.order(o, fence_);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(*first);
  auto again = a.order(o, fence_);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);  // a next leader finds it ordered: it stands
  auto stale = a.order(Order{43, 3, true, "a", 1000}, fence_ + 1000);
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.error().message.find("fence"), std::string::npos) << stale.error().message;
  EXPECT_FALSE(on("c").order(Order{44, 3, true, "c", 1}, 0).ok());
  auto all = on("b").orders();
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->front().incident, 42);
  EXPECT_EQ(all->front().incarnation, 3);
  EXPECT_EQ(all->front().by, "a");
  EXPECT_EQ(all->front().fence, fence_) << "an order carries its leader's fence";
}

TEST_F(OrdersTest, ANextLeaderSignsItsPredecessorsOrderAgain) {
  ASSERT_TRUE(on("a").order(Order{42, 3, true, "a"}, fence_).ok());
  auto rev_b = client_->put("/sw/jobs/j/nodes/b", "{}");
  ASSERT_TRUE(rev_b.ok());
  auto again = on("b").order(Order{42, 3, true, "b"}, *rev_b);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(*again) << "the incident was ordered before";
  auto all = on("c").orders();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->front().by, "b");
  EXPECT_EQ(all->front().fence, *rev_b);
  EXPECT_FALSE(on("a").order(Order{42, 3, true, "a"}, fence_ + 1000).ok())
      << "a leader whose key is not the one it holds signs nothing";
}

// E5, E6: a value that does not read is skipped and said once; the rest of the listing stands,
// and nothing is an error of the call (only a failed call is).
TEST_F(OrdersTest, ABadKeyIsSkippedAndSaidOnceNeverAFailedListing) {
  JobOrders a = on("a");
  ASSERT_TRUE(a.order(Order{42, 3, true, "a"}, fence_).ok());
  const std::string deep = R"({"incident":1,"incarnation":0,"x":)" + std::string(100000, '[') +
                           std::string(100000, ']') + "}";
  ASSERT_TRUE(client_->put("/sw/jobs/j/orders/00000000000000000001", deep).ok());
  ASSERT_TRUE(client_->put("/sw/jobs/j/orders/00000000000000000002", "x").ok());
  ASSERT_TRUE(client_->put("/sw/jobs/j/orders/00000000000000000003", R"({"incident":"3"})").ok());
  for (int poll = 0; poll < 3; ++poll) {
    auto all = a.orders();
    ASSERT_TRUE(all.ok()) << all.error().message;
    ASSERT_EQ(all->size(), 1u);
    EXPECT_EQ(all->front().incident, 42);
  }
  EXPECT_EQ(bad_.total(), 3u) << "each bad value is counted once, however often it is read";
  ASSERT_TRUE(client_->put("/sw/jobs/j/orders/00000000000000000002", "y").ok());
  ASSERT_TRUE(a.orders().ok());
  EXPECT_EQ(bad_.total(), 4u) << "a new bad value of the key is said again";

  Done d;
  d.ok = true;
  ASSERT_TRUE(on("b").report(42, d).ok());
  ASSERT_TRUE(client_->put("/sw/jobs/j/done/00000000000000000042/zz", "x").ok());
  Done forged;
  ASSERT_TRUE(on("zz").report(7, forged).ok());
  auto moved = client_->range("/sw/jobs/j/done/00000000000000000007/zz");
  ASSERT_TRUE(moved.ok() && moved->kvs.size() == 1u);
  ASSERT_TRUE(client_->put("/sw/jobs/j/done/00000000000000000042/c", moved->kvs[0].value).ok());
  auto reports = a.reports(42);
  ASSERT_TRUE(reports.ok()) << reports.error().message;
  ASSERT_EQ(reports->size(), 1u) << "garbage and node zz's report under c's name are skipped";
  EXPECT_EQ(reports->front().node, "b");

  ASSERT_TRUE(client_->put("/sw/jobs/j/roster", R"({"incarnation":1,"nodes":{"a":"x"}})").ok());
  auto roster = a.roster();
  ASSERT_TRUE(roster.ok()) << roster.error().message;
  EXPECT_FALSE(roster->has_value());
  ASSERT_TRUE(client_
                  ->put("/sw/jobs/j/view", R"({"leader":"a","at_wall_ns":1,"verdict":)" +
                                               std::string(600000, '[') + std::string(600000, ']') +
                                               "}")
                  .ok());
  auto view = a.view();
  ASSERT_TRUE(view.ok()) << view.error().message;
  EXPECT_EQ(*view, nullptr);
  EXPECT_EQ(bad_.total(), 8u);
}

// The view of a 1,000-node job would be megabytes (past etcd's request limit): written compact,
// with the verdict and only the ranks it does not call healthy, culprits first. A node reads
// the view's value only when it changed.
TEST_F(OrdersTest, ALargeJobsViewIsCompactAndReadOnlyWhenItChanged) {
  JobOrders a = on("a"), b = on("b");
  JobView v;
  v.leader = "a";
  v.at_wall_ns = 5;
  v.verdict.state = detect::State::kStalled;
  v.verdict.culprits.push_back({7999, "no step"});
  for (int r = 0; r < 8000; ++r) {
    contract::RankSnapshot s;
    s.job = "j";
    s.rank = r;
    s.world_size = 8000;
    s.host = fmt::format("node{:04}", r / 8);
    s.phase = "train";
    s.step = 100;
    s.step_count = 101;
    for (int k = 0; k < 16; ++k) s.recent.push_back({85 + k, 1'000'000'000LL * k});
    v.observation.ranks.push_back(s);
    detect::RankVerdict rv;
    rv.rank = r;
    rv.state = r >= 7990 ? detect::State::kStalled : detect::State::kHealthy;
    v.verdict.ranks.push_back(rv);
  }
  v.observation.world_size = 8000;
  for (int n = 0; n < 1000; ++n)
    v.nodes.push_back({fmt::format("node{:04}", n), n == 0, false, 1, {}});
  ASSERT_TRUE(a.write_view(v, fence_).ok());
  auto stored = client_->range("/sw/jobs/j/view");
  ASSERT_TRUE(stored.ok() && stored->kvs.size() == 1u);
  EXPECT_LE(stored->kvs[0].value.size(), kMaxViewBytes);
  auto read = b.view();
  ASSERT_TRUE(read.ok()) << read.error().message;
  ASSERT_NE(*read, nullptr);
  const JobView& got = **read;
  EXPECT_TRUE(got.compact);
  EXPECT_TRUE(got.observation.ranks.empty());
  EXPECT_EQ(got.verdict.state, detect::State::kStalled);
  ASSERT_EQ(got.verdict.ranks.size(), 10u) << "only the ranks not judged healthy";
  EXPECT_EQ(got.verdict.ranks[0].rank, 7999) << "the culprit first";
  EXPECT_EQ(got.nodes.size(), 1000u);
  // A small job's view is whole.
  v.observation.ranks.resize(16);
  v.verdict.ranks.resize(16);
  v.observation.world_size = 16;
  ASSERT_TRUE(a.write_view(v, fence_).ok());
  read = b.view();
  ASSERT_TRUE(read.ok() && *read);
  EXPECT_FALSE((*read)->compact);
  EXPECT_EQ((*read)->observation.ranks.size(), 16u);
}

// A follower reads the view each poll: one get without the value while it is unchanged.
TEST(OrdersView, AnUnchangedViewIsNotReadAgain) {
  ManualClock clock;
  test::MemoryKv kv(clock);
  BadRecords bad;
  auto fence = kv.put("/sw/jobs/j/nodes/a", "{}", 0);
  ASSERT_TRUE(fence.ok());
  JobOrders a(kv, bad, "/sw/jobs/j/", "a", "/sw/jobs/j/nodes/a");
  JobOrders b(kv, bad, "/sw/jobs/j/", "b", "/sw/jobs/j/nodes/b");
  JobView v;
  v.leader = "a";
  v.verdict.summary = "first";
  ASSERT_TRUE(a.write_view(v, *fence).ok());
  int64_t calls = kv.calls();
  auto first = b.view();
  ASSERT_TRUE(first.ok() && *first);
  EXPECT_EQ(kv.calls() - calls, 2) << "listed, then its value";
  calls = kv.calls();
  auto same = b.view();
  ASSERT_TRUE(same.ok() && *same);
  EXPECT_EQ((*same)->verdict.summary, "first");
  EXPECT_EQ(kv.calls() - calls, 1) << "listed only";
  v.verdict.summary = "second";
  ASSERT_TRUE(a.write_view(v, *fence).ok());
  auto changed = b.view();
  ASSERT_TRUE(changed.ok() && *changed);
  EXPECT_EQ((*changed)->verdict.summary, "second");
}

TEST_F(OrdersTest, EachNodeReportsOnceAndTheMergeNamesWhoDidNot) {
  JobOrders a = on("a"), b = on("b");
  auto none = b.reported(42);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
  Done d;
  d.ok = true;
  d.artifact = "artifact /x: 3 files";
  d.processes.push_back({101, "rank 1", true, "pid 101 (rank 1): exited after SIGTERM"});
  auto sent = b.report(42, d);
  ASSERT_TRUE(sent.ok()) << sent.error().message;
  EXPECT_TRUE(*sent);
  auto twice = b.report(42, d);
  ASSERT_TRUE(twice.ok());
  EXPECT_FALSE(*twice);  // never carried out (or reported) twice
  EXPECT_TRUE(*b.reported(42));
  Done refused;
  refused.refused = "not in preempt_jobs";
  ASSERT_TRUE(on("c").report(42, refused).ok());
  auto all = a.reports(42);
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 2u);
  runbook::ActReport r = merged_report(*all, {"d"});
  EXPECT_FALSE(r.preempt.ok);
  EXPECT_EQ(r.preempt.processes.size(), 3u);  // rank 1 on b, and nodes c and d standing in
  std::string summary = r.preempt.summary();
  EXPECT_NE(summary.find("refused: not in preempt_jobs"), std::string::npos) << summary;
  EXPECT_NE(summary.find("did not report"), std::string::npos) << summary;
  ASSERT_TRUE(r.artifact.has_value());
  EXPECT_NE(r.artifact->find("b: artifact /x"), std::string::npos);
  runbook::ActReport good = merged_report({(*all)[0]}, {});
  EXPECT_TRUE(good.preempt.ok) << good.preempt.summary();
}

TEST_F(OrdersTest, TheIncarnationMovesOnceFencedAndTheRosterIsKept) {
  JobOrders a = on("a");
  auto zero = a.incarnation();
  ASSERT_TRUE(zero.ok()) << zero.error().message;
  EXPECT_EQ(zero->record.incarnation, 0);
  EXPECT_EQ(zero->mod_revision, 0);
  IncarnationRecord to;
  to.incarnation = 1;
  to.resume_from = "step_200";
  to.resume_step = 200;
  to.incident = 42;
  to.by = "a";
  auto moved = a.advance(*zero, to, fence_);
  ASSERT_TRUE(moved.ok()) << moved.error().message;
  EXPECT_TRUE(*moved);
  auto again = a.advance(*zero, to, fence_);  // from a read that is no longer current
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  auto one = a.incarnation();
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->record.incarnation, 1);
  EXPECT_EQ(one->record.resume_from, "step_200");
  EXPECT_EQ(one->record.resume_step, 200);
  IncarnationRecord two = to;
  two.incarnation = 2;
  auto fenced = a.advance(*one, two, fence_ + 1000);
  ASSERT_TRUE(fenced.ok());
  EXPECT_FALSE(*fenced);  // a leader whose key is not the one it holds moves nothing
  EXPECT_EQ(a.incarnation()->record.incarnation, 1);

  EXPECT_EQ(a.launchers()->size(), 0u);
  ASSERT_TRUE(client_->put("/sw/jobs/j/launchers/a", "{}").ok());
  ASSERT_TRUE(client_->put("/sw/jobs/j/launchers/b", "not json").ok());
  LauncherRecord slurm;
  slurm.node = "c";
  slurm.scheduler = "slurm";
  slurm.scheduler_job = "1234";
  slurm.scheduler_restarts = 1;
  ASSERT_TRUE(client_->put("/sw/jobs/j/launchers/c", launcher_to_json(slurm)).ok());
  const uint64_t bad_before = bad_.total();
  auto three = a.launchers();
  ASSERT_TRUE(three.ok());
  ASSERT_EQ(three->size(), 3u);  // a bad record (b) is still a launcher, named by its key
  EXPECT_EQ(bad_.total(), bad_before + 1) << "and said once";
  ASSERT_TRUE(a.launchers().ok());
  EXPECT_EQ(bad_.total(), bad_before + 1) << "once, however often it is read";
  EXPECT_EQ((*three)[1].node, "b");
  EXPECT_EQ((*three)[2].scheduler_job, "1234");
  EXPECT_EQ((*three)[2].scheduler_restarts, 1);

  auto empty = a.roster();
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
  ASSERT_TRUE(a.write_roster(1, {{"a", {0, 1}}, {"b", {2, 3}}}, fence_).ok());
  EXPECT_FALSE(a.write_roster(1, {{"a", {0}}}, fence_ + 1000).ok());
  auto roster = on("b").roster();
  ASSERT_TRUE(roster.ok() && roster->has_value());
  EXPECT_EQ((*roster)->first, 1);
  EXPECT_EQ((*roster)->second.at("b"), (std::vector<int>{2, 3}));
}

// The newest checkpoint every rank committed moves forward only, and only by the leader: an older
// or equal one is not written, a bad record is replaced (and said once), a lost fence writes
// nothing.
TEST_F(OrdersTest, TheCheckpointKeyMovesForwardOnlyAndOnlyByTheLeader) {
  JobOrders a = on("a");
  auto none = a.checkpoint();
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_FALSE(none->has_value());
  auto first = a.advance_checkpoint({"step_20", 20, 0, "a", 1}, fence_);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(*first);
  EXPECT_FALSE(*a.advance_checkpoint({"step_20", 20, 0, "a", 2}, fence_));
  EXPECT_FALSE(*a.advance_checkpoint({"step_10", 10, 1, "a", 3}, fence_)) << "never back";
  EXPECT_FALSE(*a.advance_checkpoint({"step_40", 40, 0, "a", 4}, fence_ + 1000))
      << "a node that does not hold the fence writes nothing";
  auto twenty = on("b").checkpoint();
  ASSERT_TRUE(twenty.ok() && twenty->has_value());
  EXPECT_EQ((*twenty)->id, "step_20");
  EXPECT_EQ((*twenty)->step, 20);
  EXPECT_TRUE(*a.advance_checkpoint({"step_40", 40, 0, "a", 5}, fence_));
  EXPECT_EQ((*a.checkpoint())->step, 40);

  ASSERT_TRUE(client_->put("/sw/jobs/j/checkpoint", R"({"id":"a\"b","step":90})").ok());
  const uint64_t bad_before = bad_.total();
  auto bad = a.checkpoint();
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->has_value()) << "a bad record reads as none";
  EXPECT_EQ(bad_.total(), bad_before + 1);
  EXPECT_TRUE(*a.advance_checkpoint({"step_60", 60, 0, "a", 6}, fence_)) << "and is replaced";
  EXPECT_EQ(bad_.total(), bad_before + 1) << "said once";
  EXPECT_EQ((*a.checkpoint())->id, "step_60");
}

}  // namespace
}  // namespace stepwatch::coord
