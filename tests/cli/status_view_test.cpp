// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch status` rendering: ages, n/a for absent values, missing ranks, problems.
#include "src/cli/status_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/cli/agent_client.h"
#include "src/serve/json_views.h"

namespace stepwatch::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kSec = kNsPerSec;
const Stamp kNow{1'700'000'000 * kSec, 50'000 * kSec};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> tokens(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

std::string line_for(const std::string& text, int rank) {
  for (const auto& l : lines_of(text)) {
    auto t = tokens(l);
    if (!t.empty() && t[0] == std::to_string(rank)) return l;
  }
  return "";
}

// The columns of one rank's line. CHECKPOINT may be two tokens ("id@step age") or "n/a".
struct Row {
  std::string rank, host, pid, step, step_age, phase, phase_age, beat_age, checkpoint, loss, status,
      src;
};

std::optional<Row> row_for(const std::string& text, int rank) {
  for (const auto& l : lines_of(text)) {
    auto t = tokens(l);
    if (t.size() < 12 || t[0] != std::to_string(rank)) continue;
    Row r{t[0],
          t[1],
          t[2],
          t[3],
          t[4],
          t[5],
          t[6],
          t[7],
          "",
          t[t.size() - 3],
          t[t.size() - 2],
          t[t.size() - 1]};
    for (size_t i = 8; i + 3 < t.size(); ++i)
      r.checkpoint += (r.checkpoint.empty() ? "" : " ") + t[i];
    return r;
  }
  return std::nullopt;
}

contract::RankSnapshot rank(int r, const std::string& host = "here") {
  contract::RankSnapshot s;
  s.job = "job-1";
  s.rank = r;
  s.local_rank = r;
  s.world_size = 4;
  s.host = host;
  s.pid = 1000 + r;
  s.created = {kNow.wall_ns - 600 * kSec, kNow.mono_ns - 600 * kSec};
  s.phase = "train";
  s.phase_since = {kNow.wall_ns - 300 * kSec, kNow.mono_ns - 300 * kSec};
  return s;
}

TEST(AgeNs, PicksTheRightClock) {
  struct Case {
    Stamp at;
    bool same_host;
    int64_t want;
  } cases[] = {
      {{kNow.wall_ns - 7 * kSec, kNow.mono_ns - 3 * kSec}, true, 3 * kSec},  // same host: monotonic
      {{kNow.wall_ns - 7 * kSec, kNow.mono_ns - 3 * kSec},
       false,
       7 * kSec},                                      // other host: wall clock
      {{kNow.wall_ns - 7 * kSec, 0}, true, 7 * kSec},  // no monotonic (JSONL)
      {{0, kNow.mono_ns - 3 * kSec}, false, -1},       // nothing comparable
      {{0, 0}, true, -1},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(age_ns(c.at, kNow, c.same_host), c.want)
        << c.at.wall_ns << " " << c.at.mono_ns << " " << c.same_host;
  }
  EXPECT_EQ(age_ns({kNow.wall_ns - kSec, 0}, {kNow.wall_ns, 0}, true), kSec);
  EXPECT_EQ(age_ns({0, kNow.mono_ns - kSec}, {0, 0}, true), -1) << "now unknown";
}

TEST(RenderStatus, NoJobs) {
  EXPECT_EQ(render_status({}, kNow, "here"), "no jobs\n");
}

TEST(RenderStatus, AgesOfAFullRecord) {
  contract::RankSnapshot s = rank(0);
  s.step = 1234;
  s.step_at = {kNow.wall_ns - 99 * kSec, kNow.mono_ns - 2'500'000'000};  // monotonic says 2.5s
  s.step_count = 1235;
  s.beat_at = Stamp{kNow.wall_ns - 65 * kSec, kNow.mono_ns - 65 * kSec};
  s.checkpoint = contract::CheckpointMark{
      "ckpt-1200", 1200, {kNow.wall_ns - 3 * 3600 * kSec, kNow.mono_ns - 7500 * kSec}};
  s.loss = 0.123456;
  contract::JobView v{"job-1", "/dev/shm/stepwatch/job-1", {s}, {}};
  std::string out = render_status({v}, kNow, "here");
  EXPECT_THAT(out, HasSubstr("job job-1  ranks 1/4  dir /dev/shm/stepwatch/job-1\n"));
  EXPECT_THAT(out, HasSubstr("RANK"));
  auto r = row_for(out, 0);
  ASSERT_TRUE(r) << out;
  EXPECT_EQ(r->host, "here");
  EXPECT_EQ(r->pid, "1000");
  EXPECT_EQ(r->step, "1234");
  EXPECT_EQ(r->step_age, "2.5s") << "same host: the monotonic clock, not the wall clock's 99s";
  EXPECT_EQ(r->phase, "train");
  EXPECT_EQ(r->phase_age, "5m00s");
  EXPECT_EQ(r->beat_age, "1m05s");
  EXPECT_EQ(r->checkpoint, "ckpt-1200@1200 2h05m");
  EXPECT_EQ(r->loss, "0.1235");
  EXPECT_EQ(r->status, "running");
  EXPECT_EQ(r->src, "beacon");

  // Seen from another host, the wall clock is used.
  r = row_for(render_status({v}, kNow, "elsewhere"), 0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->step_age, "1m39s");
  EXPECT_EQ(r->checkpoint, "ckpt-1200@1200 3h00m");
}

TEST(RenderStatus, AbsentValuesAreNA) {
  contract::RankSnapshot s = rank(1, "");
  s.pid = 0;
  contract::JobView v{"job-1", "/d", {s}, {}};
  std::string out = render_status({v}, kNow, "here");
  auto r = row_for(out, 1);
  ASSERT_TRUE(r) << out;
  EXPECT_EQ(r->host, "n/a");
  EXPECT_EQ(r->pid, "n/a");
  EXPECT_EQ(r->step, "none");
  EXPECT_EQ(r->step_age, "n/a");
  EXPECT_EQ(r->beat_age, "n/a");
  EXPECT_EQ(r->checkpoint, "n/a");
  EXPECT_EQ(r->loss, "n/a") << "no loss reported is not 0";
  EXPECT_THAT(tokens(line_for(out, 1)), Not(::testing::Contains("0")))
      << "absent values never render as 0";
}

TEST(RenderStatus, ReportedNaNLossAndStatusAndSource) {
  contract::RankSnapshot s = rank(2);
  s.loss = std::nan("");
  s.status = contract::RankStatus::kFailed;
  s.source = contract::Source::kJsonl;
  contract::RankSnapshot f = rank(3);
  f.status = contract::RankStatus::kFinished;
  f.loss = 2.0;
  contract::JobView v{"job-1", "/d", {s, f}, {}};
  std::string out = render_status({v}, kNow, "here");
  auto r = row_for(out, 2);
  ASSERT_TRUE(r) << out;
  EXPECT_EQ(r->loss, "NaN");
  EXPECT_EQ(r->status, "failed");
  EXPECT_EQ(r->src, "jsonl");
  auto r3 = row_for(out, 3);
  ASSERT_TRUE(r3);
  EXPECT_EQ(r3->loss, "2");
  EXPECT_EQ(r3->status, "finished");
}

TEST(RenderStatus, MissingRanksAndProblems) {
  contract::JobView v{"job-1", "/d", {rank(0), rank(2)}, {}};
  v.problems.push_back(
      Error{Errc::kBadMagic, "/d/rank-1.beacon: bad magic 0x0, not a stepwatch beacon"});
  v.problems.push_back(Error{Errc::kParse, "/d/progress.jsonl:3: not valid JSON"});
  std::string out = render_status({v}, kNow, "here");
  EXPECT_THAT(out, HasSubstr("ranks 2/4"));
  EXPECT_THAT(out, HasSubstr("     1 no record\n"));
  EXPECT_THAT(out, HasSubstr("     3 no record\n"));
  EXPECT_THAT(out, Not(HasSubstr("0 no record")));
  EXPECT_THAT(out, Not(HasSubstr("2 no record")));
  EXPECT_THAT(out,
              HasSubstr("  problem: /d/rank-1.beacon: bad magic 0x0, not a stepwatch beacon\n"));
  EXPECT_THAT(out, HasSubstr("  problem: /d/progress.jsonl:3: not valid JSON\n"));
}

TEST(RenderStatus, JobWithOnlyProblemsAndSeveralJobs) {
  contract::JobView broken{
      "broken", "/d/broken", {}, {Error{Errc::kNotFound, "/d/broken: No such file"}}};
  contract::JobView fine{"fine", "/d/fine", {rank(0)}, {}};
  std::string out = render_status({broken, fine}, kNow, "here");
  EXPECT_THAT(
      out, HasSubstr("job broken  ranks 0/0  dir /d/broken\n  problem: /d/broken: No such file\n"));
  EXPECT_THAT(out, HasSubstr("job fine  ranks 1/4"));
  EXPECT_LT(out.find("job broken"), out.find("job fine"));
  // The header is printed only for jobs with ranks.
  EXPECT_EQ(out.find("RANK"), out.find("RANK", out.find("job fine")));
}

TEST(RenderStatus, LongNamesAreCut) {
  contract::RankSnapshot s = rank(0, "a-very-long-hostname");
  s.phase = "a-rather-long-phase-name";
  contract::JobView v{"job-1", "/d", {s}, {}};
  auto r = row_for(render_status({v}, kNow, "here"), 0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->host, "a-very-lon");
  EXPECT_EQ(r->phase, "a-rather-lon");
}

// The agent's answer shown by the same renderer: state and owner in the header, the evidence
// columns, and "n/a" for what the agent does not say (beat and checkpoint ages, CPU rates).
TEST(RenderJobs, AWatchedJobFromTheAgent) {
  StatusJob job;
  job.job = "llm";
  job.state = "stalled/collective";
  job.owner = "team-llm";
  job.world_size = 2;
  job.retired = true;
  job.verdict_summary = "rank 1 stopped at step 7";
  job.evidence = true;
  StatusRank r;
  r.rank = 0;
  r.host = "node-1";
  r.pid = 42;
  r.step = 7;
  r.step_age_ns = 12 * kSec;
  r.expected_ns = kSec;
  r.phase = "train";
  r.phase_age_ns = 30 * kSec;
  r.checkpoint = "ckpt-5";
  r.checkpoint_step = 5;
  r.status = "running";
  r.source = "beacon";
  r.verdict = "stalled";
  r.note = "no step for 12s";
  detect::ProcessFacts p;
  p.state = 'S';
  p.wchan = "futex_wait";
  p.cpu_delta_ns = kSec;
  r.process = p;
  job.ranks.push_back(r);
  job.culprits.emplace_back(0, "stopped first");
  std::string out = render_jobs({job});
  EXPECT_THAT(out, HasSubstr("job llm  stalled/collective  ranks 1/2  owner team-llm  (retired)\n"
                             "  verdict: rank 1 stopped at step 7\n"));
  EXPECT_THAT(out, HasSubstr("VERDICT   NOTE\n"));
  auto t = tokens(line_for(out, 0));
  ASSERT_GE(t.size(), 18u) << out;
  EXPECT_EQ(t[1], "node-1");
  EXPECT_EQ(t[3], "7");
  EXPECT_EQ(t[4], "12.0s/1.0s");
  EXPECT_EQ(t[7], "n/a") << "no beat age from the agent";
  EXPECT_EQ(t[8], "ckpt-5@5");
  EXPECT_EQ(t[9], "n/a") << "no checkpoint age from the agent";
  EXPECT_EQ(t[13], "S:futex_wait");
  EXPECT_EQ(t[14], "n/a") << "a CPU delta over an unknown window is no rate";
  EXPECT_EQ(t[16], "n/a") << "no GPU evidence";
  EXPECT_EQ(t[17], "stalled");
  EXPECT_THAT(line_for(out, 0), ::testing::EndsWith("stalled   no step for 12s"));
  EXPECT_THAT(out, HasSubstr("     1 no record\n"));
  EXPECT_THAT(out, HasSubstr("  culprit: rank 0: stopped first\n"));
}

// One job seen both ways: read here, and through the agent's JSON (rendered by src/serve, read
// back by the CLI). The same renderer shows the same facts in the same columns.
TEST(RenderJobs, TheSameColumnsWhicheverSource) {
  contract::RankSnapshot s = rank(0);
  s.step = 1234;
  s.step_at = {kNow.wall_ns - 9 * kSec, kNow.mono_ns - 9 * kSec};
  s.checkpoint = contract::CheckpointMark{"ckpt-1200", 1200, {kNow.wall_ns - 60 * kSec, 0}};
  s.loss = 0.5;
  detect::Verdict v;
  v.state = detect::State::kStalled;
  v.expected_interval_ns = kSec;
  v.summary = "no step for 9s";
  detect::RankVerdict rv;
  rv.rank = 0;
  rv.state = detect::State::kStalled;
  rv.step = 1234;
  rv.step_age_ns = 9 * kSec;
  rv.phase = "train";
  rv.phase_age_ns = 300 * kSec;
  rv.note = "no step";
  v.ranks.push_back(rv);
  detect::ProcessFacts p;
  p.rank = 0;
  p.state = 'D';
  p.threads_in_d = 2;
  detect::GpuFacts g;
  g.rank = 0;
  g.sm_util_pct = 97;
  g.power_w = 310;

  JobEvidence ev{v, {p}, {g}, 0};
  contract::JobView view{"job-1", "/d/job-1", {s}, {}};
  std::string local = render_jobs({status_job(view, kNow, "here", &ev)});

  watch::JobState st;
  st.job = "job-1";
  st.owner = "team";
  st.verdict = v;
  st.observation.ranks = {s};
  st.observation.procs = {p};
  st.observation.gpus = {g};
  StatusJob remote_job =
      status_job_from_agent(serve::job_summary_json(st).dump(), serve::job_detail_json(st).dump());
  EXPECT_EQ(remote_job.state, "stalled");
  EXPECT_EQ(remote_job.owner, "team");
  EXPECT_EQ(remote_job.world_size, 4);
  EXPECT_FALSE(remote_job.cluster) << "a single node's job has no cluster";
  std::string remote = render_jobs({remote_job});
  EXPECT_THAT(remote, Not(HasSubstr("cluster")));
  EXPECT_THAT(remote, Not(HasSubstr("  node ")));
  EXPECT_THAT(remote, HasSubstr("job job-1  stalled  ranks 1/4  owner team\n"));
  EXPECT_THAT(local, HasSubstr("job job-1  ranks 1/4  dir /d/job-1\n"));

  auto lt = tokens(line_for(local, 0));
  auto rt = tokens(line_for(remote, 0));
  ASSERT_EQ(lt.size(), rt.size()) << local << remote;
  for (size_t i : {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}) {
    EXPECT_EQ(lt[i], rt[i]) << "column " << i << "\n" << local << remote;
  }
  EXPECT_EQ(lt[4], "9.0s/1.0s");
  EXPECT_EQ(lt[13], "D(D2)");
  EXPECT_EQ(lt[16], "97%");
  EXPECT_EQ(rt[7], "n/a");  // the beat age: the agent does not say
  EXPECT_EQ(rt[9], "n/a");  // the checkpoint's age: neither
  EXPECT_EQ(lt[9], "1m00s");

  // What the agent left out, or a broken answer, is unknown, never 0.
  StatusJob bare = status_job_from_agent("{}", "not json");
  EXPECT_EQ(bare.job, "");
  EXPECT_TRUE(bare.ranks.empty());
  nlohmann::json detail = {{"ranks", {{{"rank", 3}, {"step", nullptr}}}}};
  StatusJob sparse = status_job_from_agent(R"({"job_id":"x","state":"starting"})", detail.dump());
  ASSERT_EQ(sparse.ranks.size(), 1u);
  EXPECT_EQ(sparse.ranks[0].rank, 3);
  EXPECT_FALSE(sparse.ranks[0].step);
  EXPECT_EQ(sparse.ranks[0].pid, 0);
  EXPECT_FALSE(sparse.ranks[0].process);
  auto t = tokens(line_for(render_jobs({sparse}), 3));
  ASSERT_GE(t.size(), 12u);
  EXPECT_THAT(t, Not(::testing::Contains("0"))) << "absent values never render as 0";
}

// A multi-node job through its leader's JSON: each rank on its node's line, the leader, and
// every node with the age of its summary (a lapsed one said so).
TEST(RenderJobs, AMultiNodeJobShowsItsLeaderAndNodes) {
  watch::JobState st;
  st.job = "llm";
  st.host = "node-a";
  st.verdict.state = detect::State::kStalled;
  st.verdict.cause = detect::Cause::kRankSilent;
  st.verdict.summary = "node-c's ranks are silent";
  const std::vector<std::pair<int, std::string>> placed = {
      {0, "node-a"}, {1, "node-a"}, {2, "node-c"}, {4, "node-c"}};
  for (const auto& [r, host] : placed) {
    contract::RankSnapshot s = rank(r, host);
    s.world_size = 5;
    st.observation.ranks.push_back(s);
    detect::RankVerdict rv;
    rv.rank = r;
    rv.state = detect::State::kHealthy;
    st.verdict.ranks.push_back(rv);
  }
  st.cluster =
      watch::ClusterState{.node = "node-a", .leader = "node-a", .leads = true, .connected = true};
  st.cluster->nodes = {
      {.node = "node-c", .lapsed = true, .summary_age_ns = 45 * kSec, .ranks = {4, 2}},
      {.node = "node-a", .leader = true, .summary_age_ns = 500 * kNsPerMs, .ranks = {0, 1}}};
  StatusJob job =
      status_job_from_agent(serve::job_summary_json(st).dump(), serve::job_detail_json(st).dump());
  ASSERT_TRUE(job.cluster);
  std::string out = render_jobs({job});
  EXPECT_THAT(out, HasSubstr("  verdict: node-c's ranks are silent\n"
                             "  cluster: leader node-a (this node), this node node-a\n"
                             "  node node-a (leader): summary 500ms ago, ranks 0-1\n"
                             "  node node-c: summary 45.0s ago, LAPSED, ranks 2,4\n"
                             "  RANK HOST"))
      << out;
  auto r2 = row_for(out, 2);
  ASSERT_TRUE(r2) << out;
  EXPECT_EQ(r2->host, "node-c");
  EXPECT_EQ(row_for(out, 0)->host, "node-a");

  // A follower that lost etcd: no leader known, no summary age.
  st.cluster->leader = "";
  st.cluster->leads = false;
  st.cluster->connected = false;
  st.cluster->nodes = {{.node = "node-a"}};
  out = render_jobs({status_job_from_agent(serve::job_summary_json(st).dump(), "{}")});
  EXPECT_THAT(out, HasSubstr("  cluster: leader unknown, this node node-a, coordination lost\n"
                             "  node node-a: summary n/a, ranks none\n"));
}

}  // namespace
}  // namespace stepwatch::cli
