// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Preemption and the proven signal path, with real processes and real signals.
#include "src/runbook/preempt.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "tests/runbook/children.h"

namespace stepwatch::runbook {
namespace {

using test::Child;
using test::SpawnOptions;

constexpr int64_t kGrace = 300 * kNsPerMs;

ProcessRef ref(const Child& c, std::string label = "") {
  return ProcessRef{c.pid(), c.start(), std::move(label)};
}

const ProcessOutcome& outcome(const PreemptReport& r, int pid) {
  for (const auto& o : r.processes) {
    if (o.process.pid == pid) return o;
  }
  throw std::runtime_error("pid not in report");
}

auto zombie = [](char s) { return s == 'Z'; };

TEST(SignalProven, SignalsOnlyTheProcessWithTheRecordedStartTime) {
  Child sleeper({"/bin/sleep", "30"}, {.capture_stdout = false});
  Status wrong = signal_proven({sleeper.pid(), sleeper.start() + 1}, SIGKILL);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, Errc::kNotFound);
  EXPECT_NE(wrong.error().message.find("reused"), std::string::npos) << wrong.error().message;
  EXPECT_TRUE(sleeper.running());

  Status no_start = signal_proven({sleeper.pid(), 0}, SIGKILL);
  EXPECT_EQ(no_start.error().code, Errc::kInvalidArgument);
  EXPECT_TRUE(sleeper.running());

  ASSERT_TRUE(signal_proven({sleeper.pid(), sleeper.start()}, SIGKILL).ok());
  EXPECT_TRUE(sleeper.wait_state(zombie));
  int status = sleeper.reap();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(signal_proven({sleeper.pid(), sleeper.start()}, SIGKILL).error().code, Errc::kNotFound);
}

TEST(Preempt, TermIgnoringAndStoppedProcessesEndAfterGrace) {
  Child polite({"/bin/sleep", "30"}, {.capture_stdout = false});
  Child stubborn({"/bin/sleep", "31"}, {.ignore_term = true, .capture_stdout = false});
  Child stopped({"/bin/sleep", "32"}, {.capture_stdout = false});
  ASSERT_TRUE(stubborn.wait_exec("sleep"));
  ASSERT_TRUE(stopped.wait_exec("sleep"));
  ::kill(stopped.pid(), SIGSTOP);
  ASSERT_TRUE(stopped.wait_state([](char s) { return s == 'T'; }));

  PreemptReport r = preempt_processes(
      {ref(polite, "rank 0"), ref(stubborn, "rank 1"), ref(stopped, "rank 2")}, kGrace);
  EXPECT_TRUE(r.ok) << r.summary();
  EXPECT_TRUE(r.survivors.empty());
  EXPECT_TRUE(r.killed);
  // Our own children end as zombies until we reap them: gone for preemption, and reported.
  EXPECT_EQ(r.zombies.size(), 3u);

  const ProcessOutcome& p = outcome(r, polite.pid());
  EXPECT_TRUE(p.term_sent);
  EXPECT_FALSE(p.kill_sent);
  EXPECT_LT(p.gone_after_ns, kGrace);

  const ProcessOutcome& s = outcome(r, stubborn.pid());
  EXPECT_TRUE(s.term_sent);
  EXPECT_TRUE(s.kill_sent);
  EXPECT_GE(s.gone_after_ns, kGrace);
  EXPECT_NE(s.describe().find("SIGKILL"), std::string::npos) << s.describe();

  const ProcessOutcome& t = outcome(r, stopped.pid());
  EXPECT_EQ(t.state_before, 'T');
  EXPECT_TRUE(t.cont_sent);  // SIGTERM stays pending in a stopped process without SIGCONT
  EXPECT_FALSE(t.kill_sent);

  int st = stubborn.reap();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  st = stopped.reap();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  polite.reap();
}

TEST(Preempt, NeverSignalsAPidWhoseStartTimeDiffers) {
  Child unrelated({"/bin/sleep", "30"}, {.ignore_term = true, .capture_stdout = false});
  ProcessRef recorded{unrelated.pid(), unrelated.start() - 1, "rank 0 of an old incarnation"};
  PreemptReport r = preempt_processes({recorded}, kGrace);
  EXPECT_TRUE(r.ok) << r.summary();  // the recorded process is gone: its pid belongs to another
  const ProcessOutcome& o = outcome(r, unrelated.pid());
  EXPECT_EQ(o.before, probe::Liveness::kReused);
  EXPECT_FALSE(o.term_sent);
  EXPECT_FALSE(o.kill_sent);
  EXPECT_TRUE(unrelated.running());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(unrelated.running());
}

TEST(Preempt, ZombieCountsAsGoneAndIsReported) {
  Child quick({"/bin/true"}, {.capture_stdout = false});
  ASSERT_TRUE(quick.wait_state(zombie));
  PreemptReport r = preempt_processes({ref(quick, "rank 0")}, kGrace);
  EXPECT_TRUE(r.ok);
  ASSERT_EQ(r.zombies.size(), 1u);
  const ProcessOutcome& o = outcome(r, quick.pid());
  EXPECT_EQ(o.before, probe::Liveness::kZombie);
  EXPECT_FALSE(o.term_sent);
  EXPECT_NE(o.note.find(std::to_string(::getpid())), std::string::npos)
      << o.note;  // who must reap it
  EXPECT_EQ(r.total_ns < kGrace, true);
  quick.reap();
  PreemptReport again = preempt_processes({ref(quick)}, kGrace);
  EXPECT_TRUE(again.ok);
  EXPECT_EQ(outcome(again, quick.pid()).before, probe::Liveness::kGone);
}

// Whether the process that started at `start` still runs (a zombie has ended).
bool still_runs(int pid, uint64_t start) {
  auto st = read_proc_stat("/proc", pid);
  return st && st->start_ticks == start && st->state != 'Z';
}

bool ends_within(int pid, uint64_t start, int ms) {
  for (int i = 0; i < ms / 10 && still_runs(pid, start); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return !still_runs(pid, start);
}

TEST(Preempt, ProcessGroupOfAProvenLeader) {
  // The leader (a shell, listed) starts background sleeps the list does not name: one that
  // ignores SIGTERM, in a leader that dies on SIGTERM (the group must get SIGKILL through the
  // zombie leader), and one in a leader that ignores SIGTERM too.
  for (const char* script : {"(trap '' TERM; exec /bin/sleep 30) & echo $!; wait",
                             "trap '' TERM; /bin/sleep 30 & echo $!; wait"}) {
    Child leader({"/bin/sh", "-c", script}, {.own_group = true});
    int member = std::stoi(leader.read_line());
    auto mst = read_proc_stat("/proc", member);
    ASSERT_TRUE(mst.ok());
    for (int i = 0; i < 500; ++i) {  // until the TERM-ignoring exec is done
      auto now = read_proc_stat("/proc", member);
      if (!now || now->comm == "sleep") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(still_runs(member, mst->start_ticks));
    PreemptOptions o;
    o.process_groups = true;
    PreemptReport r = preempt_processes({ref(leader, "launcher")}, kGrace, o);
    EXPECT_TRUE(r.ok) << script << ": " << r.summary();
    EXPECT_TRUE(r.killed) << script;
    EXPECT_GE(r.all_gone_ns, kGrace) << script;  // the member ignored SIGTERM until the grace ended
    leader.reap();
    // The orphaned member is reparented (to init or a subreaper): it must not run any more.
    EXPECT_TRUE(ends_within(member, mst->start_ticks, 2000)) << script;
  }
}

TEST(Preempt, WithoutProcessGroupsUnlistedChildrenAreLeftAlone) {
  Child leader({"/bin/sh", "-c", "/bin/sleep 30 & echo $!; wait"}, {.own_group = true});
  int member = std::stoi(leader.read_line());
  auto mst = read_proc_stat("/proc", member);
  ASSERT_TRUE(mst.ok());
  PreemptReport r = preempt_processes({ref(leader, "launcher")}, kGrace);
  EXPECT_TRUE(r.ok) << r.summary();
  leader.reap();
  EXPECT_TRUE(still_runs(member, mst->start_ticks));
  ::kill(member, SIGKILL);  // test cleanup: our own grandchild, just seen with its start time
}

TEST(PreemptReport, SummaryNamesEachSurvivorsReasonOnce) {
  PreemptReport r;
  auto survivor = [&](int pid, std::string label, std::string note) {
    ProcessOutcome o;
    o.process = ProcessRef{pid, 1, std::move(label)};
    o.before = o.after = probe::Liveness::kAlive;
    o.note = std::move(note);
    r.processes.push_back(o);
    r.survivors.push_back(o.process);
  };
  const std::string eperm = "signal 15 not permitted (EPERM: ...)";
  survivor(11, "rank 0", "pid 11: " + eperm + "; pid 11: signal 9 not permitted (EPERM: ...)");
  survivor(12, "rank 1", "pid 12: " + eperm);
  survivor(13, "", "");
  ProcessOutcome gone;
  gone.process = ProcessRef{14, 1, "rank 2"};
  gone.after = probe::Liveness::kGone;
  r.processes.push_back(gone);
  r.total_ns = 7 * kNsPerSec;
  EXPECT_EQ(r.summary(),
            "1 of 4 processes gone, 3 SURVIVOR(S) [pid 11 (rank 0), pid 12 (rank 1): " + eperm +
                "; pid 13: still " + probe::liveness_name(probe::Liveness::kAlive) + "] (7000 ms)");
}

TEST(PreemptWithCommand, CommandEndsTheProcess) {
  Child target({"/bin/sleep", "30"}, {.capture_stdout = false});
  std::string cmd = "kill -TERM " + std::to_string(target.pid());
  PreemptReport r =
      preempt_with_command({"/bin/sh", "-c", cmd}, {ref(target, "rank 0")}, 2 * kNsPerSec);
  EXPECT_TRUE(r.ok) << r.summary();
  ASSERT_TRUE(r.command.has_value());
  EXPECT_EQ(r.command->exit_code, 0);
  EXPECT_FALSE(r.killed);
  EXPECT_FALSE(outcome(r, target.pid()).term_sent);  // the command did it, not us
  EXPECT_LT(r.total_ns, 2 * kNsPerSec);
  int st = target.reap();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
}

TEST(PreemptWithCommand, NoOpCommandLeavesSurvivorsThatAreKilledAfterGrace) {
  Child target({"/bin/sleep", "30"}, {.capture_stdout = false});
  PreemptReport r = preempt_with_command({"/bin/true"}, {ref(target, "rank 0")}, kGrace);
  EXPECT_TRUE(r.ok) << r.summary();
  EXPECT_TRUE(r.killed);
  EXPECT_TRUE(outcome(r, target.pid()).kill_sent);
  EXPECT_GE(outcome(r, target.pid()).gone_after_ns, kGrace);
  int st = target.reap();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

TEST(PreemptWithCommand, HangingCommandIsKilledAndReported) {
  Child target({"/bin/sleep", "30"}, {.capture_stdout = false});
  PreemptOptions o;
  o.command_timeout_ns = 200 * kNsPerMs;
  PreemptReport r = preempt_with_command({"/bin/sleep", "20"}, {ref(target)}, kGrace, o);
  ASSERT_TRUE(r.command.has_value());
  EXPECT_TRUE(r.command->timed_out);
  EXPECT_LT(r.command->elapsed_ns, 2 * kNsPerSec);
  EXPECT_TRUE(r.ok);  // the target still got SIGKILL after the grace
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("timed out"), std::string::npos) << r.notes[0];
}

TEST(PreemptWithCommand, MissingCommandIsReported) {
  Child target({"/bin/sleep", "30"}, {.capture_stdout = false});
  PreemptReport r = preempt_with_command({"/nonexistent/scancel"}, {ref(target)}, kGrace);
  ASSERT_TRUE(r.command.has_value());
  EXPECT_EQ(r.command->exit_code, 127);
  EXPECT_TRUE(r.ok);
  EXPECT_TRUE(r.killed);
}

TEST(Preempt, WaitsForGpuRelease) {
  Child target({"/bin/sleep", "30"}, {.capture_stdout = false});
  int calls = 0;
  PreemptOptions o;
  o.gpu_holders = [&] {
    ++calls;
    return calls < 3 ? std::vector<int>{target.pid(), 1}
                     : std::vector<int>{1};  // pid 1 is not ours
  };
  PreemptReport r = preempt_processes({ref(target)}, kGrace, o);
  ASSERT_TRUE(r.gpu.has_value());
  EXPECT_TRUE(r.gpu->released);
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(r.ok);

  Child held({"/bin/sleep", "30"}, {.capture_stdout = false});
  o.gpu_holders = [&] { return std::vector<int>{held.pid()}; };
  o.gpu_release_timeout_ns = 150 * kNsPerMs;
  PreemptReport stuck = preempt_processes({ref(held)}, kGrace, o);
  ASSERT_TRUE(stuck.gpu.has_value());
  EXPECT_FALSE(stuck.gpu->released);
  EXPECT_EQ(stuck.gpu->still_holding, std::vector<int>{held.pid()});
  EXPECT_FALSE(stuck.ok);
  EXPECT_NE(stuck.summary().find("GPU memory STILL HELD"), std::string::npos) << stuck.summary();
}

}  // namespace
}  // namespace stepwatch::runbook
