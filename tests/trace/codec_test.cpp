// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/trace/codec.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/detect/sim.h"

namespace stepwatch::trace {
namespace {

using namespace stepwatch::detect;  // the observation and verdict types the codec writes
using detect::testing::kSec;
using detect::testing::SimJob;

TEST(TraceCodec, ObservationRoundTripsEveryField) {
  SimJob job(2);
  job.advance(kSec);
  job.step_all(0);
  job.advance(kSec);
  job.step_all(1);
  job.set_phase(1, "data");
  job.beat(1);
  job.rank(0).checkpoint = contract::CheckpointMark{"step_1", 1, job.now()};
  job.rank(0).loss = std::nan("");
  job.rank(0).loss_at = job.now();
  job.rank(1).status = contract::RankStatus::kFailed;
  contract::Sample sample;
  sample.count = 9;
  sample.at = job.now();
  sample.moved_at = Stamp{job.now().wall_ns - kSec, job.now().mono_ns - kSec};
  sample.hash = 0xfedcba9876543210;  // past 2^53: written as hex, read back exactly
  sample.wait = contract::WaitKind::kStore;
  sample.where = "init_process_group (distributed_c10d.py:754)";
  job.rank(1).sample = sample;
  Observation o = job.observe();
  ProcessFacts p;
  p.rank = 1;
  p.state = 'D';
  p.threads_in_d = 3;
  p.cpu_delta_ns = 12;
  p.io_delta_bytes = 0;
  p.main_cpu_delta_ns = 5;
  p.ctx_switches_delta = 2;
  p.wchan = "nfs_wait";
  p.exit_code = 9;
  o.procs.push_back(p);
  GpuFacts g;
  g.rank = 0;
  g.sm_util_pct = 97.5;
  g.power_w = 410;
  o.gpus.push_back(g);
  o.log = LogFacts{123, 77, 5, 100};
  o.job_exit_code = 3;

  auto parsed = parse_trace_line(observation_to_json(o));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  ASSERT_EQ(parsed->kind, TraceLine::kObservation);
  const Observation& b = parsed->obs;
  EXPECT_EQ(b.now.wall_ns, o.now.wall_ns);
  EXPECT_EQ(b.now.mono_ns, o.now.mono_ns);
  ASSERT_EQ(b.ranks.size(), 2u);
  EXPECT_EQ(*b.ranks[0].step, 1);
  EXPECT_EQ(b.ranks[0].step_count, 2u);
  ASSERT_EQ(b.ranks[0].recent.size(), 2u);
  EXPECT_EQ(b.ranks[0].recent[1].mono_ns, o.ranks[0].recent[1].mono_ns);
  EXPECT_EQ(b.ranks[1].phase, "data");
  EXPECT_EQ(b.ranks[1].phase_count, o.ranks[1].phase_count);
  ASSERT_TRUE(b.ranks[1].beat_at.has_value());
  EXPECT_EQ(b.ranks[1].status, contract::RankStatus::kFailed);
  ASSERT_TRUE(b.ranks[0].checkpoint.has_value());
  EXPECT_EQ(b.ranks[0].checkpoint->id, "step_1");
  ASSERT_TRUE(b.ranks[0].loss.has_value());
  EXPECT_TRUE(std::isnan(*b.ranks[0].loss));
  ASSERT_EQ(b.procs.size(), 1u);
  EXPECT_EQ(b.procs[0].state, 'D');
  EXPECT_EQ(b.procs[0].threads_in_d, 3);
  EXPECT_EQ(*b.procs[0].exit_code, 9);
  EXPECT_EQ(b.procs[0].wchan, "nfs_wait");
  EXPECT_EQ(b.procs[0].main_cpu_delta_ns, std::optional<int64_t>(5));
  EXPECT_EQ(b.procs[0].ctx_switches_delta, std::optional<int64_t>(2));
  EXPECT_FALSE(b.ranks[0].sample.has_value());
  ASSERT_TRUE(b.ranks[1].sample.has_value());
  EXPECT_EQ(b.ranks[1].sample->count, 9u);
  EXPECT_EQ(b.ranks[1].sample->hash, 0xfedcba9876543210u);
  EXPECT_EQ(b.ranks[1].sample->wait, contract::WaitKind::kStore);
  EXPECT_EQ(b.ranks[1].sample->moved_at.mono_ns, sample.moved_at.mono_ns);
  EXPECT_EQ(b.ranks[1].sample->where, sample.where);
  ASSERT_EQ(b.gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(*b.gpus[0].sm_util_pct, 97.5);
  EXPECT_FALSE(b.gpus[0].mem_used_bytes.has_value());
  ASSERT_TRUE(b.log.has_value());
  EXPECT_EQ(b.log->lines_total, 77u);
  EXPECT_EQ(*b.job_exit_code, 3);
}

TEST(TraceCodec, BadLinesNameTheField) {
  struct Case {
    const char* line;
    const char* want;
  } cases[] = {
      {"garbage", "not valid JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"ranks":[]})", "\"type\" is missing"},
      {R"({"type":"obs","ranks":[]})", "\"now\" is missing"},
      {R"({"type":"obs","now":[1],"ranks":[]})", "[wall_ns, mono_ns]"},
      {R"({"type":"obs","now":[1,2],"ranks":[{"rank":0}]})", "\"job\" is missing"},
      {R"({"type":"obs","now":[1,2],"ranks":[{"rank":5,"job":"j","world_size":2}]})",
       "outside world_size"},
      {R"({"type":"obs","now":[1,2],"ranks":[{"rank":0,"job":"../x"}]})", "job id"},
      {R"({"type":"obs","now":[1,2],"ranks":[{"rank":0,"job":"j","step":3}]})",
       "\"step_at\" is missing"},
      {R"({"type":"header","version":9})", "trace version 9"},
      {R"({"type":"obs","now":[1,2],"ranks":[{"rank":0,"job":"j","sample":{"count":1,"at":[1,2],)"
       R"("moved_at":[1,2],"hash":"xyz","wait":"none"}}]})",
       "\"sample.hash\" must be up to 16 hex digits"},
      {R"({"type":"obs","now":[1,2],"ranks":[{"rank":0,"job":"j","sample":{"count":1,"at":[1,2],)"
       R"("moved_at":[1,2],"hash":"ff","wait":"nap"}}]})",
       "\"sample.wait\" is \"nap\""},
      {R"({"type":"bogus"})", "unknown line type"},
  };
  for (const auto& c : cases) {
    auto r = parse_trace_line(c.line);
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_NE(r.error().message.find(c.want), std::string::npos)
        << c.line << " -> " << r.error().message;
  }
}

TEST(TraceCodec, VerdictJsonCarriesTheFieldsAPageNeeds) {
  Verdict v;
  v.state = State::kStalled;
  v.cause = Cause::kCollective;
  v.last_step = 41;
  v.last_step_age_ns = 9 * kSec;
  v.expected_interval_ns = 2 * kSec;
  v.interval_source = IntervalSource::kSpec;
  v.culprits.push_back({2, "in phase data"});
  v.evidence.push_back({"phase", "data", 2, 9 * kSec});
  std::string j = verdict_to_json(v, "demo");
  for (const char* want :
       {"\"state\":\"stalled\"", "\"cause\":\"collective\"", "\"last_step\":41",
        "\"expected_interval_seconds\":2.0", "\"interval_source\":\"spec\"", "\"job\":\"demo\"",
        "\"reason\":\"in phase data\"", "\"age_seconds\":9.0"}) {
    EXPECT_NE(j.find(want), std::string::npos) << want << " in " << j;
  }
}

TEST(TraceCodec, MergedObservationFieldsRoundTripAndASingleNodeLineOmitsThem) {
  SimJob job(2);
  job.advance(kSec);
  job.step_all(0);
  Observation single = job.observe();
  std::string line = observation_to_json(single);
  EXPECT_EQ(line.find("one_clock"), std::string::npos) << line;
  EXPECT_EQ(line.find("lapsed_hosts"), std::string::npos) << line;
  auto back = parse_trace_line(line);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_FALSE(back->obs.one_clock);
  EXPECT_TRUE(back->obs.lapsed_hosts.empty());

  Observation merged = single;
  merged.one_clock = true;
  merged.lapsed_hosts = {{"b", 3 * kSec}, {"c", 1}};
  auto parsed = parse_trace_line(observation_to_json(merged));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_TRUE(parsed->obs.one_clock);
  EXPECT_EQ(parsed->obs.lapsed_hosts, merged.lapsed_hosts);

  struct Case {
    const char* line;
    const char* want;
  } bad[] = {
      {R"({"type":"obs","now":[1,2],"ranks":[],"one_clock":"yes"})",
       "\"one_clock\" must be true or false"},
      {R"({"type":"obs","now":[1,2],"ranks":[],"lapsed_hosts":[1]})",
       "\"lapsed_hosts\" must be an object"},
      {R"({"type":"obs","now":[1,2],"ranks":[],"lapsed_hosts":{"b":"3s"}})",
       "\"lapsed_hosts\" must be an integer"},
  };
  for (const auto& c : bad) {
    auto r = parse_trace_line(c.line);
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_NE(r.error().message.find(c.want), std::string::npos)
        << c.line << " -> " << r.error().message;
  }
}

TEST(TraceCodec, VerdictJsonNamesACulpritsHostOnlyWhenKnown) {
  Verdict v;
  v.state = State::kStalled;
  v.cause = Cause::kRankSilent;
  v.culprits.push_back({1, "behind"});
  v.culprits.push_back({2, "node b stopped reporting", "b"});
  std::string j = verdict_to_json(v);
  EXPECT_NE(j.find(R"({"rank":1,"reason":"behind"})"), std::string::npos) << j;
  EXPECT_NE(j.find(R"({"host":"b","rank":2,"reason":"node b stopped reporting"})"),
            std::string::npos)
      << j;
}

TEST(VerdictJson, ReadsBackWhatItWrites) {
  Verdict v;
  v.state = State::kStalled;
  v.cause = Cause::kCollective;
  v.since_wall_ns = 1'700'000'000'000'000'000;
  v.last_step = 41;
  v.last_step_age_ns = 95 * kNsPerSec;
  v.expected_interval_ns = 2 * kNsPerSec;
  v.interval_source = IntervalSource::kLearned;
  v.phase = "train";
  v.phase_budget_ns = 60 * kNsPerSec;
  RankVerdict r;
  r.rank = 1;
  r.state = State::kStalled;
  r.cause = Cause::kPhaseOverrun;
  r.step = 41;
  r.step_age_ns = 95 * kNsPerSec;
  r.phase = "data";
  r.phase_age_ns = 90 * kNsPerSec;
  r.budget_ns = 60 * kNsPerSec;
  r.note = "phase data for 1m30s";
  v.ranks.push_back(r);
  v.culprits.emplace_back(1, "in data", "b");
  v.evidence.push_back({"phase", "data", 1, 90 * kNsPerSec});
  v.summary = "stalled/collective: culprit rank 1 on b";
  auto back = verdict_from_json(verdict_to_json(v, "j"));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(verdict_to_json(*back, "j"), verdict_to_json(v, "j"));  // the same, field for field
  EXPECT_EQ(back->culprits[0].host, "b");
  EXPECT_EQ(back->ranks[0].budget_ns, 60 * kNsPerSec);

  auto bad = verdict_from_json(R"({"state": "sleepy", "cause": "none", "ranks": []})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("state"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(verdict_from_json("[1]").ok());
  EXPECT_FALSE(verdict_from_json(R"({"state": "healthy", "cause": "none"})").ok());  // no ranks
}

}  // namespace
}  // namespace stepwatch::trace
