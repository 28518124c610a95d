// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// JobReader: the agent's repeated look at one job. Same records as scan_job; beacons stay
// mapped and unchanged ones are not decoded again; files that are replaced, deleted, truncated
// under the mapping, grown, symlinked or junk are reported and skipped without losing the
// good ranks; a flooded directory yields a bounded problem list.
#include "src/contract/job_reader.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "src/contract/beacon_writer.h"
#include "src/contract/names.h"
#include "tests/contract/test_support.h"

namespace stepwatch::contract {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> messages(const std::vector<Error>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.message);
  return out;
}

std::vector<int> ranks_of(const JobView& v) {
  std::vector<int> out;
  for (const auto& r : v.ranks) out.push_back(r.rank);
  return out;
}

class JobReaderTest : public ::testing::Test {
 protected:
  std::unique_ptr<BeaconWriter> writer(int rank, int world = 4) {
    Identity id;
    id.dir = root_.path();
    id.job = "job-r";
    id.host = "node-1";
    id.rank = rank;
    id.local_rank = rank;
    id.world_size = world;
    auto w = BeaconWriter::create(id);
    if (!w) ADD_FAILURE() << w.error().message;
    return w ? std::move(*w) : nullptr;
  }
  std::string beacon(int rank) { return beacon_path(root_.path(), "job-r", rank); }
  test::TempDir root_;
};

TEST_F(JobReaderTest, ReadsWhatScanJobReadsAndDecodesOnlyWhatChanged) {
  auto w0 = writer(0), w1 = writer(1);
  w0->step(5);
  w1->step(5);
  test::write_file(jsonl_path(root_.path(), "job-r"),
                   R"({"job":"job-r","rank":2,"time":1700000000,"step":4})"
                   "\n");
  JobReader reader(root_.path(), "job-r");
  JobView a = reader.poll();
  JobView b = scan_job(root_.path(), "job-r");
  EXPECT_THAT(messages(a.problems), IsEmpty());
  ASSERT_EQ(ranks_of(a), ranks_of(b));
  EXPECT_EQ(ranks_of(a), (std::vector<int>{0, 1, 2}));
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    EXPECT_EQ(a.ranks[i].step, b.ranks[i].step);
    EXPECT_EQ(a.ranks[i].source, b.ranks[i].source);
  }
  EXPECT_EQ(reader.last_stats().mapped, 2u);
  EXPECT_EQ(reader.last_stats().decoded, 2u);

  w1->step(6);
  test::append_file(jsonl_path(root_.path(), "job-r"),
                    R"({"job":"job-r","rank":2,"time":1700000001,"step":5})"
                    "\n");
  JobView c = reader.poll();
  EXPECT_EQ(reader.last_stats().mapped, 0u);
  EXPECT_EQ(reader.last_stats().decoded, 1u);    // rank 1 only
  EXPECT_EQ(reader.last_stats().unchanged, 1u);  // rank 0 kept its record
  ASSERT_EQ(c.ranks.size(), 3u);
  EXPECT_EQ(*c.ranks[0].step, 5);
  EXPECT_EQ(*c.ranks[1].step, 6);
  EXPECT_EQ(*c.ranks[2].step, 5);  // the JSONL was followed, not re-read
}

TEST_F(JobReaderTest, ASampleAloneIsAChangeTheReaderSees) {
  // The sampler writes under its own lock: a poll must not skip a record whose only change is
  // the sampler block, or the watchdog would never see the main thread move.
  auto w0 = writer(0, 1);
  w0->step(5);
  JobReader reader(root_.path(), "job-r");
  JobView a = reader.poll();
  ASSERT_EQ(a.ranks.size(), 1u);
  EXPECT_FALSE(a.ranks[0].sample.has_value());
  ASSERT_EQ(w0->sample(11, STEPWATCH_WAIT_NONE, "forward"), STEPWATCH_OK);
  JobView b = reader.poll();
  EXPECT_EQ(reader.last_stats().decoded, 1u);
  ASSERT_TRUE(b.ranks[0].sample.has_value());
  EXPECT_EQ(b.ranks[0].sample->hash, 11u);
  reader.poll();
  EXPECT_EQ(reader.last_stats().unchanged, 1u);  // nothing new: not decoded again
}

TEST_F(JobReaderTest, AReplacedBeaconIsMappedAgainAndADeletedOneDisappears) {
  auto w0 = writer(0), w1 = writer(1);
  w0->step(10);
  w1->step(10);
  JobReader reader(root_.path(), "job-r");
  ASSERT_EQ(reader.poll().ranks.size(), 2u);
  // A new incarnation of rank 0 creates its beacon afresh (a new file under the same name).
  w0.reset();
  auto again = writer(0);
  again->step(3);
  std::filesystem::remove(beacon(1));
  JobView v = reader.poll();
  EXPECT_EQ(reader.last_stats().mapped, 1u);
  ASSERT_EQ(ranks_of(v), (std::vector<int>{0}));
  EXPECT_EQ(*v.ranks[0].step, 3);
  EXPECT_THAT(messages(v.problems), IsEmpty());
}

TEST_F(JobReaderTest, ABeaconTruncatedUnderTheMappingIsReportedNotACrash) {
  auto w0 = writer(0), w1 = writer(1);
  w0->step(1);
  w1->step(1);
  JobReader reader(root_.path(), "job-r");
  ASSERT_EQ(reader.poll().ranks.size(), 2u);
  // Another user empties rank 1's file while the reader keeps it mapped: touching the mapping
  // now faults (SIGBUS). The reader must report it and go on.
  ASSERT_EQ(::truncate(beacon(1).c_str(), 0), 0);
  JobView v = reader.poll();
  EXPECT_EQ(ranks_of(v), (std::vector<int>{0}));
  EXPECT_THAT(messages(v.problems),
              Contains(HasSubstr(beacon(1) + ": the file shrank while mapped")));
  // Reported on every poll while it lasts, without reopening it each time.
  JobView again = reader.poll();
  EXPECT_EQ(reader.last_stats().mapped, 0u);
  EXPECT_EQ(ranks_of(again), (std::vector<int>{0}));
  EXPECT_EQ(again.problems.size(), 1u);
  // A proper beacon under that name again: read again.
  std::filesystem::remove(beacon(1));
  auto w1b = writer(1);
  w1b->step(2);
  JobView back = reader.poll();
  EXPECT_EQ(ranks_of(back), (std::vector<int>{0, 1}));
  EXPECT_THAT(messages(back.problems), IsEmpty());
}

// A file that changes size without faulting the mapping (it grows, or shrinks within the first
// page) is caught by the size audit within one round.
TEST_F(JobReaderTest, ABeaconThatChangesSizeIsReportedAndSkippedWithinOneAuditRound) {
  for (off_t size : {4096, 100}) {
    SCOPED_TRACE(size);
    auto w0 = writer(0);
    w0->step(1);
    JobReaderOptions opts;
    opts.audit_every = 4;
    JobReader reader(root_.path(), "job-r", opts);
    ASSERT_EQ(reader.poll().ranks.size(), 1u);
    ASSERT_EQ(::truncate(beacon(0).c_str(), size), 0);
    bool reported = false;
    for (int i = 0; i < opts.audit_every && !reported; ++i) {
      JobView v = reader.poll();
      for (const auto& m : messages(v.problems)) {
        reported =
            reported || m.find(fmt::format("changed size to {} bytes", size)) != std::string::npos;
      }
      if (reported) {
        EXPECT_THAT(v.ranks, IsEmpty());
      }
    }
    EXPECT_TRUE(reported) << "a beacon that changed size must be reported within audit_every polls";
    w0.reset();
    std::filesystem::remove(beacon(0));
  }
}

TEST_F(JobReaderTest, SymlinksAndForeignFilesAreSkippedWithTheirNames) {
  auto w0 = writer(0);
  w0->step(1);
  std::string outside = root_ / "elsewhere.beacon";
  std::filesystem::copy_file(beacon(0), outside);
  ASSERT_EQ(::symlink(outside.c_str(), beacon(1).c_str()), 0);
  test::write_file(beacon(2), std::string(1024, 'x'));
  JobReader reader(root_.path(), "job-r");
  JobView v = reader.poll();
  EXPECT_EQ(ranks_of(v), (std::vector<int>{0}));
  auto m = messages(v.problems);
  EXPECT_THAT(m, Contains(HasSubstr(beacon(1) + ": is a symlink, refused")));
  EXPECT_THAT(m, Contains(HasSubstr(beacon(2))));
}

TEST_F(JobReaderTest, AFloodedDirectoryGivesABoundedProblemListAndIsNotReopenedEachPoll) {
  auto w0 = writer(0), w1 = writer(1);
  w0->step(8);
  w1->step(8);
  std::string dir = job_dir(root_.path(), "job-r");
  // 3,000 files that are not beacons by name, and 1,500 that are by name but hold junk.
  for (int i = 0; i < 3000; ++i) test::write_file(fmt::format("{}/junk-{}.tmp", dir, i), "junk");
  for (int r = 100; r < 1600; ++r) test::write_file(beacon(r), "not a beacon");
  JobReaderOptions opts;
  opts.max_problems = 10;
  opts.audit_every = 16;
  JobReader reader(root_.path(), "job-r", opts);
  JobView v = reader.poll();
  EXPECT_EQ(ranks_of(v), (std::vector<int>{0, 1}));
  ASSERT_EQ(v.problems.size(), 11u);
  EXPECT_THAT(v.problems.back().message, HasSubstr("1490 more problem(s) not listed"));
  // The next polls reopen only the audit slice of the bad files, not all of them.
  w0->step(9);
  JobView next = reader.poll();
  EXPECT_EQ(*next.ranks[0].step, 9);
  EXPECT_EQ(reader.last_stats().mapped, 0u);
  EXPECT_EQ(next.problems.size(), 11u);
}

// D15: 200,000 empty rank-N.beacon files once cost the agent 170 MB and 0.23 s a poll. Names
// beyond the cap are neither opened nor remembered, and one line says how many.
TEST_F(JobReaderTest, BeaconNamesBeyondTheCapAreCountedNotWatched) {
  auto w0 = writer(0);
  w0->step(3);
  JobReaderOptions opts;
  opts.max_entries = 100;
  opts.max_problems = 5;
  JobReader reader(root_.path(), "job-r", opts);
  ASSERT_EQ(ranks_of(reader.poll()), (std::vector<int>{0}));  // the real beacon, seen first
  for (int r = 1000; r < 1500; ++r) test::write_file(beacon(r), "");
  JobView v = reader.poll();
  EXPECT_EQ(ranks_of(v), (std::vector<int>{0})) << "the watched beacon stays watched";
  EXPECT_EQ(*v.ranks[0].step, 3);
  EXPECT_EQ(reader.last_stats().mapped, 0u) << "empty files cannot be mapped; none is retried";
  EXPECT_EQ(v.problems_total, 100u) << "99 listed-or-summed bad files plus one line for the rest";
  EXPECT_THAT(messages(v.problems),
              Contains(HasSubstr("401 more beacon file(s) beyond the 100 watched per job")));
}

TEST_F(JobReaderTest, AMissingJobDirectoryIsAProblemAndForgetsItsBeacons) {
  auto w0 = writer(0);
  w0->step(1);
  JobReader reader(root_.path(), "job-r");
  ASSERT_EQ(reader.poll().ranks.size(), 1u);
  w0.reset();
  std::filesystem::remove_all(job_dir(root_.path(), "job-r"));
  JobView v = reader.poll();
  EXPECT_THAT(v.ranks, IsEmpty());
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_EQ(v.problems[0].code, Errc::kNotFound);
}

}  // namespace
}  // namespace stepwatch::contract
