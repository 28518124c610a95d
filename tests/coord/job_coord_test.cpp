// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Leader election, failover and fencing of a multi-node job's coordination (NodeSession +
// JobCoord), without etcd: three nodes over one in-memory store (tests/fakes/memory_kv.h, whose
// semantics tests/coord/kv_test.cpp checks against a real etcd) and one clock moved by hand, so
// a lease expires exactly when the test says.
#include "src/coord/job_coord.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/coord/session.h"
#include "tests/fakes/memory_kv.h"

namespace stepwatch::coord {
namespace {

constexpr int64_t kTtl = 10 * kNsPerSec;

struct Node {
  Node(Kv& kv, const std::string& name, int64_t steady_window = 0)
      : session(kv, SessionOptions{"/sw", name, kTtl}),
        job(session, "train", 5 * kNsPerSec, steady_window) {}
  // One poll of the agent's loop for this job: the lease first, then publish and read.
  // `changed`: its summary differs from the last one (else it is put only when due).
  void poll(Stamp now, int rank, bool changed = true) {
    session.tick(now);
    NodeSummary s;
    s.node = session.options().node;
    s.poll_seq = ++polls;
    if (changed) signature = polls;
    contract::RankSnapshot r;
    r.job = "train";
    r.rank = rank;
    r.world_size = world;
    r.step = polls;
    r.step_count = polls;
    s.observation.ranks.push_back(r);
    job.poll(std::move(s), PublishCue{signature, shape, steady}, now);
  }
  NodeSession session;
  JobCoord job;
  uint64_t polls = 0;
  uint64_t signature = 0;
  int world = 3;
  bool steady = false;  // its own verdict is healthy
  uint64_t shape = 0;
};

class JobCoordTest : public ::testing::Test {
 protected:
  JobCoordTest() : kv_(clock_) {
    for (const char* name : {"a", "b", "c"}) nodes_[name] = std::make_unique<Node>(kv_, name);
  }
  Node& node(const std::string& name) { return *nodes_.at(name); }
  // Each named node polls once, in this order, then the clock moves on a second.
  void round(const std::vector<std::string>& order) {
    int rank = 0;
    for (const auto& name : order) node(name).poll(clock_.now(), rank++);
    clock_.advance(kNsPerSec);
  }
  // A write fenced as the leader's are (etcd_ledger.h): whether it committed.
  bool fenced_write(const std::string& node_name, int64_t fence) {
    Kv& kv = kv_;
    auto t = kv.txn({Compare::create_rev("/sw/jobs/train/nodes/" + node_name, fence)},
                    {TxnOp::put("/sw/jobs/train/incident", node_name)});
    EXPECT_TRUE(t.ok()) << t.error().message;
    return t.ok() && t->succeeded;
  }

  ManualClock clock_;
  test::MemoryKv kv_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;
};

// E2, E3: a key under nodes/ counts as a node only under a lease, named as its "node" field says,
// and as a summary that reads. Planted before the job starts, none of these leads or is merged;
// each is said once, and a real node still leads.
TEST_F(JobCoordTest, OnlyALiveNodesOwnSummaryLeadsOrIsMerged) {
  Kv& kv = kv_;
  const std::string dir = "/sw/jobs/train/nodes/";
  ASSERT_TRUE(kv.put(dir + "ghost", "garbage-not-json").ok());  // E2: no lease, not JSON
  // A summary that reads, but put without a lease (E3's forged node).
  NodeSummary forged;
  forged.node = "vm";
  contract::RankSnapshot r;
  r.job = "train";
  r.rank = 2;
  r.world_size = 3;
  forged.observation.ranks.push_back(r);
  ASSERT_TRUE(kv.put(dir + "vm", summary_to_json(forged)).ok());
  // Under a lease, but node x's summary under the name "named".
  auto lease = kv.grant(60);
  ASSERT_TRUE(lease.ok());
  forged.node = "x";
  ASSERT_TRUE(kv.put(dir + "named", summary_to_json(forged), lease->id).ok());
  // Under a lease and nested past every bound (E5).
  ASSERT_TRUE(kv.put(dir + "deep",
                     R"({"v":1,"node":"deep","poll_seq":1,"incarnation":0,"obs":{"x":)" +
                         std::string(50000, '[') + std::string(50000, ']') + "}}",
                     lease->id)
                  .ok());
  for (int i = 0; i < 3; ++i) round({"b", "a"});
  EXPECT_TRUE(node("b").job.leads());
  EXPECT_EQ(node("a").job.leader(), "b");
  EXPECT_EQ(node("a").job.leader_fence(), node("b").job.fence());
  std::vector<std::string> seen;
  for (const auto& n : node("b").job.nodes(clock_.now())) seen.push_back(n.node);
  EXPECT_EQ(seen, (std::vector<std::string>{"b", "a"})) << "only the two live nodes";
  EXPECT_EQ(node("a").session.bad().total(), 4u) << "each bad key said once by a follower";
  EXPECT_EQ(node("b").session.bad().total(), 4u) << "and once by the leader";
  EXPECT_TRUE(node("a").session.connected()) << "a bad key is no failure of the session";
}

// E11: keys are listed without their values; a value is read only when its key may be a node's
// and changed. A megabyte put without a lease is never read, and quiet peers cost no value.
TEST_F(JobCoordTest, ValuesAreReadOnlyWhenANodesKeyChanged) {
  Kv& kv = kv_;
  ASSERT_TRUE(kv.put("/sw/jobs/train/nodes/ghost", std::string(1 << 20, 'x')).ok());
  for (int i = 0; i < 2; ++i) round({"b", "a"});
  // Under a lease and refused (not a summary): read once, however many polls see it.
  auto lease = kv.grant(600);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(kv.put("/sw/jobs/train/nodes/huge", std::string(1 << 20, 'y'), lease->id).ok());
  node("b").poll(clock_.now(), 0, false);  // reads what a put last
  ASSERT_TRUE(node("b").job.leads());
  ASSERT_EQ(node("a").job.leader(), "b");
  const uint64_t leader_reads = node("b").job.values_read();
  const uint64_t follower_reads = node("a").job.values_read();
  EXPECT_GE(leader_reads, 1u) << "a's summary was read";
  EXPECT_GE(follower_reads, 1u) << "the leader's summary was read";
  EXPECT_EQ(node("b").session.bad().total(), 2u) << "the ghost and huge, each said once";

  // Quiet: neither summary changes (and none is due), so nothing is read, however many polls.
  for (int i = 0; i < 3; ++i) {
    node("b").poll(clock_.now(), 0, false);
    node("a").poll(clock_.now(), 1, false);
    clock_.advance(kNsPerSec);
  }
  EXPECT_EQ(node("b").job.values_read(), leader_reads);
  EXPECT_EQ(node("a").job.values_read(), follower_reads);
  ASSERT_TRUE(node("b").job.leads());
  EXPECT_EQ(node("b").job.nodes(clock_.now()).size(), 2u) << "a is still merged";

  // a's summary changes once: the leader reads that one value, and a reads none.
  node("b").poll(clock_.now(), 0, false);
  node("a").poll(clock_.now(), 1, true);
  node("b").poll(clock_.now(), 0, false);
  EXPECT_EQ(node("b").job.values_read(), leader_reads + 1);
  EXPECT_EQ(node("a").job.values_read(), follower_reads);
}

// A node publishes the step ring of its lowest rank only (summary.h, keep_lowest_ring): what a
// leader learns the interval from, without the other rings' bytes.
TEST_F(JobCoordTest, ANodePublishesTheStepRingOfItsLowestRankOnly) {
  Node& a = node("a");
  a.session.tick(clock_.now());
  NodeSummary s;
  s.node = "a";
  s.poll_seq = 1;
  for (int rank : {5, 2, 4}) {
    contract::RankSnapshot r;
    r.job = "train";
    r.rank = rank;
    r.world_size = 6;
    r.step = 3;
    r.step_count = 3;
    r.recent = {{1, 1000}, {2, 2000}, {3, 3000}};
    s.observation.ranks.push_back(r);
  }
  a.job.poll(s, PublishCue{1, 0, false}, clock_.now());
  Kv& kv = kv_;
  auto got = kv.range("/sw/jobs/train/nodes/a");
  ASSERT_TRUE(got.ok() && got->kvs.size() == 1u);
  auto read = summary_from_json(got->kvs[0].value, "a's key");
  ASSERT_TRUE(read.ok()) << read.error().message;
  std::map<int, size_t> rings;
  for (const auto& r : read->observation.ranks) rings[r.rank] = r.recent.size();
  EXPECT_EQ(rings, (std::map<int, size_t>{{2, 3}, {4, 0}, {5, 0}}));
}

TEST_F(JobCoordTest, TheFirstNodeToPublishLeadsAndTheOthersFollowIt) {
  round({"b", "a", "c"});
  round({"a", "b", "c"});  // the order of later polls does not matter: candidacy does
  EXPECT_TRUE(node("b").job.leads());
  EXPECT_FALSE(node("a").job.leads());
  EXPECT_FALSE(node("c").job.leads());
  for (const char* n : {"a", "b", "c"}) EXPECT_EQ(node(n).job.leader(), "b") << n;
  EXPECT_GT(node("b").job.fence(), 0);
  EXPECT_EQ(node("a").job.fence(), 0);
  // The leader reads every node's summary; the others none.
  EXPECT_EQ(node("b").job.remote().size(), 2u);
  EXPECT_TRUE(node("a").job.remote().empty());
  EXPECT_TRUE(fenced_write("b", node("b").job.fence()));
}

TEST_F(JobCoordTest, AStoppedLeaderLosesTheJobToTheNextInLineOnceItsLeaseExpires) {
  round({"a", "b", "c"});
  const int64_t old_fence = node("a").job.fence();
  ASSERT_TRUE(node("a").job.leads());
  // a's poll loop stops (SIGSTOP, a wedged call): only b and c go on.
  for (int s = 0; s < 9; ++s) round({"b", "c"});
  EXPECT_EQ(node("b").job.leader(), "a") << "within the lease, a still leads";
  EXPECT_FALSE(node("b").job.leads());
  round({"b", "c"});
  round({"b", "c"});
  EXPECT_TRUE(node("b").job.leads());
  EXPECT_EQ(node("c").job.leader(), "b");
  EXPECT_NE(node("b").job.fence(), old_fence);
  // b never read a's summary (a's key went with its lease): on its own it does not know a. The
  // roster a previous leader wrote (the agent reads it on taking over) names a's ranks, held
  // as lapsed, so they are rank-silent rather than missing.
  auto lapsed = [&] {
    for (const auto* r : node("b").job.remote()) {
      if (r->summary.node == "a") return r->lapsed_mono_ns.has_value();
    }
    return false;
  };
  EXPECT_FALSE(lapsed());
  node("b").job.remember({{"a", {0}}, {"b", {1}}, {"c", {2}}}, 3, 0, clock_.now());
  EXPECT_TRUE(lapsed());
  // Whatever a still believes, its fence no longer commits anything.
  EXPECT_FALSE(fenced_write("a", old_fence));
  EXPECT_TRUE(fenced_write("b", node("b").job.fence()));
}

TEST_F(JobCoordTest, ALeaderThatComesBackAfterItsLeaseExpiredGoesToTheBackOfTheLine) {
  round({"a", "b", "c"});
  for (int s = 0; s < 12; ++s) round({"b", "c"});
  ASSERT_TRUE(node("b").job.leads());
  const uint64_t generation = node("a").session.generation();
  round({"a", "b", "c"});  // a resumes: its keepalive finds the lease gone
  EXPECT_EQ(node("a").session.generation(), generation + 1);
  EXPECT_FALSE(node("a").job.leads());
  EXPECT_EQ(node("a").job.leader(), "b");
  round({"a", "b", "c"});
  EXPECT_TRUE(node("b").job.leads());
  EXPECT_FALSE(node("a").job.leads());
  // b stops too: c was before the returned a in the line.
  for (int s = 0; s < 12; ++s) round({"a", "c"});
  EXPECT_TRUE(node("c").job.leads());
  EXPECT_EQ(node("a").job.leader(), "c");
}

TEST_F(JobCoordTest, WhileEtcdIsDownNobodyLeadsOrMayActAndLeadershipComesBackWithIt) {
  round({"a", "b", "c"});
  ASSERT_TRUE(node("a").job.leads());
  EXPECT_TRUE(node("a").session.may_act(clock_.now()));
  kv_.set_down(true);
  for (int s = 0; s < 6; ++s) round({"a", "b", "c"});
  for (const char* n : {"a", "b", "c"}) {
    EXPECT_FALSE(node(n).session.connected()) << n;
    EXPECT_FALSE(node(n).job.leads()) << n;
    EXPECT_FALSE(node(n).session.may_act(clock_.now())) << n;
    EXPECT_NE(node(n).session.last_error().find("no endpoint answered"), std::string::npos);
  }
  EXPECT_EQ(node("a").session.losses(), 1u);
  kv_.set_down(false);  // back within the lease: the same leader, the same fence
  round({"a", "b", "c"});
  EXPECT_TRUE(node("a").session.connected());
  EXPECT_TRUE(node("a").job.leads());
  EXPECT_EQ(node("b").job.leader(), "a");
}

// A steady node (its own verdict healthy) following a leader that reads steady summaries
// vouches for its ranks: its steps alone are not published, only what changes their shape, a
// verdict that is no longer healthy, and the publish interval. To a leader that does not read
// them (an older version), it publishes every step, as before.
TEST(JobCoordSteady, AVouchingNodePublishesChangesNotSteps) {
  ManualClock clock;
  test::MemoryKv kv(clock);
  const int64_t window = 12 * kNsPerSec;
  Node a(kv, "a", window), b(kv, "b", window);
  b.steady = true;
  auto round = [&] {
    a.poll(clock.now(), 0);
    b.poll(clock.now(), 1);  // a step every poll
    clock.advance(kNsPerSec);
  };
  round();  // b does not know its leader when it publishes: not vouching yet
  EXPECT_FALSE(b.job.vouching());
  round();  // now it does, and says so
  ASSERT_EQ(b.job.leader(), "a");
  EXPECT_TRUE(b.job.vouching());
  uint64_t puts = b.job.puts();
  for (int i = 0; i < 9; ++i) round();
  EXPECT_EQ(b.job.puts(), puts) << "nine steps, none published";
  round();  // two publish intervals (10 s) since its last put: still steady, said again
  EXPECT_EQ(b.job.puts(), puts + 1);
  // The leader holds b's summary as steady, with the window it vouches for.
  ASSERT_EQ(a.job.remote().size(), 1u);
  EXPECT_EQ(a.job.remote()[0]->summary.steady_ns, window);
  // A change of shape (a phase, a process) is published at once.
  puts = b.job.puts();
  b.shape = 1;
  round();
  EXPECT_EQ(b.job.puts(), puts + 1);
  round();
  EXPECT_EQ(b.job.puts(), puts + 1);
  // Its verdict turns unhealthy on a poll's look: settle() puts that look at once, not vouching,
  // and then every step is published.
  puts = b.job.puts();
  b.job.settle(true, clock.now());
  EXPECT_EQ(b.job.puts(), puts) << "still healthy: nothing";
  b.job.settle(false, clock.now());
  EXPECT_EQ(b.job.puts(), puts + 1);
  EXPECT_FALSE(b.job.vouching());
  b.job.settle(false, clock.now());
  EXPECT_EQ(b.job.puts(), puts + 1) << "once";
  b.steady = false;
  round();
  puts = b.job.puts();
  round();
  EXPECT_FALSE(a.job.remote()[0]->summary.steady_ns.has_value()) << "read by a's next poll";
  round();
  EXPECT_EQ(b.job.puts(), puts + 2);

  // A leader that does not read steady summaries (window 0, an older stepwatch): b publishes
  // every step, steady or not.
  test::MemoryKv kv2(clock);
  Node old(kv2, "old"), c(kv2, "c", window);
  c.steady = true;
  for (int i = 0; i < 3; ++i) {
    old.poll(clock.now(), 0);
    c.poll(clock.now(), 1);
    clock.advance(kNsPerSec);
  }
  ASSERT_EQ(c.job.leader(), "old");
  EXPECT_FALSE(c.job.vouching());
  EXPECT_EQ(c.job.puts(), 3u);
}

// A follower that knows its leader reads that one key each poll, not the line: etcd reads the
// whole prefix to find its first key in create order. When the leader's key goes, the line is
// listed again and the next in it leads.
TEST(JobCoordAtScale, AFollowerReadsItsLeadersKeyNotTheWholeLine) {
  ManualClock clock;
  test::MemoryKv kv(clock);
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < 6; ++i) {
    nodes.push_back(std::make_unique<Node>(kv, fmt::format("n{}", i)));
    nodes.back()->world = 6;
  }
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < nodes.size(); ++i) nodes[i]->poll(clock.now(), static_cast<int>(i));
    clock.advance(kNsPerSec);
  }
  ASSERT_TRUE(nodes[0]->job.leads());
  Node& f = *nodes[5];
  ASSERT_EQ(f.job.leader(), "n0");
  int64_t scanned = kv.keys_scanned();
  f.poll(clock.now(), 5);
  EXPECT_EQ(kv.keys_scanned() - scanned, 1) << "one key read, not the six of the line";
  EXPECT_EQ(f.job.leader(), "n0");
  // n0 stops; once its lease expired, f finds its key gone, lists the line, and follows n1.
  for (int s = 0; s < 12; ++s) {
    for (size_t i = 1; i < nodes.size(); ++i) nodes[i]->poll(clock.now(), static_cast<int>(i));
    clock.advance(kNsPerSec);
  }
  EXPECT_TRUE(nodes[1]->job.leads());
  EXPECT_EQ(f.job.leader(), "n1");
  scanned = kv.keys_scanned();
  f.poll(clock.now(), 5);
  EXPECT_EQ(kv.keys_scanned() - scanned, 1);
}

// At scale the leader reads by change: after its first poll as leader, a poll reads only the
// summaries that changed since the last (one range from a revision on, however many changed),
// never every node's again; a node whose key went away (its lease expired) shows in the count
// and is found by one listing of them all.
TEST(JobCoordAtScale, TheLeaderReadsOnlyWhatChangedAndStillSeesANodeGo) {
  ManualClock clock;
  test::MemoryKv kv(clock);
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < 9; ++i) {
    nodes.push_back(std::make_unique<Node>(kv, fmt::format("n{}", i)));
    nodes.back()->world = 9;
  }
  auto round = [&](size_t live, size_t changing) {
    for (size_t i = 0; i < live; ++i)
      nodes[i]->poll(clock.now(), static_cast<int>(i), i < changing);
    clock.advance(kNsPerSec);
  };
  round(9, 9);
  round(9, 9);
  JobCoord& leader = nodes[0]->job;
  ASSERT_TRUE(leader.leads());
  ASSERT_EQ(leader.remote().size(), 8u);
  auto poll = [&](size_t i, bool changed) {
    nodes[i]->poll(clock.now(), static_cast<int>(i), changed);
  };
  for (size_t i = 0; i < 9; ++i) poll(i, i == 0 || i > 2);  // six of the eight others change
  // The leader's next poll, unchanged: one range of what changed (keys only), one of their
  // values: six read, not eight.
  uint64_t reads = leader.values_read();
  int64_t calls = kv.calls();
  poll(0, false);
  EXPECT_EQ(leader.values_read(), reads + 6);
  EXPECT_EQ(kv.calls() - calls, 2);
  EXPECT_EQ(leader.remote().size(), 8u);
  // Nobody changed since: one range, nothing read.
  reads = leader.values_read();
  calls = kv.calls();
  poll(0, false);
  EXPECT_EQ(leader.values_read(), reads);
  EXPECT_EQ(kv.calls() - calls, 1);
  clock.advance(kNsPerSec);
  // n8 stops: once its lease expires, the count is one short and the leader lists the keys again.
  for (int s = 0; s < 11; ++s) round(8, 8);
  ASSERT_TRUE(leader.leads());
  size_t lapsed = 0, live = 0;
  for (const Received* r : leader.remote()) {
    if (r->lapsed_mono_ns) {
      EXPECT_EQ(r->summary.node, "n8");
      // Its key went with its lease: it stopped reporting a TTL before that at the latest (E18).
      EXPECT_GE(clock.now().mono_ns - *r->lapsed_mono_ns, kTtl);
      ++lapsed;
    } else {
      ++live;
    }
  }
  EXPECT_EQ(lapsed, 1u);
  EXPECT_EQ(live, 7u);
  // It comes back under a new lease: read again, live.
  for (int s = 0; s < 2; ++s) round(9, 9);
  for (const Received* r : leader.remote()) EXPECT_FALSE(r->lapsed_mono_ns) << r->summary.node;
  EXPECT_EQ(leader.remote().size(), 8u);
}

}  // namespace
}  // namespace stepwatch::coord
