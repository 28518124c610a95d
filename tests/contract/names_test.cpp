// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/contract/names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace stepwatch::contract {
namespace {

using ::testing::HasSubstr;

struct NameCase {
  std::string text;
  bool ok;
  std::string why;  // substring of the error message when !ok
};

void check_table(Status (*validate)(std::string_view), const std::vector<NameCase>& table) {
  for (const auto& c : table) {
    SCOPED_TRACE("input \"" + c.text + "\"");
    Status st = validate(c.text);
    EXPECT_EQ(st.ok(), c.ok) << (st.ok() ? "accepted" : st.error().message);
    if (!c.ok && !st.ok()) {
      EXPECT_EQ(st.error().code, Errc::kInvalidArgument);
      EXPECT_THAT(st.error().message, HasSubstr(c.why));
    }
  }
}

TEST(Names, JobIds) {
  check_table(validate_job_id, {
                                   {"a", true, ""},
                                   {"job-1", true, ""},
                                   {"Job_2.run-3", true, ""},
                                   {"0abc", true, ""},
                                   {"a.", true, ""},
                                   {std::string(63, 'j'), true, ""},
                                   {std::string(64, 'j'), false, "at most 63"},
                                   {"", false, "job id is empty"},
                                   {".hidden", false, "may not start with"},
                                   {"-flag", false, "may not start with"},
                                   {"..", false, "may not start with"},
                                   {"a/b", false, "outside [A-Za-z0-9._-]"},
                                   {"../etc", false, "outside"},
                                   {"a b", false, "outside"},
                                   {"a:b", false, "outside"},
                                   {"a\nb", false, "\\x0a"},
                                   {"caf\xc3\xa9", false, "\\xc3"},
                                   {std::string("a\0b", 3), false, "\\x00"},
                               });
}

TEST(Names, Phases) {
  check_table(validate_phase, {
                                  {"train", true, ""},
                                  {"eval/val", true, ""},
                                  {"ckpt:shard-1", true, ""},
                                  {"a.b_c", true, ""},
                                  {std::string(31, 'p'), true, ""},
                                  {std::string(32, 'p'), false, "at most 31"},
                                  {"", false, "phase is empty"},
                                  {"has space", false, "outside [A-Za-z0-9._:/-]"},
                                  {"quote\"", false, "outside"},
                                  {"semi;colon", false, "outside"},
                                  {"tab\t", false, "\\x09"},
                                  {"\xc3\xa9t\xc3\xa9", false, "outside"},
                              });
}

TEST(Names, CheckpointIds) {
  check_table(validate_checkpoint_id, {
                                          {"step-100", true, ""},
                                          {"gs://bucket/ckpt-1", true, ""},
                                          {"a!#$%&()*+,;<=>?@[]^`{|}~", true, ""},
                                          {std::string(63, 'c'), true, ""},
                                          {std::string(64, 'c'), false, "at most 63"},
                                          {"", false, "checkpoint id is empty"},
                                          {"a b", false, "without quotes"},
                                          {"a\"b", false, "without quotes"},
                                          {"a'b", false, "without quotes"},
                                          {"a\\b", false, "without quotes"},
                                          {"a\tb", false, "without quotes"},
                                          {"a\x7f", false, "\\x7f"},
                                      });
}

TEST(Names, Hosts) {
  check_table(validate_host, {
                                 {"", true, ""},
                                 {"node-1", true, ""},
                                 {std::string(63, 'h'), true, ""},
                                 {std::string(64, 'h'), false, "at most 63"},
                                 {"a b", false, "printable"},
                                 {"a\x01", false, "\\x01"},
                             });
}

// Node names reach `scontrol update NodeName=` as root: one node each, never a hostlist.
TEST(Names, NodeNames) {
  check_table(validate_node_name, {
                                      {"gpu-17.rack_2", true, ""},
                                      {"n1", true, ""},
                                      {std::string(63, 'n'), true, ""},
                                      {std::string(64, 'n'), false, "at most 63"},
                                      {"", false, "node name is empty"},
                                      {"gpu[1-100]", false, "outside [A-Za-z0-9._-]"},
                                      {"a,b", false, "outside"},
                                      {"a=b", false, "outside"},
                                      {"a b", false, "outside"},
                                      {"a/b", false, "outside"},
                                      {"-x", false, "may not start with '-'"},
                                  });
}

// Slurm job ids reach scontrol and scancel as root: an option there ("--state=RUNNING") would
// act on every job of the cluster.
TEST(Names, SlurmJobIds) {
  check_table(validate_slurm_job_id, {
                                         {"123", true, ""},
                                         {"123_4", true, ""},
                                         {"4294967295", true, ""},
                                         {"", false, "Slurm job id is empty"},
                                         {"--state=RUNNING", false,
                                          "Slurm job id \"--state=RUNNING\" must be digits, or "
                                          "digits_digits for an array task"},
                                         {"--user=alice", false, "must be digits"},
                                         {"--partition=gpu", false, "must be digits"},
                                         {"1234abc", false, "must be digits"},
                                         {"12_3x", false, "must be digits"},
                                         {"12_", false, "must be digits"},
                                         {"_3", false, "must be digits"},
                                         {"1_2_3", false, "must be digits"},
                                         {"12.0", false, "must be digits"},
                                         {"12,13", false, "must be digits"},
                                         {"12 13", false, "must be digits"},
                                         {"-12", false, "must be digits"},
                                         {"12345678901", false, "at most 10 digits"},
                                         {"12\n", false, "\\x0a"},
                                     });
}

TEST(Names, LongNamesAreShortenedInMessages) {
  Status st = validate_job_id(std::string(500, 'x'));
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("..."));
  EXPECT_THAT(st.error().message, HasSubstr("500 bytes"));
  EXPECT_LT(st.error().message.size(), 200u);
}

TEST(Names, RankFromBeaconName) {
  struct Case {
    std::string name;
    int rank;
  };
  const std::vector<Case> table = {
      {"rank-0.beacon", 0},
      {"rank-7.beacon", 7},
      {"rank-12.beacon", 12},
      {"rank-999999999.beacon", 999999999},
      {"rank-1000000000.beacon", -1},  // more than 9 digits
      {"rank-01.beacon", -1},          // leading zero: not the name a writer makes
      {"rank-00.beacon", -1},
      {"rank-.beacon", -1},
      {"rank-1x.beacon", -1},
      {"rank--1.beacon", -1},
      {"rank--5.beacon", -1},
      {"rank-+1.beacon", -1},
      {"rank- 1.beacon", -1},
      {"rank-1.beacon.tmp-5", -1},
      {".rank-1.beacon.tmp-5", -1},
      {"rank-1.beacons", -1},
      {"Rank-1.beacon", -1},
      {"rank-1.BEACON", -1},
      {"rank1.beacon", -1},
      {"progress.jsonl", -1},
      {"rank-", -1},
      {".beacon", -1},
      {"", -1},
  };
  for (const auto& c : table) {
    EXPECT_EQ(rank_from_beacon_name(c.name), c.rank) << c.name;
  }
}

TEST(Names, Paths) {
  EXPECT_EQ(job_dir("/dev/shm/stepwatch", "j1"), "/dev/shm/stepwatch/j1");
  EXPECT_EQ(beacon_path("/root", "j1", 3), "/root/j1/rank-3.beacon");
  EXPECT_EQ(jsonl_path("/root", "j1"), "/root/j1/progress.jsonl");
  EXPECT_EQ(rank_from_beacon_name("rank-42.beacon"), 42);
  // The writer's name and the reader's parser agree.
  for (int r : {0, 1, 9, 10, 4095, 999999}) {
    std::string p = beacon_path("/x", "j", r);
    EXPECT_EQ(rank_from_beacon_name(p.substr(p.rfind('/') + 1)), r);
  }
  EXPECT_STREQ(kDefaultDir, "/dev/shm/stepwatch");
}

}  // namespace
}  // namespace stepwatch::contract
