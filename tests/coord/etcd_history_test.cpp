// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A multi-node job's node-fault history in a real etcd: records merged as the store merges them,
// every write fenced by the leader's node key, implications kept once and read across jobs, and
// the node-fault rules reading it exactly as they read a node's store.
#include "src/coord/etcd_history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/coord/etcd_client.h"
#include "tests/support/etcd_server.h"

namespace stepwatch::coord {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kMin = 60 * kNsPerSec;
constexpr int64_t kNow = 1'700'000'000LL * kNsPerSec;

class EtcdHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = std::make_unique<test::EtcdServer>();
    client_ = std::make_unique<EtcdClient>(EtcdOptions{{etcd_->endpoint()}, "", kNsPerSec});
    auto rev = client_->put(kFenceKey, "{}");
    ASSERT_TRUE(rev.ok()) << rev.error().message;
    fence_ = *rev;
  }
  EtcdHistory history() {
    return EtcdHistory(*client_, "/sw", kFenceKey, [this] { return fence_; });
  }
  static store::IncarnationRecord ended(const std::string& job, int64_t n, int64_t started,
                                        std::vector<int> ranks, std::vector<std::string> hosts) {
    store::IncarnationRecord r;
    r.job = job;
    r.incarnation = n;
    r.started_ns = started;
    r.ended_ns = started + 2 * kMin;
    r.end_reason = "preempted";
    r.cause = "io";
    r.culprit_ranks = std::move(ranks);
    r.culprit_hosts = hosts;
    r.hosts = {"a", "b"};
    return r;
  }

  static constexpr const char* kFenceKey = "/sw/jobs/llm/nodes/a";
  std::unique_ptr<test::EtcdServer> etcd_;
  std::unique_ptr<EtcdClient> client_;
  int64_t fence_ = 0;
};

TEST_F(EtcdHistoryTest, AnIncarnationIsMergedAsTheStoreMergesIt) {
  EtcdHistory h = history();
  store::IncarnationRecord start;
  start.job = "llm";
  start.incarnation = 3;
  start.started_ns = kNow - 10 * kMin;
  start.hosts = {"a"};
  start.scheduler_id = "slurm:77";
  ASSERT_TRUE(h.record_incarnation(start).ok());
  store::IncarnationRecord later = start;
  later.started_ns = kNow;  // a later leader's guess: the first start is kept
  later.hosts = {"b", "a"};
  later.scheduler_id.clear();
  ASSERT_TRUE(h.record_incarnation(later).ok());
  store::IncarnationRecord end;
  end.job = "llm";
  end.incarnation = 3;
  end.ended_ns = kNow;
  end.end_reason = "preempted";
  end.cause = "collective";
  end.culprit_ranks = {1};
  end.culprit_hosts = {"b"};
  end.checkpoint_step = 1200;
  ASSERT_TRUE(h.record_incarnation(end).ok());

  auto got = h.incarnations("llm", 0);
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), 1u);
  const auto& r = (*got)[0];
  EXPECT_EQ(r.started_ns, kNow - 10 * kMin);
  EXPECT_EQ(r.ended_ns, kNow);
  EXPECT_EQ(r.end_reason, "preempted");
  EXPECT_EQ(r.cause, "collective");
  EXPECT_THAT(r.culprit_ranks, ElementsAre(1));
  EXPECT_THAT(r.culprit_hosts, ElementsAre("b"));
  EXPECT_THAT(r.hosts, ElementsAre("a", "b"));
  EXPECT_EQ(r.checkpoint_step, 1200);
  EXPECT_EQ(r.scheduler_id, "slurm:77");

  // An end without a reason is refused, naming the key; the record stays as it was.
  store::IncarnationRecord bad;
  bad.job = "llm";
  bad.incarnation = 4;
  bad.ended_ns = kNow;
  auto st = h.record_incarnation(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("/sw/jobs/llm/history/00000000000000000004"));
  EXPECT_THAT(st.error().message, HasSubstr("end_reason"));
}

TEST_F(EtcdHistoryTest, NewestFirstInIncarnationOrderWithALimit) {
  EtcdHistory h = history();
  // 9, 10, 11: key order is number order (20 digits), not text order.
  for (int64_t n : {10, 9, 11}) {
    store::IncarnationRecord r;
    r.job = "llm";
    r.incarnation = n;
    r.started_ns = kNow - (20 - n) * kMin;
    ASSERT_TRUE(h.record_incarnation(r).ok());
  }
  store::IncarnationRecord other;
  other.job = "llm2";  // a job whose name starts like this one's is not mixed in
  other.incarnation = 50;
  ASSERT_TRUE(h.record_incarnation(other).ok());
  auto all = h.incarnations("llm", 0);
  ASSERT_TRUE(all.ok()) << all.error().message;
  std::vector<int64_t> numbers;
  for (const auto& r : *all) numbers.push_back(r.incarnation);
  EXPECT_THAT(numbers, ElementsAre(11, 10, 9));
  auto two = h.incarnations("llm", 2);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].incarnation, 11);
  EXPECT_EQ((*two)[1].incarnation, 10);
}

TEST_F(EtcdHistoryTest, EveryWriteIsFencedByTheLeadersNodeKey) {
  int64_t none = 0;
  EtcdHistory follower(*client_, "/sw", kFenceKey, [&] { return none; });
  auto r = ended("llm", 1, kNow - 5 * kMin, {2}, {"b"});
  auto st = follower.record_incarnation(r);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("does not lead"));
  store::HostImplication i{"b", "llm", 1, kNow, "io", "culprit rank 2 (io)"};
  EXPECT_FALSE(follower.record_implication(i).ok());

  // A leader whose node key lapsed (deleted, recreated by another) cannot write either.
  EtcdHistory lapsed = history();
  ASSERT_TRUE(client_->del(kFenceKey).ok());
  ASSERT_TRUE(client_->put(kFenceKey, "{}").ok());
  st = lapsed.record_incarnation(r);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("refused by the fence"));
  st = lapsed.record_implication(i);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("refused by the fence"));
  auto none_written = client_->range("/sw/", RangeOptions{true});
  ASSERT_TRUE(none_written.ok());
  ASSERT_EQ(none_written->kvs.size(), 1u);  // the node key alone
}

TEST_F(EtcdHistoryTest, ImplicationsAreKeptOnceAndReadAcrossJobsNewestFirst) {
  EtcdHistory h = history();
  ASSERT_TRUE(h.record_implication({"b", "llm", 1, kNow - 3 * kMin, "io", "first"}).ok());
  ASSERT_TRUE(h.record_implication({"b", "llm", 1, kNow, "hang", "again"}).ok());  // kept first
  ASSERT_TRUE(h.record_implication({"c", "llm", 2, kNow - kMin, "io", "c"}).ok());
  ASSERT_TRUE(h.record_implication({"b", "other", 7, kNow - 30 * kMin, "io", "old"}).ok());
  auto got = h.implications(kNow - 10 * kMin);
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].host, "c");
  EXPECT_EQ((*got)[1].host, "b");
  EXPECT_EQ((*got)[1].reason, "first");
  EXPECT_EQ((*got)[1].at_ns, kNow - 3 * kMin);
  auto all = h.implications(0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
}

TEST_F(EtcdHistoryTest, AValueThatDoesNotParseNamesItsKeyAndField) {
  EtcdHistory h = history();
  ASSERT_TRUE(client_
                  ->put("/sw/jobs/llm/history/00000000000000000002",
                        R"({"job":"llm","incarnation":2,"hosts":"a"})")
                  .ok());
  auto got = h.incarnations("llm", 0);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.error().message, HasSubstr("/sw/jobs/llm/history/00000000000000000002"));
  EXPECT_THAT(got.error().message, HasSubstr("\"hosts\""));
  ASSERT_TRUE(client_->put("/sw/hosts/b/llm/00000000000000000002", "not json").ok());
  auto imp = h.implications(0);
  ASSERT_FALSE(imp.ok());
  EXPECT_THAT(imp.error().message, HasSubstr("/sw/hosts/b/llm/00000000000000000002"));
}

TEST_F(EtcdHistoryTest, TheNodeFaultRulesReadItAsTheyReadAStore) {
  EtcdHistory h = history();
  runbook::NodeFaultPolicy p;
  p.storm_incarnations = 3;
  // Three preempted incarnations in ten minutes, rank 2 on host b the culprit each time.
  for (int64_t n = 0; n < 3; ++n) {
    auto r = ended("llm", n, kNow - (9 - 3 * n) * kMin, {2}, {"b"});
    ASSERT_TRUE(runbook::record_ended(h, r).ok());
  }
  auto report = runbook::read_node_fault(h, "llm", p, kNow);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_TRUE(report->storm.has_value());
  EXPECT_EQ(report->storm->incarnations, 3);
  // b: the culprit in all three, and in the short runs; a: in the short runs only (weaker).
  ASSERT_EQ(report->suspects.size(), 2u);
  EXPECT_EQ(report->suspects[0].host, "b");
  EXPECT_EQ(report->suspects[0].culprit_in, 3);
  EXPECT_EQ(report->suspects[1].host, "a");
  EXPECT_EQ(report->suspects[1].culprit_in, 0);
  EXPECT_EQ(report->suspects[1].short_runs, 3);
  auto imp = h.implications(0);
  ASSERT_TRUE(imp.ok());
  EXPECT_EQ(imp->size(), 3u);  // one per incarnation that blamed b
}

}  // namespace
}  // namespace stepwatch::coord
