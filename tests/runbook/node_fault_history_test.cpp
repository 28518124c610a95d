// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The store side of the node-fault rules, over a real store in a temp directory: an ended
// incarnation's record from a verdict, its implications (none for a collective hang without a
// lagging rank), and the page's suspects and storm line.
#include "src/runbook/node_fault_history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace stepwatch::runbook {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kMin = 60 * kNsPerSec;
constexpr int64_t kNow = 1'700'000'000LL * kNsPerSec;

class NodeFaultHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("sw-nfh-{}-{}", ::getpid(), counter_++);
    fs::remove_all(dir_);
    auto s = store::Store::open(dir_.string());
    ASSERT_TRUE(s.ok()) << s.error().message;
    store_.emplace(std::move(*s));
    history_.emplace(*store_);
  }
  void TearDown() override {
    history_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  static inline int counter_ = 0;
  fs::path dir_;
  std::optional<store::Store> store_;
  std::optional<StoreHistory> history_;
};

detect::Verdict stalled(detect::Cause cause, std::vector<detect::Culprit> culprits) {
  detect::Verdict v;
  v.state = detect::State::kStalled;
  v.cause = cause;
  v.culprits = std::move(culprits);
  return v;
}

TEST_F(NodeFaultHistoryTest, AnEndNamesTheCulpritsHostsOrThisNode) {
  auto v = stalled(detect::Cause::kCollective,
                   {{1, "behind"}, {3, "silent first", "gpu-08"}, {2, "behind"}});
  auto r = ended_incarnation("llm", 4, "failed", &v, "gpu-07", kNow);
  EXPECT_EQ(r.job, "llm");
  EXPECT_EQ(r.incarnation, 4);
  EXPECT_EQ(r.ended_ns, kNow);
  EXPECT_EQ(r.end_reason, "failed");
  EXPECT_EQ(r.cause, "collective");
  EXPECT_THAT(r.culprit_ranks, ElementsAre(1, 3, 2));
  EXPECT_THAT(r.culprit_hosts, ElementsAre("gpu-07", "gpu-08"));  // each once

  auto clean = ended_incarnation("llm", 5, "finished", nullptr, "gpu-07", kNow);
  EXPECT_EQ(clean.cause, "");
  EXPECT_TRUE(clean.culprit_hosts.empty());
}

TEST_F(NodeFaultHistoryTest, ACollectiveHangWithoutALaggingRankImplicatesNobody) {
  for (int64_t n = 0; n < 2; ++n) {
    store::IncarnationRecord start;
    start.job = "llm";
    start.incarnation = n;
    start.started_ns = kNow - (30 - n * 10) * kMin;
    start.hosts = {"gpu-07"};
    ASSERT_TRUE(store_->record_incarnation(start).ok());
    auto v = stalled(detect::Cause::kCollective, {});
    ASSERT_TRUE(record_ended(*history_, ended_incarnation("llm", n, "failed", &v, "gpu-07",
                                                          start.started_ns + 20 * kMin))
                    .ok());
  }
  auto implications = store_->implications(0);
  ASSERT_TRUE(implications.ok());
  EXPECT_TRUE(implications->empty());
  PageMessage m;
  ASSERT_TRUE(add_node_fault(m, *history_, "llm", NodeFaultPolicy{}, "slurm", kNow).ok());
  EXPECT_TRUE(m.suspects.empty());
}

TEST_F(NodeFaultHistoryTest, ThePageNamesASuspectWithItsHintAndTheStorm) {
  NodeFaultPolicy p;
  p.storm_incarnations = 3;
  for (int64_t n = 0; n < 3; ++n) {
    store::IncarnationRecord start;
    start.job = "llm";
    start.incarnation = n;
    start.started_ns = kNow - (29 - n * 12) * kMin;
    start.hosts = {"gpu-07"};
    ASSERT_TRUE(store_->record_incarnation(start).ok());
    if (n == 2) break;  // the one that runs now
    auto v = stalled(detect::Cause::kIo, {{3, "in D state"}});
    ASSERT_TRUE(record_ended(*history_, ended_incarnation("llm", n, "failed", &v, "gpu-07",
                                                          start.started_ns + 11 * kMin))
                    .ok());
    ASSERT_TRUE(record_ended(*history_, ended_incarnation("llm", n, "failed", &v, "gpu-07",
                                                          start.started_ns + 11 * kMin))
                    .ok());  // again: idempotent
  }
  auto implications = store_->implications(0);
  ASSERT_TRUE(implications.ok());
  EXPECT_EQ(implications->size(), 2u);

  PageMessage m;
  ASSERT_TRUE(add_node_fault(m, *history_, "llm", p, "slurm:1234", kNow).ok());
  ASSERT_EQ(m.suspects.size(), 1u);
  EXPECT_EQ(m.suspects[0].host, "gpu-07");
  EXPECT_EQ(m.suspects[0].exclude_hint, "sbatch --exclude=gpu-07");
  EXPECT_THAT(m.suspects[0].evidence[0], HasSubstr("culprit in 2 of the last 2"));
  ASSERT_EQ(m.evidence.size(), 1u);
  EXPECT_THAT(m.evidence[0], HasSubstr("restart storm: 3 incarnations started in 24m00s"));
}

}  // namespace
}  // namespace stepwatch::runbook
