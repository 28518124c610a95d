// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A multi-node job's leader without etcd: two Agent instances as two nodes (each its own node
// name, beacon root, state dir and specs) over one in-memory store (tests/fakes/memory_kv.h,
// held to etcd's behaviour by tests/coord/kv_test.cpp), a real page receiver, and one 2-rank job
// whose rank 0 writes under node a's root and rank 1 under node b's. One clock moved by hand
// drives both the agents' polls and the store's leases, so a leader's lease lapses when the test
// says, with no sleeping. tests/agent/agent_coord_test.cpp runs the same stories on a real etcd.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "src/agent/agent.h"
#include "src/common/host.h"
#include "src/contract/beacon_writer.h"
#include "tests/fakes/memory_kv.h"
#include "tests/support/page_receiver.h"

namespace stepwatch::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr int64_t kTtl = 2 * kNsPerSec;

class AgentLeaderTest : public ::testing::Test {
 protected:
  AgentLeaderTest()
      : clock_(SystemClock::instance().now()), kv_(std::make_shared<test::MemoryKv>(clock_)) {}
  void SetUp() override {
    base_ = fs::temp_directory_path() / fmt::format("sw-leader-{}-{}", ::getpid(), counter_++);
    fs::remove_all(base_);
    for (const char* n : {"a", "b"}) {
      fs::create_directories(base_ / n / "beacons");
      fs::create_directories(base_ / n / "specs");
      std::ofstream((base_ / n / "specs" / "pretrain.toml").string()) << fmt::format(
          "owner = \"team-llm\"\nexpected_interval = \"1s\"\ngrace_intervals = 2\n"
          "[phases]\ndata = \"2s\"\n"
          "[[runbook.pager]]\nurl = \"{}\"\nretries = 0\ntimeout = \"2s\"\n",
          rx_.url());
    }
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string root(const std::string& node) const { return (base_ / node / "beacons").string(); }
  std::unique_ptr<Agent> open(const std::string& node) {
    AgentConfig c;
    c.beacon_roots = {root(node)};
    c.state_dir = (base_ / node / "state").string();
    c.specs_dir = (base_ / node / "specs").string();
    c.gpu = false;
    CoordConfig k;
    k.endpoints = {"http://127.0.0.1:1"};  // never dialled: every call goes to the MemoryKv
    k.node_name = node;
    k.lease_ttl_ns = kTtl;
    c.coord = k;
    AgentDeps deps;
    deps.kv = kv_;
    auto a = Agent::open(c, deps);
    EXPECT_TRUE(a.ok()) << a.error().message;
    return a.ok() ? std::move(*a) : nullptr;
  }
  std::unique_ptr<contract::BeaconWriter> beacon(const std::string& node, int rank) {
    contract::Identity id;
    id.dir = root(node);
    id.job = "pretrain";
    id.host = short_hostname();  // one machine: the node name tells the "nodes" apart
    id.rank = rank;
    id.world_size = 2;
    auto w = contract::BeaconWriter::create(id);
    EXPECT_TRUE(w.ok()) << w.error().message;
    return w.ok() ? std::move(*w) : nullptr;
  }
  struct Started {
    std::unique_ptr<contract::BeaconWriter> w0, w1;  // rank 0 under a's root, rank 1 under b's
    std::unique_ptr<Agent> a, b;
  };
  // Six steps of both ranks; a publishes first (its key has the lowest create revision, so it
  // leads), then b, then a reads b's summary.
  Started start() {
    Started s{beacon("a", 0), beacon("b", 1), nullptr, nullptr};
    for (int i = 1; i <= 6; ++i) {
      s.w0->step(i);
      s.w1->step(i);
    }
    clock_.set(SystemClock::instance().now());  // the beacons' wall clock
    s.a = open("a");
    s.b = open("b");
    poll(*s.a);
    poll(*s.b);
    advance(0.1);
    poll(*s.a);
    return s;
  }
  void poll(Agent& a) {
    auto st = a.poll_once(clock_.now());
    ASSERT_TRUE(st.ok()) << st.error().message;
  }
  void advance(double s) { clock_.advance(static_cast<int64_t>(s * 1e9)); }

  static inline int counter_ = 0;
  fs::path base_;
  ManualClock clock_;
  std::shared_ptr<test::MemoryKv> kv_;
  test::Receiver rx_;
};

TEST_F(AgentLeaderTest, OneLeaderPagesOnceAndTheNextTakesTheIncidentOverWhenItsLeaseLapses) {
  auto [w0, w1, a, b] = start();
  auto ja = a->job("pretrain");
  ASSERT_TRUE(ja && ja->cluster);
  EXPECT_TRUE(ja->cluster->leads);
  ASSERT_EQ(ja->observation.ranks.size(), 2u) << ja->verdict.summary;
  EXPECT_EQ(ja->verdict.state, detect::State::kHealthy) << ja->verdict.summary;
  auto jb = b->job("pretrain");
  ASSERT_TRUE(jb && jb->cluster);
  EXPECT_FALSE(jb->cluster->leads);
  EXPECT_EQ(jb->cluster->leader, "a");

  // Rank 1, on node b, hangs in a data fetch; rank 0 waits in the next collective.
  w1->phase_begin("data");
  for (int i = 0; i < 8; ++i) {
    advance(0.5);
    poll(*b);
    poll(*a);
  }
  ASSERT_TRUE(rx_.wait_for(1));
  for (int i = 0; i < 5; ++i) {  // a records the delivery; neither pages again
    std::this_thread::sleep_for(20ms);
    poll(*a);
    poll(*b);
  }
  EXPECT_EQ(rx_.count(), 1u);
  json page = json::parse(rx_.body(0));
  EXPECT_EQ(page["state"], "stalled");
  EXPECT_EQ(page["cause"], "collective");
  ASSERT_FALSE(page["culprits"].empty()) << page.dump();
  EXPECT_EQ(page["culprits"][0]["host"], "b");
  EXPECT_EQ(page["host"], "a");
  const std::string incident_id = page["incident_id"];
  auto from_b = b->incidents("pretrain", 10);  // the job's incident, in the store: both see it
  ASSERT_TRUE(from_b.ok()) << from_b.error().message;
  ASSERT_FALSE(from_b->empty());
  EXPECT_EQ(std::to_string(from_b->front().id), incident_id);

  // a stops: only b polls; within the lease a still leads, past it b takes the job over and
  // goes on with the same incident, without a second page.
  advance(1.0);
  poll(*b);
  EXPECT_EQ(b->job("pretrain")->cluster->leader, "a");
  for (int i = 0; i < 3; ++i) {
    advance(1.0);
    poll(*b);
  }
  jb = b->job("pretrain");
  EXPECT_TRUE(jb->cluster->leads);
  EXPECT_EQ(jb->cluster->leader, "b");
  EXPECT_EQ(jb->verdict.state, detect::State::kStalled) << jb->verdict.summary;
  // b never read a's summary, but the roster a left names a's rank: rank-silent, not missing.
  EXPECT_EQ(jb->observation.ranks.size(), 2u);
  EXPECT_EQ(jb->verdict.cause, detect::Cause::kRankSilent) << jb->verdict.summary;
  from_b = b->incidents("pretrain", 10);
  ASSERT_TRUE(from_b.ok());
  EXPECT_EQ(std::to_string(from_b->front().id), incident_id);
  EXPECT_TRUE(from_b->front().is_open());

  // a comes back: its lease is gone, so it is at the back of the line; nobody pages again.
  for (int i = 0; i < 3; ++i) {
    advance(1.0);
    poll(*a);
    poll(*b);
  }
  EXPECT_FALSE(a->job("pretrain")->cluster->leads);
  EXPECT_EQ(a->job("pretrain")->cluster->leader, "b");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rx_.count(), 1u);
  EXPECT_EQ(a->health().coord->jobs_led, 0u);
  EXPECT_EQ(b->health().coord->jobs_led, 1u);
}

TEST_F(AgentLeaderTest, WhileTheStoreIsDownEachNodePagesItsOwnRanksAndHandsBackOnceItAnswers) {
  auto [w0, w1, a, b] = start();
  ASSERT_TRUE(a->job("pretrain")->cluster->leads);
  kv_->set_down(true);
  w1->phase_begin("data");
  for (int i = 0; i < 10; ++i) {
    advance(0.5);
    poll(*a);
    poll(*b);
  }
  for (const auto* agent : {a.get(), b.get()}) {
    auto h = agent->health();
    ASSERT_TRUE(h.coord);
    EXPECT_FALSE(h.coord->connected);
    EXPECT_EQ(h.coord->jobs_led, 0u);
  }
  // Each node judges its own rank (a's waits, b's overruns its data phase) and pages from its
  // own incident, with the same alert labels for Alertmanager to merge.
  ASSERT_TRUE(rx_.wait_for(2));
  std::set<std::string> hosts;
  for (size_t i = 0; i < rx_.count(); ++i) {
    json page = json::parse(rx_.body(i));
    EXPECT_EQ(page["state"], "stalled");
    hosts.insert(page["host"].get<std::string>());
  }
  EXPECT_EQ(hosts, (std::set<std::string>{"a", "b"}));
  auto local = a->incidents("", 10);
  ASSERT_TRUE(local.ok());
  ASSERT_EQ(local->size(), 1u);
  EXPECT_TRUE(local->front().is_open());

  // The store answers again: the local incidents close, and the job's leader opens the job's,
  // once the other node had a lease TTL to publish again (every lease lapsed with the store).
  kv_->set_down(false);
  for (int i = 0; i < 12; ++i) {
    advance(0.5);
    poll(*a);
    poll(*b);
  }
  EXPECT_TRUE(a->health().coord->connected);
  local = a->incidents("", 10);
  ASSERT_TRUE(local.ok());
  for (const auto& i : *local) {
    if (i.id == 1) {
      EXPECT_FALSE(i.is_open()) << "the local incident is handed back";
    }
  }
  auto job = a->incidents("pretrain", 10);
  ASSERT_TRUE(job.ok());
  ASSERT_FALSE(job->empty());
  EXPECT_TRUE(job->front().is_open());
}

}  // namespace
}  // namespace stepwatch::agent
