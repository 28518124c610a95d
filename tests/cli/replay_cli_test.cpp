// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The real `stepwatch replay` and `stepwatch check-spec` binaries on shipped examples and on
// broken input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/cli/run_binary.h"
#include "tests/contract/test_support.h"
#include "tests/support/scenarios/scenarios.h"

namespace {

using stepwatch::test::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// Writes one scenario of the corpus as a trace, as `detection_bench --traces` does.
std::string write_scenario(const std::string& dir, const std::string& name) {
  for (const auto& s : stepwatch::bench::make_scenarios()) {
    if (s.name != name) continue;
    std::string path = dir + "/" + name + ".jsonl";
    EXPECT_TRUE(stepwatch::bench::write_trace(s, path).ok());
    return path;
  }
  ADD_FAILURE() << "no scenario " << name;
  return "";
}

TEST(ReplayCli, PrintsTheTimelineAndComparesWithTheTruth) {
  TempDir tmp;
  std::string trace = write_scenario(tmp.path(), "collective-hang-data");
  RunResult r = run({"replay", trace}, tmp.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("spec recorded in the trace"));
  EXPECT_THAT(r.out, HasSubstr("stalled/collective"));
  EXPECT_THAT(r.out, HasSubstr("culprit rank 2"));
  EXPECT_THAT(r.out,
              HasSubstr("truth: stall at +00:10:20 (culprits 2); stepwatch fired at +00:12:21"));

  // The same trace judged by another spec: a 10-minute data budget fires 8 minutes later.
  std::string spec = tmp.path() + "/long-data.toml";
  std::ofstream(spec) << "expected_interval = \"2s\"\n[phases]\ndata = \"10m\"\n";
  RunResult other = run({"replay", "--spec", spec, trace}, tmp.path());
  EXPECT_EQ(other.exit_code, 0) << other.err;
  EXPECT_THAT(other.out, HasSubstr("stepwatch fired at +00:20:21"));

  RunResult json = run({"replay", "--json", trace}, tmp.path());
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_THAT(json.out, HasSubstr("\"state\":\"stalled\""));
  EXPECT_THAT(json.out, HasSubstr("\"offset_seconds\""));
}

TEST(ReplayCli, GarbageAndTimeGoingBackwardsAreReportedWithLineNumbersAndSkipped) {
  TempDir tmp;
  std::string trace = write_scenario(tmp.path(), "steady");
  {
    std::ofstream out(trace, std::ios::app);
    out << "not json at all\n";
    out << R"({"type":"obs","now":[1,1],"ranks":[]})"
        << "\n";
  }
  RunResult r = run({"replay", trace}, tmp.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("steady.jsonl:"));
  EXPECT_THAT(r.err, HasSubstr(": not valid JSON"));
  EXPECT_THAT(r.err, HasSubstr("observation time goes backwards"));
  EXPECT_THAT(r.out, HasSubstr("truth: no stall; stepwatch never fired"));  // the rest was replayed

  RunResult missing = run({"replay", tmp.path() + "/nope.jsonl"}, tmp.path());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("nope.jsonl"));

  std::string bad_spec = tmp.path() + "/bad.toml";
  std::ofstream(bad_spec) << "grace_intervals = 0\n";
  RunResult spec = run({"replay", "--spec", bad_spec, trace}, tmp.path());
  EXPECT_EQ(spec.exit_code, 2);
  EXPECT_THAT(spec.err, HasSubstr("bad.toml:1: grace_intervals"));
}

TEST(CheckSpecCli, ShippedExamplesAreValidAndBrokenOnesAreExplained) {
  TempDir tmp;
  std::string src = std::getenv("STEPWATCH_SOURCE_DIR");
  RunResult ok = run({"check-spec", src + "/examples/specs/debug-small.toml",
                      src + "/examples/specs/pretrain-large.toml"},
                     tmp.path());
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("debug-small.toml: ok"));
  EXPECT_THAT(ok.out, HasSubstr("pretrain-large.toml: ok"));

  std::string broken = tmp.path() + "/broken.toml";
  std::ofstream(broken) << "expected_interval = \"0s\"\ngrase_intervals = 2\n[phases\n";
  RunResult bad = run({"check-spec", broken}, tmp.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.out + bad.err, HasSubstr("broken.toml:3"));  // malformed TOML, with its line
  std::string unknown = tmp.path() + "/unknown.toml";
  std::ofstream(unknown) << "expected_interval = \"0s\"\ngrase_intervals = 2\n";
  RunResult u = run({"check-spec", unknown}, tmp.path());
  EXPECT_EQ(u.exit_code, 1);
  EXPECT_THAT(u.out + u.err, HasSubstr("unknown.toml:1: expected_interval"));
  EXPECT_THAT(u.out + u.err, HasSubstr("unknown.toml:2: grase_intervals"));
  EXPECT_THAT(u.out + u.err, HasSubstr("grace_intervals"));  // the suggestion
  EXPECT_THAT(u.out + u.err, Not(HasSubstr(": ok")));
}

}  // namespace
