// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// read_text_file: whole small files that a user may have put there, without waiting or bound;
// read_small, read_range and write_all: kernel files and slices; write_private_file and
// random_token: a secret only its owner can read.
#include "src/common/text_file.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace stepwatch {
namespace {

namespace fs = std::filesystem;

class TextFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sw-text-file-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(TextFileTest, ReadsARegularFileWithItsModeAndOwner) {
  std::ofstream(path("a")) << "hello\n";
  ::chmod(path("a").c_str(), 0640);
  auto f = read_text_file(path("a"), 100);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->text, "hello\n");
  EXPECT_EQ(f->mode & 0777, 0640u);
  EXPECT_EQ(f->uid, ::getuid());
}

// D19: a FIFO as a spec or token file once hung the agent at start; it is refused at once.
TEST_F(TextFileTest, AFifoIsRefusedWithoutWaiting) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  auto t0 = std::chrono::steady_clock::now();
  auto f = read_text_file(path("fifo"), 100);
  ASSERT_FALSE(f.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(f.error().code, Errc::kInvalidArgument);
  EXPECT_EQ(f.error().message, path("fifo") + ": is a FIFO, not a regular file");
}

TEST_F(TextFileTest, DirectoriesSocketsMissingOversizeAndRefusedSymlinksAreNamed) {
  fs::create_directories(path("d"));
  EXPECT_EQ(read_text_file(path("d"), 100).error().message, path("d") + ": is a directory");

  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string sock = path("s");
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  auto on_socket = read_text_file(sock, 100);
  ::close(s);
  ASSERT_FALSE(on_socket.ok());  // open(2) of a socket fails (ENXIO) or fstat names it
  EXPECT_NE(on_socket.error().message.find(sock), std::string::npos);

  auto missing = read_text_file(path("nope"), 100);
  EXPECT_EQ(missing.error().code, Errc::kNotFound);
  EXPECT_EQ(missing.error().message, path("nope") + ": cannot read: No such file or directory");

  std::ofstream(path("big")) << std::string(101, 'x');
  EXPECT_EQ(read_text_file(path("big"), 100).error().message,
            path("big") + ": larger than 100 bytes");
  EXPECT_TRUE(read_text_file(path("big"), 101).ok());

  ASSERT_EQ(::symlink(path("a").c_str(), path("link").c_str()), 0);
  std::ofstream(path("a")) << "x";
  EXPECT_TRUE(read_text_file(path("link"), 100).ok());
  EXPECT_EQ(read_text_file(path("link"), 100, Symlinks::kRefuse).error().message,
            path("link") + ": cannot open: is a symlink");
}

TEST_F(TextFileTest, APrivateFileReplacesASymlinkWithoutFollowingIt) {
  std::ofstream(path("victim")) << "keep me\n";
  ::chmod(path("victim").c_str(), 0644);
  ASSERT_EQ(::symlink(path("victim").c_str(), path("job.ack-token").c_str()), 0);
  ASSERT_TRUE(write_private_file(path("job.ack-token"), "s3cret\n").ok());
  EXPECT_FALSE(fs::is_symlink(path("job.ack-token")));
  auto victim = read_text_file(path("victim"), 100);
  ASSERT_TRUE(victim.ok());
  EXPECT_EQ(victim->text, "keep me\n");
  auto token = read_text_file(path("job.ack-token"), 100, Symlinks::kRefuse);
  ASSERT_TRUE(token.ok()) << token.error().message;
  EXPECT_EQ(token->text, "s3cret\n");
  EXPECT_EQ(token->mode & 0777, 0600u);

  // An old file (of any mode) is replaced by a new 0600 one; a missing directory is named.
  ::chmod(path("job.ack-token").c_str(), 0666);
  ASSERT_TRUE(write_private_file(path("job.ack-token"), "next\n").ok());
  EXPECT_EQ(read_text_file(path("job.ack-token"), 100)->mode & 0777, 0600u);
  Status missing = write_private_file(path("no/such/dir"), "x");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find(path("no/such/dir")), std::string::npos)
      << missing.error().message;
}

TEST_F(TextFileTest, ReadSmallReadsProcFilesThatReportSizeZero) {
  struct stat st {};
  ASSERT_EQ(::stat("/proc/self/status", &st), 0);
  EXPECT_EQ(st.st_size, 0);  // why read_text_file's size check cannot serve /proc
  auto status = read_small("/proc/self/status", 64 << 10);
  ASSERT_TRUE(status.ok()) << status.error().message;
  EXPECT_NE(status->find("\nPid:"), std::string::npos) << *status;
  EXPECT_NE(status->find("\nSigCgt:"), std::string::npos);  // read to the end, not one buffer
}

TEST_F(TextFileTest, ReadSmallCutsAtTheLimitAndSaysSo) {
  std::ofstream(path("a")) << std::string(10000, 'x');
  bool truncated = false;
  auto cut = read_small(path("a"), 100, &truncated);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->size(), 100u);
  EXPECT_TRUE(truncated);
  auto exact = read_small(path("a"), 10000, &truncated);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->size(), 10000u);
  EXPECT_FALSE(truncated);
  auto missing = read_small(path("none"), 100);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kNotFound);
  EXPECT_NE(missing.error().message.find(path("none")), std::string::npos);
  EXPECT_EQ(read_small(dir_.string(), 100).error().code, Errc::kIo);  // a directory: EISDIR
}

TEST_F(TextFileTest, ReadRangeReadsASliceAndLessAtTheEnd) {
  std::ofstream(path("a")) << "0123456789";
  EXPECT_EQ(*read_range(path("a"), 2, 3), "234");
  EXPECT_EQ(*read_range(path("a"), 8, 100), "89");
  EXPECT_EQ(*read_range(path("a"), 20, 5), "");
  EXPECT_EQ(read_range(path("none"), 0, 1).error().code, Errc::kNotFound);
}

TEST_F(TextFileTest, WriteAllCreatesOrTruncatesAndNeverFollowsASymlink) {
  ASSERT_TRUE(write_all(path("a"), "first, longer\n").ok());
  ASSERT_TRUE(write_all(path("a"), "second\n", 0600).ok());
  auto back = read_text_file(path("a"), 100);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->text, "second\n");
  std::ofstream(path("victim")) << "keep me\n";
  fs::create_symlink(path("victim"), path("link"));
  Status through = write_all(path("link"), "x");
  ASSERT_FALSE(through.ok());
  EXPECT_NE(through.error().message.find(path("link")), std::string::npos);
  EXPECT_EQ(read_text_file(path("victim"), 100)->text, "keep me\n");
  EXPECT_FALSE(write_all(path("no/such/dir"), "x").ok());
}

TEST(RandomToken, Is64HexDigitsAndFreshEachTime) {
  auto a = random_token();
  auto b = random_token();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos) << *a;
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace stepwatch
