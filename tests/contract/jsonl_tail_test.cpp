// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// JsonlTail: following a growing progress.jsonl across polls.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "src/contract/jsonl.h"
#include "tests/contract/test_support.h"

namespace stepwatch::contract {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string ev(int rank, int64_t time, const std::string& fields = "") {
  std::string out =
      "{\"job\":\"j\",\"rank\":" + std::to_string(rank) + ",\"time\":" + std::to_string(time);
  if (!fields.empty()) out += "," + fields;
  return out + "}\n";
}

class JsonlTailTest : public ::testing::Test {
 protected:
  std::vector<Error> poll(JsonlTail& t, size_t max_bytes = 4 << 20) {
    auto r = t.poll(max_bytes);
    if (!r) {
      ADD_FAILURE() << r.error().message;
      return {};
    }
    return std::move(*r);
  }
  std::optional<int64_t> step(const JsonlTail& t, int rank = 0) {
    auto it = t.folder().ranks().find(rank);
    return it == t.folder().ranks().end() ? std::nullopt : it->second.step;
  }
  test::TempDir dir_;
  std::string path_ = dir_ / "progress.jsonl";
};

TEST_F(JsonlTailTest, MissingFileIsNotAnError) {
  JsonlTail t(path_, "j");
  EXPECT_THAT(poll(t), IsEmpty());
  EXPECT_TRUE(t.folder().ranks().empty());
  EXPECT_EQ(t.lines(), 0);
  // It appears later.
  test::write_file(path_, ev(0, 10, R"("step":1)"));
  EXPECT_THAT(poll(t), IsEmpty());
  EXPECT_EQ(step(t), 1);
}

TEST_F(JsonlTailTest, ReadsOnlyWhatWasAppended) {
  test::write_file(path_, ev(0, 10, R"("step":1)") + ev(1, 10, R"("step":1)"));
  JsonlTail t(path_, "j");
  EXPECT_THAT(poll(t), IsEmpty());
  EXPECT_EQ(t.lines(), 2);
  EXPECT_EQ(step(t, 0), 1);
  EXPECT_EQ(step(t, 1), 1);

  EXPECT_THAT(poll(t), IsEmpty());
  EXPECT_EQ(t.lines(), 2) << "nothing new";
  EXPECT_EQ(t.folder().ranks().at(0).step_count, 1u) << "old lines are not folded twice";

  test::append_file(path_, ev(0, 11, R"("step":2)"));
  EXPECT_THAT(poll(t), IsEmpty());
  EXPECT_EQ(t.lines(), 3);
  EXPECT_EQ(step(t, 0), 2);
  EXPECT_EQ(t.folder().ranks().at(0).step_count, 2u);
}

TEST_F(JsonlTailTest, PartialLastLineIsCompletedByALaterAppend) {
  std::string line = ev(0, 10, R"("step":9)");
  test::write_file(path_, ev(0, 9, R"("step":8)") + line.substr(0, 20));
  JsonlTail t(path_, "j");
  EXPECT_THAT(poll(t), IsEmpty()) << "an unterminated line is not an error yet";
  EXPECT_EQ(t.lines(), 1);
  EXPECT_EQ(step(t), 8);
  test::append_file(path_, line.substr(20, 5));
  EXPECT_THAT(poll(t), IsEmpty());
  EXPECT_EQ(step(t), 8);
  test::append_file(path_, line.substr(25));
  EXPECT_THAT(poll(t), IsEmpty());
  EXPECT_EQ(t.lines(), 2);
  EXPECT_EQ(step(t), 9);
}

TEST_F(JsonlTailTest, SmallReadsAssembleLinesAcrossPolls) {
  std::string content;
  for (int i = 0; i < 20; ++i) content += ev(i % 3, 100 + i, "\"step\":" + std::to_string(i));
  test::write_file(path_, content);
  JsonlTail t(path_, "j");
  int polls = 0;
  while (t.lines() < 20 && polls < 10000) {
    EXPECT_THAT(poll(t, 7), IsEmpty());
    ++polls;
  }
  EXPECT_EQ(t.lines(), 20);
  EXPECT_GE(polls, static_cast<int>(content.size() / 7));
  EXPECT_EQ(step(t, 0), 18);
  EXPECT_EQ(step(t, 1), 19);
  EXPECT_EQ(step(t, 2), 17);
  EXPECT_EQ(t.folder().ranks().at(0).step_count, 7u);
}

TEST_F(JsonlTailTest, BadLinesAreReportedWithFileAndLine) {
  test::write_file(path_, ev(0, 10, R"("step":1)") + "garbage\n" + ev(0, 11, R"("step":"two")") +
                              "{\"job\":\"other\",\"rank\":0,\"time\":12}\n" + "\n" +
                              ev(0, 13, R"("step":3)"));
  JsonlTail t(path_, "j");
  auto bad = poll(t);
  ASSERT_EQ(bad.size(), 3u);
  EXPECT_THAT(bad[0].message, HasSubstr(path_ + ":2: not valid JSON"));
  EXPECT_THAT(bad[1].message, HasSubstr(path_ + ":3: field \"step\""));
  EXPECT_EQ(bad[2].code, Errc::kJobMismatch);
  EXPECT_THAT(bad[2].message, HasSubstr(path_ + ":4:"));
  EXPECT_EQ(t.lines(), 6);
  EXPECT_EQ(step(t), 3);
  EXPECT_EQ(t.folder().ranks().at(0).step_count, 2u);
}

TEST_F(JsonlTailTest, TruncationRestartsFromTheTopAndSaysSo) {
  test::write_file(path_,
                   ev(0, 10, R"("step":1)") + ev(0, 11, R"("step":2)") + ev(1, 11, R"("step":2)"));
  JsonlTail t(path_, "j");
  EXPECT_THAT(poll(t), IsEmpty());
  EXPECT_EQ(t.lines(), 3);

  test::write_file(path_, ev(0, 20, R"("step":0)"));  // truncated and rewritten, shorter
  auto bad = poll(t);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].code, Errc::kIo);
  EXPECT_THAT(bad[0].message, HasSubstr(path_ + ": file was truncated or replaced"));
  EXPECT_EQ(t.lines(), 1) << "line numbers restart with the file";
  EXPECT_EQ(step(t, 0), 0) << "the new content is read";
  EXPECT_EQ(step(t, 1), 2) << "the fold keeps what it knew";
  EXPECT_THAT(poll(t), IsEmpty()) << "reported once";
}

TEST_F(JsonlTailTest, ReplacedFileIsReadFromTheTop) {
  test::write_file(path_, ev(0, 10, R"("step":1)"));
  JsonlTail t(path_, "j");
  EXPECT_THAT(poll(t), IsEmpty());
  // A new file renamed over the old one, longer than the old offset.
  std::string fresh = dir_ / "fresh.jsonl";
  test::write_file(fresh, ev(0, 20, R"("step":100)") + ev(0, 21, R"("step":101)"));
  ASSERT_EQ(std::rename(fresh.c_str(), path_.c_str()), 0);
  auto bad = poll(t);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_THAT(bad[0].message, HasSubstr("truncated or replaced"));
  EXPECT_EQ(t.lines(), 2);
  EXPECT_EQ(step(t), 101);
  EXPECT_EQ(t.folder().ranks().at(0).step_count, 3u);
}

TEST_F(JsonlTailTest, OverlongLineInOneReadIsSkipped) {
  std::string huge =
      "{\"job\":\"j\",\"rank\":0,\"time\":1,\"pad\":\"" + std::string(kMaxJsonlLine, 'x') + "\"}\n";
  test::write_file(path_, huge + ev(0, 10, R"("step":4)"));
  JsonlTail t(path_, "j");
  auto bad = poll(t);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_THAT(bad[0].message, HasSubstr(path_ + ":1:"));
  EXPECT_THAT(bad[0].message, HasSubstr("at most 65536"));
  EXPECT_EQ(t.lines(), 2);
  EXPECT_EQ(step(t), 4);
}

TEST_F(JsonlTailTest, OverlongLineGrowingAcrossPollsIsSkipped) {
  test::write_file(path_, ev(0, 10, R"("step":1)"));
  JsonlTail t(path_, "j");
  EXPECT_THAT(poll(t), IsEmpty());
  // A writer emits a line longer than the limit in pieces, without a newline for a while.
  std::string piece(40 * 1024, 'x');
  test::append_file(path_, "{\"job\":\"j\",\"rank\":0,\"time\":2,\"pad\":\"" + piece);
  EXPECT_THAT(poll(t), IsEmpty());
  test::append_file(path_, piece);
  auto bad = poll(t);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_THAT(bad[0].message, HasSubstr(path_ + ":2: line longer than 65536 bytes, skipped"));
  test::append_file(path_, piece);
  EXPECT_THAT(poll(t), IsEmpty()) << "the rest of the long line is dropped quietly";
  test::append_file(path_, "\"}\n" + ev(0, 12, R"("step":2)"));
  EXPECT_THAT(poll(t), IsEmpty());
  EXPECT_EQ(t.lines(), 3);
  EXPECT_EQ(step(t), 2);
  EXPECT_EQ(t.folder().ranks().at(0).step_count, 2u);
}

// D1: `truncate -s 100G progress.jsonl` once froze every agent poll in std::bad_alloc. A sparse
// file costs no disk and one bounded window of reading; the lines after it are read.
TEST_F(JsonlTailTest, AHugeSparseFileCostsOneWindowAndTheLinesAfterItAreRead) {
  test::write_file(path_, ev(0, 10, R"("step":1)"));
  JsonlTail t(path_, "j");
  EXPECT_THAT(poll(t), IsEmpty());
  ASSERT_EQ(::truncate(path_.c_str(), int64_t{100} << 30), 0);  // 100 GiB of holes
  auto bad = poll(t);
  ASSERT_EQ(bad.size(), 1u);  // said once; the window of NULs after it is the dropped part line
  EXPECT_THAT(bad[0].message, HasSubstr("bytes behind the writer"));
  EXPECT_THAT(bad[0].message, HasSubstr("skipped"));
  EXPECT_GT(t.skipped_bytes(), uint64_t{99} << 30);
  EXPECT_EQ(step(t), 1) << "what was read stays";
  EXPECT_THAT(poll(t), IsEmpty()) << "nothing new: no work";
  test::append_file(path_, "\n" + ev(0, 11, R"("step":2)"));
  poll(t);
  EXPECT_EQ(step(t), 2) << "a writer that appends after the holes is read";
}

TEST_F(JsonlTailTest, AFloodOfBadLinesIsListedUpToABoundAndCounted) {
  std::string junk;
  for (int i = 0; i < 10000; ++i) junk += "x\n";
  test::write_file(path_, junk + ev(0, 10, R"("step":3)"));
  JsonlTail t(path_, "j");
  auto bad = poll(t);
  ASSERT_EQ(bad.size(), kMaxBadLinesPerPoll + 1);
  EXPECT_THAT(bad.back().message,
              HasSubstr(std::to_string(10000 - kMaxBadLinesPerPoll) + " more bad line(s)"));
  EXPECT_EQ(step(t), 3) << "the good line after the flood is folded";
}

TEST_F(JsonlTailTest, SymlinkAndDirectoryAreRefused) {
  std::string real = dir_ / "real.jsonl";
  test::write_file(real, ev(0, 10, R"("step":1)"));
  ASSERT_EQ(::symlink(real.c_str(), path_.c_str()), 0);
  JsonlTail t(path_, "j");
  auto r = t.poll();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kInvalidArgument);
  EXPECT_THAT(r.error().message, HasSubstr(path_));
  EXPECT_THAT(r.error().message, HasSubstr("symlink"));

  std::string d = dir_ / "dir.jsonl";
  std::filesystem::create_directory(d);
  JsonlTail td(d, "j");
  auto rd = td.poll();
  ASSERT_FALSE(rd.ok());
  EXPECT_THAT(rd.error().message, HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace stepwatch::contract
