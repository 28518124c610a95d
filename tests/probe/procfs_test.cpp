// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/procfs.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "src/probe/liveness.h"

namespace stepwatch::probe {
namespace {

namespace fs = std::filesystem;

std::string fake_root() {
  return std::string(std::getenv("STEPWATCH_SOURCE_DIR")) + "/tests/probe/data/proc";
}

// A writable copy of the fake tree, for tests that change it between polls.
fs::path copy_fake(const std::string& name) {
  fs::path dst = fs::temp_directory_path() / fmt::format("sw-proc-{}-{}", name, ::getpid());
  fs::remove_all(dst);
  fs::copy(fake_root(), dst, fs::copy_options::recursive);
  return dst;
}

void set_stat_field(const fs::path& root, int pid, const std::string& from, const std::string& to,
                    const std::string& file = "stat") {
  fs::path p = root / std::to_string(pid) / file;
  std::ifstream in(p);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  std::ofstream(p, std::ios::trunc) << text;
}

TEST(ProcessProbe, TreeFromRootFollowsParentLinks) {
  ProcessProbe probe(fake_root());
  Selector sel;
  sel.root_pid = 100;
  auto tree = probe.scan(sel);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  std::set<int> pids;
  for (const auto& [pid, p] : tree->procs) pids.insert(pid);
  EXPECT_EQ(pids, (std::set<int>{100, 101, 102, 103, 400}));
  EXPECT_EQ(tree->unreadable, 1);  // 999 vanished: counted, not an error
  const ProcInfo& r0 = tree->procs.at(101);
  EXPECT_EQ(r0.comm, "pt_main_thread) 0");
  EXPECT_EQ(r0.state, 'S');
  EXPECT_EQ(r0.ppid, 100);
  EXPECT_EQ(r0.start_ticks, 5010u);
  EXPECT_EQ(r0.cpu_ticks, 1000u);
  EXPECT_EQ(r0.threads, 3);
  EXPECT_EQ(r0.read_bytes, 4096000u);
  EXPECT_EQ(r0.write_bytes, 8192u);
  EXPECT_EQ(r0.wchan, "futex_wait_queue");
  EXPECT_EQ(tree->procs.at(102).state, 'D');
  EXPECT_EQ(tree->procs.at(400).state, 'Z');
  // Unreadable io is absent, never zero; wchan "0" means running.
  EXPECT_FALSE(tree->procs.at(103).read_bytes.has_value());
  EXPECT_EQ(tree->procs.at(103).wchan, "");
}

TEST(ProcessProbe, ProcessGroupIncludesReparentedLeftovers) {
  ProcessProbe probe(fake_root());
  Selector sel;
  sel.pgid = 100;
  auto tree = probe.scan(sel);
  ASSERT_TRUE(tree.ok());
  EXPECT_TRUE(tree->procs.count(300));  // reparented to init, still in the group
  EXPECT_FALSE(tree->procs.count(200));
  Selector by_session;
  by_session.sid = 200;
  auto other = probe.scan(by_session);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->procs.size(), 1u);
}

TEST(ProcessProbe, ThreadStatesOnlyForTheAskedPids) {
  ProcessProbe probe(fake_root());
  Selector sel;
  sel.root_pid = 100;
  ScanOptions opts;
  opts.thread_scan_pids = {101, 102};
  auto tree = probe.scan(sel, opts);
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(tree->procs.at(101).threads_in_d, 1);
  EXPECT_EQ(tree->procs.at(102).threads_in_d, 1);
  EXPECT_EQ(tree->procs.at(100).threads_in_d, 0);
  // The main thread's own CPU and context switches come with the threads.
  EXPECT_EQ(tree->procs.at(101).main_cpu_ticks, std::optional<uint64_t>(1000));
  EXPECT_EQ(tree->procs.at(101).main_ctx_switches, std::optional<uint64_t>(1520));
  EXPECT_FALSE(tree->procs.at(102).main_ctx_switches.has_value());  // no status file
  EXPECT_FALSE(tree->procs.at(100).main_cpu_ticks.has_value());     // threads not scanned
}

TEST(ProcessProbe, TheMainThreadsDeltasApartFromTheProcesss) {
  fs::path root = copy_fake("main-thread");
  ProcessProbe probe(root.string());
  Selector sel;
  sel.root_pid = 100;
  ScanOptions opts;
  opts.thread_scan_pids = {101};
  auto first = probe.scan(sel, opts);
  ASSERT_TRUE(first.ok());
  probe.remember(*first);
  // A helper thread spins (+60 ticks for the process); the main thread does not move.
  set_stat_field(root, 101, " 900 100 ", " 950 110 ");
  set_stat_field(root, 101, "voluntary_ctxt_switches:\t1500", "voluntary_ctxt_switches:\t1503",
                 "status");
  auto second = probe.scan(sel, opts);
  ASSERT_TRUE(second.ok());
  auto d = probe.delta(second->procs.at(101));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->cpu_ns, 60 * ProcessProbe::ns_per_tick());
  EXPECT_EQ(d->main_cpu_ns, std::optional<int64_t>(0));
  EXPECT_EQ(d->main_ctx_switches, std::optional<int64_t>(3));
  // Then the main thread computes.
  set_stat_field(root, 101, " 900 100 ", " 940 100 ", "task/101/stat");
  probe.remember(*second);
  auto third = probe.scan(sel, opts);
  ASSERT_TRUE(third.ok());
  d = probe.delta(third->procs.at(101));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->main_cpu_ns, std::optional<int64_t>(40 * ProcessProbe::ns_per_tick()));
  fs::remove_all(root);
}

TEST(ProcessProbe, DeltasBetweenPollsAndPidReuse) {
  fs::path root = copy_fake("delta");
  ProcessProbe probe(root.string());
  Selector sel;
  sel.root_pid = 100;
  auto first = probe.scan(sel);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(probe.delta(first->procs.at(101)).has_value());  // first sight
  probe.remember(*first);

  set_stat_field(root, 101, " 900 100 ", " 950 110 ");  // +60 ticks of CPU
  std::ofstream(root / "101" / "io", std::ios::trunc) << "read_bytes: 4096500\nwrite_bytes: 8292\n";
  set_stat_field(root, 102, " 5011 ", " 7777 ");  // pid 102 now belongs to another process
  auto second = probe.scan(sel);
  ASSERT_TRUE(second.ok());
  auto d = probe.delta(second->procs.at(101));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->cpu_ns, 60 * ProcessProbe::ns_per_tick());
  ASSERT_TRUE(d->io_bytes.has_value());
  EXPECT_EQ(*d->io_bytes, 600);
  EXPECT_FALSE(probe.delta(second->procs.at(102)).has_value());
  auto d103 = probe.delta(second->procs.at(103));
  ASSERT_TRUE(d103.has_value());
  EXPECT_FALSE(d103->io_bytes.has_value());  // unknown io stays unknown

  EXPECT_EQ(inspect(probe.root(), {101, 5010}).liveness, Liveness::kAlive);
  EXPECT_EQ(inspect(probe.root(), {102, 5011}).liveness, Liveness::kReused);
  EXPECT_EQ(inspect(probe.root(), {4242, 1}).liveness, Liveness::kGone);
  EXPECT_EQ(inspect(probe.root(), {101, 0}).liveness, Liveness::kUnknown);
  fs::remove_all(root);
}

TEST(ProcessProbe, MissingRootIsAnErrorNotACrash) {
  ProcessProbe probe("/nonexistent/proc");
  Selector sel;
  sel.root_pid = 1;
  auto tree = probe.scan(sel);
  ASSERT_FALSE(tree.ok());
  EXPECT_NE(tree.error().message.find("/nonexistent/proc"), std::string::npos);
}

TEST(ProcessProbe, RealProcessesComeAndGo) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ProcessProbe probe;
  Selector sel;
  sel.root_pid = ::getpid();
  auto tree = probe.scan(sel);
  ASSERT_TRUE(tree.ok()) << tree.error().message;
  ASSERT_TRUE(tree->procs.count(child));
  uint64_t start = tree->procs.at(child).start_ticks;
  EXPECT_EQ(inspect(probe.root(), {child, start}).liveness, Liveness::kAlive);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(inspect(probe.root(), {child, start}).liveness, Liveness::kGone);
  auto after = probe.scan(sel);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->procs.count(child));
}

}  // namespace
}  // namespace stepwatch::probe

namespace stepwatch::probe {
namespace {

TEST(ProcessProbe, ReuseKnownReadsOnlyNewProcessesAndTheRanks) {
  fs::path root = copy_fake("reuse");
  ProcessProbe probe(root.string());
  Selector sel;
  sel.root_pid = 100;
  ScanOptions opts;
  opts.reuse_known = true;
  opts.detail_pids = std::set<int>{101};
  ASSERT_TRUE(probe.scan(sel, opts).ok());
  // Change what stat says for a known non-rank process and for the rank: only the rank is re-read.
  set_stat_field(root, 102, "pt_main_thread) 1) D", "pt_main_thread) 1) R");
  set_stat_field(root, 101, "pt_main_thread) 0) S", "pt_main_thread) 0) R");
  // A new process of the tree appears: it is read.
  fs::create_directories(root / "500");
  std::ifstream in(root / "103" / "stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(0, 3, "500");
  std::ofstream(root / "500" / "stat") << text;
  auto tree = probe.scan(sel, opts);
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(tree->procs.at(101).state, 'R');  // the rank: fresh
  EXPECT_EQ(tree->procs.at(102).state, 'D');  // known: reused
  EXPECT_TRUE(tree->procs.count(500));        // new: read
  EXPECT_EQ(tree->procs.at(500).ppid, 101);
  // Without reuse, everything is fresh.
  ProcessProbe fresh(root.string());
  EXPECT_EQ(fresh.scan(sel)->procs.at(102).state, 'R');
  fs::remove_all(root);
}

}  // namespace
}  // namespace stepwatch::probe
