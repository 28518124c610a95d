// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/contract/identity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "src/contract/names.h"
#include "tests/contract/test_support.h"

namespace stepwatch::contract {
namespace {

using ::testing::HasSubstr;
using Env = std::map<std::string, std::string>;

GetEnv fake_env(const Env& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

struct Expected {
  std::string dir = kDefaultDir;
  std::string job = "job-1";
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  uint32_t incarnation = 0;
};

struct OkCase {
  const char* name;
  Env env;
  IdentityOverrides overrides;
  Expected want;
};

TEST(Identity, ResolvesFromEnvironmentAndOverrides) {
  const std::vector<OkCase> table = {
      {"no rank variables: rank 0 of 1", {{"STEPWATCH_JOB", "job-1"}}, {}, {}},
      {"torchrun",
       {{"STEPWATCH_JOB", "job-1"}, {"RANK", "3"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}},
       {},
       {.rank = 3, .local_rank = 1, .world_size = 8}},
      {"slurm",
       {{"STEPWATCH_JOB", "job-1"},
        {"SLURM_PROCID", "5"},
        {"SLURM_LOCALID", "2"},
        {"SLURM_NTASKS", "6"}},
       {},
       {.rank = 5, .local_rank = 2, .world_size = 6}},
      {"torchrun wins over slurm",
       {{"STEPWATCH_JOB", "job-1"},
        {"RANK", "1"},
        {"LOCAL_RANK", "1"},
        {"WORLD_SIZE", "4"},
        {"SLURM_PROCID", "7"},
        {"SLURM_LOCALID", "3"},
        {"SLURM_NTASKS", "16"}},
       {},
       {.rank = 1, .local_rank = 1, .world_size = 4}},
      {"each variable falls back on its own",
       {{"STEPWATCH_JOB", "job-1"}, {"RANK", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}},
       {},
       {.rank = 2, .local_rank = 0, .world_size = 4}},
      {"local rank defaults to rank",
       {{"STEPWATCH_JOB", "job-1"}, {"RANK", "3"}, {"WORLD_SIZE", "4"}},
       {},
       {.rank = 3, .local_rank = 3, .world_size = 4}},
      {"empty variables count as unset",
       {{"STEPWATCH_JOB", "job-1"}, {"RANK", ""}, {"WORLD_SIZE", ""}, {"STEPWATCH_DIR", ""}},
       {},
       {}},
      {"STEPWATCH_DIR and incarnation",
       {{"STEPWATCH_JOB", "job-1"},
        {"STEPWATCH_DIR", "/tmp/sw"},
        {"STEPWATCH_INCARNATION", "4294967295"}},
       {},
       {.dir = "/tmp/sw", .incarnation = 4294967295u}},
      {"overrides win over the environment",
       {{"STEPWATCH_JOB", "env-job"},
        {"STEPWATCH_DIR", "/env"},
        {"RANK", "1"},
        {"LOCAL_RANK", "1"},
        {"WORLD_SIZE", "2"},
        {"STEPWATCH_INCARNATION", "5"}},
       {.dir = "/over",
        .job = "job-1",
        .rank = 2,
        .local_rank = 0,
        .world_size = 3,
        .incarnation = 9},
       {.dir = "/over", .rank = 2, .local_rank = 0, .world_size = 3, .incarnation = 9}},
      {"negative overrides mean 'from the environment'",
       {{"STEPWATCH_JOB", "job-1"},
        {"RANK", "1"},
        {"WORLD_SIZE", "2"},
        {"STEPWATCH_INCARNATION", "5"}},
       {.rank = -1, .local_rank = -1, .world_size = -1, .incarnation = -1},
       {.rank = 1, .local_rank = 1, .world_size = 2, .incarnation = 5}},
      {"empty override strings mean 'from the environment'",
       {{"STEPWATCH_JOB", "job-1"}, {"STEPWATCH_DIR", "/env"}},
       {.dir = "", .job = ""},
       {.dir = "/env"}},
      {"job without environment", {}, {.job = "job-1"}, {}},
  };
  for (const auto& c : table) {
    SCOPED_TRACE(c.name);
    auto id = resolve_identity(c.overrides, fake_env(c.env));
    ASSERT_TRUE(id.ok()) << id.error().message;
    EXPECT_EQ(id->dir, c.want.dir);
    EXPECT_EQ(id->job, c.want.job);
    EXPECT_EQ(id->rank, c.want.rank);
    EXPECT_EQ(id->local_rank, c.want.local_rank);
    EXPECT_EQ(id->world_size, c.want.world_size);
    EXPECT_EQ(id->incarnation, c.want.incarnation);
    EXPECT_EQ(id->host.find('.'), std::string::npos) << "host is the short name: " << id->host;
    EXPECT_TRUE(validate_host(id->host).ok());
  }
}

struct BadCase {
  const char* name;
  Env env;
  IdentityOverrides overrides;
  Errc code;
  std::vector<std::string> message_has;
};

TEST(Identity, ErrorsNameTheVariableAtFault) {
  const std::vector<BadCase> table = {
      {"no job", {{"RANK", "0"}}, {}, Errc::kNotFound, {"STEPWATCH_JOB"}},
      {"empty job", {{"STEPWATCH_JOB", ""}}, {}, Errc::kNotFound, {"STEPWATCH_JOB"}},
      {"invalid job",
       {{"STEPWATCH_JOB", "../etc"}},
       {},
       Errc::kInvalidArgument,
       {"job id", "../etc"}},
      {"invalid job override", {}, {.job = "a b"}, Errc::kInvalidArgument, {"job id", "a b"}},
      {"malformed RANK",
       {{"STEPWATCH_JOB", "j"}, {"RANK", "x"}},
       {},
       Errc::kInvalidArgument,
       {"RANK=\"x\"", "integer"}},
      {"RANK with trailing junk",
       {{"STEPWATCH_JOB", "j"}, {"RANK", "3 "}, {"WORLD_SIZE", "4"}},
       {},
       Errc::kInvalidArgument,
       {"RANK=\"3 \""}},
      {"malformed WORLD_SIZE",
       {{"STEPWATCH_JOB", "j"}, {"WORLD_SIZE", "2.0"}},
       {},
       Errc::kInvalidArgument,
       {"WORLD_SIZE"}},
      {"malformed LOCAL_RANK",
       {{"STEPWATCH_JOB", "j"}, {"LOCAL_RANK", "one"}},
       {},
       Errc::kInvalidArgument,
       {"LOCAL_RANK"}},
      {"malformed SLURM_NTASKS",
       {{"STEPWATCH_JOB", "j"}, {"SLURM_NTASKS", "4a"}},
       {},
       Errc::kInvalidArgument,
       {"SLURM_NTASKS=\"4a\""}},
      {"malformed SLURM_PROCID",
       {{"STEPWATCH_JOB", "j"}, {"SLURM_PROCID", "z"}},
       {},
       Errc::kInvalidArgument,
       {"SLURM_PROCID"}},
      {"rank == world_size",
       {{"STEPWATCH_JOB", "j"}, {"RANK", "4"}, {"WORLD_SIZE", "4"}},
       {},
       Errc::kInvalidArgument,
       {"RANK=4", "WORLD_SIZE=4"}},
      {"rank > world_size (slurm)",
       {{"STEPWATCH_JOB", "j"}, {"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "4"}},
       {},
       Errc::kInvalidArgument,
       {"SLURM_PROCID=9", "SLURM_NTASKS=4"}},
      {"rank without world_size",
       {{"STEPWATCH_JOB", "j"}, {"RANK", "1"}},
       {},
       Errc::kInvalidArgument,
       {"RANK=1"}},
      {"WORLD_SIZE > 1 without RANK",
       {{"STEPWATCH_JOB", "j"}, {"WORLD_SIZE", "2"}},
       {},
       Errc::kInvalidArgument,
       {"WORLD_SIZE=2", "RANK"}},
      {"SLURM_NTASKS > 1 without rank",
       {{"STEPWATCH_JOB", "j"}, {"SLURM_NTASKS", "8"}},
       {},
       Errc::kInvalidArgument,
       {"SLURM_NTASKS=8", "SLURM_PROCID"}},
      {"negative RANK",
       {{"STEPWATCH_JOB", "j"}, {"RANK", "-1"}, {"WORLD_SIZE", "2"}},
       {},
       Errc::kInvalidArgument,
       {"RANK=-1"}},
      {"huge RANK",
       {{"STEPWATCH_JOB", "j"}, {"RANK", "4294967296"}, {"WORLD_SIZE", "2"}},
       {},
       Errc::kInvalidArgument,
       {"RANK=4294967296"}},
      {"WORLD_SIZE=0",
       {{"STEPWATCH_JOB", "j"}, {"WORLD_SIZE", "0"}},
       {},
       Errc::kInvalidArgument,
       {"WORLD_SIZE=0"}},
      {"LOCAL_RANK >= WORLD_SIZE",
       {{"STEPWATCH_JOB", "j"}, {"RANK", "0"}, {"LOCAL_RANK", "5"}, {"WORLD_SIZE", "4"}},
       {},
       Errc::kInvalidArgument,
       {"LOCAL_RANK=5"}},
      // 2^32 would wrap to 0 in an int: it must still be refused.
      {"LOCAL_RANK that wraps an int",
       {{"STEPWATCH_JOB", "j"}, {"RANK", "0"}, {"LOCAL_RANK", "4294967296"}, {"WORLD_SIZE", "4"}},
       {},
       Errc::kInvalidArgument,
       {"LOCAL_RANK=4294967296"}},
      {"negative SLURM_LOCALID",
       {{"STEPWATCH_JOB", "j"}, {"SLURM_LOCALID", "-2"}},
       {},
       Errc::kInvalidArgument,
       {"SLURM_LOCALID=-2"}},
      {"rank override >= world",
       {{"STEPWATCH_JOB", "j"}},
       {.rank = 3, .world_size = 2},
       Errc::kInvalidArgument,
       {"rank=3", "world_size=2"}},
      {"malformed incarnation",
       {{"STEPWATCH_JOB", "j"}, {"STEPWATCH_INCARNATION", "x"}},
       {},
       Errc::kInvalidArgument,
       {"STEPWATCH_INCARNATION=\"x\""}},
      {"negative incarnation",
       {{"STEPWATCH_JOB", "j"}, {"STEPWATCH_INCARNATION", "-1"}},
       {},
       Errc::kInvalidArgument,
       {"STEPWATCH_INCARNATION=-1", "out of range"}},
      {"incarnation above u32",
       {{"STEPWATCH_JOB", "j"}, {"STEPWATCH_INCARNATION", "4294967296"}},
       {},
       Errc::kInvalidArgument,
       {"STEPWATCH_INCARNATION=4294967296"}},
  };
  for (const auto& c : table) {
    SCOPED_TRACE(c.name);
    auto id = resolve_identity(c.overrides, fake_env(c.env));
    ASSERT_FALSE(id.ok()) << "accepted: rank " << id->rank << " world " << id->world_size
                          << " local " << id->local_rank;
    EXPECT_EQ(id.error().code, c.code) << id.error().message;
    for (const auto& part : c.message_has) EXPECT_THAT(id.error().message, HasSubstr(part));
  }
}

TEST(Identity, IncarnationOverrideSkipsAMalformedVariable) {
  Env env = {{"STEPWATCH_JOB", "j"}, {"STEPWATCH_INCARNATION", "x"}};
  auto id = resolve_identity({.incarnation = 3}, fake_env(env));
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_EQ(id->incarnation, 3u);
}

TEST(Identity, ReadsTheProcessEnvironment) {
  test::ScopedEnv env;
  env.clear_identity();
  env.set("STEPWATCH_JOB", "real-env");
  env.set("SLURM_PROCID", "1");
  env.set("SLURM_NTASKS", "2");
  env.set("STEPWATCH_INCARNATION", "12");
  auto id = resolve_identity({});
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_EQ(id->job, "real-env");
  EXPECT_EQ(id->rank, 1);
  EXPECT_EQ(id->local_rank, 1);
  EXPECT_EQ(id->world_size, 2);
  EXPECT_EQ(id->incarnation, 12u);
  EXPECT_EQ(id->dir, kDefaultDir);

  env.set("STEPWATCH_JOB", nullptr);
  auto missing = resolve_identity({});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kNotFound);
  EXPECT_THAT(missing.error().message, HasSubstr("STEPWATCH_JOB"));
}

}  // namespace
}  // namespace stepwatch::contract
