// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// D7: another user must not be able to speak for a job. The writer refuses a job directory (or
// beacon root) it does not own, and the reader ignores beacons and JSONL files whose owner is
// not the job directory's owner. Files of another owner need root to make (chown): these tests
// run as root, as CI does; as anyone else they say so and are skipped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "src/contract/beacon_writer.h"
#include "src/contract/job_reader.h"
#include "src/contract/names.h"
#include "tests/contract/test_support.h"

namespace stepwatch::contract {
namespace {

using ::testing::HasSubstr;

constexpr uid_t kOther = 65534;  // nobody

class Ownership : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "making files of another owner needs root (chown)";
  }
  Identity id(const std::string& job, int rank = 0) {
    Identity i;
    i.dir = root_.path();
    i.job = job;
    i.host = "node-1";
    i.rank = rank;
    i.world_size = 2;
    return i;
  }
  test::TempDir root_;
};

TEST_F(Ownership, TheWriterRefusesAJobDirectoryAnotherUserMadeFirst) {
  std::string dir = job_dir(root_.path(), "taken");
  std::filesystem::create_directories(dir);
  ASSERT_EQ(::chown(dir.c_str(), kOther, kOther), 0);
  auto w = BeaconWriter::create(id("taken"));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, Errc::kPermission);
  EXPECT_THAT(w.error().message, HasSubstr("the job directory " + dir + " belongs to uid 65534"));

  std::filesystem::create_directories(root_ / "elsewhere");
  std::filesystem::create_directory_symlink(root_ / "elsewhere", job_dir(root_.path(), "linked"));
  auto l = BeaconWriter::create(id("linked"));
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.error().message, HasSubstr("is a symlink"));

  EXPECT_TRUE(BeaconWriter::create(id("mine")).ok()) << "a directory of its own is fine";
}

TEST_F(Ownership, TheReaderIgnoresFilesNotOwnedByTheJobDirectorysOwner) {
  auto w0 = BeaconWriter::create(id("job-o", 0));
  auto w1 = BeaconWriter::create(id("job-o", 1));
  ASSERT_TRUE(w0.ok() && w1.ok());
  (*w0)->step(5);
  (*w1)->step(5);
  std::string forged = beacon_path(root_.path(), "job-o", 1);
  ASSERT_EQ(::chown(forged.c_str(), kOther, kOther), 0);  // as if another user had put it there
  std::string jsonl = jsonl_path(root_.path(), "job-o");
  test::write_file(jsonl, R"({"job":"job-o","rank":0,"time":1,"step":99})"
                          "\n");
  ASSERT_EQ(::chown(jsonl.c_str(), kOther, kOther), 0);

  JobReader reader(root_.path(), "job-o");
  JobView v = reader.poll();
  ASSERT_EQ(v.ranks.size(), 1u);
  EXPECT_EQ(v.ranks[0].rank, 0);
  EXPECT_EQ(*v.ranks[0].step, 5) << "not the JSONL's step 99";
  std::string all;
  for (const auto& p : v.problems) all += p.message + "\n";
  EXPECT_THAT(all,
              HasSubstr(forged +
                        ": owned by uid 65534, not by the job directory's owner (uid 0): ignored"));
  EXPECT_THAT(all, HasSubstr(jsonl + ": owned by uid 65534"));
}

}  // namespace
}  // namespace stepwatch::contract
