// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The job leader alone (src/agent/job_leader.h): two nodes of one 2-rank job, each a JobLeader
// over its own NodeSession, sharing one in-memory store (tests/fakes/memory_kv.h, held to
// etcd's behaviour by tests/coord/kv_test.cpp) on one hand-moved clock, each with a scripted
// JobNode in place of the agent. No agent, no beacon, no detector, no etcd: the verdicts are
// given. A real page receiver counts the pages. It covers who leads (the first to publish), the
// merge of both nodes' ranks, the job's one incident in etcd under the leader's fence, the preempt
// order every node carries out and reports on, and a failover whose new leader adopts the
// incident without a second page.
#include "src/agent/job_leader.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "src/coord/etcd_ledger.h"
#include "src/runbook/page_message.h"
#include "tests/fakes/memory_kv.h"
#include "tests/support/page_receiver.h"

namespace stepwatch::agent {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr int64_t kTtl = 2 * kNsPerSec;
const char* const kPrefix = "/stepwatch";

// This node as the leader sees it: its verdicts are given, its processes scripted.
class ScriptedNode final : public JobNode {
 public:
  explicit ScriptedNode(std::string name) : name_(std::move(name)) {}
  runbook::PageMessage job_page(const detect::Verdict& v) override {
    runbook::PageMessage m = runbook::page_for_verdict("pretrain", "team-llm", v);
    m.host = name_;
    return m;
  }
  // Ranks this node's preempt ended are no new stall (as the agent's preempted_by_us says).
  bool may_open(const detect::Verdict&, Stamp) override { return acted_for.empty(); }
  void log(LogLevel, const std::string& line) override { lines.push_back(line); }
  std::optional<std::string> may_carry_out() const override { return refuse; }
  runbook::PreemptTargets targets() override {
    runbook::PreemptTargets t;
    t.processes.push_back({{pid, 7}, "rank on " + name_});
    return t;
  }
  std::future<runbook::ActReport> act(const detect::Verdict&, int64_t incident_id,
                                      runbook::PreemptTargets targets) override {
    acted_for.push_back(incident_id);
    collected.push_back(targets.collect);
    runbook::ActReport r;
    for (const auto& p : targets.processes) {
      runbook::ProcessOutcome o;
      o.process = p;
      o.before = probe::Liveness::kAlive;
      o.after = probe::Liveness::kGone;  // gone on SIGTERM
      o.term_sent = true;
      r.preempt.processes.push_back(o);
    }
    r.preempt.ok = true;
    std::promise<runbook::ActReport> done;
    done.set_value(r);
    return done.get_future();
  }
  void carried_out(const store::Action& a) override { carried.push_back(a); }
  void recorded(int64_t id, bool created) override { (created ? opened : adopted).push_back(id); }
  void counted(std::string_view) override {}
  void ended(std::string_view reason, const detect::Verdict& v, Stamp) override {
    ends.push_back(fmt::format("{} {}", reason, detect::state_name(v.state)));
  }
  void problem(const std::string& line) override { problems.push_back(line); }
  // The node's store of deliveries etcd did not take.
  void keep_delivery(const store::KeptDelivery& d) override { kept.push_back(d); }
  void forget_delivery(int64_t id) override {
    std::erase_if(kept, [&](const store::KeptDelivery& k) { return k.incident_id == id; });
  }
  std::vector<store::KeptDelivery> kept_deliveries() override { return kept; }

  int pid = 0;
  std::vector<store::KeptDelivery> kept;
  std::optional<std::string> refuse;  // may_carry_out's answer
  std::vector<std::string> lines, problems, ends;
  std::vector<int64_t> acted_for, opened, adopted;
  std::vector<bool> collected;  // each act: whether it was to collect an artifact
  std::vector<store::Action> carried;

 private:
  std::string name_;
};

class JobLeaderTest : public ::testing::Test {
 protected:
  struct Node {
    Node(coord::Kv& kv, const std::string& name, const spec::JobSpec& spec,
         coord::ReadAhead* read_ahead = nullptr)
        : name(name),
          session(kv, coord::SessionOptions{kPrefix, name, kTtl}),
          history(kv, kPrefix, "", [] { return int64_t{0}; }),
          node(name),
          leader(JobLeaderDeps{"pretrain",
                               spec,
                               kv,
                               session,
                               kNsPerSec,
                               history,
                               kPrefix,
                               {},
                               node,
                               std::nullopt,
                               read_ahead ? 4 * kNsPerSec : 0,
                               read_ahead}) {}
    std::string name;
    coord::NodeSession session;
    coord::EtcdHistory history;
    ScriptedNode node;
    JobLeader leader;
    detect::Observation seen;  // what it judged at its last turn (the merge, where it leads)
  };

  JobLeaderTest() : clock_(SystemClock::instance().now()), kv_(clock_) {
    auto s = spec::parse_spec(fmt::format("owner = \"team-llm\"\nexpected_interval = \"1s\"\n"
                                          "[runbook]\nack_timeout = \"1s\"\n"
                                          "preempt_grace = \"2s\"\n"
                                          "[auto_preempt]\nenabled = true\nmisses = 1\n"
                                          "[[runbook.pager]]\nurl = \"{}\"\nretries = 0\n"
                                          "timeout = \"2s\"\n",
                                          rx_.url()),
                              "pretrain.toml");
    EXPECT_TRUE(s.ok()) << s.error().message;
    if (s) spec_ = *s;
    a_ = std::make_unique<Node>(kv_, "a", spec_);
    b_ = std::make_unique<Node>(kv_, "b", spec_);
    a_->node.pid = 1000;
    b_->node.pid = 2000;
  }

  // One rank of this node, `steps` committed, and the checkpoint it committed last (none: -1).
  static detect::Observation look(const std::string& host, int rank, uint64_t steps,
                                  int64_t checkpoint = -1) {
    detect::Observation obs;
    obs.local_host = host;
    contract::RankSnapshot r;
    r.job = "pretrain";
    r.host = host;
    r.rank = rank;
    r.world_size = 2;
    r.pid = 1000 * (rank + 1);
    r.pid_start_ticks = 7;
    r.step = static_cast<int64_t>(steps);
    r.step_count = steps;
    if (checkpoint >= 0)
      r.checkpoint = contract::CheckpointMark{fmt::format("step_{}", checkpoint), checkpoint, {}};
    obs.ranks.push_back(r);
    return obs;
  }
  static detect::Verdict verdict(detect::State state) {
    detect::Verdict v;
    v.state = state;
    v.summary = detect::state_name(state);
    if (state == detect::State::kStalled) v.cause = detect::Cause::kCollective;
    return v;
  }
  // One poll of a node: its lease, its look published (merged where it leads), then the turn
  // of the runbook on verdict `v`.
  watch::ClusterState turn(Node& n, int rank, uint64_t steps, detect::State state,
                           int64_t checkpoint = -1) {
    Stamp now = clock_.now();
    n.session.tick(now);
    n.seen = look(n.name, rank, steps, checkpoint);
    watch::ClusterState c = n.leader.amend(n.seen, ++polls_, now);
    n.leader.step(verdict(state), n.seen, 0, now);
    return c;
  }
  // Half a second later, a poll of a, then of b.
  void round(detect::State a, detect::State b) {
    advance(0.5);
    turn(*a_, 0, 5, a);
    turn(*b_, 1, 5, b);
  }
  void advance(double s) { clock_.advance(static_cast<int64_t>(s * 1e9)); }
  std::optional<store::Incident> incident() {
    coord::LedgerKeys k = coord::ledger_keys(a_->session, "pretrain");
    auto all = coord::incidents_in_etcd(kv_, k, "pretrain", 10);
    EXPECT_TRUE(all.ok()) << all.error().message;
    if (!all || all->empty()) return std::nullopt;
    return all->front();
  }

  // Node `node`'s `stepwatch run --coord` in etcd, under a lease of the test's: `record` its
  // launcher key's value.
  void launcher(const std::string& node, const std::string& record) {
    if (!launcher_lease_) {
      auto lease = kv_.grant(3600);
      ASSERT_TRUE(lease.ok());
      launcher_lease_ = lease->id;
    }
    ASSERT_TRUE(
        kv_.put(std::string(kPrefix) + "/jobs/pretrain/launchers/" + node, record, launcher_lease_)
            .ok());
  }
  // Both nodes healthy, then stalled: a pages, orders the preempt, both carry it out.
  void stall_until_preempted() {
    turn(*a_, 0, 5, detect::State::kHealthy);
    turn(*b_, 1, 5, detect::State::kHealthy);
    round(detect::State::kStalled, detect::State::kStalled);
    ASSERT_TRUE(rx_.wait_for(1));
    for (int i = 0; i < 12; ++i) round(detect::State::kStalled, detect::State::kStalled);
    ASSERT_EQ(b_->node.acted_for.size(), 1u);
    // The page's delivery is recorded at a turn of a's once its sender returned (a loaded
    // machine may take a while): a page claimed and never recorded as delivered is sent again
    // by a next leader, by design.
    for (int i = 0; i < 500; ++i) {
      if (auto open = incident(); open && open->delivered_at_ns) return;
      std::this_thread::sleep_for(10ms);
      turn(*a_, 0, 5, detect::State::kStalled);
    }
    FAIL() << "the page's delivery was never recorded";
  }
  // Both healthy, then a (leading, paging only) pages the stall of its rank and records the
  // delivery at a next turn once its sender returned (a loaded machine may take a while): a
  // page claimed and never recorded as delivered is sent again by design.
  void paged_by_a() {
    a_->node.refuse = b_->node.refuse = std::string();
    turn(*a_, 0, 5, detect::State::kHealthy);
    turn(*b_, 1, 5, detect::State::kHealthy);
    advance(0.5);
    turn(*a_, 0, 5, detect::State::kStalled);
    ASSERT_TRUE(rx_.wait_for(1));
    for (int i = 0; i < 200; ++i) {
      turn(*a_, 0, 5, detect::State::kStalled);
      if (auto i = incident(); i && i->delivered_at_ns) return;
      std::this_thread::sleep_for(10ms);
    }
    FAIL() << "the page's delivery was never recorded";
  }
  // Both healthy, then a stalled (b too, turning after it, when `b_follows`) until a orders the
  // preempt: whether it did within a dozen rounds.
  bool a_orders(bool b_follows) {
    turn(*a_, 0, 5, detect::State::kHealthy);
    turn(*b_, 1, 5, detect::State::kHealthy);
    for (int i = 0; i < 12; ++i) {
      advance(0.5);
      turn(*a_, 0, 5, detect::State::kStalled);
      const bool ordered = a_->leader.preempting();
      if (b_follows) turn(*b_, 1, 5, detect::State::kStalled);
      if (ordered) return true;
    }
    return false;
  }
  // The job's incarnation record in etcd.
  coord::IncarnationRecord incarnation() {
    auto r = coord::read_incarnation(kv_, coord::incarnation_key(kPrefix, "pretrain"));
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r ? r->record : coord::IncarnationRecord{};
  }

  test::Receiver rx_;
  ManualClock clock_;
  test::MemoryKv kv_;
  spec::JobSpec spec_ = spec::default_spec();
  std::unique_ptr<Node> a_, b_;
  uint64_t polls_ = 0;
  int64_t launcher_lease_ = 0;
};

TEST_F(JobLeaderTest, TheFirstToPublishLeadsAndMergesEveryNodesRanks) {
  watch::ClusterState ca = turn(*a_, 0, 5, detect::State::kHealthy);
  watch::ClusterState cb = turn(*b_, 1, 5, detect::State::kHealthy);
  EXPECT_TRUE(ca.leads);
  EXPECT_EQ(ca.leader, "a");
  EXPECT_FALSE(cb.leads);
  EXPECT_EQ(cb.leader, "a");
  EXPECT_TRUE(a_->leader.leads());
  EXPECT_FALSE(b_->leader.leads());
  EXPECT_EQ(b_->leader.history_writer(), nullptr) << "only the leader records the history";
  EXPECT_NE(a_->leader.history_writer(), nullptr);

  advance(0.1);
  ca = turn(*a_, 0, 6, detect::State::kHealthy);
  ASSERT_EQ(a_->seen.ranks.size(), 2u) << "the leader judges both nodes' ranks";
  EXPECT_EQ(a_->seen.ranks[0].host, "a");
  EXPECT_EQ(a_->seen.ranks[1].host, "b");
  EXPECT_EQ(ca.nodes.size(), 2u);
  cb = turn(*b_, 1, 6, detect::State::kHealthy);
  EXPECT_EQ(b_->seen.ranks.size(), 1u) << "a follower judges nothing but its own";
  EXPECT_TRUE(a_->node.problems.empty()) << a_->node.problems.front();
}

// The leader records the newest checkpoint every rank committed, for a restart it does not order
// (issue 30): not while a rank has none or an older one, never back, and never a follower.
TEST_F(JobLeaderTest, TheLeaderRecordsTheNewestCheckpointEveryRankCommitted) {
  auto recorded = [&]() -> std::optional<coord::CheckpointRecord> {
    auto r = kv_.range(coord::checkpoint_key(kPrefix, "pretrain"), {});
    EXPECT_TRUE(r.ok());
    if (!r || r->kvs.empty()) return std::nullopt;
    auto c = coord::checkpoint_from_json(r->kvs[0].value, "checkpoint");
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c ? std::optional<coord::CheckpointRecord>(*c) : std::nullopt;
  };
  turn(*a_, 0, 5, detect::State::kHealthy, 20);
  turn(*b_, 1, 5, detect::State::kHealthy);
  advance(0.5);
  turn(*a_, 0, 25, detect::State::kHealthy, 20);
  EXPECT_FALSE(recorded()) << "rank 1 has committed none (and a alone, at first, saw no rank 1)";
  turn(*b_, 1, 25, detect::State::kHealthy, 20);
  advance(0.5);
  turn(*a_, 0, 30, detect::State::kHealthy, 20);
  auto twenty = recorded();
  ASSERT_TRUE(twenty);
  EXPECT_EQ(twenty->id, "step_20");
  EXPECT_EQ(twenty->step, 20);
  EXPECT_EQ(twenty->by, "a");
  EXPECT_EQ(twenty->incarnation, 0);
  EXPECT_EQ(twenty->at_ns, clock_.now().wall_ns);
  turn(*b_, 1, 40, detect::State::kHealthy, 20);
  advance(0.5);
  turn(*a_, 0, 41, detect::State::kHealthy, 40);
  EXPECT_EQ(recorded()->step, 20) << "rank 1 has not committed step_40 yet";
  turn(*b_, 1, 41, detect::State::kHealthy, 40);
  EXPECT_EQ(recorded()->step, 20) << "a follower writes nothing";
  advance(0.5);
  turn(*a_, 0, 42, detect::State::kHealthy, 40);
  EXPECT_EQ(recorded()->id, "step_40");
  // A rank resumed from an older one (its beacon says so) moves nothing back.
  turn(*b_, 1, 11, detect::State::kHealthy, 10);
  advance(0.5);
  turn(*a_, 0, 43, detect::State::kHealthy, 40);
  EXPECT_EQ(recorded()->id, "step_40");
}

// A following node's reads of a poll (its leader's key, the leader's view, the job's orders)
// go to etcd as one request, as the agent wires it (its etcd is the read ahead).
TEST_F(JobLeaderTest, AFollowersPollIsOneRequestToEtcd) {
  coord::ReadAhead ahead(kv_);
  Node c(ahead, "c", spec_, &ahead);
  c.node.pid = 3000;
  for (int i = 0; i < 4; ++i) {
    round(detect::State::kHealthy, detect::State::kHealthy);
    turn(c, 1, 5, detect::State::kHealthy);
  }
  ASSERT_EQ(c.leader.leader(), "a");
  // A poll as the agent makes it: the look (published, the leader read), the leader's view
  // shown, then the runbook's turn (the orders read).
  auto poll = [&] {
    Stamp now = clock_.now();
    c.session.tick(now);
    c.seen = look("c", 1, 5);
    c.leader.amend(c.seen, ++polls_, now);
    watch::JobState state;
    c.leader.share_view(state, now);
    c.leader.step(verdict(detect::State::kHealthy), c.seen, 0, now);
  };
  advance(0.5);
  poll();  // whatever is due (a keepalive, a put) goes now
  const int64_t calls = kv_.calls();
  const uint64_t answered = ahead.answered();
  poll();  // nothing due, nothing new to publish
  EXPECT_EQ(kv_.calls() - calls, 1) << "one txn of its three reads";
  EXPECT_EQ(ahead.answered() - answered, 3u);
  EXPECT_EQ(c.leader.leader(), "a");
}

TEST_F(JobLeaderTest, TheLeaderOpensTheJobsOneIncidentAndAFollowerOpensNone) {
  turn(*a_, 0, 5, detect::State::kHealthy);
  turn(*b_, 1, 5, detect::State::kHealthy);
  b_->node.refuse = std::string();  // b may not preempt: the test stops at the page
  a_->node.refuse = std::string();
  advance(0.5);
  turn(*a_, 0, 5, detect::State::kStalled);
  turn(*b_, 1, 5, detect::State::kStalled);
  ASSERT_TRUE(rx_.wait_for(1));
  ASSERT_EQ(a_->node.opened.size(), 1u);
  EXPECT_TRUE(b_->node.opened.empty());
  EXPECT_TRUE(b_->node.adopted.empty());
  auto open = incident();
  ASSERT_TRUE(open);
  EXPECT_EQ(open->id, a_->node.opened.front());
  EXPECT_TRUE(open->is_open());
  json page = json::parse(rx_.body(0));
  EXPECT_EQ(page["host"], "a");
  EXPECT_EQ(page["incident_id"], std::to_string(open->id));

  // The incident's writes are fenced by the leader's node key: a ledger whose fence is not the
  // leader's writes nothing, and the incident stays as the leader left it.
  coord::EtcdLedger stale(kv_, "pretrain", coord::ledger_keys(b_->session, "pretrain"),
                          [] { return int64_t{12345}; });
  EXPECT_FALSE(stale.close(open->id, clock_.now().wall_ns, "forged").ok());
  open = incident();
  ASSERT_TRUE(open);
  EXPECT_TRUE(open->is_open());

  // It recovers: the leader closes it. Nobody paged twice.
  advance(0.5);
  turn(*a_, 0, 6, detect::State::kHealthy);
  turn(*b_, 1, 6, detect::State::kHealthy);
  open = incident();
  ASSERT_TRUE(open);
  EXPECT_FALSE(open->is_open());
  EXPECT_EQ(open->resolution, "recovered");
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(rx_.count(), 1u);
}

TEST_F(JobLeaderTest, EveryNodeCarriesOutThePreemptOrderOnceAndTheLeaderGathersTheReports) {
  using detect::State;
  turn(*a_, 0, 5, State::kHealthy);
  turn(*b_, 1, 5, State::kHealthy);
  round(State::kStalled, State::kStalled);  // a opens and pages
  ASSERT_TRUE(rx_.wait_for(1));
  // Past ack_timeout with no ack, the leader orders the preempt; every node (the leader too)
  // carries it out on its own processes and reports; the leader gathers both reports.
  bool ordered = false;
  for (int i = 0; i < 12 && (!ordered || a_->leader.preempting()); ++i) {
    round(State::kStalled, State::kStalled);
    ordered = ordered || a_->leader.preempting();
  }
  ASSERT_TRUE(ordered);
  EXPECT_FALSE(a_->leader.preempting());
  ASSERT_EQ(a_->node.acted_for.size(), 1u);
  ASSERT_EQ(b_->node.acted_for.size(), 1u);
  EXPECT_EQ(b_->node.acted_for[0], a_->node.opened.at(0));
  EXPECT_EQ(b_->leader.ended_by_orders().count(2000), 1u);
  EXPECT_EQ(b_->leader.preempted_incarnation(), 0);
  ASSERT_EQ(b_->node.carried.size(), 1u);
  EXPECT_EQ(b_->node.carried[0].kind, store::action_kind::kPreempt);
  EXPECT_NE(b_->node.carried[0].detail.find("ordered by a"), std::string::npos)
      << b_->node.carried[0].detail;
  // The incarnation ended as preempted on the verdict acted on; nothing relaunches it here (no
  // launcher): the incident closes, saying so.
  ASSERT_EQ(a_->node.ends.size(), 1u);
  EXPECT_EQ(a_->node.ends[0], "preempted stalled");
  EXPECT_TRUE(b_->node.ends.empty()) << "only the leader records the job's history";
  auto closed = incident();
  ASSERT_TRUE(closed);
  EXPECT_FALSE(closed->is_open());
  EXPECT_NE(closed->resolution.find("preempted on 2 node(s) (a, b)"), std::string::npos)
      << closed->resolution;
  EXPECT_NE(closed->resolution.find("nothing relaunches it"), std::string::npos)
      << closed->resolution;
  // The order is carried out once: more turns act no more (the ended ranks open nothing new).
  for (int i = 0; i < 4; ++i) round(State::kStalled, State::kStalled);
  EXPECT_EQ(a_->node.acted_for.size(), 1u);
  EXPECT_EQ(b_->node.acted_for.size(), 1u);
  EXPECT_EQ(rx_.count(), 1u);
}

// The next incarnation moves only once every node of the job has its launcher under a lease: a
// node without one would be missing from it. The leader waits, pages once after
// kDefaultRestartWaitNs that the job cannot restart whole (naming the node), and moves on once the
// launcher is back. A launcher key put without a lease is nobody's.
TEST_F(JobLeaderTest, TheIncarnationMovesOnlyOnceEveryNodeHasALiveLauncher) {
  using detect::State;
  coord::Kv& kv = kv_;
  const std::string launchers = std::string(kPrefix) + "/jobs/pretrain/launchers/";
  auto lease = kv.grant(3600);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(kv.put(launchers + "a", "{}", lease->id).ok());
  ASSERT_TRUE(kv.put(launchers + "b", "{}").ok());  // no lease: not a live launcher
  turn(*a_, 0, 5, State::kHealthy);
  turn(*b_, 1, 5, State::kHealthy);
  round(State::kStalled, State::kStalled);  // a opens and pages
  ASSERT_TRUE(rx_.wait_for(1));
  for (int i = 0; i < 12; ++i) round(State::kStalled, State::kStalled);  // ordered, carried out
  ASSERT_EQ(a_->node.acted_for.size(), 1u);
  ASSERT_EQ(b_->node.acted_for.size(), 1u);
  auto incarnation = [&] {
    auto r = coord::read_incarnation(kv_, coord::incarnation_key(kPrefix, "pretrain"));
    EXPECT_TRUE(r.ok());
    return r ? r->record.incarnation : -1;
  };
  EXPECT_EQ(incarnation(), 0) << "b has no live launcher";
  auto open = incident();
  ASSERT_TRUE(open);
  EXPECT_TRUE(open->is_open());
  // Two minutes on: paged once that it cannot restart whole, naming b.
  const int64_t waiting_from = clock_.now().mono_ns;
  while (rx_.count() < 2 && clock_.now().mono_ns - waiting_from < kDefaultRestartWaitNs + kNsPerSec)
    round(State::kStalled, State::kStalled);
  ASSERT_TRUE(rx_.wait_for(2));
  EXPECT_GE(clock_.now().mono_ns - waiting_from, kDefaultRestartWaitNs - 10 * kNsPerSec)
      << "not before the wait ran out";
  auto page = rx_.body(rx_.count() - 1);
  EXPECT_NE(page.find("cannot restart whole"), std::string::npos) << page;
  EXPECT_NE(page.find("node(s) b"), std::string::npos) << page;
  EXPECT_NE(page.find("restart-blocked"), std::string::npos) << page;
  for (int i = 0; i < 3; ++i) round(State::kStalled, State::kStalled);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(rx_.count(), 2u) << "paged once";
  EXPECT_EQ(incarnation(), 0);
  // b's launcher comes back under its lease: the next incarnation moves, the incident closes.
  ASSERT_TRUE(kv.put(launchers + "b", "{}", lease->id).ok());
  round(State::kStalled, State::kStalled);
  EXPECT_EQ(incarnation(), 1);
  open = incident();
  ASSERT_TRUE(open);
  EXPECT_FALSE(open->is_open());
  EXPECT_NE(open->resolution.find("relaunched as incarnation 1"), std::string::npos)
      << open->resolution;
}

// Launchers that start at the barrier: the incarnation moves with "barrier", and the incident stays
// open until every node of the run is ready for it (its old processes gone, its cleanup passed).
// The job's verdict names the nodes it waits for; past restart_wait the leader pages once that
// the job cannot restart whole; once the last node is ready it writes the start key and the
// incident closes.
TEST_F(JobLeaderTest, TheNextIncarnationStartsAtOneBarrierOnceEveryNodeIsReady) {
  using detect::State;
  coord::Kv& kv = kv_;
  launcher("a", R"({"barrier":true})");
  launcher("b", R"({"barrier":true})");
  stall_until_preempted();
  coord::IncarnationRecord at = incarnation();
  EXPECT_EQ(at.incarnation, 1) << "every node has its launcher: it moves";
  EXPECT_TRUE(at.barrier);
  EXPECT_EQ(at.nodes, (std::vector<std::string>{"a", "b"})) << "the run's nodes";
  auto start = [&] { return kv.range(coord::start_key(kPrefix, "pretrain")); };
  ASSERT_TRUE(start().ok());
  EXPECT_TRUE(start()->kvs.empty()) << "no node is ready yet";
  auto open = incident();
  ASSERT_TRUE(open);
  EXPECT_TRUE(open->is_open()) << "open until the barrier is released";
  auto restart_evidence = [&] {
    watch::JobState state;
    state.verdict = verdict(State::kStalled);
    a_->leader.share_view(state, clock_.now());
    for (const auto& e : state.verdict.evidence)
      if (e.name == "restart") return e.value;
    return std::string();
  };
  EXPECT_NE(restart_evidence().find("incarnation 1 waits for node(s) a (cleaning up"),
            std::string::npos)
      << restart_evidence();

  // a is ready; b is still cleaning up: named in the verdict, and paged once past restart_wait.
  launcher("a", R"({"barrier":true,"ready":1})");
  const int64_t waiting_from = clock_.now().mono_ns;
  round(State::kStalled, State::kStalled);
  EXPECT_EQ(restart_evidence().find("a (cleaning up"), std::string::npos) << restart_evidence();
  EXPECT_NE(restart_evidence().find("waits for node(s) b (cleaning up"), std::string::npos)
      << restart_evidence();
  EXPECT_TRUE(start()->kvs.empty());
  while (rx_.count() < 2 && clock_.now().mono_ns - waiting_from < kDefaultRestartWaitNs + kNsPerSec)
    round(State::kStalled, State::kStalled);
  ASSERT_TRUE(rx_.wait_for(2));
  EXPECT_GE(clock_.now().mono_ns - waiting_from, kDefaultRestartWaitNs - 10 * kNsPerSec);
  auto page = json::parse(rx_.body(1));
  EXPECT_EQ(page["state"], "restart-blocked") << page.dump();
  EXPECT_NE(page["summary"].get<std::string>().find(
                "cannot restart whole: incarnation 1 waits for node(s) b (cleaning up"),
            std::string::npos)
      << page.dump();
  EXPECT_TRUE(start()->kvs.empty());

  // b is ready: the start key names incarnation 1 and both nodes; the incident closes.
  launcher("b", R"({"barrier":true,"ready":1})");
  round(State::kStalled, State::kStalled);
  ASSERT_EQ(start()->kvs.size(), 1u);
  auto released = coord::start_from_json(start()->kvs[0].value, "start");
  ASSERT_TRUE(released.ok()) << released.error().message;
  EXPECT_EQ(released->incarnation, 1);
  EXPECT_EQ(released->by, "a");
  EXPECT_EQ(released->nodes, (std::vector<std::string>{"a", "b"}));
  open = incident();
  ASSERT_TRUE(open);
  EXPECT_FALSE(open->is_open());
  EXPECT_NE(open->resolution.find("relaunched as incarnation 1; every node started it together"),
            std::string::npos)
      << open->resolution;
  EXPECT_TRUE(restart_evidence().empty());
  for (int i = 0; i < 3; ++i) round(State::kStalled, State::kStalled);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(rx_.count(), 2u) << "the stall's page and the one restart-blocked page";
}

// A leader lost while the next incarnation waits for a node's launcher: the next leader gathers
// the reports of the order again and waits in its turn, moving the incarnation once the launcher
// is there. Nobody pages twice.
TEST_F(JobLeaderTest, ANextLeaderTakesUpTheWaitForAMissingLauncher) {
  using detect::State;
  launcher("a", R"({"barrier":true})");
  stall_until_preempted();
  ASSERT_EQ(incarnation().incarnation, 0) << "b has no launcher";

  // a stops; past its lease b leads. b's launcher comes: b moves the incarnation.
  for (int i = 0; i < 5; ++i) {
    advance(1.0);
    turn(*b_, 1, 5, State::kStalled);
  }
  ASSERT_TRUE(b_->leader.leads());
  EXPECT_EQ(incarnation().incarnation, 0);
  launcher("b", R"({"barrier":true})");
  for (int i = 0; i < 3 && incarnation().incarnation == 0; ++i) {
    advance(0.5);
    turn(*b_, 1, 5, State::kStalled);
  }
  EXPECT_EQ(incarnation().incarnation, 1) << "the next leader moved it once b's launcher was there";
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(rx_.count(), 1u) << "no second page";
}

// A leader lost while its barrier waits: the next leader takes the barrier up, releases it once
// every node is ready and closes the incident, without a page of its own.
TEST_F(JobLeaderTest, ANextLeaderReleasesABarrierItsPredecessorSet) {
  using detect::State;
  coord::Kv& kv = kv_;
  for (const char* n : {"a", "b"}) launcher(n, R"({"barrier":true})");
  stall_until_preempted();
  ASSERT_EQ(incarnation().incarnation, 1);
  ASSERT_TRUE(incarnation().barrier);

  // a stops; both launchers get ready meanwhile. Past a's lease, b leads and releases it.
  for (const char* n : {"a", "b"}) launcher(n, R"({"barrier":true,"ready":1})");
  for (int i = 0; i < 5; ++i) {
    advance(1.0);
    turn(*b_, 1, 5, State::kStalled);
  }
  EXPECT_TRUE(b_->leader.leads());
  auto start = kv.range(coord::start_key(kPrefix, "pretrain"));
  ASSERT_TRUE(start.ok());
  ASSERT_EQ(start->kvs.size(), 1u) << "the next leader released the barrier";
  auto released = coord::start_from_json(start->kvs[0].value, "start");
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released->incarnation, 1);
  EXPECT_EQ(released->by, "b");
  auto open = incident();
  ASSERT_TRUE(open);
  EXPECT_FALSE(open->is_open());
  EXPECT_NE(open->resolution.find("every node started it together"), std::string::npos)
      << open->resolution;
  bool took_up = false;
  for (const auto& l : b_->node.lines)
    took_up = took_up || l.find("taking up the start barrier of incarnation 1 that a set") !=
                             std::string::npos;
  EXPECT_TRUE(took_up);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(rx_.count(), 1u) << "no second page";
}

// Under Kubernetes a stop is an exit status too: with runbook.resume = false the leader moves the
// incarnation with exit code 75 (the pod failure policy stops the JobSet on it), so that every
// pod's launcher exits with it, not with its job's status (which the JobSet would restart).
TEST_F(JobLeaderTest, UnderKubernetesAStopIsWrittenAsTheExitStatusOfEveryLauncher) {
  using detect::State;
  auto parsed = spec::parse_spec(fmt::format("owner = \"team-llm\"\nexpected_interval = \"1s\"\n"
                                             "[runbook]\nack_timeout = \"1s\"\n"
                                             "preempt_grace = \"2s\"\nresume = false\n"
                                             "resume_owner = \"kubernetes\"\n"
                                             "[[runbook.pager]]\nurl = \"{}\"\nretries = 0\n"
                                             "timeout = \"2s\"\n",
                                             rx_.url()),
                                 "pretrain.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  spec::JobSpec k8s = *parsed;
  Node p(kv_, "p", k8s), q(kv_, "q", k8s);
  p.node.pid = 1000;
  q.node.pid = 2000;
  for (const char* n : {"p", "q"}) launcher(n, R"({"barrier":true})");
  turn(p, 0, 5, State::kHealthy);
  turn(q, 1, 5, State::kHealthy);
  for (int i = 0; i < 14; ++i) {
    advance(0.5);
    turn(p, 0, 5, State::kStalled);
    turn(q, 1, 5, State::kStalled);
  }
  ASSERT_TRUE(rx_.wait_for(1));
  ASSERT_EQ(q.node.acted_for.size(), 1u) << "preempted on every node";
  auto at = coord::read_incarnation(kv_, coord::incarnation_key(kPrefix, "pretrain"));
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->record.incarnation, 1);
  EXPECT_EQ(at->record.scheduler, "kubernetes");
  EXPECT_EQ(at->record.exit_code, spec::kExitStopped);
  EXPECT_FALSE(at->record.barrier);
  auto closed = incident();
  ASSERT_TRUE(closed);
  EXPECT_FALSE(closed->is_open());
  EXPECT_NE(closed->resolution.find("runbook.resume = false"), std::string::npos)
      << closed->resolution;
  EXPECT_NE(closed->resolution.find("its launchers exit with 75 so that Kubernetes does not "
                                    "restart it"),
            std::string::npos)
      << closed->resolution;
}

// E1: anyone who can write under the prefix could put an order. A node carries one out only when
// the job's leader of now signed it with its fence and it names the job's open incident in etcd;
// a forged one is said once and neither carried out nor reported. `collect = false` holds.
TEST_F(JobLeaderTest, OnlyTheLeadersOrderForTheOpenIncidentIsCarriedOut) {
  using detect::State;
  turn(*a_, 0, 5, State::kHealthy);
  turn(*b_, 1, 5, State::kHealthy);
  coord::Kv& kv = kv_;
  const std::string orders = std::string(kPrefix) + "/jobs/pretrain/orders/";
  auto fence = kv.range(std::string(kPrefix) + "/jobs/pretrain/nodes/a");
  ASSERT_TRUE(fence.ok() && fence->kvs.size() == 1u);
  const int64_t a_fence = fence->kvs[0].create_revision;
  // The review's order (no incident, no fence), one copying the leader's name and fence for an
  // incident that is not open, and one that does not parse.
  ASSERT_TRUE(
      kv.put(orders + "00000000000000000999",
             R"({"incident":999,"incarnation":0,"collect":false,"by":"attacker","at_ns":0})")
          .ok());
  ASSERT_TRUE(
      kv.put(orders + "00000000000000000998",
             fmt::format(R"({{"incident":998,"incarnation":0,"by":"a","fence":{}}})", a_fence))
          .ok());
  ASSERT_TRUE(kv.put(orders + "00000000000000000001", "x").ok());
  for (int i = 0; i < 4; ++i) round(State::kHealthy, State::kHealthy);
  EXPECT_TRUE(a_->node.acted_for.empty());
  EXPECT_TRUE(b_->node.acted_for.empty()) << "a healthy job is preempted by no forged order";
  auto done = kv.range(std::string(kPrefix) + "/jobs/pretrain/done/", {true});
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->kvs.empty()) << "nor reported on";
  int said_999 = 0, said_998 = 0;
  for (const auto& p : b_->node.problems) {
    said_999 += p.find(
                    "order 999 not carried out: it is not signed by the job's leader of now "
                    "(a, fence") != std::string::npos;
    said_998 += p.find("order 998 not carried out: the job has no open incident in etcd") !=
                std::string::npos;
  }
  EXPECT_EQ(said_999, 1) << "said once, not every poll";
  EXPECT_EQ(said_998, 1);
  EXPECT_TRUE(b_->session.connected()) << "a bad order is no failure of the session";
  EXPECT_EQ(b_->session.bad().total(), 1u) << "the unparseable one, said once";

  // The real stall: the leader's order (collect = false, say) is carried out on every node.
  round(State::kStalled, State::kStalled);
  ASSERT_TRUE(rx_.wait_for(1));
  ASSERT_TRUE(incident());
  const int64_t id = incident()->id;
  for (int i = 0; i < 12 && b_->node.acted_for.empty(); ++i) {
    advance(0.5);
    turn(*a_, 0, 5, State::kStalled);
    if (auto o = kv.range(orders + fmt::format("{:020d}", id)); o && !o->kvs.empty()) {
      auto j = json::parse(o->kvs[0].value);
      if (j.value("collect", true)) {
        j["collect"] = false;  // as a leader told not to collect would write it
        ASSERT_TRUE(kv.put(o->kvs[0].key, j.dump()).ok());
      }
    }
    turn(*b_, 1, 5, State::kStalled);
  }
  ASSERT_EQ(b_->node.acted_for, std::vector<int64_t>{id});
  EXPECT_EQ(b_->node.collected, std::vector<bool>{false}) << "collect = false is honoured";
}

// E2: a leader that holds its lease and never opens an incident (a wedged agent, a forged node
// under a lease) must not mute a stall: past the lease TTL with no incident open in etcd, a
// follower is told to page from its own node; once the job's incident is open, it is not.
TEST_F(JobLeaderTest, AFollowerWhoseLeaderOpensNothingPagesItselfPastTheTtl) {
  using detect::State;
  coord::NodeSession c_session(kv_, coord::SessionOptions{kPrefix, "c", kTtl});
  coord::JobCoord c(c_session, "pretrain", kNsPerSec);
  auto c_polls = [&] {
    c_session.tick(clock_.now());
    coord::NodeSummary s;
    s.node = "c";
    s.observation = look("c", 2, 5);
    s.observation.ranks[0].world_size = 3;
    c.poll(s, coord::PublishCue{1, 1, false}, clock_.now());
  };
  c_polls();  // c leads, and will never judge the job
  turn(*a_, 0, 5, State::kHealthy);
  turn(*b_, 1, 5, State::kHealthy);
  ASSERT_EQ(b_->leader.leader(), "c");
  EXPECT_FALSE(b_->leader.unattended(verdict(State::kHealthy), clock_.now()));
  bool told = false;
  double stalled_for = 0;
  while (!told && stalled_for < 5) {
    advance(0.5);
    stalled_for += 0.5;
    c_polls();
    turn(*b_, 1, 5, State::kStalled);
    told = b_->leader.unattended(verdict(State::kStalled), clock_.now());
  }
  EXPECT_TRUE(told);
  EXPECT_GT(stalled_for, 2.0) << "not before the lease TTL (2 s)";
  EXPECT_LE(stalled_for, 3.0);
  EXPECT_FALSE(a_->leader.unattended(verdict(State::kHealthy), clock_.now()))
      << "a node whose own ranks are fine pages nothing";
  // The job's incident opens in etcd (a real leader): the follower is told no more.
  coord::EtcdLedger ledger(kv_, "pretrain", coord::ledger_keys(c_session, "pretrain"),
                           [&] { return c.fence(); });
  store::NewIncident n;
  n.job = "pretrain";
  n.state = "stalled";
  n.cause = "collective";
  ASSERT_TRUE(ledger.open(n).ok());
  EXPECT_FALSE(b_->leader.unattended(verdict(State::kStalled), clock_.now()));
  // Junk written over it: the leader restores it at its next poll, so the follower gives the
  // junk a lease TTL before it pages its own view; junk left there longer mutes nothing.
  ASSERT_TRUE(kv_.put(std::string(kPrefix) + "/jobs/pretrain/incident", "{\"state\": 7}", 0).ok());
  EXPECT_FALSE(b_->leader.unattended(verdict(State::kStalled), clock_.now()));
  advance(1.5);
  c_polls();
  EXPECT_FALSE(b_->leader.unattended(verdict(State::kStalled), clock_.now()));
  advance(1.0);
  c_polls();
  EXPECT_TRUE(b_->leader.unattended(verdict(State::kStalled), clock_.now()));
}

// etcd paused past the TTL lapses every lease at once, and a leader whose lease replaced an
// expired one judges nothing for a TTL. A follower's own TTL of "the leader opens nothing" starts
// only after that: counted from its first poll back, it ran out at the poll the leader opened
// the job's incident, and the stall was paged a second time from the follower's node
// (e2e_coord_matrix, etcd SIGSTOPped while the ranks stall: 3 runs in 6). Here a's poll began
// 0.4 s before etcd answered it (its poll's stamp), b's after: b publishes first and leads.
TEST_F(JobLeaderTest, AfterEveryLeaseLapsedAFollowerWaitsForTheRejoiningLeader) {
  using detect::State;
  a_->node.refuse = b_->node.refuse = std::string();  // paging only
  turn(*a_, 0, 5, State::kHealthy);
  turn(*b_, 1, 5, State::kHealthy);
  advance(3.0);  // nobody renews: both leases lapse
  turn(*b_, 1, 5, State::kStalled);
  ASSERT_TRUE(b_->leader.leads());
  Stamp began = clock_.now();
  began.mono_ns -= 400 * kNsPerMs;
  a_->session.tick(began);
  a_->seen = look("a", 0, 5);
  a_->leader.amend(a_->seen, ++polls_, began);
  ASSERT_EQ(a_->leader.leader(), "b");
  bool told = a_->leader.unattended(verdict(State::kStalled), began);
  a_->leader.step(verdict(State::kStalled), a_->seen, 0, began);
  for (int i = 0; i < 10 && !told; ++i) {  // 5 s of polls: a, then b
    advance(0.5);
    told = a_->leader.unattended(verdict(State::kStalled), clock_.now());
    turn(*a_, 0, 5, State::kStalled);
    turn(*b_, 1, 5, State::kStalled);
  }
  EXPECT_FALSE(told) << "a paged the stall itself while b waited out its rejoin";
  EXPECT_EQ(b_->node.opened.size(), 1u) << "the leader opened the job's incident";
}

TEST_F(JobLeaderTest, AFollowerThatMayNotPreemptReportsWhyAndTheIncidentStaysOpen) {
  using detect::State;
  b_->node.refuse = std::string("its spec sets auto_preempt.enabled = false");
  turn(*a_, 0, 5, State::kHealthy);
  turn(*b_, 1, 5, State::kHealthy);
  for (int i = 0; i < 8; ++i) round(State::kStalled, State::kStalled);
  EXPECT_EQ(a_->node.acted_for.size(), 1u) << "the leader ordered, and carried it out itself";
  EXPECT_TRUE(b_->node.acted_for.empty());
  EXPECT_TRUE(b_->node.carried.empty());
  bool said = false;
  for (const auto& l : b_->node.lines)
    said =
        said || l.find("refused: its spec sets auto_preempt.enabled = false") != std::string::npos;
  EXPECT_TRUE(said);
  auto open = incident();
  ASSERT_TRUE(open);
  EXPECT_TRUE(open->is_open()) << "b's processes are not known to be gone: " << open->resolution;
  EXPECT_TRUE(a_->node.ends.empty());
  EXPECT_FALSE(a_->leader.preempting());
}

// E16: once the job's page is delivered every node knows it: the leader, and a follower from the
// leader's view (believed only against the job's open incident in etcd). That is what a node's
// own incident joins once etcd is gone; once the job steps again it is forgotten.
TEST_F(JobLeaderTest, EveryNodeKnowsTheJobsDeliveredPageAndAForgedViewIsNotBelieved) {
  ASSERT_NO_FATAL_FAILURE(paged_by_a());
  turn(*a_, 0, 5, detect::State::kStalled);  // a turn once the delivery is recorded
  auto open = incident();
  ASSERT_TRUE(open && open->delivered_at_ns);
  const std::string key = std::to_string(open->id);
  auto at_a = a_->leader.paged_as(0);
  ASSERT_TRUE(at_a);
  EXPECT_EQ(at_a->key, key);
  EXPECT_EQ(at_a->why, fmt::format("incident {} of the job, paged through etcd by node a", key));
  EXPECT_FALSE(a_->leader.paged_as(1)) << "another incarnation's stall is another stall";
  EXPECT_FALSE(b_->leader.paged_as(0)) << "b has not read the leader's view yet";

  watch::JobState leader_state;
  leader_state.verdict = verdict(detect::State::kStalled);
  a_->leader.share_view(leader_state, clock_.now());
  watch::JobState shown;
  b_->leader.share_view(shown, clock_.now());
  auto at_b = b_->leader.paged_as(0);
  ASSERT_TRUE(at_b);
  EXPECT_EQ(at_b->key, key);

  // A view anyone rewrote to name another incident is not believed, and said once.
  const std::string view_key = std::string(kPrefix) + "/jobs/pretrain/view";
  auto r = kv_.range(view_key, {});
  ASSERT_TRUE(r.ok() && !r->kvs.empty());
  json forged = json::parse(r->kvs[0].value);
  forged["paged"] = {{"key", "999"}, {"incident", 999}, {"incarnation", 0}};
  ASSERT_TRUE(kv_.put(view_key, forged.dump(), 0).ok());
  for (int i = 0; i < 2; ++i) {
    watch::JobState again;
    b_->leader.share_view(again, clock_.now());
  }
  EXPECT_EQ(b_->leader.paged_as(0)->key, key);
  EXPECT_EQ(std::count_if(b_->node.lines.begin(), b_->node.lines.end(),
                          [](const std::string& l) {
                            return l.find("says incident 999 was paged") != std::string::npos;
                          }),
            1);

  // The job steps again: what was paged is forgotten, a next stall is a new one.
  advance(0.5);
  turn(*b_, 1, 6, detect::State::kHealthy);
  EXPECT_FALSE(b_->leader.paged_as(0));
  turn(*a_, 0, 6, detect::State::kHealthy);
  EXPECT_FALSE(a_->leader.paged_as(0));
}

TEST_F(JobLeaderTest, WhenTheLeadersLeaseLapsesTheNextAdoptsItsIncidentWithoutASecondPage) {
  ASSERT_NO_FATAL_FAILURE(paged_by_a());
  auto open = incident();
  ASSERT_TRUE(open);
  ASSERT_TRUE(open->delivered_at_ns);

  // a stops: within its lease it still leads; past it, b leads and adopts the open incident.
  advance(1.0);
  EXPECT_FALSE(turn(*b_, 1, 5, detect::State::kStalled).leads);
  for (int i = 0; i < 3; ++i) {
    advance(1.0);
    turn(*b_, 1, 5, detect::State::kStalled);
  }
  EXPECT_TRUE(b_->leader.leads());
  EXPECT_TRUE(b_->node.opened.empty());
  ASSERT_EQ(b_->node.adopted.size(), 1u);
  EXPECT_EQ(b_->node.adopted[0], open->id);
  EXPECT_NE(b_->leader.history_writer(), nullptr);

  // a comes back behind b: it no longer leads and lets go of the incident; nobody paged again.
  advance(0.5);
  EXPECT_FALSE(turn(*a_, 0, 5, detect::State::kStalled).leads);
  EXPECT_FALSE(a_->leader.leads());
  EXPECT_EQ(a_->leader.history_writer(), nullptr);
  bool let_go = false;
  for (const auto& l : a_->node.lines)
    let_go = let_go || l.find("no longer leads") != std::string::npos;
  EXPECT_TRUE(let_go);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rx_.count(), 1u);
  open = incident();
  ASSERT_TRUE(open);
  EXPECT_TRUE(open->is_open());
}

// The leader stops right after it ordered the preempt, before carrying it out itself: b carries
// out its part, then leads, adopts the incident and takes the order up (signed again by b, since a
// node carries out only the order of the leader of now) instead of waiting the incident out
// afresh. Meanwhile b's verdict is the others "finishing" (its own ranks ended by the order): the
// incident does not read it as a recovery. Once a is back, it carries out b's order; b gathers
// both reports and closes the incident, paged once.
TEST_F(JobLeaderTest, ALeaderStoppedAfterItsOrderIsFollowedByOneThatTakesTheOrderUp) {
  using detect::State;
  ASSERT_TRUE(a_orders(true));
  ASSERT_TRUE(rx_.wait_for(1));
  ASSERT_EQ(b_->node.acted_for.size(), 1u) << "b carried out a's order";
  EXPECT_TRUE(a_->node.acted_for.empty());
  const int64_t id = b_->node.acted_for[0];
  // a stops (past its lease): b leads, adopts the incident and takes a's order up.
  for (int i = 0; i < 4; ++i) {
    advance(1.0);
    turn(*b_, 1, 5, State::kHealthy);
  }
  ASSERT_TRUE(b_->leader.leads());
  EXPECT_EQ(b_->node.adopted, std::vector<int64_t>{id});
  EXPECT_TRUE(b_->leader.preempting()) << "waiting on a's report";
  bool taken_up = false;
  for (const auto& l : b_->node.lines)
    taken_up = taken_up ||
               l.find(fmt::format("incident {}: the preempt that \"a\" ordered is taken up", id)) !=
                   std::string::npos;
  EXPECT_TRUE(taken_up);
  auto open = incident();
  ASSERT_TRUE(open);
  EXPECT_TRUE(open->is_open()) << "the ranks b's order ended are no recovery";
  EXPECT_EQ(b_->node.acted_for.size(), 1u) << "b does not carry it out twice";
  // a is back behind b: it carries out the order b signed; b gathers both reports.
  for (int i = 0; i < 4 && b_->leader.preempting(); ++i) {
    advance(0.5);
    turn(*a_, 0, 5, State::kStalled);
    turn(*b_, 1, 5, State::kHealthy);
  }
  EXPECT_EQ(a_->node.acted_for, std::vector<int64_t>{id});
  EXPECT_FALSE(b_->leader.preempting());
  auto closed = incident();
  ASSERT_TRUE(closed);
  EXPECT_FALSE(closed->is_open());
  EXPECT_NE(closed->resolution.find("preempted on 2 node(s) (a, b)"), std::string::npos)
      << closed->resolution;
  EXPECT_EQ(rx_.count(), 1u);
}

// A node that leads anew takes up no order for a job it sees running whose ranks no order ended
// here: an order in etcd is input, never by itself a reason to end a job.
TEST_F(JobLeaderTest, ANewLeaderTakesUpNoOrderForAJobItSeesRunning) {
  using detect::State;
  ASSERT_TRUE(a_orders(false));
  b_->node.refuse = std::string("not in preempt_jobs");  // b carries out nothing
  turn(*b_, 1, 5, State::kHealthy);
  b_->node.refuse.reset();
  for (int i = 0; i < 4; ++i) {
    advance(1.0);
    turn(*b_, 1, 6 + i, State::kHealthy);
  }
  ASSERT_TRUE(b_->leader.leads());
  EXPECT_FALSE(b_->leader.preempting());
  auto closed = incident();
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->resolution, "recovered");
}

// E14 across an agent restart: a's page is delivered while etcd is down, so its outcome is kept
// in a's store; a's agent restarts (its memory gone) and records it at its first turn, leading or
// not; nobody sends the page again, the next leader included.
TEST_F(JobLeaderTest, ADeliveryKeptInTheNodesStoreIsRecordedAfterTheAgentRestarts) {
  using detect::State;
  a_->node.refuse = b_->node.refuse = std::string();  // paging only
  turn(*a_, 0, 5, State::kHealthy);
  turn(*b_, 1, 5, State::kHealthy);
  rx_.delay_ms = 300;
  advance(0.5);
  turn(*a_, 0, 5, State::kStalled);  // opened, claimed, the page under way
  kv_.set_down(true);
  ASSERT_TRUE(rx_.wait_for(1));
  std::this_thread::sleep_for(200ms);  // its sender returns
  turn(*a_, 0, 5, State::kStalled);    // reaped: etcd does not take the outcome
  ASSERT_EQ(a_->node.kept.size(), 1u);
  EXPECT_TRUE(a_->node.kept[0].delivered);
  const int64_t id = a_->node.kept[0].incident_id;

  std::vector<store::KeptDelivery> kept = a_->node.kept;  // a's store outlives its agent
  a_ = std::make_unique<Node>(kv_, "a", spec_);
  a_->node.pid = 1000;
  a_->node.refuse = std::string();
  a_->node.kept = kept;
  // Before etcd answers: what this node paged is known, for its own incident to join (E16).
  auto joined = a_->leader.paged_as(0);
  ASSERT_TRUE(joined);
  EXPECT_EQ(joined->key, std::to_string(id));
  EXPECT_NE(joined->why.find("paged from this node before its agent restarted"), std::string::npos)
      << joined->why;
  kv_.set_down(false);
  advance(0.5);
  turn(*a_, 0, 5, State::kStalled);
  auto open = incident();
  ASSERT_TRUE(open);
  EXPECT_EQ(open->id, id);
  EXPECT_TRUE(open->delivered_at_ns.has_value()) << "recorded by the restarted agent";
  EXPECT_TRUE(a_->node.kept.empty()) << "and forgotten in its store";
  bool said = false;
  for (const auto& l : a_->node.lines)
    said = said || l.find("before the agent restarted") != std::string::npos;
  EXPECT_TRUE(said);
  for (int i = 0; i < 8; ++i) {
    advance(1.0);
    turn(*b_, 1, 5, State::kStalled);
    turn(*a_, 0, 5, State::kStalled);
  }
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rx_.count(), 1u) << "paged once, whoever leads";
}

TEST_F(JobLeaderTest, WhileTheStoreIsDownNoNodeLeadsAndTheIncidentWaitsInIt) {
  a_->node.refuse = b_->node.refuse = std::string();
  turn(*a_, 0, 5, detect::State::kHealthy);
  turn(*b_, 1, 5, detect::State::kHealthy);
  kv_.set_down(true);
  advance(0.5);
  turn(*a_, 0, 5, detect::State::kStalled);
  EXPECT_FALSE(a_->leader.connected());
  EXPECT_EQ(a_->leader.history_writer(), nullptr);
  EXPECT_TRUE(a_->node.opened.empty()) << "no incident in etcd without etcd";
  kv_.set_down(false);
  advance(0.5);
  turn(*a_, 0, 5, detect::State::kStalled);
  EXPECT_TRUE(a_->leader.connected());
  EXPECT_EQ(a_->node.opened.size(), 1u);
}

}  // namespace
}  // namespace stepwatch::agent
