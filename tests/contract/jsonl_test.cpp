// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The JSONL text contract: the line parser and the per-rank fold.
#include "src/contract/jsonl.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace stepwatch::contract {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSec = 1'000'000'000;

TEST(ParseProgressLine, EveryField) {
  auto e = parse_progress_line(
      R"({"job":"job-1","rank":3,"time":1700000000.25,"step":42,"phase":"eval","beat":true,)"
      R"("checkpoint":"ckpt-40","checkpoint_step":40,"loss":0.125,"world_size":8,"local_rank":1,)"
      R"("pid":4242,"host":"node-3","status":"finished","incarnation":2})");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->job, "job-1");
  EXPECT_EQ(e->rank, 3);
  // A double holds Unix time to about 0.25 us: nanoseconds are not promised.
  EXPECT_NEAR(static_cast<double>(e->wall_ns - 1'700'000'000 * kSec), 250'000'000.0, 1000.0);
  EXPECT_EQ(e->step, 42);
  EXPECT_EQ(e->phase, "eval");
  EXPECT_TRUE(e->beat);
  EXPECT_EQ(e->checkpoint, "ckpt-40");
  EXPECT_EQ(e->checkpoint_step, 40);
  EXPECT_EQ(e->loss, 0.125);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->pid, 4242);
  EXPECT_EQ(e->host, "node-3");
  EXPECT_EQ(e->status, RankStatus::kFinished);
  EXPECT_EQ(e->incarnation, 2u);
}

TEST(ParseProgressLine, OnlyRequiredFields) {
  auto e = parse_progress_line(R"({"job":"j","rank":0,"time":1700000000})");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->wall_ns, 1'700'000'000 * kSec);
  EXPECT_FALSE(e->step || e->phase || e->checkpoint || e->checkpoint_step || e->loss ||
               e->world_size || e->local_rank || e->pid || e->host || e->status || e->incarnation);
  EXPECT_FALSE(e->beat);
}

TEST(ParseProgressLine, StatusValues) {
  for (auto [text, want] :
       {std::pair{"running", RankStatus::kRunning}, std::pair{"finished", RankStatus::kFinished},
        std::pair{"failed", RankStatus::kFailed}}) {
    auto e = parse_progress_line(std::string(R"({"job":"j","rank":0,"time":1,"status":")") + text +
                                 "\"}");
    ASSERT_TRUE(e.ok()) << e.error().message;
    EXPECT_EQ(e->status, want) << text;
  }
}

TEST(ParseProgressLine, LossForms) {
  auto loss = [](const char* v) {
    return parse_progress_line(std::string(R"({"job":"j","rank":0,"time":1,"loss":)") + v + "}");
  };
  auto null = loss("null");
  ASSERT_TRUE(null.ok());
  EXPECT_FALSE(null->loss.has_value()) << "null: not reported";
  for (const char* nan : {"\"nan\"", "\"NaN\""}) {
    auto e = loss(nan);
    ASSERT_TRUE(e.ok()) << e.error().message;
    ASSERT_TRUE(e->loss.has_value()) << "a reported NaN";
    EXPECT_TRUE(std::isnan(*e->loss));
  }
  auto inf = loss("\"inf\"");
  ASSERT_TRUE(inf.ok());
  EXPECT_EQ(*inf->loss, std::numeric_limits<double>::infinity());
  auto ninf = loss("\"-inf\"");
  ASSERT_TRUE(ninf.ok());
  EXPECT_EQ(*ninf->loss, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(*loss("3")->loss, 3.0);
  EXPECT_EQ(*loss("-0.5e-3")->loss, -0.0005);
}

TEST(ParseProgressLine, IntegralFloatsAreAccepted) {
  auto e = parse_progress_line(R"({"job":"j","rank":1.0,"time":1,"step":12.0,"world_size":2.0})");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->step, 12);
  EXPECT_EQ(e->world_size, 2);
  auto big = parse_progress_line(R"({"job":"j","rank":0,"time":1,"step":9223372036854775807})");
  ASSERT_TRUE(big.ok()) << big.error().message;
  EXPECT_EQ(big->step, std::numeric_limits<int64_t>::max());
}

TEST(ParseProgressLine, UnknownKeysAreIgnored) {
  auto e = parse_progress_line(
      R"({"job":"j","rank":0,"time":1,"future_field":{"nested":[1,2,{"x":null}]},"grad_norm":3.5,"step":1})");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->step, 1);
}

struct BadLine {
  std::string line;
  std::string message_has;
};

TEST(ParseProgressLine, MissingRequiredFields) {
  const std::vector<BadLine> table = {
      {R"({"rank":0,"time":1})", "field \"job\" is missing"},
      {R"({"job":"j","time":1})", "field \"rank\" is missing"},
      {R"({"job":"j","rank":0})", "field \"time\" is missing"},
      {R"({})", "field \"job\" is missing"},
  };
  for (const auto& c : table) {
    auto e = parse_progress_line(c.line);
    ASSERT_FALSE(e.ok()) << c.line;
    EXPECT_EQ(e.error().code, Errc::kParse);
    EXPECT_THAT(e.error().message, HasSubstr(c.message_has)) << c.line;
  }
}

TEST(ParseProgressLine, WrongTypesAndRanges) {
  const std::string head = R"({"job":"j","rank":0,"time":1,)";
  const std::vector<BadLine> table = {
      {R"({"job":5,"rank":0,"time":1})", "field \"job\" must be a string"},
      {R"({"job":"../x","rank":0,"time":1})", "field \"job\""},
      {R"({"job":"","rank":0,"time":1})", "job id is empty"},
      {R"({"job":"j","rank":"1","time":1})", "field \"rank\" must be an integer, got \"1\""},
      {R"({"job":"j","rank":1.5,"time":1})", "field \"rank\" must be an integer"},
      {R"({"job":"j","rank":-1,"time":1})", "field \"rank\" is -1"},
      {R"({"job":"j","rank":true,"time":1})", "field \"rank\" must be an integer"},
      {R"({"job":"j","rank":0,"time":"now"})", "field \"time\" must be Unix seconds"},
      {R"({"job":"j","rank":0,"time":0})", "field \"time\" is 0"},
      {R"({"job":"j","rank":0,"time":-5})", "field \"time\""},
      {R"({"job":"j","rank":0,"time":1e300})", "field \"time\""},
      {head + R"("step":"3"})", "field \"step\" must be an integer"},
      {head + R"("step":-1})", "field \"step\" is -1"},
      {head + R"("step":1.5})", "field \"step\" must be an integer"},
      {head + R"("step":1e300})", "field \"step\" must be an integer"},
      // 2^63 as a float is one past int64 max: refused, not converted (that would be UB).
      {head + R"("step":9223372036854775808.0})", "field \"step\" must be an integer"},
      {head + R"("step":18446744073709551615})", "field \"step\" is out of range"},
      {head + R"("step":null})", "field \"step\" must be an integer"},
      {head + R"("phase":5})", "field \"phase\" must be a string"},
      {head + R"("phase":"bad phase"})", "field \"phase\""},
      {head + R"("phase":""})", "phase is empty"},
      {head + R"("beat":"yes"})", "field \"beat\" must be true or false"},
      {head + R"("beat":1})", "field \"beat\" must be true or false"},
      {head + R"("checkpoint":5})", "field \"checkpoint\" must be a string"},
      {head + R"("checkpoint":"a b"})", "field \"checkpoint\""},
      {head + R"("checkpoint":"c","checkpoint_step":"x"})",
       "field \"checkpoint_step\" must be an integer"},
      {head + R"("checkpoint":"c","checkpoint_step":-3})", "field \"checkpoint_step\" is -3"},
      {head + R"("checkpoint_step":3})", "field \"checkpoint_step\" given without \"checkpoint\""},
      {head + R"("loss":"abc"})", "field \"loss\" must be a number, null or \"nan\""},
      {head + R"("loss":true})", "field \"loss\""},
      {head + R"("loss":[1]})", "field \"loss\""},
      {head + R"("world_size":0})", "field \"world_size\" is 0"},
      {R"({"job":"j","rank":2,"time":1,"world_size":2})",
       "field \"rank\" is 2, not below world_size 2"},
      {head + R"("local_rank":-1})", "field \"local_rank\""},
      {head + R"("pid":0})", "field \"pid\" is 0"},
      {head + R"("pid":4294967296})", "field \"pid\""},
      {head + R"("host":5})", "field \"host\" must be a string"},
      {head + R"("host":"a b"})", "field \"host\""},
      {head + R"("status":"done"})", "field \"status\" is \"done\""},
      {head + R"("status":1})", "field \"status\" must be a string"},
      {head + R"("incarnation":-1})", "field \"incarnation\""},
      {head + R"("incarnation":4294967296})", "field \"incarnation\""},
  };
  for (const auto& c : table) {
    auto e = parse_progress_line(c.line);
    ASSERT_FALSE(e.ok()) << c.line;
    EXPECT_EQ(e.error().code, Errc::kParse) << c.line;
    EXPECT_THAT(e.error().message, HasSubstr(c.message_has)) << c.line;
  }
}

TEST(ParseProgressLine, NotAnObject) {
  for (const char* line : {"", "not json", "{\"job\":", "{\"job\":\"j\",}"}) {
    auto e = parse_progress_line(line);
    ASSERT_FALSE(e.ok()) << line;
    EXPECT_EQ(e.error().message, "not valid JSON") << line;
  }
  for (const char* line : {"[1,2]", "42", "\"str\"", "null"}) {
    auto e = parse_progress_line(line);
    ASSERT_FALSE(e.ok()) << line;
    EXPECT_EQ(e.error().message, "not a JSON object") << line;
  }
}

TEST(ParseProgressLine, LineLengthLimit) {
  std::string base = R"({"job":"j","rank":0,"time":1,"step":5})";
  std::string exact = base;
  exact.insert(exact.size() - 1, std::string(kMaxJsonlLine - base.size(), ' '));
  ASSERT_EQ(exact.size(), kMaxJsonlLine);
  auto ok = parse_progress_line(exact);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->step, 5);

  std::string over = exact;
  over.insert(over.size() - 1, " ");
  auto e = parse_progress_line(over);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, Errc::kParse);
  EXPECT_THAT(e.error().message, HasSubstr("line of 65537 bytes, at most 65536"));
}

// --- JsonlFolder -------------------------------------------------------------------------

// One event line: {"job":..,"rank":..,"time":..[,fields]}.
std::string ev(int rank, int64_t time, const std::string& fields = "",
               const std::string& job = "j") {
  std::string out = "{\"job\":\"" + job + "\",\"rank\":" + std::to_string(rank) +
                    ",\"time\":" + std::to_string(time);
  if (!fields.empty()) out += "," + fields;
  return out + "}";
}

TEST(JsonlFolder, FoldsEventsPerRank) {
  JsonlFolder f("/x/progress.jsonl");
  int64_t n = 0;
  auto feed = [&](const std::string& l) {
    Status st = f.feed(l, ++n);
    ASSERT_TRUE(st.ok()) << st.error().message;
  };
  feed(ev(0, 100, R"("world_size":2,"pid":42,"host":"h","local_rank":0,"incarnation":1)"));
  const RankSnapshot& r = f.ranks().at(0);
  EXPECT_EQ(r.source, Source::kJsonl);
  EXPECT_EQ(r.path, "/x/progress.jsonl");
  EXPECT_EQ(r.job, "j");
  EXPECT_EQ(r.world_size, 2);
  EXPECT_EQ(r.pid, 42);
  EXPECT_EQ(r.host, "h");
  EXPECT_EQ(r.incarnation, 1u);
  EXPECT_EQ(r.created.wall_ns, 100 * kSec);
  EXPECT_EQ(r.created.mono_ns, 0) << "text lines carry no monotonic time";
  EXPECT_EQ(r.phase, "init");
  EXPECT_EQ(r.phase_since.wall_ns, 100 * kSec);
  EXPECT_FALSE(r.step.has_value());
  EXPECT_EQ(r.status, RankStatus::kRunning);

  feed(ev(0, 101, R"("step":0)"));
  EXPECT_EQ(r.step, 0);
  EXPECT_EQ(r.step_at.wall_ns, 101 * kSec);
  EXPECT_EQ(r.step_count, 1u);
  EXPECT_EQ(r.phase, "train") << "the first step ends an unlabeled init";
  EXPECT_EQ(r.phase_since.wall_ns, 101 * kSec);
  EXPECT_EQ(r.phase_count, 1u);

  feed(ev(0, 102, R"("phase":"eval")"));
  EXPECT_EQ(r.phase, "eval");
  EXPECT_EQ(r.phase_count, 2u);
  feed(ev(0, 103, R"("phase":"eval","beat":true)"));
  EXPECT_EQ(r.phase_count, 2u) << "the same phase again is no transition";
  EXPECT_EQ(r.phase_since.wall_ns, 102 * kSec);
  ASSERT_TRUE(r.beat_at.has_value());
  EXPECT_EQ(r.beat_at->wall_ns, 103 * kSec);
  EXPECT_EQ(r.beat_count, 1u);
  feed(ev(0, 103, R"("beat":false)"));
  EXPECT_EQ(r.beat_count, 1u);

  feed(ev(0, 104, R"("phase":"train","step":1,"loss":0.5)"));
  EXPECT_EQ(r.phase, "train");
  EXPECT_EQ(r.phase_count, 3u);
  EXPECT_EQ(r.step, 1);
  EXPECT_EQ(r.step_count, 2u);
  EXPECT_EQ(r.loss, 0.5);
  EXPECT_EQ(r.loss_at.wall_ns, 104 * kSec);
  feed(ev(0, 105, R"("loss":null)"));
  EXPECT_EQ(r.loss, 0.5) << "null is 'not reported', not a reset";
  EXPECT_EQ(r.loss_at.wall_ns, 104 * kSec);

  feed(ev(0, 106, R"("checkpoint":"c1")"));
  ASSERT_TRUE(r.checkpoint.has_value());
  EXPECT_EQ(r.checkpoint->id, "c1");
  EXPECT_EQ(r.checkpoint->step, 1) << "defaults to the rank's last step";
  EXPECT_EQ(r.checkpoint->at.wall_ns, 106 * kSec);
  feed(ev(0, 107, R"("checkpoint":"c2","checkpoint_step":5)"));
  EXPECT_EQ(r.checkpoint->id, "c2");
  EXPECT_EQ(r.checkpoint->step, 5);
  feed(ev(0, 108, R"("step":9,"checkpoint":"c3")"));
  EXPECT_EQ(r.checkpoint->step, 9) << "defaults to the event's step";

  feed(ev(0, 109, R"("loss":"nan")"));
  ASSERT_TRUE(r.loss.has_value());
  EXPECT_TRUE(std::isnan(*r.loss));
  feed(ev(0, 110, R"("status":"finished")"));
  EXPECT_EQ(r.status, RankStatus::kFinished);
  EXPECT_EQ(r.updated.wall_ns, 110 * kSec);
  feed(ev(0, 90, R"("beat":true)"));
  EXPECT_EQ(r.updated.wall_ns, 110 * kSec) << "an older line does not move 'updated' back";
  EXPECT_EQ(r.beat_count, 2u);

  feed(ev(1, 50, R"("step":3)"));
  ASSERT_EQ(f.ranks().size(), 2u);
  const RankSnapshot& r1 = f.ranks().at(1);
  EXPECT_EQ(r1.rank, 1);
  EXPECT_EQ(r1.local_rank, 1) << "local rank defaults to the rank";
  EXPECT_EQ(r1.step, 3);
  EXPECT_EQ(r1.created.wall_ns, 50 * kSec);
  EXPECT_EQ(r.step, 9) << "ranks fold independently";
}

TEST(JsonlFolder, FirstStepInsideALabeledPhaseKeepsTheLabel) {
  JsonlFolder f;
  ASSERT_TRUE(f.feed(ev(0, 100, R"("step":0,"phase":"compile")"), 1).ok());
  EXPECT_EQ(f.ranks().at(0).phase, "compile");
  EXPECT_EQ(f.ranks().at(0).phase_count, 1u);
}

TEST(JsonlFolder, BadLineKeepsPriorState) {
  JsonlFolder f("/x/progress.jsonl");
  ASSERT_TRUE(f.feed(ev(0, 100, R"("step":1,"loss":2.0)"), 1).ok());
  struct Case {
    std::string line;
    Errc code;
    std::string message_has;
  } cases[] = {
      {ev(0, 101, R"("step":"x")"), Errc::kParse, "/x/progress.jsonl:2: field \"step\""},
      // Valid fields before the bad one are not applied either.
      {ev(0, 101, R"("step":5,"loss":1.0,"status":"bogus")"), Errc::kParse,
       "/x/progress.jsonl:3: field \"status\""},
      {"{\"job\":\"j\",\"rank\":0,\"time\":10", Errc::kParse,
       "/x/progress.jsonl:4: not valid JSON"},
      {"[]", Errc::kParse, "/x/progress.jsonl:5: not a JSON object"},
  };
  int64_t line_no = 2;
  for (const auto& c : cases) {
    Status st = f.feed(c.line, line_no++);
    ASSERT_FALSE(st.ok()) << c.line;
    EXPECT_EQ(st.error().code, c.code);
    EXPECT_THAT(st.error().message, HasSubstr(c.message_has));
  }
  const RankSnapshot& r = f.ranks().at(0);
  EXPECT_EQ(r.step, 1);
  EXPECT_EQ(r.step_count, 1u);
  EXPECT_EQ(r.loss, 2.0);
  EXPECT_EQ(r.status, RankStatus::kRunning);
  EXPECT_EQ(f.ranks().size(), 1u);

  // Blank lines and trailing whitespace or CR are fine.
  EXPECT_TRUE(f.feed("", 10).ok());
  EXPECT_TRUE(f.feed("  \t\r", 11).ok());
  EXPECT_TRUE(f.feed(ev(0, 102, R"("step":2)") + " \r", 12).ok());
  EXPECT_EQ(r.step, 2);
}

TEST(JsonlFolder, JobMismatch) {
  JsonlFolder expecting("/x/progress.jsonl", "job-a");
  Status st = expecting.feed(ev(0, 100, R"("step":1)", "job-b"), 7);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Errc::kJobMismatch);
  EXPECT_THAT(st.error().message,
              HasSubstr("/x/progress.jsonl:7: line belongs to job \"job-b\", expected \"job-a\""));
  EXPECT_TRUE(expecting.ranks().empty());
  EXPECT_TRUE(expecting.feed(ev(0, 100, R"("step":1)", "job-a"), 8).ok());

  JsonlFolder any;
  ASSERT_TRUE(any.feed(ev(0, 100, R"("step":1)", "job-a"), 1).ok());
  st = any.feed(ev(0, 101, R"("step":2)", "job-b"), 2);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Errc::kJobMismatch);
  EXPECT_THAT(st.error().message, HasSubstr("rank 0 was job \"job-a\", now \"job-b\""));
  EXPECT_EQ(any.ranks().at(0).step, 1);
  EXPECT_TRUE(any.feed(ev(1, 101, R"("step":2)", "job-b"), 3).ok());
}

TEST(JsonlFolder, ApplyWithoutParsing) {
  JsonlFolder f("p");
  ProgressEvent e;
  e.job = "j";
  e.rank = 2;
  e.wall_ns = 5 * kSec;
  e.step = 7;
  e.world_size = 4;
  f.apply(e);
  EXPECT_EQ(f.ranks().at(2).step, 7);
  EXPECT_EQ(f.ranks().at(2).world_size, 4);
  EXPECT_EQ(f.path(), "p");
}

}  // namespace
}  // namespace stepwatch::contract
