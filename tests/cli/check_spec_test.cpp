// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch check-spec`: what it prints and its exit codes.
#include "src/cli/check_spec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"

namespace stepwatch::cli {
namespace {

std::string source_dir() {
  const char* d = std::getenv("STEPWATCH_SOURCE_DIR");
  return d != nullptr ? d : ".";
}

class CheckSpec : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  int run(const std::vector<std::string>& paths, bool json = false) {
    out_.clear();
    return check_spec_report(paths, json, &out_);
  }
  test::TempDir tmp_;
  std::string dir_ = tmp_.path();
  std::string out_;
};

TEST_F(CheckSpec, ValidFilePrintsOkAndTheEffectiveValues) {
  std::string path = write("good.toml", R"(job = "demo"
owner = "me"
expected_interval = "2s"
grace_intervals = 3
[phases]
compile = "20m"
compile_warm = "4m"
tokenize = { budget = "30s", beats_renew = true }
[[runbook.pager]]
url = "http://127.0.0.1:9/p"
)");
  EXPECT_EQ(run({path}), kCheckSpecOk) << out_;
  EXPECT_EQ(out_.rfind(path + ": ok\n", 0), 0u) << out_;
  EXPECT_NE(out_.find("  job       demo (owner me)\n"), std::string::npos) << out_;
  EXPECT_NE(
      out_.find("2.0s expected; stalled after 3 intervals without a step (6.0s); slow above 1.5x"),
      std::string::npos)
      << out_;
  EXPECT_NE(out_.find("compile 20m00s (warm 4m00s)"), std::string::npos) << out_;
  EXPECT_NE(out_.find("tokenize 30.0s (beats renew)"), std::string::npos) << out_;
  EXPECT_EQ(out_.find("compile_warm"), std::string::npos) << "shown with compile: " << out_;
  EXPECT_NE(
      out_.find(
          "  paging    webhook http://127.0.0.1:9/…; ack within 10m00s; an acked incident waits up "
          "to 1h00m\n"),
      std::string::npos)
      << out_;
  EXPECT_NE(out_.find("  recovery  preempt after 1 stalled verdict (SIGTERM, kill after 30.0s); "
                      "checkpoints as the "
                      "beacons report them; resume the original command "
                      "(STEPWATCH_RESUME_CHECKPOINT); restart budget 3\n"),
            std::string::npos)
      << out_;
}

TEST_F(CheckSpec, EmptyFileShowsTheDefaults) {
  std::string path = write("empty.toml", "");
  EXPECT_EQ(run({path}), kCheckSpecOk);
  EXPECT_NE(out_.find("learned (warmup 3 steps, window 32); stalled after 2 intervals without a "
                      "step; slow above "
                      "1.5x"),
            std::string::npos)
      << out_;
  EXPECT_NE(out_.find("checkpoint 15m00s, compile 30m00s (warm 10m00s), data 10m00s, eval 30m00s, "
                      "finish 10m00s, init 10m00s"),
            std::string::npos)
      << out_;
  EXPECT_NE(out_.find("  paging    nobody;"), std::string::npos) << out_;
}

TEST_F(CheckSpec, InvalidFilePrintsEveryErrorAndExitsOne) {
  std::string path =
      write("bad.toml", "grace_intervals = 0\nslow_factr = 2\n[phases]\ninit = -1\n");
  EXPECT_EQ(run({path}), kCheckSpecInvalid);
  EXPECT_EQ(out_, path +
                      ":1: grace_intervals: must be >= 1 and <= 1000 (intervals without a step "
                      "before a stall), "
                      "got 0\n" +
                      path + ":2: slow_factr: unknown key; did you mean \"slow_factor\"?\n" + path +
                      ":4: phases.init: must be a positive duration, got -1\n" + path +
                      ": invalid (3 errors)\n");
}

TEST_F(CheckSpec, MalformedTomlExitsOne) {
  std::string path = write("syntax.toml", "job = \"a\"\n[runbook\n");
  EXPECT_EQ(run({path}), kCheckSpecInvalid);
  EXPECT_EQ(out_.rfind(path + ":2:", 0), 0u) << out_;
  EXPECT_NE(out_.find("malformed TOML"), std::string::npos) << out_;
  EXPECT_NE(out_.find(path + ": invalid (1 error)\n"), std::string::npos) << out_;
}

TEST_F(CheckSpec, WarningsAreShownButDoNotFail) {
  std::string path = write("warn.toml", "slow_factor = 2.5\n");
  EXPECT_EQ(run({path}), kCheckSpecOk);
  EXPECT_EQ(out_.rfind(path + ":1: warning: slow_factor: slow_factor 2.5 >= grace_intervals 2", 0),
            0u)
      << out_;
  EXPECT_NE(out_.find(path + ": ok\n"), std::string::npos);
}

TEST_F(CheckSpec, UnreadableExitsTwoAndWinsOverInvalid) {
  std::string bad = write("bad.toml", "grace_intervals = 0\n");
  std::string missing = dir_ + "/missing.toml";
  EXPECT_EQ(run({missing}), kCheckSpecUnreadable);
  EXPECT_EQ(out_, missing + ": cannot read: No such file or directory\n");
  EXPECT_EQ(run({dir_}), kCheckSpecUnreadable);
  EXPECT_EQ(run({bad, missing}), kCheckSpecUnreadable);
  EXPECT_NE(out_.find(bad + ": invalid"), std::string::npos)
      << "every file is still checked: " << out_;
  EXPECT_EQ(run({missing, bad}), kCheckSpecUnreadable);
}

TEST_F(CheckSpec, ShippedExamplesAreValid) {
  std::string small = source_dir() + "/examples/specs/debug-small.toml";
  std::string large = source_dir() + "/examples/specs/pretrain-large.toml";
  EXPECT_EQ(run({small, large}), kCheckSpecOk) << out_;
  EXPECT_EQ(out_.find("warning"), std::string::npos) << out_;
  EXPECT_NE(out_.find(small + ": ok\n"), std::string::npos) << out_;
  EXPECT_NE(out_.find(large + ": ok\n"), std::string::npos) << out_;
}

TEST_F(CheckSpec, JsonHasStatusErrorsAndTheEffectiveSpec) {
  std::string good = write("good.toml", "expected_interval = \"4s\"\n[phases]\nx = \"1m\"\n");
  std::string bad = write("bad.toml", "\n[log]\npreset = \"megatorn\"\n");
  std::string missing = dir_ + "/missing.toml";
  EXPECT_EQ(run({good, bad, missing}, true), kCheckSpecUnreadable);
  auto doc = nlohmann::json::parse(out_);
  EXPECT_FALSE(doc["ok"].get<bool>());
  ASSERT_EQ(doc["files"].size(), 3u);
  const auto& g = doc["files"][0];
  EXPECT_EQ(g["file"], good);
  EXPECT_EQ(g["status"], "ok");
  EXPECT_EQ(g["spec"]["expected_interval_ns"], 4'000'000'000LL);
  EXPECT_EQ(g["spec"]["stall_after_ns"], 8'000'000'000LL);
  EXPECT_EQ(g["spec"]["phases"]["x"]["budget_ns"], 60'000'000'000LL);
  EXPECT_EQ(g["spec"]["phases"]["compile_warm"]["budget"], "10m00s");
  EXPECT_TRUE(g["spec"]["poll_interval_ns"].is_null());
  EXPECT_EQ(g["spec"]["runbook"]["collect"]["max_bytes"], 64 << 20);
  const auto& b = doc["files"][1];
  EXPECT_EQ(b["status"], "invalid");
  ASSERT_EQ(b["errors"].size(), 1u);
  EXPECT_EQ(b["errors"][0]["line"], 3);
  EXPECT_EQ(b["errors"][0]["key"], "log.preset");
  EXPECT_FALSE(b.contains("spec"));
  EXPECT_EQ(doc["files"][2]["status"], "unreadable");

  EXPECT_EQ(run({good}, true), kCheckSpecOk);
  EXPECT_TRUE(nlohmann::json::parse(out_)["ok"].get<bool>());
}

}  // namespace
}  // namespace stepwatch::cli
