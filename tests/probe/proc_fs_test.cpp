// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// ProcFs, the one /proc reader: on the checked-in fake tree (tests/probe/data/proc) and on this
// process's own /proc entries (status, environ of a child, maps, sockets, threads, btime).
#include "src/probe/proc_fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <string>

namespace stepwatch::probe {
namespace {

std::string fake_root() {
  return std::string(std::getenv("STEPWATCH_SOURCE_DIR")) + "/tests/probe/data/proc";
}

TEST(ProcFs, StatAndThreadsOfTheFakeTree) {
  ProcFs proc(fake_root());
  auto st = proc.stat(101);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(st->comm, "pt_main_thread) 0");  // from the last ')'
  EXPECT_EQ(st->start_ticks, 5010u);
  auto tids = proc.tasks(101);
  ASSERT_TRUE(tids.ok()) << tids.error().message;
  EXPECT_EQ(*tids, (std::vector<int>{101, 111, 112}));
  EXPECT_TRUE(proc.task_stat(101, 111).ok());
  EXPECT_EQ(proc.stat(4242).error().code, Errc::kNotFound);
  EXPECT_EQ(proc.tasks(4242).error().code, Errc::kNotFound);
  EXPECT_EQ(proc.path(101, "wchan"), fake_root() + "/101/wchan");
  auto pids = proc.pids();
  ASSERT_TRUE(pids.ok());
  EXPECT_NE(std::find(pids->begin(), pids->end(), 101), pids->end());
  EXPECT_EQ(std::find(pids->begin(), pids->end(), 0), pids->end());  // "meminfo" is not a pid
  EXPECT_FALSE(proc.btime().ok());                                   // the fake tree has no stat
}

TEST(ProcFs, StatusUidsAndCaughtSignals) {
  ProcStatus s = parse_proc_status(
      "Name:\tpython\nUid:\t1000\t1001\t1000\t1000\nSigCgt:\t0000000180004a02\n"
      "CapEff:\t0000000000080000\n");
  ASSERT_TRUE(s.uids.has_value());
  EXPECT_EQ(s.uids->real, 1000u);
  EXPECT_EQ(s.uids->effective, 1001u);
  ASSERT_TRUE(s.caught_signals.has_value());
  EXPECT_EQ(*s.caught_signals, 0x180004a02u);
  EXPECT_EQ(s.effective_caps, std::optional<uint64_t>(uint64_t{1} << 19));  // CAP_SYS_PTRACE
  ProcStatus none = parse_proc_status("Name:\tx\nUid:\tnot-a-number\n");
  EXPECT_FALSE(none.uids.has_value());
  EXPECT_FALSE(none.caught_signals.has_value());
  EXPECT_FALSE(none.effective_caps.has_value());
  EXPECT_FALSE(none.ctx_switches.has_value());
  // Context switches: both lines, or none (the "non" line alone is not the voluntary one).
  EXPECT_EQ(parse_proc_status("Name:\tx\nvoluntary_ctxt_switches:\t7\n"
                              "nonvoluntary_ctxt_switches:\t5\n")
                .ctx_switches,
            std::optional<uint64_t>(12));
  EXPECT_FALSE(
      parse_proc_status("Name:\tx\nnonvoluntary_ctxt_switches:\t5\n").ctx_switches.has_value());

  auto mine = ProcFs().status(static_cast<int>(::getpid()));
  ASSERT_TRUE(mine.ok()) << mine.error().message;
  ASSERT_TRUE(mine->uids.has_value());
  EXPECT_EQ(mine->uids->real, ::getuid());
  EXPECT_EQ(mine->uids->effective, ::geteuid());
  EXPECT_TRUE(mine->caught_signals.has_value());
  EXPECT_TRUE(mine->ctx_switches.has_value());
  EXPECT_EQ(ProcFs(fake_root()).status(4242).error().code, Errc::kNotFound);
}

TEST(ProcFs, CatchesSignalAnswersOnlyForRealSignals) {
  struct sigaction sa {};
  sa.sa_handler = [](int) {};
  struct sigaction old {};
  ASSERT_EQ(::sigaction(SIGUSR2, &sa, &old), 0);
  const int self = static_cast<int>(::getpid());
  EXPECT_EQ(catches_signal(ProcFs(), self, SIGUSR2), std::optional<bool>(true));
  ::sigaction(SIGUSR2, &old, nullptr);
  EXPECT_EQ(catches_signal(ProcFs(), self, SIGUSR2), std::optional<bool>(false));
  EXPECT_EQ(catches_signal(ProcFs(), self, 0), std::nullopt);
  EXPECT_EQ(catches_signal(ProcFs(), self, 65), std::nullopt);
  EXPECT_EQ(catches_signal(ProcFs(fake_root()), 101, SIGUSR1), std::nullopt);  // no status file
}

TEST(ProcFs, EnvironOfAChild) {
  pid_t c = ::fork();
  if (c == 0) {
    char* env[] = {const_cast<char*>("RANK=3"), const_cast<char*>("EMPTY="), nullptr};
    ::execle("/bin/sleep", "sleep", "30", nullptr, env);
    ::_exit(127);
  }
  ASSERT_GT(c, 0);
  Result<std::vector<std::string>> env = Error{Errc::kNotFound, ""};
  for (int i = 0; i < 200; ++i) {  // until exec has replaced the forked image's environment
    env = ProcFs().environ(c);
    if (env && *env == std::vector<std::string>{"RANK=3", "EMPTY="}) break;
    ::usleep(10'000);
  }
  ASSERT_TRUE(env.ok()) << env.error().message;
  EXPECT_EQ(*env, (std::vector<std::string>{"RANK=3", "EMPTY="}));
  ::kill(c, SIGKILL);
  ::waitpid(c, nullptr, 0);
  EXPECT_EQ(ProcFs().environ(c).error().code, Errc::kNotFound);
}

TEST(ProcFs, MapsFileFindsAMappedFileByDeviceAndInode) {
  char tmpl[] = "/tmp/sw-proc-fs-XXXXXX";
  int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 4096), 0);
  void* map = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  const int self = static_cast<int>(::getpid());
  auto mapped = ProcFs().maps_file(self, st.st_dev, st.st_ino);
  ASSERT_TRUE(mapped.ok()) << mapped.error().message;
  EXPECT_TRUE(*mapped);
  ::munmap(map, 4096);
  auto after = ProcFs().maps_file(self, st.st_dev, st.st_ino);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(*after);
  ::close(fd);
  ::unlink(tmpl);
  EXPECT_EQ(ProcFs(fake_root()).maps_file(4242, st.st_dev, st.st_ino).error().code,
            Errc::kNotFound);
}

TEST(ProcFs, SocketInodesOfThisProcess) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(s, &st), 0);
  auto inodes = ProcFs().socket_inodes(static_cast<int>(::getpid()));
  ASSERT_TRUE(inodes.ok()) << inodes.error().message;
  EXPECT_NE(std::find(inodes->begin(), inodes->end(), st.st_ino), inodes->end());
  ::close(s);
  EXPECT_EQ(ProcFs(fake_root()).socket_inodes(4242).error().code, Errc::kNotFound);
}

TEST(ProcFs, BootTimeIsInThePast) {
  auto btime = ProcFs().btime();
  ASSERT_TRUE(btime.ok()) << btime.error().message;
  EXPECT_GT(*btime, 1'000'000'000);  // after 2001
  EXPECT_LE(*btime, static_cast<int64_t>(std::time(nullptr)));
}

}  // namespace
}  // namespace stepwatch::probe
