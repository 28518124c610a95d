// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one subprocess runner, with real processes: output captured and bounded, stdin and
// environment, exec failures, and the timeout kill through the proven group signal.
#include "src/runbook/command.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "src/common/clock.h"
#include "src/common/proc_stat.h"

namespace stepwatch::runbook {
namespace {

CommandOptions with_timeout(int64_t timeout_ns, size_t max_output = size_t{256} << 10) {
  CommandOptions o;
  o.timeout_ns = timeout_ns;
  o.max_output = max_output;
  return o;
}

// Gone, or a zombie waiting for init: nothing of it runs any more.
bool ended_within(int pid, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  do {
    auto st = read_proc_stat("/proc", pid);
    if (!st || st->state == 'Z' || st->state == 'X') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

TEST(RunCommand, CapturesOutputAndBoundsIt) {
  CommandResult r =
      run_command({"/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"}, with_timeout(kNsPerSec));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("hello"), std::string::npos);
  EXPECT_NE(r.output.find("oops"), std::string::npos);
  CommandResult big =
      run_command({"/bin/sh", "-c", "head -c 100000 /dev/zero"}, with_timeout(kNsPerSec, 1000));
  EXPECT_EQ(big.output.size(), 1000u);
  EXPECT_TRUE(big.output_truncated);
  EXPECT_EQ(big.exit_code, 0);
}

TEST(RunCommand, KeepTailKeepsTheLastBytes) {
  CommandOptions o = with_timeout(5 * kNsPerSec, 100);
  o.keep_tail = true;
  CommandResult r = run_command({"/bin/sh", "-c", "head -c 100000 /dev/zero; echo END"}, o);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output.size(), 100u);
  EXPECT_TRUE(r.output_truncated);
  EXPECT_EQ(r.output.substr(96), "END\n");
  CommandResult small = run_command({"/bin/echo", "short"}, o);
  EXPECT_EQ(small.output, "short\n");
  EXPECT_FALSE(small.output_truncated);
}

TEST(RunCommand, GetsItsInputAndEnvironment) {
  CommandOptions o = with_timeout(5 * kNsPerSec);
  o.input = "from stdin\n";
  o.env = {{"SW_COMMAND_TEST", "from env"}, {"PATH", "/usr/bin:/bin"}};
  CommandResult r = run_command({"/bin/sh", "-c", "cat; echo \"$SW_COMMAND_TEST\"; echo $PATH"}, o);
  EXPECT_TRUE(r.succeeded()) << r.error << r.output;
  EXPECT_EQ(r.output, "from stdin\nfrom env\n/usr/bin:/bin\n");
  // Without input, stdin is /dev/null: cat ends at once.
  CommandResult none = run_command({"/bin/cat"}, with_timeout(5 * kNsPerSec));
  EXPECT_TRUE(none.succeeded());
  EXPECT_EQ(none.output, "");
}

TEST(RunCommand, MissingProgramIsAnExecError) {
  CommandResult r = run_command({"/nonexistent/helper", "x"}, with_timeout(kNsPerSec));
  EXPECT_TRUE(r.started);
  EXPECT_FALSE(r.succeeded());
  EXPECT_EQ(r.exec_errno, ENOENT);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.error, "cannot run /nonexistent/helper: No such file or directory");
  CommandResult empty = run_command({}, with_timeout(kNsPerSec));
  EXPECT_FALSE(empty.started);
  EXPECT_EQ(empty.error, "empty command");
}

TEST(RunCommand, CommandThatOutlivesItsTimeoutIsKilledAndReportedAsTimedOut) {
  auto t0 = std::chrono::steady_clock::now();
  CommandResult r = run_command({"/bin/sleep", "30"}, with_timeout(200 * kNsPerMs));
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.succeeded());
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_TRUE(r.error.empty()) << r.error;  // killed through the proven path without a refusal
  EXPECT_GE(r.elapsed_ns, 200 * kNsPerMs);
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST(RunCommand, GrandchildInItsGroupIsKilledWithIt) {
  // The shell prints its background child's pid, then waits for it: only the group kill ends it.
  CommandResult r =
      run_command({"/bin/sh", "-c", "sleep 30 & echo $!; wait"}, with_timeout(300 * kNsPerMs));
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_TRUE(r.error.empty()) << r.error;
  int grandchild = std::stoi(r.output);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(ended_within(grandchild, std::chrono::seconds(2)))
      << "pid " << grandchild << " survived the timeout";
}

TEST(RunCommand, TimedOutCommandKeepsTheOutputItWroteWithinTheLimit) {
  CommandResult r = run_command({"/bin/sh", "-c", "head -c 5000 /dev/zero; echo; sleep 30"},
                                with_timeout(300 * kNsPerMs, 1000));
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.output.size(), 1000u);
  EXPECT_TRUE(r.output_truncated);
}

TEST(RunCommand, ABackgroundGrandchildHoldingThePipeDoesNotHoldTheCaller) {
  auto t0 = std::chrono::steady_clock::now();
  CommandResult r =
      run_command({"/bin/sh", "-c", "sleep 3 & echo started"}, with_timeout(10 * kNsPerSec));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_TRUE(r.succeeded()) << r.error;
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.output, "started\n");
}

}  // namespace
}  // namespace stepwatch::runbook
