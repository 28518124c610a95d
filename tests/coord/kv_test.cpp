// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The same scripts against a real etcd (EtcdClient over tests/support/etcd_server.h) and the
// in-memory store (tests/fakes/memory_kv.h): what coord/ relies on of etcd (revisions, versions,
// ranges, compares, branches, leases), so a test written over MemoryKv means what it would over
// etcd. What only the fake can do (a clock moved by hand, an outage) is tested after.
#include "src/coord/kv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "src/coord/etcd_client.h"
#include "tests/fakes/memory_kv.h"
#include "tests/support/etcd_server.h"

namespace stepwatch::coord {
namespace {

template <class T>
T must(Result<T> r, const char* what) {
  if (!r.ok()) throw std::runtime_error(std::string(what) + ": " + r.error().message);
  return std::move(r).value();
}
#define MUST(expr) must((expr), #expr)

std::vector<std::string> keys_of(const RangeResult& r) {
  std::vector<std::string> keys;
  for (const auto& kv : r.kvs) keys.push_back(kv.key);
  return keys;
}

KeyValue only(const RangeResult& r) {
  if (r.kvs.size() != 1) throw std::runtime_error(std::to_string(r.kvs.size()) + " keys, not 1");
  return r.kvs[0];
}

enum class Backend { kEtcd, kMemory };

class KvTest : public ::testing::TestWithParam<Backend> {
 protected:
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override {
    std::string name = testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');  // "Name/etcd"
    prefix_ = "/kv/" + name;
    if (GetParam() == Backend::kMemory) {
      kv_ = std::make_unique<test::MemoryKv>(clock_);
      return;
    }
    ASSERT_TRUE(test::etcd_available()) << test::kEtcdMissing;  // never skipped
    if (!server_) server_ = std::make_unique<test::EtcdServer>();
    kv_ = std::make_unique<EtcdClient>(EtcdOptions{{server_->endpoint()}, "", 2 * kNsPerSec});
  }
  std::string key(std::string_view rel) const { return prefix_ + "/" + std::string(rel); }

  static std::unique_ptr<test::EtcdServer> server_;
  ManualClock clock_;
  std::unique_ptr<Kv> kv_;
  std::string prefix_;
};
std::unique_ptr<test::EtcdServer> KvTest::server_;

TEST_P(KvTest, PutMovesTheRevisionAndKeepsCreateRevisionAndCountsVersions) {
  Kv& c = *kv_;
  const int64_t first = MUST(c.put(key("a"), "1"));
  KeyValue kv = only(MUST(c.range(key("a"))));
  EXPECT_EQ(kv.value, "1");
  EXPECT_EQ(kv.create_revision, first);
  EXPECT_EQ(kv.mod_revision, first);
  EXPECT_EQ(kv.version, 1);
  const int64_t again = MUST(c.put(key("a"), "2"));
  EXPECT_EQ(again, first + 1);
  kv = only(MUST(c.range(key("a"))));
  EXPECT_EQ(kv.create_revision, first);
  EXPECT_EQ(kv.mod_revision, again);
  EXPECT_EQ(kv.version, 2);
  auto none = MUST(c.range(key("missing")));
  EXPECT_TRUE(none.kvs.empty());
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.revision, again);
  // Deleted and written again: a new key, with a new create revision.
  EXPECT_EQ(MUST(c.del(key("a"))), 1);
  const int64_t reborn = MUST(c.put(key("a"), "3"));
  EXPECT_EQ(reborn, again + 2);
  kv = only(MUST(c.range(key("a"))));
  EXPECT_EQ(kv.create_revision, reborn);
  EXPECT_EQ(kv.version, 1);
}

TEST_P(KvTest, RangesByPrefixLimitCreateRevisionAndDescending) {
  Kv& c = *kv_;
  for (const char* k : {"p/c", "p/a", "p/b", "p0"}) MUST(c.put(key(k), std::string("v-") + k));
  // "p0" is prefix_end("p/"): the first key past the range.
  auto r = MUST(c.range(key("p/"), {.prefix = true}));
  ASSERT_EQ(keys_of(r), (std::vector<std::string>{key("p/a"), key("p/b"), key("p/c")}));
  EXPECT_EQ(r.kvs[1].value, "v-p/b");
  EXPECT_EQ(r.count, 3);
  r = MUST(c.range(key("p/"), {.prefix = true, .limit = 2}));
  EXPECT_EQ(keys_of(r), (std::vector<std::string>{key("p/a"), key("p/b")}));
  EXPECT_EQ(r.count, 3);  // past the limit
  r = MUST(c.range(key("p/"), {.prefix = true, .keys_only = true}));
  ASSERT_EQ(r.kvs.size(), 3u);
  for (const auto& kv : r.kvs) EXPECT_EQ(kv.value, "") << kv.key;
  EXPECT_GT(r.kvs[0].create_revision, 0);
  // An empty prefix is every key.
  r = MUST(c.range("", {.prefix = true, .limit = 1, .keys_only = true}));
  EXPECT_GE(r.count, 4);
  r = MUST(c.range(key("p/"), {.prefix = true, .by_create_rev = true}));
  EXPECT_EQ(keys_of(r), (std::vector<std::string>{key("p/c"), key("p/a"), key("p/b")}));
  r = MUST(c.range(key("p/"), {.prefix = true, .limit = 1, .descending = true}));
  EXPECT_EQ(keys_of(r), std::vector<std::string>{key("p/c")});
  EXPECT_EQ(MUST(c.del(key("p/"), true)), 3);
  EXPECT_EQ(MUST(c.del(key("p/"), true)), 0);
  EXPECT_EQ(keys_of(MUST(c.range(key("p"), {.prefix = true}))),
            std::vector<std::string>{key("p0")});
}

TEST_P(KvTest, AMinModRevisionRangeReturnsWhatChangedAndCountsEveryKey) {
  Kv& c = *kv_;
  MUST(c.put(key("m/a"), "1"));
  MUST(c.put(key("m/b"), "2"));
  int64_t seen = MUST(c.put(key("m/c"), "3"));  // a reader held everything up to here
  MUST(c.put(key("m/a"), "4"));
  MUST(c.put(key("m/d"), "5"));
  auto r = MUST(
      c.range(key("m/"), {.prefix = true, .by_create_rev = true, .min_mod_revision = seen + 1}));
  // The changed and the new key, in candidacy order, with their values; the count is every key.
  ASSERT_EQ(keys_of(r), (std::vector<std::string>{key("m/a"), key("m/d")}));
  EXPECT_EQ(r.kvs[0].value, "4");
  EXPECT_EQ(r.count, 4);
  EXPECT_EQ(r.revision, seen + 2);
  // A deletion shows only in the count.
  MUST(c.del(key("m/b")));
  r = MUST(c.range(key("m/"), {.prefix = true, .min_mod_revision = r.revision + 1}));
  EXPECT_TRUE(r.kvs.empty());
  EXPECT_EQ(r.count, 3);
}

// A txn's ranges take a range's options: several reads of a poll in one request.
TEST_P(KvTest, ATxnsRangesTakeTheirOptions) {
  Kv& c = *kv_;
  MUST(c.put(key("t/a"), "1"));
  MUST(c.put(key("t/b"), "2"));
  MUST(c.put(key("u"), "3"));
  auto t = MUST(c.txn(
      {}, {TxnOp::read(key("t/"), {.prefix = true, .keys_only = true}), TxnOp::read(key("u"), {}),
           TxnOp::read(key("t/"), {.prefix = true, .limit = 1, .descending = true})}));
  EXPECT_TRUE(t.succeeded);
  ASSERT_EQ(t.ranges.size(), 3u);
  ASSERT_EQ(keys_of(t.ranges[0]), (std::vector<std::string>{key("t/a"), key("t/b")}));
  EXPECT_EQ(t.ranges[0].kvs[0].value, "") << "keys only";
  ASSERT_EQ(t.ranges[1].kvs.size(), 1u);
  EXPECT_EQ(t.ranges[1].kvs[0].value, "3");
  EXPECT_EQ(keys_of(t.ranges[2]), std::vector<std::string>{key("t/b")});
  EXPECT_EQ(t.ranges[2].count, 2);
}

TEST_P(KvTest, CompareTargetsAndResultsAsEtcdEvaluatesThem) {
  Kv& c = *kv_;
  for (int i = 0; i < 3; ++i) MUST(c.put(key("filler"), "x"));
  const int64_t create = MUST(c.put(key("k"), "v1"));
  MUST(c.put(key("k"), "v2"));
  const int64_t mod = MUST(c.put(key("k"), "v3"));
  using T = Compare::Target;
  using R = Compare::Result;
  const std::string k = key("k");
  struct Row {
    Compare compare;
    bool holds;
  };
  // Each row fails if "target", "result" or the compared field were not sent as etcd spells
  // them (EtcdClient): a dropped field compares VERSION, EQUAL or 0, and the three numbers differ.
  const int64_t version = 3;
  ASSERT_TRUE(create != version && mod != version && create != mod);
  const std::vector<Row> rows = {
      {Compare::create_rev(k, create), true},
      {Compare::create_rev(k, 0), false},
      {Compare::create_rev(k, mod), false},
      {Compare::mod_rev(k, mod), true},
      {Compare::mod_rev(k, create), false},
      {Compare{k, T::kVersion, R::kEqual, version, {}}, true},
      {Compare{k, T::kVersion, R::kEqual, version - 1, {}}, false},
      {Compare{k, T::kCreate, R::kNotEqual, create, {}}, false},
      {Compare{k, T::kCreate, R::kNotEqual, mod, {}}, true},
      {Compare{k, T::kCreate, R::kLess, create + 1, {}}, true},
      {Compare{k, T::kCreate, R::kLess, create, {}}, false},
      {Compare{k, T::kMod, R::kGreater, mod - 1, {}}, true},
      {Compare{k, T::kMod, R::kGreater, mod, {}}, false},
      {Compare::value_is(k, "v3"), true},
      {Compare::value_is(k, "v1"), false},
      {Compare{k, T::kValue, R::kNotEqual, 0, "v1"}, true},
      {Compare{k, T::kValue, R::kGreater, 0, "v2"}, true},
      {Compare::value_is(key("absent"), ""), false},  // a value compare on no key fails
      {Compare::create_rev(key("absent"), 0), true},
      {Compare{key("absent"), T::kVersion, R::kLess, 1, {}}, true},
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    auto t = MUST(c.txn({rows[i].compare}, {}, {}));
    EXPECT_EQ(t.succeeded, rows[i].holds) << "row " << i;
    EXPECT_EQ(t.revision, mod) << "a txn that writes nothing moves no revision";
  }
}

TEST_P(KvTest, ATxnRunsOneBranchAsOneRevisionAndReturnsItsRanges) {
  Kv& c = *kv_;
  MUST(c.put(key("b/x"), "1"));
  const int64_t before = MUST(c.put(key("b/y"), "2"));
  auto t = MUST(c.txn({Compare::create_rev(key("b/x"), 0)}, {TxnOp::put(key("wrong"), "!")},
                      {TxnOp::put(key("b/z"), "3"), TxnOp::get(key("b/"), true),
                       TxnOp::del(key("b/y")), TxnOp::get(key("b/y"))}));
  EXPECT_FALSE(t.succeeded);
  EXPECT_EQ(t.revision, before + 1);
  ASSERT_EQ(t.ranges.size(), 2u);
  ASSERT_EQ(keys_of(t.ranges[0]), (std::vector<std::string>{key("b/x"), key("b/y"), key("b/z")}));
  EXPECT_EQ(t.ranges[0].count, 3);
  EXPECT_EQ(t.ranges[0].kvs[2].value, "3");
  EXPECT_TRUE(t.ranges[1].kvs.empty());
  EXPECT_GT(t.ranges[1].revision, 0);
  EXPECT_TRUE(MUST(c.range(key("wrong"))).kvs.empty());
  t = MUST(c.txn({Compare::value_is(key("b/x"), "1")},
                 {TxnOp::del(key("b/"), true), TxnOp::get(key("b/"), true)}));
  EXPECT_TRUE(t.succeeded);
  ASSERT_EQ(t.ranges.size(), 1u);
  EXPECT_TRUE(t.ranges[0].kvs.empty());
  EXPECT_EQ(t.ranges[0].count, 0);
  // Create-once: the second attempt fails and reads the first one's record.
  const std::string once = key("incident");
  EXPECT_TRUE(MUST(c.txn({Compare::create_rev(once, 0)}, {TxnOp::put(once, "A")})).succeeded);
  auto lost =
      MUST(c.txn({Compare::create_rev(once, 0)}, {TxnOp::put(once, "B")}, {TxnOp::get(once)}));
  EXPECT_FALSE(lost.succeeded);
  ASSERT_EQ(lost.ranges.size(), 1u);
  EXPECT_EQ(only(lost.ranges[0]).value, "A");
}

TEST_P(KvTest, AFencedWriteFailsOnceTheFenceKeyIsRecreated) {
  Kv& c = *kv_;
  const int64_t fence = MUST(c.put(key("leader"), "A"));
  auto fenced = [&](const std::string& v) {
    auto t = MUST(c.txn({Compare::create_rev(key("leader"), fence)}, {TxnOp::put(key("state"), v)},
                        {TxnOp::get(key("leader"))}));
    if (!t.succeeded) {
      EXPECT_FALSE(fence_held(t, fence)) << "the fence itself failed";
    }
    return t.succeeded;
  };
  EXPECT_TRUE(fenced("1"));
  MUST(c.put(key("leader"), "A again"));
  EXPECT_TRUE(fenced("2"));
  MUST(c.del(key("leader")));
  EXPECT_FALSE(fenced("3"));
  MUST(c.put(key("leader"), "B"));  // recreated: a new create revision
  EXPECT_FALSE(fenced("4"));
  EXPECT_EQ(only(MUST(c.range(key("state")))).value, "2");
}

TEST_P(KvTest, LeasesCarryKeysUntilRevokedAndADeadLeaseIsRefused) {
  Kv& c = *kv_;
  const Lease lease = MUST(c.grant(5));
  EXPECT_NE(lease.id, 0);
  EXPECT_EQ(lease.ttl_s, 5);
  EXPECT_EQ(MUST(c.keepalive(lease.id)), 5);
  const int64_t left = MUST(c.time_to_live(lease.id));  // the id survived parsing exactly
  EXPECT_GE(left, 4);
  EXPECT_LE(left, 5);
  MUST(c.put(key("a"), "v", lease.id));
  MUST(c.txn({}, {TxnOp::put(key("b"), "v", lease.id)}));
  auto r = MUST(c.range(key(""), {.prefix = true}));
  ASSERT_EQ(r.kvs.size(), 2u);
  EXPECT_EQ(r.kvs[0].lease, lease.id);
  EXPECT_EQ(r.kvs[1].lease, lease.id);
  ASSERT_TRUE(c.revoke(lease.id).ok());
  EXPECT_TRUE(MUST(c.range(key(""), {.prefix = true})).kvs.empty());  // the keys went with it
  EXPECT_EQ(MUST(c.keepalive(lease.id)), 0);
  EXPECT_EQ(MUST(c.time_to_live(lease.id)), -1);
  auto again = c.revoke(lease.id);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, Errc::kNotFound);
  auto put = c.put(key("c"), "v", lease.id);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, Errc::kNotFound);
  EXPECT_NE(put.error().message.find("requested lease not found"), std::string::npos);
  auto txn = c.txn({}, {TxnOp::put(key("c"), "v", lease.id)});
  ASSERT_FALSE(txn.ok());
  EXPECT_EQ(txn.error().code, Errc::kNotFound);
  EXPECT_TRUE(MUST(c.range(key("c"))).kvs.empty());
  EXPECT_TRUE(c.health().ok());
}

INSTANTIATE_TEST_SUITE_P(EtcdAndMemory, KvTest, ::testing::Values(Backend::kEtcd, Backend::kMemory),
                         [](const auto& info) {
                           return info.param == Backend::kEtcd ? "etcd" : "memory";
                         });

// Only the fake: time moved by hand, and an outage.
TEST(MemoryKv, ALeaseExpiresOnTheInjectedClockAndTakesItsKeys) {
  ManualClock clock;
  test::MemoryKv memory(clock);
  Kv& kv = memory;
  const Lease lease = MUST(kv.grant(10));
  MUST(kv.put("/node/a", "up", lease.id));
  clock.advance(9 * kNsPerSec);
  EXPECT_EQ(MUST(kv.time_to_live(lease.id)), 1);
  EXPECT_EQ(MUST(kv.keepalive(lease.id)), 10);  // renewed: ten more seconds
  clock.advance(9 * kNsPerSec);
  EXPECT_EQ(only(MUST(kv.range("/node/a"))).value, "up");
  clock.advance(kNsPerSec);
  EXPECT_TRUE(MUST(kv.range("/node/a")).kvs.empty());
  EXPECT_EQ(MUST(kv.time_to_live(lease.id)), -1);
  EXPECT_EQ(MUST(kv.keepalive(lease.id)), 0);
}

TEST(MemoryKv, WhileDownEveryCallFailsAsAnUnreachableEtcdAndNothingIsWritten) {
  ManualClock clock;
  test::MemoryKv memory(clock);
  Kv& kv = memory;
  MUST(kv.put("/k", "1"));
  memory.set_down(true);
  auto put = kv.put("/k", "2");
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error().code, Errc::kIo);
  EXPECT_NE(put.error().message.find("/v3/kv/put"), std::string::npos) << put.error().message;
  EXPECT_FALSE(kv.health().ok());
  EXPECT_FALSE(kv.txn({}, {TxnOp::put("/k", "3")}).ok());
  memory.set_down(false);
  EXPECT_EQ(only(MUST(kv.range("/k"))).value, "1");
  EXPECT_EQ(memory.calls(), 5);
}

}  // namespace
}  // namespace stepwatch::coord
