// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one liveness vocabulary: alive, zombie, gone, reused and unknown, on real children and on
// the fake tree.
#include "src/probe/liveness.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace stepwatch::probe {
namespace {

TEST(Liveness, NamesAndWhatHasEnded) {
  EXPECT_STREQ(liveness_name(Liveness::kAlive), "alive");
  EXPECT_STREQ(liveness_name(Liveness::kZombie), "zombie");
  EXPECT_STREQ(liveness_name(Liveness::kGone), "gone");
  EXPECT_STREQ(liveness_name(Liveness::kReused), "reused");
  EXPECT_STREQ(liveness_name(Liveness::kUnknown), "unknown");
  EXPECT_FALSE(ended(Liveness::kAlive));
  EXPECT_TRUE(ended(Liveness::kZombie));
  EXPECT_TRUE(ended(Liveness::kGone));
  EXPECT_TRUE(ended(Liveness::kReused));
  EXPECT_FALSE(ended(Liveness::kUnknown));
}

TEST(Liveness, AChildAliveThenZombieThenGone) {
  pid_t c = ::fork();
  if (c == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(c, 0);
  const ProcFs proc;
  auto st = proc.stat(c);
  ASSERT_TRUE(st.ok());
  const ProcessId id{c, st->start_ticks};
  ProcessState alive = inspect(proc, id);
  EXPECT_EQ(alive.liveness, Liveness::kAlive);
  EXPECT_EQ(alive.ppid, static_cast<int>(::getpid()));
  EXPECT_EQ(inspect(proc, {c, st->start_ticks + 1}).liveness, Liveness::kReused);
  EXPECT_EQ(inspect(proc, {c, 0}).liveness, Liveness::kUnknown);  // a pid alone proves nothing
  ::kill(c, SIGKILL);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(c), &info, WEXITED | WNOWAIT), 0);  // not reaped
  EXPECT_EQ(inspect(proc, id).liveness, Liveness::kZombie);
  ::waitpid(c, nullptr, 0);
  EXPECT_EQ(inspect(proc, id).liveness, Liveness::kGone);
}

TEST(Liveness, FakeTree) {
  const ProcFs proc(std::string(std::getenv("STEPWATCH_SOURCE_DIR")) + "/tests/probe/data/proc");
  ProcessState s = inspect(proc, {101, 5010});
  EXPECT_EQ(s.liveness, Liveness::kAlive);
  EXPECT_EQ(s.comm, "pt_main_thread) 0");
  EXPECT_EQ(s.ppid, 100);
  EXPECT_EQ(inspect(proc, {4242, 1}).liveness, Liveness::kGone);
}

}  // namespace
}  // namespace stepwatch::probe
