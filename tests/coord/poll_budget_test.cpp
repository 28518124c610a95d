// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// One budget for every etcd call of a poll (E8), over the in-memory store: a store that hangs is
// one whose every call takes the request timeout on a hand-moved clock.
#include "src/coord/poll_budget.h"

#include <gtest/gtest.h>

#include "tests/fakes/memory_kv.h"

namespace stepwatch::coord {
namespace {

constexpr int64_t kTimeout = 2 * kNsPerSec;

// The store as the agent's client sees it: each call counted; while `hung`, each one takes the
// request timeout and then fails as an unanswered request does.
class HungKv final : public Kv {
 public:
  HungKv(test::MemoryKv& inner, ManualClock& clock) : inner_(inner), clock_(clock) {}
  bool hung = false;
  int64_t call_ns = 1'000'000;  // 1 ms while it answers
  int calls = 0;

  Result<int64_t> put(const std::string& k, const std::string& v, int64_t lease) override {
    return through<int64_t>([&] { return inner_.put(k, v, lease); });
  }
  Result<RangeResult> range(const std::string& k, const RangeOptions& o) override {
    return through<RangeResult>([&] { return inner_.range(k, o); });
  }
  Result<int64_t> del(const std::string& k, bool prefix) override {
    return through<int64_t>([&] { return inner_.del(k, prefix); });
  }
  Result<TxnResult> txn(const std::vector<Compare>& c, const std::vector<TxnOp>& s,
                        const std::vector<TxnOp>& f) override {
    return through<TxnResult>([&] { return inner_.txn(c, s, f); });
  }
  Result<Lease> grant(int64_t ttl) override {
    return through<Lease>([&] { return inner_.grant(ttl); });
  }
  Result<int64_t> keepalive(int64_t l) override {
    return through<int64_t>([&] { return inner_.keepalive(l); });
  }
  Status revoke(int64_t l) override { return inner_.revoke(l); }
  Result<int64_t> time_to_live(int64_t l) override { return inner_.time_to_live(l); }
  Status health() override { return inner_.health(); }
  const std::string& endpoint() const override { return inner_.endpoint(); }

 private:
  template <class T, class F>
  Result<T> through(F f) {
    ++calls;
    clock_.advance(hung ? kTimeout : call_ns);
    if (hung) return Error{Errc::kIo, "etcd: no endpoint answered: timed out after 2s"};
    return f();
  }
  test::MemoryKv& inner_;
  ManualClock& clock_;
};

class PollBudgetTest : public ::testing::Test {
 protected:
  PollBudgetTest()
      : store_(clock_),
        hung_(store_, clock_),
        budget_(hung_, 2 * kTimeout, [this] { return clock_.now().mono_ns; }) {}
  // One poll of `jobs` jobs, three calls each (publish, read, an order list): its etcd time.
  int64_t poll(int jobs) {
    const int64_t began = clock_.now().mono_ns;
    budget_.start_poll();
    for (int j = 0; j < jobs; ++j) {
      std::string base = "/sw/jobs/j" + std::to_string(j) + "/";
      (void)budget_.put(base + "nodes/a", "{}", 0);
      (void)budget_.range(base + "nodes/", {true});
      (void)budget_.range(base + "orders/", {true});
    }
    return clock_.now().mono_ns - began;
  }

  ManualClock clock_;
  test::MemoryKv store_;
  HungKv hung_;
  PollBudget budget_;
};

TEST_F(PollBudgetTest, AHungStoreCostsAPollOneTimeoutNotOnePerJob) {
  EXPECT_LT(poll(11), kTimeout) << "a store that answers: every call goes through";
  EXPECT_EQ(hung_.calls, 33);
  EXPECT_FALSE(budget_.tripped());

  hung_.hung = true;
  hung_.calls = 0;
  EXPECT_EQ(poll(11), kTimeout) << "11 jobs, one timeout (11 s in the review)";
  EXPECT_EQ(hung_.calls, 1) << "the rest of the poll skipped etcd";
  ASSERT_TRUE(budget_.tripped());
  EXPECT_NE(budget_.tripped()->message.find("the rest of this poll skips etcd"), std::string::npos)
      << budget_.tripped()->message;
  auto skipped = budget_.range("/sw/jobs/j0/nodes/", {true});
  ASSERT_FALSE(skipped.ok());
  EXPECT_EQ(skipped.error().code, Errc::kIo) << "a transport failure: the session is lost";

  hung_.hung = false;  // it answers again: the next poll goes through whole
  hung_.calls = 0;
  EXPECT_LT(poll(11), kTimeout);
  EXPECT_EQ(hung_.calls, 33);
}

TEST_F(PollBudgetTest, ASlowStoreStopsAtTheBudgetAndAnApplicationErrorTripsNothing) {
  hung_.call_ns = kTimeout;  // each call answers, slowly
  poll(11);
  EXPECT_EQ(hung_.calls, 2) << "two calls spent the budget of two timeouts";
  ASSERT_TRUE(budget_.tripped());
  EXPECT_NE(budget_.tripped()->message.find("its budget"), std::string::npos);

  hung_.call_ns = 1'000'000;
  budget_.start_poll();
  auto refused = budget_.keepalive(424242);  // a lease etcd does not have: an answer, not a fault
  EXPECT_TRUE(refused.ok() || refused.error().code != Errc::kIo);
  EXPECT_FALSE(budget_.tripped());
}

}  // namespace
}  // namespace stepwatch::coord
