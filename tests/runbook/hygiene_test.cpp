// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Restart hygiene: leftovers of an earlier incarnation found with evidence, and cleanup acting
// only on what is proven to be the job's own. Real processes hold real ports (the port readers
// themselves: tests/probe/ports_test.cpp).
#include "src/runbook/hygiene.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/contract/test_support.h"
#include "tests/runbook/children.h"

namespace stepwatch::runbook {
namespace {

using test::Child;

std::vector<const Leftover*> of(const std::vector<Leftover>& all, LeftoverKind kind, int pid = -1) {
  std::vector<const Leftover*> out;
  for (const auto& l : all) {
    if (l.kind == kind && (pid < 0 || l.pid == pid)) out.push_back(&l);
  }
  return out;
}

std::string dump(const std::vector<Leftover>& all) {
  std::string s;
  for (const auto& l : all) s += std::string(leftover_kind_name(l.kind)) + ": " + l.evidence + "\n";
  return s;
}

TEST(Hygiene, LeftoverOfEarlierIncarnationHoldingThePortIsFoundAndCleaned) {
  test::ListeningChild old;
  HygieneInput in;
  in.incarnation = 2;
  in.recorded = {{old.child.pid(), old.child.start(), 1, "rank 1"}};
  in.port = old.port;
  auto found = find_leftovers(in);
  auto procs = of(found, LeftoverKind::kProcess, old.child.pid());
  auto ports = of(found, LeftoverKind::kPort, old.child.pid());
  ASSERT_EQ(procs.size(), 1u) << dump(found);
  ASSERT_EQ(ports.size(), 1u) << dump(found);
  EXPECT_TRUE(procs[0]->provable);
  EXPECT_EQ(procs[0]->action, LeftoverAction::kKill);
  EXPECT_NE(procs[0]->evidence.find("rank 1 of incarnation 1, started "), std::string::npos)
      << procs[0]->evidence;
  EXPECT_TRUE(ports[0]->provable);
  EXPECT_EQ(ports[0]->what, "holds port " + std::to_string(old.port));
  EXPECT_NE(ports[0]->evidence.find("127.0.0.1:" + std::to_string(old.port)), std::string::npos);

  CleanupOptions co;
  co.grace_ns = 2 * kNsPerSec;
  CleanupReport rep = cleanup(found, in, co);
  ASSERT_TRUE(rep.preempt.has_value());
  EXPECT_EQ(rep.preempt->processes.size(), 1u);  // one process, found twice, signalled once
  EXPECT_TRUE(rep.clean()) << dump(rep.remaining);
  ASSERT_EQ(rep.done.size(), 1u);
  EXPECT_NE(rep.done[0].find("exited after SIGTERM"), std::string::npos) << rep.done[0];
  int st = old.child.reap();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
}

TEST(Hygiene, UnrelatedPortHolderIsReportedButNeverTouched) {
  test::ListeningChild stranger;
  test::ListeningChild reused;  // a record names its pid, but with another start time
  for (test::ListeningChild* l : {&stranger, &reused}) {
    HygieneInput in;
    in.incarnation = 2;
    in.recorded = {{reused.child.pid(), reused.child.start() - 1, 1, "rank 0"}};
    in.port = l->port;
    auto found = find_leftovers(in);
    auto ports = of(found, LeftoverKind::kPort, l->child.pid());
    ASSERT_EQ(ports.size(), 1u) << dump(found);
    EXPECT_FALSE(ports[0]->provable);
    EXPECT_EQ(ports[0]->action, LeftoverAction::kNone);
    EXPECT_NE(ports[0]->evidence.find("not ours, will not touch"), std::string::npos)
        << ports[0]->evidence;
    if (l == &reused) {
      EXPECT_NE(ports[0]->evidence.find("pid reused"), std::string::npos) << ports[0]->evidence;
    }
    EXPECT_TRUE(of(found, LeftoverKind::kProcess).empty()) << dump(found);

    CleanupOptions co;
    co.grace_ns = 100 * kNsPerMs;
    CleanupReport rep = cleanup(found, in, co);
    EXPECT_FALSE(rep.preempt.has_value());
    EXPECT_EQ(rep.refused.size(), 1u);
    EXPECT_FALSE(rep.clean());
    EXPECT_EQ(rep.provable_remaining(), 0u);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(l->child.running());
  }
}

TEST(Hygiene, ForgedFindingIsRefusedByCleanup) {
  Child victim({"/bin/sleep", "30"}, {.capture_stdout = false});
  Leftover forged;
  forged.kind = LeftoverKind::kProcess;
  forged.provable = true;
  forged.action = LeftoverAction::kKill;
  forged.pid = victim.pid();
  forged.start_ticks = victim.start();
  HygieneInput in;
  in.incarnation = 2;  // no record names the victim
  CleanupReport rep = cleanup({forged}, in);
  EXPECT_FALSE(rep.preempt.has_value());
  ASSERT_EQ(rep.refused.size(), 1u);
  EXPECT_TRUE(victim.running());
}

TEST(Hygiene, StaleBeaconsAreRemovedOthersKept) {
  test::TempDir root;
  const std::string dir = root / "job-1";
  std::filesystem::create_directories(dir);
  Child dead({"/bin/true"}, {.capture_stdout = false});
  dead.reap();
  auto self = read_proc_stat("/proc", ::getpid());
  ASSERT_TRUE(self.ok());
  auto beacon = [&](int rank, int pid, uint64_t start, uint32_t inc, const char* job = "job-1") {
    stepwatch_beacon_v1 b = test::valid_record(job);
    b.rank = rank;
    b.world_size = 4;
    b.pid = pid;
    b.pid_start_ticks = start;
    b.incarnation = inc;
    test::write_file(dir + "/rank-" + std::to_string(rank) + ".beacon", test::as_bytes(b));
  };
  beacon(0, dead.pid(), dead.start(), 2);               // writer gone
  beacon(1, ::getpid(), self->start_ticks, 1);          // an earlier incarnation
  beacon(2, ::getpid(), self->start_ticks, 2);          // current and alive: not stale
  beacon(3, dead.pid(), dead.start(), 1, "other-job");  // not this job's: never removed
  test::write_file(dir + "/notes.txt", "not a beacon");

  HygieneInput in;
  in.job = "job-1";
  in.incarnation = 2;
  in.beacon_dir = dir;
  auto found = find_leftovers(in);
  auto stale = of(found, LeftoverKind::kStaleBeacon);
  ASSERT_EQ(stale.size(), 2u) << dump(found);
  EXPECT_NE(stale[0]->evidence.find("is gone"), std::string::npos) << stale[0]->evidence;
  EXPECT_NE(stale[1]->evidence.find("written by incarnation 1"), std::string::npos)
      << stale[1]->evidence;
  auto foreign = of(found, LeftoverKind::kBeacon);
  ASSERT_EQ(foreign.size(), 1u) << dump(found);
  EXPECT_FALSE(foreign[0]->provable);

  CleanupReport rep = cleanup(found, in);
  EXPECT_EQ(rep.done.size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(dir + "/rank-0.beacon"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/rank-1.beacon"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/rank-2.beacon"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/rank-3.beacon"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/notes.txt"));
  ASSERT_EQ(rep.remaining.size(), 1u) << dump(rep.remaining);
  EXPECT_EQ(rep.remaining[0].kind, LeftoverKind::kBeacon);

  // A beacon that a live writer took over after it was found stale is kept.
  beacon(0, dead.pid(), dead.start(), 2);
  auto again = find_leftovers(in);
  beacon(0, ::getpid(), self->start_ticks, 2);
  CleanupReport kept = cleanup(again, in);
  EXPECT_TRUE(std::filesystem::exists(dir + "/rank-0.beacon"));
  ASSERT_EQ(kept.failed.size(), 1u);
  EXPECT_NE(kept.failed[0].find("changed"), std::string::npos) << kept.failed[0];
}

TEST(Hygiene, GpuHoldersProvableOnlyWithAMatchingRecord) {
  Child old({"/bin/sleep", "30"}, {.capture_stdout = false});
  Child current({"/bin/sleep", "31"}, {.capture_stdout = false});
  probe::GpuDevice dev;
  dev.index = 0;
  dev.processes = std::vector<probe::GpuProcess>{{old.pid(), uint64_t{2} << 30},
                                                 {::getpid(), uint64_t{1} << 30},
                                                 {999999, uint64_t{100} << 20},
                                                 {current.pid(), uint64_t{3} << 30}};
  probe::GpuSnapshot snap;
  snap.devices.push_back(dev);
  HygieneInput in;
  in.incarnation = 2;
  in.recorded = {{old.pid(), old.start(), 1, "rank 0"},
                 {current.pid(), current.start(), 2, "rank 0"}};
  in.gpus = snap;
  auto found = find_leftovers(in);
  auto gpu = of(found, LeftoverKind::kGpuMemory);
  ASSERT_EQ(gpu.size(), 3u) << dump(found);
  auto mine = of(found, LeftoverKind::kGpuMemory, old.pid());
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_TRUE(mine[0]->provable);
  EXPECT_EQ(mine[0]->what, "holds 2.0 GiB on GPU 0");
  EXPECT_NE(of(found, LeftoverKind::kGpuMemory, ::getpid())[0]->evidence.find("not ours"),
            std::string::npos);
  EXPECT_NE(of(found, LeftoverKind::kGpuMemory, 999999)[0]->evidence.find("not visible"),
            std::string::npos);

  CleanupOptions co;
  co.grace_ns = kNsPerSec;
  CleanupReport rep = cleanup(found, in, co);
  EXPECT_EQ(rep.provable_remaining(), 0u) << dump(rep.remaining);
  EXPECT_EQ(rep.remaining.size(), 2u) << dump(rep.remaining);  // the two that are not ours
  EXPECT_TRUE(old.wait_state([](char s) { return s == 'Z'; }));
  EXPECT_TRUE(current.running());  // the current incarnation is never touched
}

TEST(Hygiene, ZombieOfEarlierIncarnationIsNotALeftover) {
  Child z({"/bin/true"}, {.capture_stdout = false});
  ASSERT_TRUE(z.wait_state([](char s) { return s == 'Z'; }));
  HygieneInput in;
  in.incarnation = 1;
  in.recorded = {{z.pid(), z.start(), 0, "rank 0"}};
  auto found = find_leftovers(in);
  EXPECT_TRUE(found.empty()) << dump(found);  // it holds nothing; only its parent can reap it
}

}  // namespace
}  // namespace stepwatch::runbook
