// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// PidWatch: liveness of many processes through pidfds, with real child processes: alive, exited
// (zombie or reaped), a pid whose start time does not match, descriptors kept above 1023 and
// closed when a process is no longer asked about; and the /proc fallback on a fake tree.
#include "src/probe/pid_watch.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "src/common/limits.h"
#include "src/common/proc_stat.h"

namespace stepwatch::probe {
namespace {

uint64_t start_of(int pid) {
  auto st = read_proc_stat("/proc", pid);
  return st ? st->start_ticks : 0;
}

pid_t sleeper() {
  pid_t c = ::fork();
  if (c == 0) {
    ::execl("/bin/sleep", "sleep", "60", nullptr);
    ::_exit(127);
  }
  return c;
}

// Open descriptors of this process at or above `from`.
int fds_at_or_above(int from) {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.' && std::atoi(e->d_name) >= from && std::atoi(e->d_name) != ::dirfd(d))
      ++n;
  }
  ::closedir(d);
  return n;
}

// The agent raises its open-file limit first; so do these tests. Where even the hard limit is
// too low for descriptors above 1023, pidfds are not kept and liveness comes from /proc.
bool room_for_pidfds(size_t n) {
  return raise_fd_limit() >= PidWatch::kFirstPidfd + n + 64;
}

TEST(PidWatch, AliveExitedAndReusedProcesses) {
  const bool kept = room_for_pidfds(8);
  pid_t a = sleeper(), b = sleeper();
  PidWatch w;
  ASSERT_TRUE(w.using_pidfds()) << "this kernel has pidfd_open (Linux >= 5.3)";
  std::vector<ProcessId> asks = {
      {::getpid(), start_of(::getpid())}, {a, start_of(a)}, {b, 0}, {b, start_of(b) + 7}, {0, 0}};
  auto lives = w.check(asks);
  EXPECT_EQ(lives[0], Liveness::kAlive);
  EXPECT_EQ(lives[1], Liveness::kAlive);
  EXPECT_EQ(lives[2], Liveness::kAlive);   // start time unknown: whatever runs under the pid now
  EXPECT_EQ(lives[3], Liveness::kReused);  // another process than the one that started then
  EXPECT_EQ(lives[4], Liveness::kUnknown);
  EXPECT_EQ(w.descriptors(), kept ? 3u : 0u);

  // a exits and stays a zombie (not reaped): it will never step again.
  ::kill(a, SIGKILL);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(a), &info, WEXITED | WNOWAIT), 0);
  lives = w.check(asks);
  EXPECT_EQ(lives[1], Liveness::kGone);
  EXPECT_EQ(lives[0], Liveness::kAlive);
  EXPECT_EQ(lives[2], Liveness::kAlive);
  EXPECT_EQ(w.descriptors(), kept ? 2u : 0u);  // a's descriptor closed
  ::waitpid(a, nullptr, 0);
  EXPECT_EQ(w.check(asks)[1], Liveness::kGone);  // reaped: still gone, for good

  ::kill(b, SIGKILL);
  ::waitpid(b, nullptr, 0);
  EXPECT_EQ(w.check({{b, 0}})[0], Liveness::kGone);
  EXPECT_EQ(w.descriptors(), 0u);  // processes no longer asked about are let go
}

TEST(PidWatch, DescriptorsStayAbove1023AndLowOnesStayFree) {
  const bool kept = room_for_pidfds(40);
  pid_t kids[40];
  std::vector<ProcessId> asks;
  for (pid_t& k : kids) {
    k = sleeper();
    asks.push_back({k, start_of(k)});
  }
  int before = fds_at_or_above(PidWatch::kFirstPidfd);
  {
    PidWatch w;
    for (Liveness l : w.check(asks)) EXPECT_EQ(l, Liveness::kAlive);
    EXPECT_EQ(w.descriptors(), kept ? 40u : 0u);
    EXPECT_EQ(fds_at_or_above(PidWatch::kFirstPidfd) - before, kept ? 40 : 0);
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_LT(s, 1024) << "low descriptors stay free for sockets";
    ::close(s);
  }
  EXPECT_EQ(fds_at_or_above(PidWatch::kFirstPidfd), before) << "the destructor closes every pidfd";
  for (pid_t k : kids) {
    ::kill(k, SIGKILL);
    ::waitpid(k, nullptr, 0);
  }
}

TEST(PidWatch, AFakeProcTreeIsReadThroughStatFiles) {
  std::string root = std::string(std::getenv("STEPWATCH_SOURCE_DIR")) + "/tests/probe/data/proc";
  PidWatch w(root);
  EXPECT_FALSE(w.using_pidfds());
  auto lives = w.check({{100, 5000}, {100, 4999}, {424242, 0}});
  EXPECT_EQ(lives[0], Liveness::kAlive);
  EXPECT_EQ(lives[1], Liveness::kReused);
  EXPECT_EQ(lives[2], Liveness::kGone);
  EXPECT_EQ(w.descriptors(), 0u);
}

}  // namespace
}  // namespace stepwatch::probe
