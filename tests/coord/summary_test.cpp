// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/coord/summary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "src/detect/detector.h"
#include "src/detect/spec_adapter.h"
#include "tests/detect/sim.h"

namespace stepwatch::coord {
namespace {

using detect::testing::kSec;
using detect::testing::SimJob;

constexpr const char* kKey = "etcd key /stepwatch/v1/jobs/j/nodes/b";
constexpr int64_t kWall = 1'700'000'000 * kSec;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

detect::Config configured(int64_t interval) {
  detect::Config c = detect::default_config();
  c.expected_interval_ns = interval;
  c.init_budget_ns = 60 * kSec;
  c.warmup_steps = 0;
  return c;
}

// One node's look at its ranks of a job, as its Observer makes it: beacons written on this host,
// stamped with its own clocks. The simulated job holds every rank; the node keeps its own.
struct Node {
  Node(std::string n, int world, Stamp start, std::set<int> ranks)
      : name(std::move(n)), job(world, start), mine(std::move(ranks)) {
    for (int r = 0; r < world; ++r) job.rank(r).host = name;
  }
  detect::Observation observe() const {
    detect::Observation o = job.observe();
    o.local_host = name;
    std::erase_if(o.ranks, [&](const contract::RankSnapshot& r) { return !mine.count(r.rank); });
    return o;
  }
  NodeSummary summary(uint64_t seq) const { return {name, seq, 0, observe(), std::nullopt, false}; }

  std::string name;
  SimJob job;
  std::set<int> mine;
};

const contract::RankSnapshot* rank_of(const detect::Observation& o, int rank) {
  for (const auto& r : o.ranks)
    if (r.rank == rank) return &r;
  return nullptr;
}

TEST(Summary, JsonRoundTripsTheObservation) {
  Node b("b", 2, {kWall, 90'000 * kSec}, {1});
  b.job.advance(kSec);
  b.job.step_all(0);
  b.job.set_phase(1, "data");
  b.job.beat(1);
  b.job.rank(1).checkpoint = contract::CheckpointMark{"step_0", 0, b.job.now()};
  b.job.rank(1).loss = std::nan("");
  b.job.rank(1).loss_at = b.job.now();
  NodeSummary s = b.summary(42);
  s.incarnation = 3;
  s.observation.world_size = 2;
  detect::ProcessFacts p;
  p.rank = 1;
  p.wchan = "pipe_read";
  p.cpu_delta_ns = 7;
  s.observation.procs.push_back(p);
  detect::GpuFacts g;
  g.rank = 1;
  g.sm_util_pct = 99;
  s.observation.gpus.push_back(g);

  std::string text = summary_to_json(s);
  EXPECT_TRUE(has(text, R"("v":1)")) << text;
  EXPECT_TRUE(has(text, R"("obs":{)")) << "the observation is embedded as an object: " << text;
  auto back = summary_from_json(text, kKey);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->node, "b");
  EXPECT_EQ(back->poll_seq, 42u);
  EXPECT_EQ(back->incarnation, 3);
  const detect::Observation& o = back->observation;
  EXPECT_EQ(o.now.mono_ns, s.observation.now.mono_ns);
  EXPECT_EQ(o.local_host, "b");
  EXPECT_EQ(o.world_size, 2);
  ASSERT_EQ(o.ranks.size(), 1u);
  const contract::RankSnapshot& r = o.ranks[0];
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.phase, "data");
  ASSERT_TRUE(r.beat_at.has_value());
  EXPECT_EQ(r.beat_at->mono_ns, b.job.now().mono_ns);
  ASSERT_TRUE(r.checkpoint.has_value());
  EXPECT_EQ(r.checkpoint->id, "step_0");
  ASSERT_TRUE(r.loss.has_value());
  EXPECT_TRUE(std::isnan(*r.loss));
  ASSERT_EQ(r.recent.size(), 1u);
  ASSERT_EQ(o.procs.size(), 1u);
  EXPECT_EQ(o.procs[0].wchan, "pipe_read");
  ASSERT_EQ(o.gpus.size(), 1u);
  EXPECT_EQ(*o.gpus[0].sm_util_pct, 99);
  EXPECT_EQ(summary_to_json(*back), text) << "a second trip changes nothing";
  EXPECT_FALSE(back->steady_ns.has_value()) << "not written, not read";
  EXPECT_FALSE(back->reads_steady);

  s.steady_ns = 7 * kSec;
  s.reads_steady = true;
  text = summary_to_json(s);
  back = summary_from_json(text, kKey);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->steady_ns, 7 * kSec);
  EXPECT_TRUE(back->reads_steady);
  EXPECT_EQ(summary_to_json(*back), text);
}

TEST(Summary, BadInputsNameTheSourceAndTheField) {
  const std::string obs = R"("obs":{"type":"obs","now":[1,2],"ranks":[]})";
  struct Case {
    std::string text;
    const char* want;
    Errc code = Errc::kParse;
  } cases[] = {
      {"garbage", "not a JSON object"},
      {"[1]", "not a JSON object"},
      {R"({"node":"b","poll_seq":1,"incarnation":0,)" + obs + "}", "field \"v\" is missing"},
      {R"({"v":"1","node":"b","poll_seq":1,"incarnation":0,)" + obs + "}",
       "field \"v\" must be an integer"},
      {R"({"v":2,"node":"b","poll_seq":1,"incarnation":0,)" + obs + "}",
       "summary version 2, this stepwatch reads version 1", Errc::kUnknownVersion},
      {R"({"v":1,"poll_seq":1,"incarnation":0,)" + obs + "}", "field \"node\" is missing"},
      {R"({"v":1,"node":"","poll_seq":1,"incarnation":0,)" + obs + "}",
       "field \"node\" must be a node name", Errc::kInvalidField},
      {R"({"v":1,"node":5,"poll_seq":1,"incarnation":0,)" + obs + "}",
       "field \"node\" must be a node name", Errc::kInvalidField},
      {R"({"v":1,"node":"b","poll_seq":-1,"incarnation":0,)" + obs + "}",
       "field \"poll_seq\" must be a count", Errc::kInvalidField},
      {R"({"v":1,"node":"b","poll_seq":1,)" + obs + "}", "field \"incarnation\" is missing"},
      {R"({"v":1,"node":"b","poll_seq":1,"incarnation":0})", "field \"obs\" is missing"},
      {R"({"v":1,"node":"b","poll_seq":1,"incarnation":0,"obs":"x"})",
       "field \"obs\" must be an object"},
      {R"({"v":1,"node":"b","poll_seq":1,"incarnation":0,"obs":{"type":"obs","now":[1,2]}})",
       "field \"obs\": field \"ranks\" is missing"},
      {R"({"v":1,"node":"b","poll_seq":1,"incarnation":0,)"
       R"("obs":{"type":"obs","now":[1,2],"ranks":[{"rank":0}]}})",
       "field \"obs\": field \"job\" is missing"},
      {R"({"v":1,"node":"b","poll_seq":1,"incarnation":0,"obs":{"type":"header","version":1}})",
       "field \"obs\" must be an observation"},
      {R"({"v":1,"node":"b","poll_seq":1,"incarnation":0,"steady_ns":0,)" + obs + "}",
       "field \"steady_ns\" must be more than 0", Errc::kInvalidField},
      {R"({"v":1,"node":"b","poll_seq":1,"incarnation":0,"steady_ns":-5,)" + obs + "}",
       "field \"steady_ns\" must be more than 0", Errc::kInvalidField},
      {R"({"v":1,"node":"b","poll_seq":1,"incarnation":0,"steady_ns":3600000000001,)" + obs + "}",
       "at most 3600000000000 (an hour), got 3600000000001", Errc::kInvalidField},
      {R"({"v":1,"node":"b","poll_seq":1,"incarnation":0,"steady_ns":"5s",)" + obs + "}",
       "field \"steady_ns\" must be an integer"},
      {R"({"v":1,"node":"b","poll_seq":1,"incarnation":0,"reads_steady":1,)" + obs + "}",
       "field \"reads_steady\" must be"},
  };
  for (const auto& c : cases) {
    auto r = summary_from_json(c.text, kKey);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.error().message.rfind(std::string(kKey) + ": ", 0), 0u) << r.error().message;
    EXPECT_TRUE(has(r.error().message, c.want)) << c.text << " -> " << r.error().message;
    EXPECT_EQ(r.error().code, c.code) << c.text << " -> " << r.error().message;
  }
  EXPECT_EQ(summary_from_json(R"({"v":1})", kKey).error().message,
            std::string(kKey) + ": field \"node\" is missing");
}

// E5, E11: a summary is bounded in size, depth and ranks before anything reads it.
TEST(Summary, ValuesPastTheBoundsAreRefused) {
  const std::string head = R"({"v":1,"node":"b","poll_seq":1,"incarnation":0,"obs":)";
  auto deep = summary_from_json(head + R"({"type":"obs","deep":)" + std::string(600000, '[') +
                                    std::string(600000, ']') + "}}",
                                kKey);
  ASSERT_FALSE(deep.ok());
  EXPECT_TRUE(has(deep.error().message, "more than the 262144 a summary may hold"))
      << deep.error().message;
  auto nested = summary_from_json(
      head + R"({"type":"obs","deep":)" + std::string(1000, '[') + std::string(1000, ']') + "}}",
      kKey);
  ASSERT_FALSE(nested.ok());
  EXPECT_TRUE(has(nested.error().message, "nested deeper than 32 levels"))
      << nested.error().message;
  NodeSummary big{"b", 1, 0, {}, std::nullopt, false};
  for (int i = 0; i < 300; ++i) {
    contract::RankSnapshot r;
    r.job = "j";
    r.rank = i;
    r.world_size = 300;
    big.observation.ranks.push_back(r);
  }
  auto many = summary_from_json(summary_to_json(big), kKey);
  ASSERT_FALSE(many.ok());
  EXPECT_TRUE(has(many.error().message, "300 ranks, more than the 256 a node may hold"))
      << many.error().message;
}

// The leader is node a (its clock: the one its SimJob runs on); node b's monotonic clock started
// elsewhere and its wall clock is an hour behind, so only a rebase by age can time its ranks.
struct TwoNodes {
  Node a{"a", 2, {kWall, 5'000 * kSec}, {0}};
  Node b{"b", 2, {kWall - 3600 * kSec, 90'000 * kSec}, {1}};
  void advance(int64_t ns) {
    a.job.advance(ns);
    b.job.advance(ns);
  }
  Stamp now() const { return a.job.now(); }
};

TEST(Merge, ARemoteRanksAgeIsItsAgeWhenPublishedPlusSinceReceived) {
  TwoNodes n;
  n.advance(kSec);
  n.a.job.step_all(0);
  n.b.job.step_all(0);
  n.b.job.sample(1, 7, contract::WaitKind::kCollective, "all_reduce (c10d.py:1)");
  n.advance(3 * kSec);  // b's step (and its sampler's move) is 3 s old when it publishes
  Received rb{n.b.summary(1), n.now().mono_ns, std::nullopt};
  n.a.job.step(0, 1);
  n.advance(2 * kSec);  // received 2 s ago
  detect::ProcessFacts pa, pb;
  pa.rank = 0;
  pb.rank = 1;
  detect::Observation local = n.a.observe();
  local.procs.push_back(pa);
  rb.summary.observation.procs.push_back(pb);
  rb.summary.observation.world_size = 2;

  Merged m = merge(local, "a", {&rb}, n.now());
  EXPECT_TRUE(m.problems.empty());
  const detect::Observation& o = m.observation;
  EXPECT_TRUE(o.one_clock);
  EXPECT_EQ(o.local_host, "a");
  EXPECT_EQ(o.world_size, 2);
  ASSERT_EQ(o.ranks.size(), 2u);
  EXPECT_EQ(o.ranks[0].host, "a");
  EXPECT_EQ(o.ranks[1].host, "b");
  EXPECT_EQ(o.ranks[1].step_at.mono_ns, n.now().mono_ns - 5 * kSec);
  EXPECT_EQ(o.ranks[1].step_at.wall_ns, rb.summary.observation.ranks[0].step_at.wall_ns)
      << "wall stamps are kept as the node wrote them";
  ASSERT_EQ(o.procs.size(), 2u);
  EXPECT_EQ(o.procs[1].rank, 1);
  // The sampler's stamps move onto the leader's clock like every other monotonic stamp.
  ASSERT_TRUE(o.ranks[1].sample.has_value());
  EXPECT_EQ(o.ranks[1].sample->moved_at.mono_ns, n.now().mono_ns - 5 * kSec);
  EXPECT_EQ(o.ranks[1].sample->at.mono_ns, n.now().mono_ns - 5 * kSec);
  EXPECT_EQ(o.ranks[1].sample->wait, contract::WaitKind::kCollective);

  detect::Detector d(configured(10 * kSec));
  detect::Verdict v = d.observe(o);
  ASSERT_EQ(v.ranks.size(), 2u);
  EXPECT_EQ(v.ranks[0].step_age_ns, 2 * kSec);
  EXPECT_EQ(v.ranks[1].step_age_ns, 5 * kSec) << "not 3 s (as published), not an hour (by wall)";
  EXPECT_EQ(v.state, detect::State::kHealthy) << v.summary;
}

// A summary carries the step ring of its node's lowest rank alone (the bytes a leader reads), and
// the leader still learns the job's interval: from the lowest rank of the job, here another
// node's, whose ring came through the summary.
TEST(Merge, TheLeaderLearnsTheIntervalFromTheRingOfTheNodeHoldingRankZero) {
  Node a{"a", 4, {kWall, 5'000 * kSec}, {2, 3}};
  Node b{"b", 4, {kWall, 5'000 * kSec}, {1, 0}};
  detect::Config config = configured(0);
  config.expected_interval_ns.reset();
  detect::Detector d(config);
  detect::Verdict v;
  for (int step = 0; step < 40; ++step) {
    a.job.advance(3 * kSec);
    b.job.advance(3 * kSec);
    a.job.step_all(step);
    b.job.step_all(step);
    NodeSummary published = b.summary(static_cast<uint64_t>(step) + 1);
    keep_lowest_ring(published.observation);
    const std::string text = summary_to_json(published);
    auto read = summary_from_json(text, kKey);
    ASSERT_TRUE(read.ok()) << read.error().message;
    ASSERT_EQ(read->observation.ranks.size(), 2u);
    ASSERT_NE(rank_of(read->observation, 0), nullptr);
    ASSERT_NE(rank_of(read->observation, 1), nullptr);
    EXPECT_FALSE(rank_of(read->observation, 0)->recent.empty()) << "the node's lowest rank";
    EXPECT_TRUE(rank_of(read->observation, 1)->recent.empty()) << text;
    Received rb{*std::move(read), a.job.now().mono_ns, std::nullopt};
    v = d.observe(merge(a.observe(), "a", {&rb}, a.job.now()).observation);
  }
  EXPECT_NE(v.interval_source, detect::IntervalSource::kSpec);
  EXPECT_EQ(v.expected_interval_ns, 3 * kSec) << v.summary;
  EXPECT_EQ(v.state, detect::State::kHealthy) << v.summary;
}

// A steady node vouches for its ranks: while its promise runs, the leader takes its look as
// current (ages as published); once the promise ran out with nothing new, they age from receipt
// as any summary's, so a node that went quiet is not vouched for past its window.
TEST(Merge, ASteadyNodesLookStandsForNowUntilItsPromiseRunsOut) {
  TwoNodes n;
  n.advance(kSec);
  n.a.job.step_all(0);
  n.b.job.step_all(0);
  n.b.job.sample(1, 7, contract::WaitKind::kNone, "forward (model.py:3)");
  n.advance(kSec);  // b's step is 1 s old when it publishes
  Received rb{n.b.summary(1), n.now().mono_ns, std::nullopt};
  rb.summary.steady_ns = 7 * kSec;
  Received plain = rb;
  plain.summary.steady_ns.reset();
  auto age_of_b = [&](const Received& r) {
    Merged m = merge(n.a.observe(), "a", {&r}, n.now());
    const contract::RankSnapshot* b = rank_of(m.observation, 1);
    EXPECT_NE(b, nullptr);
    return b ? n.now().mono_ns - b->step_at.mono_ns : -1;
  };
  n.advance(4 * kSec);
  EXPECT_EQ(age_of_b(rb), kSec) << "within the promise: as published";
  {
    // A phase's start is no progress: it ages as in any summary, steady or not (a job-wide
    // phase mark moved on would restart every other rank's clock).
    Merged m = merge(n.a.observe(), "a", {&rb}, n.now());
    const contract::RankSnapshot* b = rank_of(m.observation, 1);
    ASSERT_NE(b, nullptr);
    Merged p = merge(n.a.observe(), "a", {&plain}, n.now());
    EXPECT_EQ(b->phase_since.mono_ns, rank_of(p.observation, 1)->phase_since.mono_ns);
    EXPECT_EQ(b->created.mono_ns, rank_of(p.observation, 1)->created.mono_ns);
    // Nor is the evidence inside a step (the early rule reads it): a rank that went quiet on a
    // steady node still ages at the leader.
    EXPECT_GT(b->updated_mono_ns, 0);
    EXPECT_EQ(b->updated_mono_ns, rank_of(p.observation, 1)->updated_mono_ns);
    ASSERT_TRUE(b->sample && rank_of(p.observation, 1)->sample);
    EXPECT_EQ(b->sample->moved_at.mono_ns, rank_of(p.observation, 1)->sample->moved_at.mono_ns);
  }
  EXPECT_EQ(age_of_b(plain), 5 * kSec) << "not steady: published plus since received";
  Received gone = rb;
  gone.lapsed_mono_ns = n.now().mono_ns - kSec;
  EXPECT_EQ(age_of_b(gone), 5 * kSec) << "a lapsed node vouches for nothing";
  n.advance(3 * kSec);  // 7 s since received: the last instant of the promise
  EXPECT_EQ(age_of_b(rb), kSec);
  n.advance(1);
  EXPECT_EQ(age_of_b(rb), 8 * kSec + 1) << "past the promise: from receipt, nothing vouched";
}

TEST(Merge, ALapsedNodesRanksAreRankSilentNamedByHost) {
  TwoNodes n;
  n.advance(kSec);
  n.a.job.step_all(0);
  n.b.job.step_all(0);
  Received rb{n.b.summary(1), n.now().mono_ns, std::nullopt};
  n.advance(kSec);
  rb.lapsed_mono_ns = n.now().mono_ns;  // its key is gone
  n.advance(3 * kSec);
  n.a.job.step(0, 1);
  n.advance(kSec);

  Merged m = merge(n.a.observe(), "a", {&rb}, n.now());
  EXPECT_EQ(m.observation.lapsed_hosts, (std::map<std::string, int64_t>{{"b", 4 * kSec}}));
  detect::Detector d(configured(10 * kSec));
  detect::Verdict v = d.observe(m.observation);
  EXPECT_EQ(v.state, detect::State::kStalled) << v.summary;
  EXPECT_EQ(v.cause, detect::Cause::kRankSilent) << v.summary;
  ASSERT_EQ(v.culprits.size(), 1u) << v.summary;
  EXPECT_EQ(v.culprits[0].rank, 1);
  EXPECT_EQ(v.culprits[0].host, "b");
  EXPECT_TRUE(has(v.culprits[0].reason, "node b stopped reporting at least 4.0s ago")) << v.summary;
  EXPECT_EQ(v.ranks[0].state, detect::State::kHealthy) << v.ranks[0].note;
}

TEST(Merge, ARankListedTwiceIsKeptFromTheSummaryReceivedLast) {
  Node a("a", 2, {kWall, 5'000 * kSec}, {0, 1});
  Node b("b", 2, {kWall, 90'000 * kSec}, {1});
  Node c("c", 2, {kWall, 70'000 * kSec}, {1});
  for (Node* n : {&a, &b, &c}) {
    n->job.advance(kSec);
    n->job.step_all(0);
  }
  auto with_proc = [](NodeSummary s, const char* wchan) {
    detect::ProcessFacts p;
    p.rank = 1;
    p.wchan = wchan;
    s.observation.procs.push_back(p);
    return s;
  };
  Received rb{with_proc(b.summary(1), "from_b"), a.job.now().mono_ns - 2 * kSec, std::nullopt};
  Received rc{with_proc(c.summary(1), "from_c"), a.job.now().mono_ns - kSec, std::nullopt};
  Received self{a.summary(1), a.job.now().mono_ns - 3 * kSec, std::nullopt};

  // b and c both list rank 1; c's summary came in later. The leader's own key read back is
  // not another node, and null entries are skipped.
  a.mine = {0};
  Merged m = merge(a.observe(), "a", {&rb, nullptr, &rc, &self}, a.job.now());
  ASSERT_EQ(m.observation.ranks.size(), 2u);
  EXPECT_EQ(m.observation.ranks[1].host, "c");
  ASSERT_EQ(m.problems.size(), 1u);
  EXPECT_TRUE(has(m.problems[0], "rank 1 is listed by nodes b and c: kept c's")) << m.problems[0];
  ASSERT_EQ(m.observation.procs.size(), 1u) << "the dropped record's process facts go with it";
  EXPECT_EQ(m.observation.procs[0].wchan, "from_c");

  // The local look counts as received now: it wins over any remote.
  a.mine = {0, 1};
  m = merge(a.observe(), "a", {&rb}, a.job.now());
  EXPECT_EQ(m.observation.ranks[1].host, "a");
  ASSERT_EQ(m.problems.size(), 1u);
  EXPECT_TRUE(has(m.problems[0],
                  "rank 1 is listed by nodes a and b: kept a's (received last), ignored b's"))
      << m.problems[0];
  EXPECT_TRUE(m.observation.procs.empty());
}

TEST(Merge, RecordsTheNodeCouldNotTimeKeepOnlyTheirWallTime) {
  TwoNodes n;
  n.advance(kSec);
  n.b.job.step_all(0);
  n.b.job.step_all(1);
  n.advance(7 * kSec);
  // Rank 1 as node b read it from a shared JSONL file written on host c; rank 0 from a record
  // that names no host (b's own, by the rule).
  NodeSummary s = n.b.summary(1);
  s.observation.ranks = n.b.job.observe().ranks;
  contract::RankSnapshot& foreign = s.observation.ranks[1];
  foreign.source = contract::Source::kJsonl;
  foreign.host = "c";
  s.observation.ranks[0].host.clear();
  Received rb{s, n.now().mono_ns, std::nullopt};

  Merged m = merge(detect::Observation{}, "a", {&rb}, n.now());
  const contract::RankSnapshot* r1 = rank_of(m.observation, 1);
  const contract::RankSnapshot* r0 = rank_of(m.observation, 0);
  ASSERT_TRUE(r0 && r1);
  EXPECT_EQ(r1->host, "b");
  EXPECT_EQ(r1->step_at.mono_ns, 0);
  EXPECT_EQ(r1->created.mono_ns, 0);
  EXPECT_EQ(r1->phase_since.mono_ns, 0);
  EXPECT_EQ(r1->updated_mono_ns, 0);
  EXPECT_TRUE(r1->recent.empty());
  EXPECT_EQ(r1->step_at.wall_ns, foreign.step_at.wall_ns);
  EXPECT_EQ(r0->host, "b");
  EXPECT_EQ(r0->step_at.mono_ns, n.now().mono_ns - 7 * kSec);

  // By wall, b's clock an hour behind ours: rank 1 reads an hour old; rank 0 by its age.
  detect::Detector d(configured(10 * kSec));
  detect::Verdict v = d.observe(m.observation);
  EXPECT_EQ(v.ranks[0].step_age_ns, 7 * kSec);
  EXPECT_EQ(v.ranks[1].step_age_ns, 3607 * kSec);
}

TEST(Merge, AStampOlderThanTheLeadersBootFallsBackToWall) {
  Node b("b", 1, {kWall, 90'000 * kSec}, {0});
  for (int i = 0; i < 4; ++i) {
    b.job.advance(10 * kSec);
    b.job.step(0, i);
  }
  b.job.advance(5 * kSec);
  Stamp now{b.job.now().wall_ns, 20 * kSec};  // the leader booted 20 s ago
  Received rb{b.summary(1), now.mono_ns, std::nullopt};
  Merged m = merge(detect::Observation{}, "a", {&rb}, now);
  const contract::RankSnapshot& r = m.observation.ranks.at(0);
  EXPECT_EQ(r.step_at.mono_ns, 15 * kSec);
  EXPECT_EQ(r.created.mono_ns, 0) << "45 s old: before the leader's clock began";
  // The ring keeps only the steps its clock can hold, newest last.
  ASSERT_EQ(r.recent.size(), 2u);
  EXPECT_EQ(r.recent[0].step, 2);
  EXPECT_EQ(r.recent[1].mono_ns, 15 * kSec);
}

// The whole path: both agents observe, b publishes through JSON each poll, the leader (a) merges
// and runs one detector. b's rank 1 hangs in its data loader; a's rank 0 waits in train.
TEST(Merge, ACollectiveHangAcrossNodesNamesTheRankAndItsHost) {
  TwoNodes n;
  detect::Config cfg = configured(2 * kSec);
  cfg.phases["data"] = {30 * kSec, false};
  detect::Detector d(cfg);
  auto poll = [&](uint64_t seq) {
    auto wire = summary_from_json(summary_to_json(n.b.summary(seq)), kKey);
    EXPECT_TRUE(wire.ok()) << wire.error().message;
    Received rb{*wire, n.now().mono_ns, std::nullopt};
    detect::ProcessFacts waiting, loading;
    waiting.rank = 0;
    waiting.wchan = "futex_wait_queue";
    loading.rank = 1;
    loading.wchan = "pipe_read";
    detect::Observation local = n.a.observe();
    local.procs.push_back(waiting);
    rb.summary.observation.procs.push_back(loading);
    n.advance(kSec / 4);  // the leader merges a moment after it received b's summary
    Merged m = merge(local, "a", {&rb}, n.now());
    EXPECT_TRUE(m.problems.empty());
    return d.observe(m.observation);
  };
  uint64_t seq = 0;
  for (int step = 0; step < 10; ++step) {
    n.advance(2 * kSec - kSec / 4);
    n.a.job.step_all(step);
    n.b.job.step_all(step);
    detect::Verdict v = poll(++seq);
    ASSERT_EQ(v.state, detect::State::kHealthy) << v.summary;
  }
  n.b.job.set_phase(1, "data");
  detect::Verdict v;
  int waited = 0;  // polls in which a's rank 0 was seen waiting on b's rank 1
  for (int i = 0; i < 40 && v.state != detect::State::kStalled; ++i) {
    n.advance(kSec - kSec / 4);
    v = poll(++seq);
    if (v.state == detect::State::kSuspect) {
      EXPECT_TRUE(has(v.ranks[0].note, "waiting on rank 1")) << v.ranks[0].note;
      ++waited;
    }
  }
  EXPECT_GT(waited, 20) << "inside the data budget the hang is only suspected";
  ASSERT_EQ(v.state, detect::State::kStalled) << v.summary;
  EXPECT_EQ(v.cause, detect::Cause::kCollective) << v.summary;
  ASSERT_EQ(v.culprits.size(), 1u) << v.summary;
  EXPECT_EQ(v.culprits[0].rank, 1);
  EXPECT_EQ(v.culprits[0].host, "b");
  EXPECT_TRUE(has(v.culprits[0].reason, "phase data")) << v.culprits[0].reason;
  EXPECT_TRUE(has(v.summary, "culprit rank 1 on b (phase data")) << v.summary;
  EXPECT_GT(v.ranks[1].phase_age_ns, 30 * kSec);
  EXPECT_LT(v.ranks[1].phase_age_ns, 32 * kSec) << "found within a poll of the budget";
}

}  // namespace
}  // namespace stepwatch::coord
