// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// job_scan: listing jobs and merging each rank's beacon and JSONL records.
#include "src/contract/job_scan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "src/contract/beacon_writer.h"
#include "src/contract/names.h"
#include "tests/contract/test_support.h"

namespace stepwatch::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> messages(const std::vector<Error>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.message);
  return out;
}

class JobScan : public ::testing::Test {
 protected:
  std::unique_ptr<BeaconWriter> writer(const std::string& job, int rank, int world) {
    Identity id;
    id.dir = root_.path();
    id.job = job;
    id.host = "node-1";
    id.rank = rank;
    id.local_rank = rank;
    id.world_size = world;
    auto w = BeaconWriter::create(id);
    if (!w) ADD_FAILURE() << w.error().message;
    return w ? std::move(*w) : nullptr;
  }
  std::string jsonl(const std::string& job) { return jsonl_path(root_.path(), job); }
  test::TempDir root_;
};

TEST_F(JobScan, ListJobsSkipsJunkWithAReason) {
  for (const char* d : {"job-b", "job-a", ".hidden", "bad name", "-dash"}) {
    std::filesystem::create_directories(root_ / d);
  }
  test::write_file(root_ / "stray.txt", "x");
  ASSERT_EQ(::symlink((root_ / "job-a").c_str(), (root_ / "link").c_str()), 0);

  std::vector<Error> skipped;
  auto jobs = list_jobs(root_.path(), &skipped);
  ASSERT_TRUE(jobs.ok()) << jobs.error().message;
  EXPECT_THAT(*jobs, ElementsAre("job-a", "job-b"));
  auto m = messages(skipped);
  ASSERT_EQ(m.size(), 4u) << ::testing::PrintToString(m);
  EXPECT_THAT(m, ::testing::Contains(HasSubstr(root_ / "bad name")));
  EXPECT_THAT(m, ::testing::Contains(HasSubstr(root_ / "-dash")));
  EXPECT_THAT(m, ::testing::Contains(HasSubstr(root_ / "stray.txt" + ": not a job directory")));
  EXPECT_THAT(m, ::testing::Contains(HasSubstr(root_ / "link" + ": not a job directory")));
  for (const auto& e : skipped) EXPECT_THAT(e.message, HasSubstr("skipped"));

  auto again = list_jobs(root_.path());  // without a list for the skipped names
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *jobs);
}

TEST_F(JobScan, ListJobsOfAMissingRoot) {
  auto jobs = list_jobs(root_ / "nope");
  ASSERT_FALSE(jobs.ok());
  EXPECT_EQ(jobs.error().code, Errc::kNotFound);
  EXPECT_THAT(jobs.error().message, HasSubstr(root_ / "nope"));
}

TEST_F(JobScan, EmptyRootHasNoJobs) {
  auto jobs = list_jobs(root_.path());
  ASSERT_TRUE(jobs.ok());
  EXPECT_THAT(*jobs, IsEmpty());
}

TEST_F(JobScan, MergesBeaconAndJsonlRanks) {
  const std::string job = "merge";
  auto w0 = writer(job, 0, 4);
  auto w2 = writer(job, 2, 4);
  auto w3 = writer(job, 3, 4);
  ASSERT_TRUE(w0 && w2 && w3);
  ASSERT_EQ(w0->step(5), STEPWATCH_OK);
  ASSERT_EQ(w2->step(7), STEPWATCH_OK);
  ASSERT_EQ(w3->step(30), STEPWATCH_OK);
  int64_t now_s = wall_now_ns() / 1'000'000'000;
  test::write_file(jsonl(job),
                   // rank 1 only writes JSONL
                   "{\"job\":\"merge\",\"rank\":1,\"time\":" + std::to_string(now_s) +
                       ",\"step\":11}\n" +
                       // rank 2 moved from the beacon to JSONL: its JSONL step is newer and wins
                       "{\"job\":\"merge\",\"rank\":2,\"time\":" + std::to_string(now_s + 1000) +
                       ",\"step\":8}\n" +
                       // rank 3's JSONL line is ancient: the beacon wins
                       "{\"job\":\"merge\",\"rank\":3,\"time\":1000,\"step\":1}\n");

  JobView v = scan_job(root_.path(), job);
  EXPECT_THAT(messages(v.problems), IsEmpty());
  EXPECT_EQ(v.job, job);
  EXPECT_EQ(v.dir, root_ / job);
  ASSERT_EQ(v.ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(v.ranks[r].rank, r) << "sorted by rank, one per rank";
  EXPECT_EQ(v.ranks[0].source, Source::kBeacon);
  EXPECT_EQ(v.ranks[0].step, 5);
  EXPECT_EQ(v.ranks[1].source, Source::kJsonl);
  EXPECT_EQ(v.ranks[1].step, 11);
  EXPECT_EQ(v.ranks[1].path, jsonl(job));
  EXPECT_EQ(v.ranks[2].source, Source::kJsonl);
  EXPECT_EQ(v.ranks[2].step, 8);
  EXPECT_EQ(v.ranks[3].source, Source::kBeacon);
  EXPECT_EQ(v.ranks[3].step, 30);
}

TEST_F(JobScan, ReportsBadFilesAndIgnoresOthers) {
  const std::string job = "junk";
  auto w0 = writer(job, 0, 2);
  auto w1 = writer(job, 1, 2);
  ASSERT_TRUE(w0 && w1);
  ASSERT_EQ(w1->step(1), STEPWATCH_OK);
  std::string dir = root_ / job;
  // Files that are not beacons live here too: ignored without a word.
  test::write_file(dir + "/stack-1234.txt", "Thread 1 ...");
  test::write_file(dir + "/rank-x.beacon", "not a rank");
  test::write_file(dir + "/rank-01.beacon", "leading zero");
  test::write_file(dir + "/.rank-0.beacon.tmp-99", "a writer's temporary file");
  std::filesystem::create_directories(dir + "/artifacts");
  // A beacon copied under another rank's name.
  std::filesystem::copy_file(w1->path(), dir + "/rank-7.beacon");
  // A beacon that is not one.
  test::write_file(dir + "/rank-5.beacon", std::string(1024, 'z'));
  // A beacon of another job.
  auto foreign = writer("other-job", 6, 8);
  ASSERT_TRUE(foreign);
  std::filesystem::copy_file(foreign->path(), dir + "/rank-6.beacon");
  // A bad JSONL line.
  test::write_file(jsonl(job), "{\"job\":\"junk\",\"rank\":0,\"time\":1}\nnot json\n");

  JobView v = scan_job(root_.path(), job);
  auto m = messages(v.problems);
  ASSERT_EQ(m.size(), 4u) << ::testing::PrintToString(m);
  EXPECT_THAT(m, ::testing::Contains(AllOf(HasSubstr(dir + "/rank-7.beacon"),
                                           HasSubstr("file name says rank 7, record says 1"))));
  EXPECT_THAT(
      m, ::testing::Contains(AllOf(HasSubstr(dir + "/rank-5.beacon"), HasSubstr("bad magic"))));
  EXPECT_THAT(
      m, ::testing::Contains(AllOf(HasSubstr(dir + "/rank-6.beacon"), HasSubstr("\"other-job\""))));
  EXPECT_THAT(m, ::testing::Contains(HasSubstr(jsonl(job) + ":2: not valid JSON")));
  ASSERT_EQ(v.ranks.size(), 2u);
  EXPECT_EQ(v.ranks[0].rank, 0);
  EXPECT_EQ(v.ranks[0].source, Source::kBeacon)
      << "a JSONL rank without steps does not replace a beacon";
  EXPECT_EQ(v.ranks[1].rank, 1);
  EXPECT_EQ(v.ranks[1].step, 1);
}

TEST_F(JobScan, MissingJobDirectory) {
  JobView v = scan_job(root_.path(), "nope");
  EXPECT_TRUE(v.ranks.empty());
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].code, Errc::kNotFound);
  EXPECT_THAT(v.problems[0].message, HasSubstr(root_ / "nope"));
}

TEST_F(JobScan, JsonlOnlyJob) {
  std::filesystem::create_directories(root_ / "text");
  test::write_file(jsonl("text"),
                   "{\"job\":\"text\",\"rank\":0,\"time\":5,\"step\":2,\"world_size\":2}\n");
  JobView v = scan_job(root_.path(), "text");
  EXPECT_THAT(messages(v.problems), IsEmpty());
  ASSERT_EQ(v.ranks.size(), 1u);
  EXPECT_EQ(v.ranks[0].step, 2);
  EXPECT_EQ(v.ranks[0].world_size, 2);
}

TEST_F(JobScan, AFloodedRootListsABoundedNumberOfSkippedEntriesAndCountsThemAll) {
  std::filesystem::create_directories(root_ / "job-ok");
  for (int i = 0; i < 2000; ++i) test::write_file(root_ / ("junk-" + std::to_string(i)), "x");
  for (int i = 0; i < 300; ++i)
    std::filesystem::create_directories(root_ / ("bad name " + std::to_string(i)));
  std::vector<Error> skipped;
  size_t total = 0;
  auto jobs = list_jobs(root_.path(), &skipped, 10, &total);
  ASSERT_TRUE(jobs.ok()) << jobs.error().message;
  EXPECT_THAT(*jobs, ElementsAre("job-ok"));
  EXPECT_EQ(total, 2300u);
  ASSERT_EQ(skipped.size(), 11u);
  EXPECT_THAT(skipped.back().message,
              HasSubstr(root_.path() + ": 2290 more entries that are not job directories"));
}

}  // namespace
}  // namespace stepwatch::contract
