// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// coord::ReadAhead over the in-memory store: prefetched reads cost one request, answer the
// matching range once, and never answer older than this node's own writes to their keys.
#include "src/coord/read_ahead.h"

#include <gtest/gtest.h>

#include "tests/fakes/memory_kv.h"

namespace stepwatch::coord {
namespace {

class ReadAheadTest : public ::testing::Test {
 protected:
  ReadAheadTest() : kv_(clock_), ahead_(kv_) {
    Kv& kv = kv_;
    EXPECT_TRUE(kv.put("/j/nodes/a", "summary a").ok());
    EXPECT_TRUE(kv.put("/j/view", "view 1").ok());
    EXPECT_TRUE(kv.put("/j/orders/7", "order 7").ok());
  }
  ManualClock clock_;
  test::MemoryKv kv_;
  ReadAhead ahead_;
};

TEST_F(ReadAheadTest, PrefetchedReadsCostOneRequestAndAnswerOnce) {
  Kv& kv = ahead_;
  int64_t calls = kv_.calls();
  ASSERT_TRUE(ahead_
                  .prefetch({{"/j/nodes/a", RangeOptions{.keys_only = true}},
                             {"/j/view", {}},
                             {"/j/orders/", RangeOptions{.prefix = true}}})
                  .ok());
  EXPECT_EQ(kv_.calls() - calls, 1);
  auto a = kv.range("/j/nodes/a", RangeOptions{.keys_only = true});
  auto v = kv.range("/j/view", {});
  auto o = kv.range("/j/orders/", RangeOptions{.prefix = true});
  EXPECT_EQ(kv_.calls() - calls, 1) << "all three answered from the one txn";
  EXPECT_EQ(ahead_.answered(), 3u);
  ASSERT_TRUE(a.ok() && a->kvs.size() == 1u);
  EXPECT_EQ(a->kvs[0].value, "") << "keys only, as asked";
  ASSERT_TRUE(v.ok() && v->kvs.size() == 1u);
  EXPECT_EQ(v->kvs[0].value, "view 1");
  ASSERT_TRUE(o.ok() && o->kvs.size() == 1u);
  // Each answers once: the same read again goes to etcd.
  auto again = kv.range("/j/view", {});
  EXPECT_EQ(kv_.calls() - calls, 2);
  EXPECT_EQ(ahead_.answered(), 3u);
  ASSERT_TRUE(again.ok() && again->kvs.size() == 1u);
}

TEST_F(ReadAheadTest, AReadWithOtherOptionsOrKeysGoesToEtcd) {
  Kv& kv = ahead_;
  ASSERT_TRUE(ahead_.prefetch({{"/j/view", RangeOptions{.keys_only = true}}}).ok());
  int64_t calls = kv_.calls();
  auto full = kv.range("/j/view", {});  // the value: not what was prefetched
  ASSERT_TRUE(full.ok() && full->kvs.size() == 1u);
  EXPECT_EQ(full->kvs[0].value, "view 1");
  EXPECT_EQ(kv_.calls() - calls, 1);
  EXPECT_EQ(ahead_.answered(), 0u);
  ahead_.forget();
  auto listed = kv.range("/j/view", RangeOptions{.keys_only = true});  // forgotten: to etcd
  EXPECT_EQ(kv_.calls() - calls, 2);
  EXPECT_EQ(ahead_.answered(), 0u);
}

// A write through it to a key a held read covers drops that read: never older than its own write.
TEST_F(ReadAheadTest, AWriteToAHeldKeyDropsItsRead) {
  Kv& kv = ahead_;
  ASSERT_TRUE(
      ahead_
          .prefetch(
              {{"/j/view", {}}, {"/j/orders/", RangeOptions{.prefix = true}}, {"/j/nodes/a", {}}})
          .ok());
  ASSERT_TRUE(kv.put("/j/view", "view 2").ok());
  ASSERT_TRUE(kv.txn({}, {TxnOp::put("/j/orders/8", "order 8")}, {}).ok());
  ASSERT_TRUE(kv.put("/j/nodes/b", "summary b").ok());  // another key: a's read stays
  auto v = kv.range("/j/view", {});
  ASSERT_TRUE(v.ok() && v->kvs.size() == 1u);
  EXPECT_EQ(v->kvs[0].value, "view 2");
  auto o = kv.range("/j/orders/", RangeOptions{.prefix = true});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->kvs.size(), 2u);
  ASSERT_TRUE(kv.range("/j/nodes/a", {}).ok());
  EXPECT_EQ(ahead_.answered(), 1u) << "only a's read was still good";
  ASSERT_TRUE(ahead_.prefetch({{"/j/orders/", RangeOptions{.prefix = true}}}).ok());
  ASSERT_TRUE(kv.del("/j/", true).ok());  // a prefix covering it
  o = kv.range("/j/orders/", RangeOptions{.prefix = true});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->kvs.empty());
}

TEST_F(ReadAheadTest, AFailedPrefetchHoldsNothingAndEachReadFailsOnItsOwn) {
  Kv& kv = ahead_;
  kv_.set_down(true);
  EXPECT_FALSE(ahead_.prefetch({{"/j/view", {}}}).ok());
  EXPECT_FALSE(kv.range("/j/view", {}).ok());
  kv_.set_down(false);
  auto v = kv.range("/j/view", {});
  ASSERT_TRUE(v.ok() && v->kvs.size() == 1u);
  EXPECT_EQ(ahead_.answered(), 0u);
}

}  // namespace
}  // namespace stepwatch::coord
