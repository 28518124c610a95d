// `stepwatch status` rendering: ages, n/a for absent values, missing ranks, problems.
#include "src/cli/status_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

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

}  // namespace
}  // namespace stepwatch::cli
