// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The real `stepwatch status` binary against beacons written by the real writer.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "src/contract/beacon_writer.h"
#include "tests/cli/run_binary.h"
#include "tests/contract/test_support.h"

namespace {

using stepwatch::contract::BeaconWriter;
using stepwatch::contract::Identity;
using ::testing::HasSubstr;
using ::testing::Not;

std::string line_of_rank(const std::string& out, int rank) {
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    std::istringstream t(l);
    std::string first;
    t >> first;
    if (first == std::to_string(rank)) return l;
  }
  return "";
}

class StatusCli : public ::testing::Test {
 protected:
  std::unique_ptr<BeaconWriter> writer(const std::string& job, int rank, int world) {
    Identity id;
    id.dir = root_;
    id.job = job;
    id.host = "node-1";
    id.rank = rank;
    id.local_rank = rank;
    id.world_size = world;
    auto w = BeaconWriter::create(id);
    if (!w) ADD_FAILURE() << w.error().message;
    return w ? std::move(*w) : nullptr;
  }
  stepwatch::test::TempDir scratch_;
  std::string root_ = scratch_ / "root";
};

TEST_F(StatusCli, ShowsEachRanksStepAndPhase) {
  auto r0 = writer("train-1", 0, 3);
  auto r1 = writer("train-1", 1, 3);
  ASSERT_TRUE(r0 && r1);
  ASSERT_EQ(r0->step_loss(41, 0.5), STEPWATCH_OK);
  ASSERT_EQ(r1->step(40), STEPWATCH_OK);
  ASSERT_EQ(r1->phase_begin("eval"), STEPWATCH_OK);
  ASSERT_EQ(r1->checkpoint_committed("ckpt-40", 40), STEPWATCH_OK);

  RunResult r = run({"status", "--dir", root_, "train-1"}, scratch_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("job train-1  ranks 2/3  dir " + root_ + "/train-1"));
  std::string l0 = line_of_rank(r.out, 0), l1 = line_of_rank(r.out, 1);
  EXPECT_THAT(l0, HasSubstr(" 41 "));
  EXPECT_THAT(l0, HasSubstr(" train "));
  EXPECT_THAT(l0, HasSubstr(" 0.5 "));
  EXPECT_THAT(l0, HasSubstr(std::to_string(::getpid())));
  EXPECT_THAT(l1, HasSubstr(" 40 "));
  EXPECT_THAT(l1, HasSubstr(" eval "));
  EXPECT_THAT(l1, HasSubstr("ckpt-40@40"));
  EXPECT_THAT(r.out, HasSubstr("2 no record"));
  EXPECT_EQ(r.err, "");
}

TEST_F(StatusCli, AllJobsFromStepwatchDir) {
  auto a = writer("job-a", 0, 1);
  auto b = writer("job-b", 0, 1);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->step(7), STEPWATCH_OK);
  ASSERT_EQ(b->finish(true), STEPWATCH_OK);
  std::filesystem::create_directories(root_ + "/not a job");

  RunResult r =
      run({"status"}, scratch_.path(), {"STEPWATCH_DIR=" + root_, "STEPWATCH_JOB", "SLURM_JOB_ID"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("job job-a"));
  EXPECT_THAT(r.out, HasSubstr("job job-b"));
  EXPECT_THAT(line_of_rank(r.out, 0), HasSubstr(" 7 "));
  EXPECT_THAT(r.out, HasSubstr("finished"));
  EXPECT_THAT(r.err, HasSubstr("not a job")) << "junk in the root is reported on stderr";
}

// Inside a job (its STEPWATCH_JOB, its Slurm job) `status` shows that job, by the rule `run`
// names it by (issue 30), and says so; --all shows every job; a bad id in the environment is
// named.
TEST_F(StatusCli, InsideAJobShowsThatJobUnlessAll) {
  auto a = writer("job-a", 0, 1);
  auto b = writer("job-b", 0, 1);
  auto slurm = writer("slurm-77", 0, 1);
  ASSERT_TRUE(a && b && slurm);
  ASSERT_EQ(a->step(7), STEPWATCH_OK);
  ASSERT_EQ(b->step(9), STEPWATCH_OK);
  ASSERT_EQ(slurm->step(3), STEPWATCH_OK);
  const std::vector<std::string> env = {"STEPWATCH_DIR=" + root_, "STEPWATCH_JOB=job-a",
                                        "SLURM_JOB_ID"};

  RunResult in = run({"status", "--dir", root_}, scratch_.path(), env);
  ASSERT_EQ(in.exit_code, 0) << in.err;
  EXPECT_THAT(in.out, HasSubstr("job job-a"));
  EXPECT_THAT(in.out, Not(HasSubstr("job job-b")));
  EXPECT_THAT(in.err, HasSubstr("stepwatch status: job job-a, the one this shell runs in "
                                "(--all: every job)"));

  RunResult all = run({"status", "--dir", root_, "--all"}, scratch_.path(), env);
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_THAT(all.out, HasSubstr("job job-a"));
  EXPECT_THAT(all.out, HasSubstr("job job-b"));
  EXPECT_THAT(all.err, Not(HasSubstr("the one this shell runs in")));

  RunResult in_slurm =
      run({"status", "--dir", root_}, scratch_.path(), {"STEPWATCH_JOB", "SLURM_JOB_ID=77"});
  ASSERT_EQ(in_slurm.exit_code, 0) << in_slurm.err;
  EXPECT_THAT(in_slurm.out, HasSubstr("job slurm-77"));
  EXPECT_THAT(in_slurm.out, Not(HasSubstr("job job-a")));

  RunResult bad = run({"status", "--dir", root_}, scratch_.path(), {"STEPWATCH_JOB=../x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("stepwatch status: STEPWATCH_JOB: "));
  EXPECT_EQ(bad.out, "");
}

TEST_F(StatusCli, ProblemsAreListed) {
  auto w = writer("job-p", 0, 2);
  ASSERT_TRUE(w);
  stepwatch::test::write_file(root_ + "/job-p/rank-1.beacon", std::string(1024, 'x'));
  RunResult r = run({"status", "--dir", root_, "job-p"}, scratch_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("problem: " + root_ + "/job-p/rank-1.beacon: bad magic"));
  EXPECT_THAT(r.out, HasSubstr("1 no record"));
}

TEST_F(StatusCli, UnknownJobFails) {
  std::filesystem::create_directories(root_);
  RunResult r = run({"status", "--dir", root_, "no-such-job"}, scratch_.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(root_ + "/no-such-job"));
  EXPECT_EQ(r.out, "");
}

TEST_F(StatusCli, MissingRootFails) {
  RunResult r = run({"status", "--dir", root_ + "/absent"}, scratch_.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(root_ + "/absent"));
}

TEST_F(StatusCli, InvalidJobIdExits2) {
  for (const char* job : {"../etc", "a b", "x/y"}) {
    RunResult r = run({"status", "--dir", root_, job}, scratch_.path());
    EXPECT_EQ(r.exit_code, 2) << job << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("job id")) << job;
    EXPECT_EQ(r.out, "") << job;
  }
}

TEST_F(StatusCli, EmptyRootSaysNoJobs) {
  std::filesystem::create_directories(root_);
  RunResult r = run({"status", "--dir", root_}, scratch_.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "no jobs\n");
}

TEST_F(StatusCli, UsageErrors) {
  RunResult none = run({}, scratch_.path());
  EXPECT_NE(none.exit_code, 0) << "a subcommand is required";
  RunResult bogus = run({"status", "--no-such-flag"}, scratch_.path());
  EXPECT_NE(bogus.exit_code, 0);
  EXPECT_THAT(bogus.err + bogus.out, HasSubstr("no-such-flag"));
}

}  // namespace
