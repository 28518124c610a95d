// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Multi-node agents: two Agent instances as two "nodes" (each its own node name, beacon root,
// state dir and specs), one real etcd (tests/support/etcd_server.h), a real page receiver, and
// one 2-rank job whose rank 0 writes under node a's root and rank 1 under node b's. Leases run
// on real time (TTL 1 s); the detector's time is injected into poll_once as real time plus an
// offset, so a stall needs no sleeping, a lease expiry does.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "src/agent/agent.h"
#include "src/common/host.h"
#include "src/contract/beacon_writer.h"
#include "src/coord/etcd_client.h"
#include "src/coord/etcd_history.h"
#include "tests/fakes/fake_slurm.h"
#include "tests/support/etcd_server.h"
#include "tests/support/page_receiver.h"

namespace stepwatch::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

class AgentCoordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / fmt::format("sw-coord-{}-{}", ::getpid(), counter_++);
    fs::remove_all(base_);
    for (const char* n : {"a", "b"}) {
      fs::create_directories(base_ / n / "beacons");
      fs::create_directories(base_ / n / "specs");
    }
    t0_ = SystemClock::instance().now();
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string root(const std::string& node) const { return (base_ / node / "beacons").string(); }

  AgentConfig config(const std::string& node, const std::string& endpoint) const {
    AgentConfig c;
    c.beacon_roots = {root(node)};
    c.state_dir = (base_ / node / "state").string();
    c.specs_dir = (base_ / node / "specs").string();
    c.gpu = false;
    CoordConfig k;
    k.endpoints = {endpoint};
    k.node_name = node;
    k.lease_ttl_ns = lease_ttl_ns_;
    k.request_timeout_ns = 500 * kNsPerMs;
    c.coord = k;
    return c;
  }
  // 1 s: failover within a test's patience. Tests of what the leader decides after a preempt
  // take longer leases, so that a slow machine (the ASan build beside other tests) never hands
  // the job to the other node mid-sequence.
  int64_t lease_ttl_ns_ = kNsPerSec;
  std::unique_ptr<Agent> open(const std::string& node, const std::string& endpoint) {
    auto a = Agent::open(config(node, endpoint));
    EXPECT_TRUE(a.ok()) << a.error().message;
    return a.ok() ? std::move(*a) : nullptr;
  }
  // The same spec on both nodes: a step a second, grace 2, data phases of at most 2 s.
  void write_specs(const std::string& job, const std::string& url) {
    for (const char* n : {"a", "b"}) {
      std::ofstream((base_ / n / "specs" / (job + ".toml")).string()) << fmt::format(
          "owner = \"team-llm\"\nexpected_interval = \"1s\"\ngrace_intervals = 2\n"
          "[phases]\ndata = \"2s\"\n"
          "[[runbook.pager]]\nurl = \"{}\"\nretries = 0\ntimeout = \"2s\"\n",
          url);
    }
  }
  std::unique_ptr<contract::BeaconWriter> beacon(const std::string& node, const std::string& job,
                                                 int rank, int world) {
    contract::Identity id;
    id.dir = root(node);
    id.job = job;
    id.host = short_hostname();  // one machine: the node name tells the "nodes" apart
    id.rank = rank;
    id.world_size = world;
    auto w = contract::BeaconWriter::create(id);
    EXPECT_TRUE(w.ok()) << w.error().message;
    return w.ok() ? std::move(*w) : nullptr;
  }
  // Real time now plus `s` seconds of injected time.
  Stamp later(double s) const {
    Stamp n = SystemClock::instance().now();
    auto ns = static_cast<int64_t>(s * 1e9);
    return {n.wall_ns + ns, n.mono_ns + ns};
  }
  static void poll(Agent& a, Stamp at) {
    auto st = a.poll_once(at);
    ASSERT_TRUE(st.ok()) << st.error().message;
  }

  static inline int counter_ = 0;
  fs::path base_;
  Stamp t0_;
};

TEST_F(AgentCoordTest, OneLeaderMergesBothNodesRanksAndPagesOnceNamingTheRemoteCulprit) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_specs("pretrain", rx.url());
  auto w0 = beacon("a", "pretrain", 0, 2);
  auto w1 = beacon("b", "pretrain", 1, 2);
  for (int i = 1; i <= 6; ++i) {
    w0->step(i);
    w1->step(i);
    std::this_thread::sleep_for(2ms);
  }
  auto a = open("a", etcd.endpoint());
  auto b = open("b", etcd.endpoint());
  poll(*a, later(0));  // a publishes first: its key has the lowest create revision
  poll(*b, later(0));
  poll(*a, later(0.1));  // and now reads b's summary
  auto ja = a->job("pretrain");
  ASSERT_TRUE(ja && ja->cluster);
  EXPECT_TRUE(ja->cluster->leads);
  EXPECT_EQ(ja->cluster->leader, "a");
  ASSERT_EQ(ja->observation.ranks.size(), 2u) << ja->verdict.summary;
  EXPECT_EQ(ja->cluster->nodes.size(), 2u);
  EXPECT_EQ(ja->verdict.state, detect::State::kHealthy) << ja->verdict.summary;
  std::set<std::string> hosts;
  for (const auto& r : ja->observation.ranks) hosts.insert(r.host);
  EXPECT_EQ(hosts, (std::set<std::string>{"a", "b"}));
  auto jb = b->job("pretrain");
  ASSERT_TRUE(jb && jb->cluster);
  EXPECT_FALSE(jb->cluster->leads);
  EXPECT_EQ(jb->cluster->leader, "a");
  // A follower shows the leader's view of the whole job (written when a judged it).
  poll(*b, later(0.2));
  jb = b->job("pretrain");
  EXPECT_EQ(jb->observation.ranks.size(), 2u);
  EXPECT_EQ(jb->verdict.summary, a->job("pretrain")->verdict.summary);
  ASSERT_TRUE(jb->cluster);
  EXPECT_EQ(jb->cluster->nodes.size(), 2u);  // every node, as the leader knows them

  // Rank 1, on node b, hangs in a data fetch; rank 0, on a, waits in the next collective.
  w1->phase_begin("data");
  for (double s = 0.5; s <= 4.0; s += 0.5) {
    poll(*b, later(s));
    poll(*a, later(s));
  }
  ASSERT_TRUE(rx.wait_for(1));
  for (int i = 0; i < 5; ++i) {  // a records the delivery; neither pages again
    std::this_thread::sleep_for(20ms);
    poll(*a, later(4.5));
    poll(*b, later(4.5));
  }
  EXPECT_EQ(rx.count(), 1u);
  json page = json::parse(rx.body(0));
  EXPECT_EQ(page["state"], "stalled");
  EXPECT_EQ(page["cause"], "collective");
  ASSERT_FALSE(page["culprits"].empty()) << page.dump();
  EXPECT_EQ(page["culprits"][0]["rank"], 1);
  EXPECT_EQ(page["culprits"][0]["host"], "b");
  EXPECT_EQ(page["host"], "a");
  std::string incident_id = page["incident_id"];
  ja = a->job("pretrain");
  EXPECT_NE(ja->verdict.summary.find("rank 1 on b"), std::string::npos) << ja->verdict.summary;

  // The incident is the job's, in etcd: both nodes list it, with the same id.
  auto from_b = b->incidents("pretrain", 10);
  ASSERT_TRUE(from_b.ok()) << from_b.error().message;
  ASSERT_FALSE(from_b->empty());
  EXPECT_EQ(std::to_string(from_b->front().id), incident_id);
  EXPECT_TRUE(from_b->front().is_open());
  EXPECT_TRUE(from_b->front().delivered_at_ns.has_value());

  // Ack anywhere: acked through node b while a leads.
  auto acked = b->ack("pretrain", "alice", "looking");
  ASSERT_TRUE(acked.ok()) << acked.error().message;
  ASSERT_TRUE(acked->has_value());
  EXPECT_EQ(std::to_string((*acked)->id), incident_id);
  auto from_a = a->incidents("pretrain", 10);
  ASSERT_TRUE(from_a.ok());
  EXPECT_EQ(from_a->front().acked_by, "alice");

  // a stops (as if SIGKILLed or SIGSTOPped): its lease lapses, b takes the job over and goes on
  // with the same incident, without a second page.
  std::this_thread::sleep_for(2500ms);
  for (int i = 0; i < 3; ++i) {
    poll(*b, later(7 + i));
    std::this_thread::sleep_for(20ms);
  }
  jb = b->job("pretrain");
  EXPECT_TRUE(jb->cluster->leads);
  EXPECT_EQ(jb->cluster->leader, "b");
  EXPECT_EQ(jb->verdict.state, detect::State::kStalled) << jb->verdict.summary;
  // b never read a's summary, but the roster a left names a's rank: rank-silent, not missing.
  EXPECT_EQ(jb->observation.ranks.size(), 2u);
  EXPECT_EQ(jb->verdict.cause, detect::Cause::kRankSilent) << jb->verdict.summary;
  ASSERT_FALSE(jb->verdict.culprits.empty());
  EXPECT_EQ(jb->verdict.culprits[0].host, "a");
  EXPECT_EQ(rx.count(), 1u);
  from_b = b->incidents("pretrain", 10);
  ASSERT_TRUE(from_b.ok());
  EXPECT_EQ(std::to_string(from_b->front().id), incident_id);
  EXPECT_TRUE(from_b->front().is_open());

  // a comes back (SIGCONT): its old lease is gone, so it is at the back of the line and its
  // runbook has nothing to write; nobody pages again.
  for (int i = 0; i < 3; ++i) {
    poll(*a, later(10 + i));
    poll(*b, later(10 + i));
  }
  ja = a->job("pretrain");
  EXPECT_FALSE(ja->cluster->leads);
  EXPECT_EQ(ja->cluster->leader, "b");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rx.count(), 1u);
  EXPECT_EQ(a->health().coord->jobs_led, 0u);
  EXPECT_EQ(b->health().coord->jobs_led, 1u);
}

TEST_F(AgentCoordTest, ANodeWhoseSummaryLapsesTurnsItsRanksRankSilent) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_specs("pretrain", rx.url());
  auto w0 = beacon("a", "pretrain", 0, 2);
  auto w1 = beacon("b", "pretrain", 1, 2);
  for (int i = 1; i <= 6; ++i) {
    w0->step(i);
    w1->step(i);
  }
  auto a = open("a", etcd.endpoint());
  auto b = open("b", etcd.endpoint());
  poll(*a, later(0));
  poll(*b, later(0));
  poll(*a, later(0.1));
  ASSERT_EQ(a->job("pretrain")->observation.ranks.size(), 2u);
  b.reset();  // node b dies: its agent is gone, its lease runs out
  std::this_thread::sleep_for(2500ms);
  w0->step(7);
  // a's own lease lapsed too (not polled meanwhile): it gives the other nodes a TTL to publish
  // again before their absence counts, then b's rank is rank-silent.
  poll(*a, later(0.2));
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(250ms);
    w0->step(8 + i);
    poll(*a, later(0.2));
  }
  auto ja = a->job("pretrain");
  EXPECT_EQ(ja->verdict.state, detect::State::kStalled) << ja->verdict.summary;
  EXPECT_EQ(ja->verdict.cause, detect::Cause::kRankSilent) << ja->verdict.summary;
  ASSERT_FALSE(ja->verdict.culprits.empty());
  EXPECT_EQ(ja->verdict.culprits[0].rank, 1);
  EXPECT_EQ(ja->verdict.culprits[0].host, "b");
  ASSERT_TRUE(rx.wait_for(1));
  EXPECT_EQ(json::parse(rx.body(0))["cause"], "rank-silent");
}

TEST_F(AgentCoordTest, WithoutEtcdAgentsPageLocallyAndNeverActThenHandBack) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_specs("pretrain", rx.url());
  auto w0 = beacon("a", "pretrain", 0, 1);
  for (int i = 1; i <= 6; ++i) w0->step(i);
  auto a = open("a", etcd.endpoint());
  poll(*a, later(0));
  EXPECT_TRUE(a->health().coord->connected);
  etcd.kill();
  poll(*a, later(5));  // no step for 5 s: stalled, seen without etcd
  auto h = a->health();
  ASSERT_TRUE(h.coord);
  EXPECT_FALSE(h.coord->connected);
  EXPECT_FALSE(h.coord->error.empty());
  ASSERT_TRUE(rx.wait_for(1));  // paged from this node's own incident
  auto local = a->incidents("", 10);
  ASSERT_TRUE(local.ok());
  ASSERT_EQ(local->size(), 1u);
  EXPECT_TRUE(local->front().is_open());

  etcd.restart();  // same data dir: coordination resumes, the job's leader takes the incident
  for (int i = 0; i < 3; ++i) poll(*a, later(6 + i));
  EXPECT_TRUE(a->health().coord->connected);
  local = a->incidents("", 10);
  ASSERT_TRUE(local.ok());
  bool local_open = false;
  for (const auto& i : *local) {
    if (i.id == 1 && i.is_open()) local_open = true;
  }
  EXPECT_FALSE(local_open);
  auto job = a->incidents("pretrain", 10);
  ASSERT_TRUE(job.ok());
  ASSERT_FALSE(job->empty());
  EXPECT_TRUE(job->front().is_open());  // the job's incident, in etcd, opened by its leader
}

// Polls past the ack timeout until the caller has what it waits for. The fake clock moves 10 ms
// a poll, from 1.5 s to at most 3.5 s; the ranks' ends are real, and a loaded machine stretches
// them, so the polls go on for up to 30 s of real time rather than a fixed count.
class PollPast {
 public:
  bool next() {
    if (i_ > 0) std::this_thread::sleep_for(20ms);
    ++i_;
    return std::chrono::steady_clock::now() < give_up_;
  }
  double at() const { return 1.5 + 0.01 * std::min(i_ - 1, 200); }

 private:
  int i_ = 0;
  std::chrono::steady_clock::time_point give_up_ = std::chrono::steady_clock::now() + 30s;
};

// The job's preempt: the leader orders it once the ack timeout passed, each node's agent ends its
// own proven rank and reports, and the leader moves the job to its next incarnation for the
// registered `stepwatch run --coord` launcher.
class AgentCoordPreemptTest : public AgentCoordTest {
 protected:
  void TearDown() override {
    for (pid_t c : children_) {
      ::kill(c, SIGKILL);
      ::waitpid(c, nullptr, 0);
    }
    AgentCoordTest::TearDown();
  }
  // A trainer rank in its own process under node's root: 8 quick steps, then it hangs.
  pid_t hung_rank(const std::string& node, int rank, uint32_t incarnation = 0) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    pid_t c = ::fork();
    if (c == 0) {
      ::close(ready[0]);
      contract::Identity id;
      id.dir = root(node);
      id.job = "pretrain";
      id.host = short_hostname();
      id.rank = rank;
      id.world_size = 2;
      id.incarnation = incarnation;
      auto w = contract::BeaconWriter::create(id);
      if (!w) ::_exit(2);
      for (int i = 1; i <= 8; ++i) (*w)->step(i);
      (*w)->checkpoint_committed("step_8", 8);
      if (::write(ready[1], "r", 1) != 1) ::_exit(3);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char ch = 0;
    EXPECT_EQ(::read(ready[0], &ch, 1), 1);
    ::close(ready[0]);
    children_.push_back(c);
    return c;
  }
  bool ended_within(pid_t pid, int ms, int* status) {
    for (int i = 0; i < ms / 10; ++i) {
      if (::waitpid(pid, status, WNOHANG) == pid) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  std::unique_ptr<Agent> open_preempting(const std::string& node, const std::string& endpoint) {
    AgentConfig c = config(node, endpoint);
    c.preempt_jobs = {"pretrain"};
    auto a = Agent::open(c);
    EXPECT_TRUE(a.ok()) << a.error().message;
    return a.ok() ? std::move(*a) : nullptr;
  }
  void write_preempt_specs(const std::string& url, const std::string& extra = "") {
    for (const char* n : {"a", "b"}) {
      std::ofstream((base_ / n / "specs" / "pretrain.toml").string()) << fmt::format(
          "owner = \"team-llm\"\nexpected_interval = \"100ms\"\ngrace_intervals = 2\n"
          "[runbook]\nack_timeout = \"1s\"\npreempt_grace = \"2s\"\n"
          "[[runbook.pager]]\nurl = \"{}\"\nretries = 0\ntimeout = \"2s\"\n{}",
          url, extra);
    }
  }
  // The job's history in etcd as an earlier leader left it: incarnations 0 and 1 ended 9 and 4
  // minutes ago, rank 1's node b the culprit of each; the incarnation key at 2.
  // The incarnation key while a restart storm holds it; nullopt when not held.
  static std::optional<json> held(coord::EtcdClient& etcd) {
    auto inc = etcd.range("/stepwatch/v1/jobs/pretrain/incarnation");
    if (!inc.ok() || inc->kvs.empty()) return std::nullopt;
    json j = json::parse(inc->kvs[0].value);
    if (j.value("hold_incident", 0) == 0) return std::nullopt;
    return j;
  }
  // Each node's `stepwatch run --coord`, registered under a lease as a live one is.
  static void live_launchers(coord::EtcdClient& etcd) {
    auto lease = etcd.grant(600);
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    for (const char* n : {"a", "b"}) {
      ASSERT_TRUE(
          etcd.put(fmt::format("/stepwatch/v1/jobs/pretrain/launchers/{}", n), "{}", lease->id)
              .ok());
    }
  }
  // The seeded history, a launcher, incarnation 2 hung on both nodes and storm_incarnations = 3:
  // both agents polled past the ack timeout until the storm holds the job (its two pages sent)
  // and both ranks have ended.
  std::pair<std::unique_ptr<Agent>, std::unique_ptr<Agent>> run_to_storm_hold(
      test::EtcdServer& etcd, coord::EtcdClient& client, test::Receiver& rx) {
    write_preempt_specs(rx.url(), "[node_fault]\nstorm_incarnations = 3\n");
    seed_history(client);
    live_launchers(client);
    pid_t r0 = hung_rank("a", 0, 2);
    pid_t r1 = hung_rank("b", 1, 2);
    auto a = open_preempting("a", etcd.endpoint());
    auto b = open_preempting("b", etcd.endpoint());
    std::this_thread::sleep_for(400ms);
    poll(*a, later(0));
    poll(*b, later(0));
    for (PollPast past; past.next();) {
      poll(*a, later(past.at()));
      poll(*b, later(past.at()));
      if (held(client) && rx.count() >= 2) break;
    }
    int status = 0;
    EXPECT_TRUE(ended_within(r0, 5000, &status));
    EXPECT_TRUE(ended_within(r1, 5000, &status));
    children_.clear();
    return {std::move(a), std::move(b)};
  }
  static void seed_history(coord::EtcdClient& etcd) {
    const std::string prefix = "/stepwatch/v1";
    int64_t now = SystemClock::instance().now().wall_ns;
    for (int64_t n = 0; n < 2; ++n) {
      store::IncarnationRecord r;
      r.job = "pretrain";
      r.incarnation = n;
      r.started_ns = now - (10 - 5 * n) * 60 * kNsPerSec;
      r.ended_ns = r.started_ns + 60 * kNsPerSec;
      r.end_reason = "preempted";
      r.cause = "io";
      r.culprit_ranks = {1};
      r.culprit_hosts = {"b"};
      r.hosts = {"a", "b"};
      ASSERT_TRUE(
          etcd.put(coord::history_key(prefix, "pretrain", n), coord::incarnation_record_json(r))
              .ok());
      store::HostImplication i{"b", "pretrain", n, *r.ended_ns, "io", "culprit rank 1 (io)"};
      ASSERT_TRUE(
          etcd.put(coord::implication_key(prefix, "b", "pretrain", n), coord::implication_json(i))
              .ok());
    }
    ASSERT_TRUE(etcd.put(prefix + "/jobs/pretrain/incarnation", R"({"incarnation":2})").ok());
  }
  std::vector<pid_t> children_;
};

TEST_F(AgentCoordPreemptTest, EachNodeEndsItsOwnRankOnceAndTheJobMovesToItsNextIncarnation) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_preempt_specs(rx.url());
  pid_t r0 = hung_rank("a", 0);
  pid_t r1 = hung_rank("b", 1);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  // A `stepwatch run --coord` of the job on each node, under its lease: relaunching is someone's
  // job, on every node.
  live_launchers(etcd_client);
  auto a = open_preempting("a", etcd.endpoint());
  auto b = open_preempting("b", etcd.endpoint());
  std::this_thread::sleep_for(400ms);
  poll(*a, later(0));
  poll(*b, later(0));
  poll(*a, later(0.1));
  ASSERT_EQ(a->job("pretrain")->verdict.state, detect::State::kStalled)
      << a->job("pretrain")->verdict.summary;
  int status = 0;
  EXPECT_FALSE(ended_within(r0, 50, &status)) << "the owner has the ack timeout to answer";
  // Past the ack timeout: the leader orders, both nodes carry it out, the leader gathers.
  std::set<std::string> seen;  // what the job reads on either node on the way (E13)
  for (PollPast past; past.next();) {
    poll(*a, later(past.at()));
    poll(*b, later(past.at()));
    seen.insert(detect::state_name(a->job("pretrain")->verdict.state));
    seen.insert(detect::state_name(b->job("pretrain")->verdict.state));
    auto inc = etcd_client.range("/stepwatch/v1/jobs/pretrain/incarnation");
    if (inc.ok() && !inc->kvs.empty()) break;
  }
  ASSERT_TRUE(ended_within(r0, 5000, &status));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  ASSERT_TRUE(ended_within(r1, 5000, &status));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  children_.clear();

  auto inc = etcd_client.range("/stepwatch/v1/jobs/pretrain/incarnation");
  ASSERT_TRUE(inc.ok());
  ASSERT_EQ(inc->kvs.size(), 1u) << "the job was not moved to its next incarnation";
  json next = json::parse(inc->kvs[0].value);
  EXPECT_EQ(next["incarnation"], 1);
  EXPECT_EQ(next["resume_from"], "step_8");
  EXPECT_EQ(next["by"], "a");
  auto done = etcd_client.range("/stepwatch/v1/jobs/pretrain/done/", {true});
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->kvs.size(), 2u);  // one report per node
  auto incidents = b->incidents("pretrain", 10);
  ASSERT_TRUE(incidents.ok());
  ASSERT_FALSE(incidents->empty());
  EXPECT_FALSE(incidents->front().is_open());
  EXPECT_NE(incidents->front().resolution.find("relaunched as incarnation 1 from step_8"),
            std::string::npos)
      << incidents->front().resolution;
  // The ended ranks are not a new stall, and nothing is ordered or paged again.
  for (int i = 0; i < 5; ++i) {
    poll(*a, later(10 + i));
    poll(*b, later(10 + i));
    seen.insert(detect::state_name(a->job("pretrain")->verdict.state));
    seen.insert(detect::state_name(b->job("pretrain")->verdict.state));
  }
  EXPECT_EQ(rx.count(), 1u);
  done = etcd_client.range("/stepwatch/v1/jobs/pretrain/done/", {true});
  EXPECT_EQ(done->kvs.size(), 2u);
  auto orders = etcd_client.range("/stepwatch/v1/jobs/pretrain/orders/", {true});
  EXPECT_EQ(orders->kvs.size(), 1u);
  EXPECT_EQ(a->job("pretrain")->actions_total.count("preempt"), 1u);
  EXPECT_EQ(b->job("pretrain")->actions_total.count("preempt"), 1u);
  // E13: a job ended by the order reads preempted on both nodes, never finished, and on the way
  // from the stall it read nothing else (not healthy, dead or finished as its ranks ended).
  for (Agent* agent : {a.get(), b.get()}) {
    EXPECT_EQ(agent->job("pretrain")->verdict.state, detect::State::kPreempted)
        << agent->job("pretrain")->verdict.summary;
    EXPECT_NE(agent->job("pretrain")->verdict.summary.find("the job leader's order"),
              std::string::npos)
        << agent->job("pretrain")->verdict.summary;
  }
  EXPECT_EQ(seen, (std::set<std::string>{"stalled", "preempted"}));
}

TEST_F(AgentCoordPreemptTest, ANodeThatMayNotPreemptRefusesAndTheLeaderPagesItsSurvivors) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_preempt_specs(rx.url());
  pid_t r0 = hung_rank("a", 0);
  pid_t r1 = hung_rank("b", 1);
  auto a = open_preempting("a", etcd.endpoint());
  auto b = open("b", etcd.endpoint());  // b's agent does not list the job in preempt_jobs
  std::this_thread::sleep_for(400ms);
  poll(*a, later(0));
  poll(*b, later(0));
  for (PollPast past; past.next();) {
    poll(*a, later(past.at()));
    poll(*b, later(past.at()));
    if (rx.count() >= 2) break;  // the page, then the one saying the preempt left survivors
  }
  int status = 0;
  ASSERT_TRUE(ended_within(r0, 5000, &status)) << "a ends its own rank";
  EXPECT_FALSE(ended_within(r1, 200, &status)) << "b's agent may not preempt: rank 1 lives";
  ASSERT_TRUE(rx.wait_for(2));
  json escalation = json::parse(rx.body(1));
  EXPECT_NE(escalation["summary"].get<std::string>().find("preempt failed"), std::string::npos)
      << escalation.dump();
  auto done = coord::EtcdClient(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec})
                  .range("/stepwatch/v1/jobs/pretrain/done/", {true});
  ASSERT_TRUE(done.ok());
  ASSERT_EQ(done->kvs.size(), 2u);
  EXPECT_NE(done->kvs[1].value.find("does not list the job in preempt_jobs"), std::string::npos)
      << done->kvs[1].value;
}

// The job's node-fault history is in etcd. Incarnations 0 and 1 ended minutes ago with rank 1's
// node b the culprit; incarnation 2 hangs on both nodes. Three starts in the window
// ([node_fault] storm_incarnations = 3) are a restart storm: the leader preempts, records the
// end, pages the storm, marks the hold in the incarnation key and moves nothing until an ack;
// every node's API shows b suspect.
TEST_F(AgentCoordPreemptTest, ARestartStormHoldsTheNextIncarnationUntilAcked) {
  test::EtcdServer etcd;
  test::Receiver rx;
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  const std::string prefix = "/stepwatch/v1";
  auto [a, b] = run_to_storm_hold(etcd, etcd_client, rx);
  ASSERT_TRUE(a && b);

  // The stall's page already names the storm and the suspect; the second page is the hold's.
  ASSERT_TRUE(rx.wait_for(2));
  json first = json::parse(rx.body(0));
  ASSERT_EQ(first["suspect_hosts"].size(), 1u) << first.dump();
  EXPECT_EQ(first["suspect_hosts"][0]["host"], "b");
  json storm = json::parse(rx.body(1));
  EXPECT_EQ(storm["state"], "restart-storm") << storm.dump();
  EXPECT_EQ(storm["severity"], "warning");
  EXPECT_NE(storm["summary"].get<std::string>().find("restart storm: 3 incarnations started in"),
            std::string::npos)
      << storm.dump();
  EXPECT_NE(storm["summary"].get<std::string>().find(
                "automatic resume held until acked (stepwatch ack pretrain, on any node of the "
                "job), then incarnation 3 from step_8"),
            std::string::npos)
      << storm.dump();
  std::optional<json> mark = held(etcd_client);
  ASSERT_TRUE(mark.has_value()) << "the hold is marked in the incarnation key";
  EXPECT_EQ((*mark)["incarnation"], 2);
  EXPECT_EQ((*mark)["by"], "a");

  // The end of incarnation 2 is in the history: preempted, on both nodes. Both ranks hung; which
  // the verdict blames (none, or the one that went silent first) depends on the machine's speed,
  // and each host it blames gains one implication from incarnation 2, no more.
  auto h2 = etcd_client.range(coord::history_key(prefix, "pretrain", 2));
  ASSERT_TRUE(h2.ok());
  ASSERT_EQ(h2->kvs.size(), 1u);
  json end2 = json::parse(h2->kvs[0].value);
  EXPECT_EQ(end2["end_reason"], "preempted") << end2.dump();
  EXPECT_EQ(end2["hosts"], json::array({"a", "b"})) << end2.dump();
  EXPECT_EQ(end2["checkpoint_step"], 8);
  auto implied = etcd_client.range(prefix + "/hosts/", {true});
  ASSERT_TRUE(implied.ok());
  std::set<std::string> blamed_by_2;
  for (const auto& kv : implied->kvs) {
    if (kv.key.ends_with("/00000000000000000002"))
      blamed_by_2.insert(json::parse(kv.value)["host"]);
  }
  EXPECT_EQ(blamed_by_2, end2["culprit_hosts"].get<std::set<std::string>>()) << end2.dump();
  EXPECT_EQ(implied->kvs.size(), 2u + blamed_by_2.size());

  // Held: polls go on, nothing moves, the incident stays open.
  for (int i = 0; i < 5; ++i) {
    poll(*a, later(10 + i));
    poll(*b, later(10 + i));
  }
  mark = held(etcd_client);
  ASSERT_TRUE(mark.has_value());
  EXPECT_EQ((*mark)["incarnation"], 2);
  // Its ranks are ended, but the leader's verdict (which both nodes show) stays at the stall the
  // held incident is open for (E13: docs/api.md), neither preempted nor finished yet.
  for (Agent* agent : {a.get(), b.get()}) {
    EXPECT_EQ(agent->job("pretrain")->verdict.state, detect::State::kStalled)
        << agent->job("pretrain")->verdict.summary;
  }
  auto open_inc = b->incidents("pretrain", 10);
  ASSERT_TRUE(open_inc.ok());
  ASSERT_FALSE(open_inc->empty());
  EXPECT_TRUE(open_inc->front().is_open());
  // Every node shows the job's history from etcd: b is suspect, the storm is on.
  for (Agent* agent : {a.get(), b.get()}) {
    auto nf = agent->node_faults();
    ASSERT_TRUE(nf && nf->jobs.count("pretrain"));
    const auto& view = nf->jobs.at("pretrain");
    EXPECT_TRUE(view.storm.has_value());
    ASSERT_FALSE(view.suspects.empty());
    EXPECT_EQ(view.suspects[0].host, "b");
    EXPECT_EQ(view.incarnations.size(), 3u);
    bool b_listed = false;
    for (const auto& h : nf->hosts) b_listed = b_listed || (h.host == "b" && h.implications >= 2);
    EXPECT_TRUE(b_listed);
  }

  // The ack (on the follower) releases it: incarnation 3 from the checkpoint, the incident closed.
  auto acked = b->ack("pretrain", "alice", "node b cordoned");
  ASSERT_TRUE(acked.ok()) << acked.error().message;
  ASSERT_TRUE(acked->has_value());
  for (int i = 0; i < 50; ++i) {
    poll(*a, later(20 + i));
    poll(*b, later(20 + i));
    auto inc = b->incidents("pretrain", 10);
    if (inc.ok() && !inc->empty() && !inc->front().is_open()) break;
    std::this_thread::sleep_for(20ms);
  }
  auto inc = etcd_client.range(prefix + "/jobs/pretrain/incarnation");
  ASSERT_TRUE(inc.ok());
  ASSERT_EQ(inc->kvs.size(), 1u);
  json next = json::parse(inc->kvs[0].value);
  EXPECT_EQ(next["incarnation"], 3) << next.dump();
  EXPECT_EQ(next["resume_from"], "step_8");
  EXPECT_FALSE(next.contains("hold_incident")) << next.dump();
  auto closed = b->incidents("pretrain", 10);
  ASSERT_TRUE(closed.ok());
  ASSERT_FALSE(closed->empty());
  EXPECT_FALSE(closed->front().is_open());
  EXPECT_NE(closed->front().resolution.find(
                "acked restart storm; preempted on 2 node(s) (a, b); relaunched as incarnation 3 "
                "from step_8"),
            std::string::npos)
      << closed->front().resolution;
  EXPECT_EQ(rx.count(), 2u);
}

// The leader holding a storm's next incarnation goes away: the next leader takes the hold up
// from the incarnation key, neither pages again nor closes the incident as recovered, and
// releases it on the ack.
TEST_F(AgentCoordPreemptTest, AStormHoldSurvivesALeaderChange) {
  test::EtcdServer etcd;
  test::Receiver rx;
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  auto [a, b] = run_to_storm_hold(etcd, etcd_client, rx);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(held(etcd_client).has_value());
  ASSERT_TRUE(rx.wait_for(2));

  a.reset();  // the leader's agent stops: its lease lapses within the TTL (1 s)
  bool b_leads = false;
  for (int i = 0; i < 100 && !b_leads; ++i) {
    std::this_thread::sleep_for(50ms);
    poll(*b, later(10 + 0.05 * i));
    auto jb = b->job("pretrain");
    b_leads = jb && jb->cluster && jb->cluster->leads;
  }
  ASSERT_TRUE(b_leads);
  for (int i = 0; i < 5; ++i) poll(*b, later(20 + i));
  auto open_inc = b->incidents("pretrain", 10);
  ASSERT_TRUE(open_inc.ok());
  ASSERT_FALSE(open_inc->empty());
  EXPECT_TRUE(open_inc->front().is_open()) << open_inc->front().resolution;
  ASSERT_TRUE(held(etcd_client).has_value()) << "still held under the new leader";

  auto acked = b->ack("pretrain", "alice", "");
  ASSERT_TRUE(acked.ok() && acked->has_value());
  for (int i = 0; i < 5; ++i) poll(*b, later(30 + i));
  auto inc = etcd_client.range("/stepwatch/v1/jobs/pretrain/incarnation");
  ASSERT_TRUE(inc.ok() && inc->kvs.size() == 1u);
  json next = json::parse(inc->kvs[0].value);
  EXPECT_EQ(next["incarnation"], 3) << next.dump();
  EXPECT_EQ(next["by"], "b");
  EXPECT_EQ(next["resume_from"], "step_8");
  auto closed = b->incidents("pretrain", 10);
  ASSERT_TRUE(closed.ok() && !closed->empty());
  EXPECT_NE(closed->front().resolution.find("acked restart storm; preempted under a previous "
                                            "leader; relaunched as incarnation 3 from step_8"),
            std::string::npos)
      << closed->front().resolution;
  EXPECT_EQ(rx.count(), 2u);
}

// runbook.resume_owner = "slurm": the leader requeues the batch job its launchers name, fenced by
// the restart count they published, through a fake scontrol that keeps Restarts in a file.
class AgentCoordSlurmTest : public AgentCoordPreemptTest {
 public:
  AgentCoordSlurmTest() { lease_ttl_ns_ = 4 * kNsPerSec; }

 protected:
  void write_slurm_specs(const std::string& url, const std::string& runbook = "") {
    slurm_.emplace(base_ / "slurm");
    const std::string fake = slurm_->scontrol();
    const std::string scancel = slurm_->scancel();
    for (const char* n : {"a", "b"}) {
      std::ofstream((base_ / n / "specs" / "pretrain.toml").string()) << fmt::format(
          "owner = \"team-llm\"\nexpected_interval = \"100ms\"\ngrace_intervals = 2\n"
          "[runbook]\nresume_owner = \"slurm\"\nack_timeout = \"1s\"\npreempt_grace = \"2s\"\n{}"
          "[slurm]\nscontrol = \"{}\"\nscancel = \"{}\"\n"
          "[[runbook.pager]]\nurl = \"{}\"\nretries = 0\ntimeout = \"2s\"\n",
          runbook, fake, scancel, url);
    }
  }
  void set_restarts(int n) { slurm_->set_restarts(n); }
  std::string requeues() const { return slurm_->requeues(); }
  std::string cancels() const { return slurm_->cancels(); }
  std::optional<test::FakeSlurm> slurm_;  // made by write_slurm_specs
  static std::string read_path(const std::string& path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), {});
  }
  // Each node's `stepwatch run --coord` of incarnation 0, as under Slurm job 77 (or outside it).
  void register_launchers(coord::EtcdClient& etcd, std::optional<int> restarts, int incarnation = 0,
                          const std::string& slurm_job = "77") {
    for (const char* n : {"a", "b"}) {
      json l = {{"node", n}, {"pid", 1}, {"incarnation", incarnation}, {"started_at_ns", 1}};
      if (restarts) {
        l["scheduler"] = "slurm";
        l["scheduler_job"] = slurm_job;
        l["scheduler_restarts"] = *restarts;
      }
      ASSERT_TRUE(
          etcd.put(fmt::format("/stepwatch/v1/jobs/pretrain/launchers/{}", n), l.dump()).ok());
    }
  }
  // Both hung ranks preempted past the ack timeout, until b sees the job's incident closed (or
  // `stop` says so); its resolution ("" when it never closed).
  std::string run_to_close(const std::string& endpoint, uint32_t incarnation = 0,
                           const std::function<bool()>& stop = {}) {
    hung_rank("a", 0, incarnation);
    hung_rank("b", 1, incarnation);
    auto a = open_preempting("a", endpoint);
    auto b = open_preempting("b", endpoint);
    std::this_thread::sleep_for(400ms);
    poll(*a, later(0));
    poll(*b, later(0));
    for (PollPast past; past.next();) {
      poll(*a, later(past.at()));
      poll(*b, later(past.at()));
      auto inc = b->incidents("pretrain", 10);
      if (inc.ok() && !inc->empty() && !inc->front().is_open()) return inc->front().resolution;
      if (stop && stop()) break;
    }
    return "";
  }
};

TEST_F(AgentCoordSlurmTest, TheLeaderRequeuesTheBatchJobOnceAndRecordsIt) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url());
  set_restarts(0);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  register_launchers(etcd_client, 0);
  std::string resolution = run_to_close(etcd.endpoint());
  EXPECT_NE(resolution.find("requeued Slurm job 77 (Restarts 0 -> 1); next incarnation 1 from "
                            "step_8"),
            std::string::npos)
      << resolution;
  EXPECT_EQ(requeues(), "77\n");
  auto inc = etcd_client.range("/stepwatch/v1/jobs/pretrain/incarnation");
  ASSERT_TRUE(inc.ok());
  ASSERT_EQ(inc->kvs.size(), 1u) << "the requeue is recorded as the next incarnation";
  json next = json::parse(inc->kvs[0].value);
  EXPECT_EQ(next["incarnation"], 1);
  EXPECT_EQ(next["scheduler"], "slurm");
  EXPECT_EQ(next["scheduler_job"], "77");
  EXPECT_EQ(next["by"], "a");
  EXPECT_EQ(rx.count(), 1u);
}

// Someone else (Slurm after a node failure, an operator, a leader that died before recording its
// requeue) moved the count since the launchers started: the fence refuses a second requeue.
TEST_F(AgentCoordSlurmTest, AMovedRestartCountIsNotRequeuedAgain) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url());
  set_restarts(1);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  register_launchers(etcd_client, 0);
  std::string resolution = run_to_close(etcd.endpoint());
  EXPECT_NE(resolution.find("not requeued: Slurm job 77 was requeued already (Restarts=1, this "
                            "incarnation started at 0); the next incarnation is someone else's"),
            std::string::npos)
      << resolution;
  EXPECT_EQ(requeues(), "");
  auto inc = etcd_client.range("/stepwatch/v1/jobs/pretrain/incarnation");
  ASSERT_TRUE(inc.ok());
  EXPECT_TRUE(inc->kvs.empty()) << "nothing recorded: the rerun's launchers move it up";
}

// runbook.resume = false: the job must stay stopped, and a plain end could be requeued by Slurm.
TEST_F(AgentCoordSlurmTest, ResumeOffCancelsTheBatchJob) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url(), "resume = false\n");
  set_restarts(0);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  register_launchers(etcd_client, 0);
  std::string resolution = run_to_close(etcd.endpoint());
  EXPECT_NE(resolution.find("runbook.resume = false: Slurm job 77 cancelled"), std::string::npos)
      << resolution;
  EXPECT_EQ(cancels(), "77\n");
  EXPECT_EQ(requeues(), "");
}

// [slurm] requeue = "exit": no scontrol call; the incarnation key carries the RequeueExit code
// every launcher exits with.
TEST_F(AgentCoordSlurmTest, RequeueByExitTellsTheLaunchersTheCode) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url());
  // The [slurm] table gains the mode and the code.
  std::string slurm_exit = "requeue = \"exit\"\nrequeue_exit_code = 79\n";
  for (const char* n : {"a", "b"}) {
    std::string path = (base_ / n / "specs" / "pretrain.toml").string();
    std::string text = read_path(path);
    text.replace(text.find("[slurm]\n") + 8, 0, slurm_exit);
    std::ofstream(path) << text;
  }
  set_restarts(0);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  register_launchers(etcd_client, 0);
  std::string resolution = run_to_close(etcd.endpoint());
  EXPECT_NE(resolution.find("its launchers exit with 79 for Slurm's RequeueExit to restart it as "
                            "incarnation 1 from step_8"),
            std::string::npos)
      << resolution;
  EXPECT_EQ(requeues(), "") << "no scontrol requeue with requeue = \"exit\"";
  auto inc = etcd_client.range("/stepwatch/v1/jobs/pretrain/incarnation");
  ASSERT_TRUE(inc.ok());
  ASSERT_EQ(inc->kvs.size(), 1u);
  json next = json::parse(inc->kvs[0].value);
  EXPECT_EQ(next["incarnation"], 1);
  EXPECT_EQ(next["scheduler"], "slurm");
  EXPECT_EQ(next["scheduler_job"], "77");
  EXPECT_EQ(next["exit_code"], 79);
}

// [node_fault] drain = true under Slurm: the leader drains the job's suspect node (b, the culprit
// of the two incarnations before) once, before it requeues.
TEST_F(AgentCoordSlurmTest, TheLeaderDrainsASuspectNodeBeforeTheRequeue) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url());
  for (const char* n : {"a", "b"}) {
    std::ofstream((base_ / n / "specs" / "pretrain.toml").string(), std::ios::app)
        << "[node_fault]\ndrain = true\nstorm_incarnations = 0\n";
  }
  set_restarts(2);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  seed_history(etcd_client);
  register_launchers(etcd_client, 2, 2);
  std::string resolution = run_to_close(etcd.endpoint(), 2);
  EXPECT_NE(resolution.find("requeued Slurm job 77 (Restarts 2 -> 3); next incarnation 3"),
            std::string::npos)
      << resolution;
  std::string drains = slurm_->drains();
  EXPECT_NE(drains.find("NodeName=b State=DRAIN"), std::string::npos) << drains;
  EXPECT_EQ(drains.find("NodeName=a"), std::string::npos) << drains;
  // The drain is one of the incident's actions, kept with it in etcd once it closed.
  auto kept = etcd_client.range("/stepwatch/v1/jobs/pretrain/incidents/", {true});
  ASSERT_TRUE(kept.ok());
  std::string closed;
  for (const auto& kv : kept->kvs) closed += kv.value;
  EXPECT_NE(closed.find("drained Slurm node b (stepwatch pretrain: culprit in"), std::string::npos)
      << closed;
  // a ran every short incarnation too: named, but correlation is not blame.
  EXPECT_NE(closed.find("Slurm node a not drained: its only evidence is the short-run correlation"),
            std::string::npos)
      << closed;
}

// A launcher key names a batch job that is no Slurm job id ("--state=RUNNING" would have scancel
// act on every running job of the cluster, as root): its record is refused where it is read, and
// no scontrol or scancel runs at all.
TEST_F(AgentCoordSlurmTest, AForgedJobIdInTheLauncherKeysRunsNothing) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url());
  set_restarts(0);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  register_launchers(etcd_client, 0, 0, "--state=RUNNING");
  std::string resolution = run_to_close(etcd.endpoint());
  EXPECT_NE(resolution.find("not requeued: no launcher of incarnation 0 carries a Slurm job id"),
            std::string::npos)
      << resolution;
  EXPECT_EQ(slurm_->calls(), "") << "nothing ran";
}

// A Slurm job id of the right form may still be another user's job: the leader (root) reads its
// UserId, and requeues nothing that is not the job directory's owner's.
TEST_F(AgentCoordSlurmTest, AnotherUsersBatchJobIsNotRequeued) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url());
  set_restarts(0);
  slurm_->set_user_id(::getuid() + 1000);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  register_launchers(etcd_client, 0);
  int after_show = 0;  // polls since the leader asked scontrol: room for a requeue to follow
  std::string resolution = run_to_close(etcd.endpoint(), 0, [&] {
    return slurm_->calls().find("show job 77") != std::string::npos && ++after_show > 20;
  });
  EXPECT_EQ(resolution.find("requeued"), std::string::npos) << resolution;
  EXPECT_EQ(requeues(), "");
  EXPECT_EQ(slurm_->calls(), "scontrol -o -- show job 77\n") << "only read";
}

TEST_F(AgentCoordSlurmTest, LaunchersOutsideSlurmAreNotRequeued) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url());
  set_restarts(0);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  register_launchers(etcd_client, std::nullopt);
  std::string resolution = run_to_close(etcd.endpoint());
  EXPECT_NE(resolution.find("not requeued: no launcher of incarnation 0 carries a Slurm job id "
                            "(a, b run outside Slurm)"),
            std::string::npos)
      << resolution;
  EXPECT_EQ(requeues(), "");
}

}  // namespace
}  // namespace stepwatch::agent
