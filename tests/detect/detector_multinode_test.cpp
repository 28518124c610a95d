// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The detector on a job leader's merged observation (src/coord/summary.h): remote ranks timed on
// one clock, nodes that stopped reporting, and culprits named by host only when hosts differ.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "src/detect/detector.h"
#include "src/detect/spec_adapter.h"
#include "src/trace/codec.h"
#include "tests/detect/sim.h"

namespace stepwatch::detect {
namespace {

using testing::kSec;
using testing::SimJob;

Config configured(int64_t interval) {
  Config c = default_config();
  c.expected_interval_ns = interval;
  c.init_budget_ns = 60 * kSec;
  c.warmup_steps = 0;
  return c;
}

void train(SimJob& job, Detector& d, int64_t first, int steps, int64_t interval) {
  for (int i = 0; i < steps; ++i) {
    job.advance(interval);
    job.step_all(first + i);
    d.observe(job.observe());
  }
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(DetectorMultiNode, OneClockTimesRemoteRanksByTheirMonotonicStamps) {
  struct Case {
    const char* name;
    int64_t wall_skew;  // node b's wall clock against ours
    bool wall_only;     // its monotonic stamps unknown (a record its node could not time)
    bool one_clock;
    int64_t want_age;
    State want;
  } cases[] = {
      {"remote without one clock: by wall, b's clock an hour behind", -3600 * kSec, false, false,
       3601 * kSec, State::kStalled},
      {"one clock: by mono, b's wall skew does not matter", -3600 * kSec, false, true, kSec,
       State::kHealthy},
      {"one clock, b's clock ahead", 3600 * kSec, false, true, kSec, State::kHealthy},
      {"one clock, wall only, clocks agree: by wall", 0, true, true, kSec, State::kHealthy},
      {"one clock, wall only, b an hour behind: by wall", -3600 * kSec, true, true, 3601 * kSec,
       State::kStalled},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    SimJob job(2);
    Detector d(configured(2 * kSec));
    train(job, d, 0, 5, 2 * kSec);
    job.advance(kSec);
    Observation o = job.observe();
    o.one_clock = c.one_clock;
    contract::RankSnapshot& r = o.ranks[1];
    r.host = "b";
    for (Stamp* s : {&r.created, &r.step_at, &r.phase_since, &r.updated}) {
      s->wall_ns += c.wall_skew;
      if (c.wall_only) s->mono_ns = 0;
    }
    if (c.wall_only) r.recent.clear();
    Verdict v = d.observe(o);
    ASSERT_EQ(v.ranks.size(), 2u);
    EXPECT_EQ(v.ranks[1].step_age_ns, c.want_age) << v.ranks[1].note;
    EXPECT_EQ(v.ranks[0].step_age_ns, kSec);
    EXPECT_EQ(v.state, c.want) << v.summary;
  }
}

TEST(DetectorMultiNode, ALapsedNodesRanksAreRankSilentWithTheirHost) {
  struct Case {
    const char* name;
    std::map<std::string, int64_t> lapsed;
    std::function<void(SimJob&)> then;  // after training, before the observation
    State want;
    Cause want_cause;
    std::vector<int> culprits;
  } cases[] = {
      {"node b lapsed 3 s ago",
       {{"b", 3 * kSec}},
       [](SimJob& j) { j.advance(kSec); },
       State::kStalled,
       Cause::kRankSilent,
       {2}},
      {"the lost node goes before a phase overrun here",
       {{"b", 3 * kSec}},
       [](SimJob& j) {
         j.set_phase(0, "data");
         j.advance(6 * kSec);
       },
       State::kStalled,
       Cause::kRankSilent,
       {2}},
      {"without the lapse that overrun is a collective hang",
       {},
       [](SimJob& j) {
         j.set_phase(0, "data");
         j.advance(6 * kSec);
       },
       State::kStalled,
       Cause::kCollective,
       {0}},
      {"a rank that finished before its node went stays finished",
       {{"b", 3 * kSec}},
       [](SimJob& j) {
         j.finish(2);
         j.advance(kSec);
       },
       State::kHealthy,
       Cause::kNone,
       {}},
      {"a node this job has no rank on",
       {{"c", 3 * kSec}},
       [](SimJob& j) { j.advance(kSec); },
       State::kHealthy,
       Cause::kNone,
       {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    SimJob job(3);
    Config cfg = configured(2 * kSec);
    cfg.phases["data"] = {5 * kSec, false};
    Detector d(cfg);
    job.rank(2).host = "b";
    train(job, d, 0, 5, 2 * kSec);
    c.then(job);
    Observation o = job.observe();
    o.one_clock = true;
    o.lapsed_hosts = c.lapsed;
    Verdict v = d.observe(o);
    EXPECT_EQ(v.state, c.want) << v.summary;
    EXPECT_EQ(v.cause, c.want_cause) << v.summary;
    std::vector<int> culprits;
    for (const auto& k : v.culprits) culprits.push_back(k.rank);
    EXPECT_EQ(culprits, c.culprits) << v.summary;
    if (c.want_cause != Cause::kRankSilent) continue;
    EXPECT_EQ(v.ranks[2].state, State::kStalled);
    EXPECT_EQ(v.ranks[2].cause, Cause::kRankSilent);
    EXPECT_EQ(v.culprits[0].host, "b");
    EXPECT_TRUE(has(v.culprits[0].reason, "node b stopped reporting at least 3.0s ago"))
        << v.summary;
    EXPECT_TRUE(has(v.summary, "culprit rank 2 on b (node b stopped reporting")) << v.summary;
    bool evidence = false;
    for (const auto& e : v.evidence) evidence = evidence || (e.name == "node" && has(e.value, "b"));
    EXPECT_TRUE(evidence) << "the lost node is listed as evidence";
  }
}

TEST(DetectorMultiNode, CulpritHostIsNamedOnlyWhenTheJobSpansHosts) {
  struct Case {
    const char* name;
    std::vector<std::string> hosts;  // of ranks 0..2
    bool one_clock;
    std::string want_host;
  } cases[] = {
      {"one host", {"node1", "node1", "node1"}, false, ""},
      {"hosts unknown", {"", "", ""}, false, ""},
      {"two hosts", {"node1", "b", "node1"}, false, "b"},
      {"a merged observation on one host", {"a", "a", "a"}, true, "a"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    SimJob job(3);
    for (int r = 0; r < 3; ++r) job.rank(r).host = c.hosts[r];
    Detector d(configured(2 * kSec));
    train(job, d, 0, 10, 2 * kSec);
    job.advance(2 * kSec);
    job.step(0, 10);
    job.step(2, 10);  // rank 1 never commits step 10
    job.advance(5 * kSec);
    Observation o = job.observe();
    o.one_clock = c.one_clock;
    Verdict v = d.observe(o);
    ASSERT_EQ(v.state, State::kStalled) << v.summary;
    ASSERT_FALSE(v.culprits.empty()) << v.summary;
    EXPECT_EQ(v.culprits[0].rank, 1);
    EXPECT_EQ(v.culprits[0].host, c.want_host);
    std::string named = c.want_host.empty() ? "culprit rank 1 (behind"
                                            : "culprit rank 1 on " + c.want_host + " (behind";
    EXPECT_TRUE(has(v.summary, named)) << v.summary;
  }
}

TEST(DetectorMultiNode, ALeadersTraceReplaysToTheSameVerdict) {
  SimJob job(3);
  job.rank(2).host = "b";
  Detector live(configured(2 * kSec));
  Detector replay(configured(2 * kSec));
  std::vector<Observation> seen;
  for (int i = 0; i < 6; ++i) {
    job.advance(2 * kSec);
    job.step_all(i);
    Observation o = job.observe();
    o.one_clock = true;
    if (i == 5) o.lapsed_hosts["b"] = 2 * kSec;
    seen.push_back(o);
  }
  Verdict want, got;
  for (const auto& o : seen) {
    want = live.observe(o);
    auto line = trace::parse_trace_line(trace::observation_to_json(o));
    ASSERT_TRUE(line.ok()) << line.error().message;
    got = replay.observe(line->obs);
  }
  EXPECT_EQ(want.state, State::kStalled);
  EXPECT_EQ(got.summary, want.summary);
  EXPECT_EQ(trace::verdict_to_json(got), trace::verdict_to_json(want));
}

}  // namespace
}  // namespace stepwatch::detect
