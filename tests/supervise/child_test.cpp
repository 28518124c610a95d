// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/supervise/child.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>

namespace stepwatch::supervise {
namespace {

struct Captured {
  std::mutex mu;
  std::vector<std::pair<Stream, std::string>> lines;
  LineSink sink() {
    return [this](Stream s, std::string_view l) {
      std::lock_guard lock(mu);
      lines.emplace_back(s, std::string(l));
    };
  }
};

int wait_exit(Child& c, int seconds = 10) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (auto st = c.poll_exit()) return *st;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

// A pipe standing in for the terminal, so the test sees the passthrough bytes.
struct Terminal {
  int fds[2];
  Terminal() { EXPECT_EQ(::pipe(fds), 0); }
  ~Terminal() { ::close(fds[0]); }
  std::string drain() {
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    return out;
  }
};

TEST(Child, PassesOutputThroughAndSplitsLinesOnNewlineAndCarriageReturn) {
  Captured cap;
  Terminal term;
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "printf 'step 1\\nbar 10%%\\rbar 20%%\\rstep 2\\n'; echo oops >&2; exit 3"};
  spec.out_fd = term.fds[1];
  auto c = Child::start(spec, cap.sink());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(wait_exit(**c), 3);
  (*c)->join_output();
  EXPECT_EQ(term.drain(), "step 1\nbar 10%\rbar 20%\rstep 2\n");  // unchanged
  std::vector<std::string> out;
  for (auto& [s, l] : cap.lines) {
    if (s == Stream::kStdout) out.push_back(l);
  }
  EXPECT_EQ(out, (std::vector<std::string>{"step 1", "bar 10%", "bar 20%", "step 2"}));
  bool saw_err = false;
  for (auto& [s, l] : cap.lines) saw_err = saw_err || (s == Stream::kStderr && l == "oops");
  EXPECT_TRUE(saw_err);
}

// D16: `stepwatch run ... | sleep 30` once blocked the job on its print, and the watchdog then
// killed it as stalled. Now the job's output is drained whatever our reader does: what it does
// not take is dropped and counted, and the job runs to its end.
TEST(Child, AReaderThatDoesNotReadNeverBlocksTheJob) {
  Captured cap;
  Terminal term;  // never read until the end
  Terminal errs;
  LaunchSpec spec;
  // 64 MiB to stdout (far past a pipe's 64 KiB and the 16 MiB hand-off), then a last line.
  spec.argv = {"/bin/sh", "-c", "head -c 67108864 /dev/zero; echo; echo last line"};
  spec.out_fd = term.fds[1];
  spec.err_fd = errs.fds[1];
  auto t0 = std::chrono::steady_clock::now();
  auto c = Child::start(spec, cap.sink());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(wait_exit(**c, 30), 0) << "the job ran to its end";
  (*c)->join_output();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_GT((*c)->dropped_passthrough_bytes(), uint64_t{32} << 20);
  std::string said = errs.drain();
  EXPECT_NE(said.find("stdout is not being read: dropping the job's output"), std::string::npos)
      << said;
  std::lock_guard lock(cap.mu);
  bool last = false;
  for (auto& [st, l] : cap.lines) last = last || l == "last line";
  EXPECT_TRUE(last || (*c)->dropped_log_bytes() > 0)
      << "the log contract saw the end, or says it lost some";
}

TEST(Child, RunsInItsOwnSessionWithTheGivenEnvironment) {
  Captured cap;
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo \"$STEPWATCH_JOB $(ps -o sid= -p $$ | tr -d ' ') $$\""};
  spec.env["STEPWATCH_JOB"] = "envtest";
  auto c = Child::start(spec, cap.sink());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(wait_exit(**c), 0);
  (*c)->join_output();
  ASSERT_FALSE(cap.lines.empty());
  int pid = (*c)->pid();
  EXPECT_EQ(cap.lines[0].second, fmt::format("envtest {} {}", pid, pid));  // session leader
}

TEST(Child, SignalReachesTheWholeGroupAndStatusSaysSo) {
  Captured cap;
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", "sleep 30 & sleep 30; wait"};
  auto c = Child::start(spec, cap.sink());
  ASSERT_TRUE(c.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  (*c)->signal_group(SIGTERM);
  EXPECT_EQ(wait_exit(**c), 128 + SIGTERM);
  // The background sleep was in the group too: nothing holds the pipe, the join returns.
  auto t0 = std::chrono::steady_clock::now();
  (*c)->join_output();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

TEST(Child, AMissingProgramIsAClearError) {
  Captured cap;
  LaunchSpec spec;
  spec.argv = {"/nonexistent/trainer"};
  auto c = Child::start(spec, cap.sink());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("cannot run /nonexistent/trainer"), std::string::npos)
      << c.error().message;
}

TEST(Child, AStragglerHoldingThePipeDoesNotHangTheJoin) {
  Captured cap;
  LaunchSpec spec;
  // The leader exits at once; a daemonized child (new session) keeps stdout open.
  spec.argv = {"/bin/sh", "-c", "setsid sleep 5 & echo started"};
  auto c = Child::start(spec, cap.sink());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(wait_exit(**c), 0);
  auto t0 = std::chrono::steady_clock::now();
  (*c)->join_output();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  // The straggler ends by itself after 5 s; it holds nothing of ours.
}

}  // namespace
}  // namespace stepwatch::supervise
