// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// D21 through the real binary: `stepwatch run` and `stepwatch agent` refuse an empty (0-byte)
// stepwatch.db, naming it and --new-store; with --new-store it becomes a new store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "tests/cli/run_binary.h"
#include "tests/contract/test_support.h"

namespace {

using ::testing::HasSubstr;

off_t size_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

class EmptyStoreCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(state_);
    std::filesystem::create_directories(root_);
    std::ofstream(db_.c_str()).flush();  // a store truncated to 0 bytes
    ASSERT_EQ(size_of(db_), 0);
  }
  std::vector<std::string> run_args(bool new_store) {
    std::vector<std::string> args = {"run",   "--state-dir", state_,       "--job",       "d21",
                                     "--dir", root_,         "--nvml-lib", "/nonexistent"};
    if (new_store) args.push_back("--new-store");
    args.insert(args.end(), {"--", "true"});
    return args;
  }
  stepwatch::test::TempDir scratch_;
  std::string state_ = scratch_ / "state";
  std::string root_ = scratch_ / "root";
  std::string db_ = state_ + "/stepwatch.db";
};

TEST_F(EmptyStoreCli, RunRefusesItAndSaysHowToStartAfresh) {
  RunResult r = run(run_args(false), scratch_.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(db_ + ": the database file is empty (0 bytes"));
  EXPECT_THAT(r.err, HasSubstr("stepwatch run --new-store"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("launched")));
  EXPECT_EQ(size_of(db_), 0) << "left as it was found";
}

TEST_F(EmptyStoreCli, RunWithNewStoreStartsANewOne) {
  RunResult r = run(run_args(true), scratch_.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("job d21 finished"));
  EXPECT_GT(size_of(db_), 0);
  // From then on it is a store like any other, without the flag.
  RunResult again = run(run_args(false), scratch_.path());
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

TEST_F(EmptyStoreCli, AgentRefusesIt) {
  std::string cfg = scratch_ / "agent.toml";
  std::ofstream(cfg) << "state_dir = \"" << state_ << "\"\nbeacon_roots = [\"" << root_
                     << "\"]\nlisten = \"127.0.0.1:0\"\ngpu = false\n";
  RunResult r = run({"agent", "--config", cfg}, scratch_.path());
  EXPECT_EQ(r.exit_code, 1) << r.err;  // kAgentStartError
  EXPECT_THAT(r.err, HasSubstr("stepwatch agent: " + db_ + ": the database file is empty"));
  EXPECT_THAT(r.err, HasSubstr("stepwatch agent --new-store"));
  EXPECT_EQ(size_of(db_), 0);
}

}  // namespace
