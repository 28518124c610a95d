// Restart hygiene: leftovers of an earlier incarnation found with evidence, and cleanup acting
// only on what is proven to be the job's own. Real processes hold real ports; /proc/net/tcp
// parsing also runs on a checked-in fake tree (tests/runbook/data/proc).
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

#include "src/runbook/ports.h"
#include "tests/contract/test_support.h"
#include "tests/runbook/children.h"

namespace stepwatch::runbook {
namespace {

using test::Child;

const char* kListen =
    "import socket, time\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', 0))\n"
    "s.listen()\n"
    "print(s.getsockname()[1], flush=True)\n"
    "time.sleep(60)\n";

struct Listener {
  Child child{{test::kPython, "-c", kListen}};
  int port = std::stoi(child.read_line());
};

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

TEST(Ports, ParsesTheCheckedInProcNetFiles) {
  const std::string root = std::string(RUNBOOK_TEST_DATA) + "/proc";
  int malformed = 0;
  auto v4 = parse_proc_net_tcp(test::read_file(root + "/net/tcp"), false, &malformed);
  EXPECT_EQ(malformed, 1);
  ASSERT_EQ(v4.size(), 2u);  // listeners only: the ESTABLISHED and TIME_WAIT lines are not
  EXPECT_EQ(v4[0].address, "127.0.0.1");
  EXPECT_EQ(v4[0].port, 29500);
  EXPECT_EQ(v4[0].inode, 51234u);
  EXPECT_EQ(v4[0].uid, 1000u);
  EXPECT_EQ(v4[1].port, 22);

  auto on_port = listeners_on_port(root, 29500);
  ASSERT_TRUE(on_port.ok());
  ASSERT_EQ(on_port->size(), 2u);
  EXPECT_EQ((*on_port)[1].address, "::");
  EXPECT_TRUE((*on_port)[1].v6);
  EXPECT_EQ((*on_port)[1].inode, 61234u);
  auto mapped = listeners_on_port(root, 8080);
  ASSERT_TRUE(mapped.ok());
  ASSERT_EQ(mapped->size(), 1u);
  EXPECT_EQ((*mapped)[0].address, "::ffff:10.0.0.1");
  EXPECT_TRUE(listeners_on_port(root, 1)->empty());
  EXPECT_FALSE(listeners_on_port(root + "/nonexistent", 29500).ok());
}

// Found by fuzz/proc_fuzz.cpp: a port of more than four hex digits, or with a sign, was taken.
TEST(Ports, APortIsFourHexDigitsAsTheKernelPrintsIt) {
  const std::string header =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
      "inode\n";
  auto line = [](const char* port) {
    return fmt::format(
        "   0: 0100007F:{} 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000 0 7001 1 "
        "0 100 0 0 10 0\n",
        port);
  };
  int malformed = 0;
  auto ok = parse_proc_net_tcp(header + line("24F9"), false, &malformed);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].port, 9465);
  EXPECT_EQ(malformed, 0);
  for (const char* bad : {"124F9", "-001", "+0FF", "24F", "zzzz"}) {
    auto none = parse_proc_net_tcp(header + line(bad), false, &malformed);
    EXPECT_TRUE(none.empty()) << bad;
    EXPECT_EQ(malformed, 1) << bad;
  }
}

TEST(Ports, AConnectedSocketsOwnerIsFoundByItsLocalEnd) {
  const std::string root = std::string(RUNBOOK_TEST_DATA) + "/proc";
  // Line 2 of the checked-in tcp: 127.0.0.1:29500 -> 127.0.0.1:50000, ESTABLISHED, uid 1000.
  EXPECT_EQ(connected_socket_uid(root, "127.0.0.1", 29500), std::optional<uint32_t>(1000));
  EXPECT_EQ(connected_socket_uid(root, "::ffff:127.0.0.1", 29500), std::optional<uint32_t>(1000));
  EXPECT_EQ(connected_socket_uid(root, "127.0.0.1", 22), std::nullopt);  // only a listener there
  EXPECT_EQ(connected_socket_uid(root, "127.0.0.2", 29500), std::nullopt);

  // A real client socket on this machine belongs to us.
  int server = ::socket(AF_INET, SOCK_STREAM, 0), client = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(server, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(server, 1), 0);
  ASSERT_EQ(::getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  sockaddr_in mine{};
  len = sizeof mine;
  ASSERT_EQ(::getsockname(client, reinterpret_cast<sockaddr*>(&mine), &len), 0);
  EXPECT_EQ(connected_socket_uid("/proc", "127.0.0.1", ntohs(mine.sin_port)),
            std::optional<uint32_t>(::geteuid()));
  ::close(client);
  ::close(server);
}

TEST(Ports, MapsSocketInodesToOwnersThroughFdLinks) {
  test::TempDir root;
  std::filesystem::create_directories(root / "4242/fd");
  std::filesystem::create_directories(root / "4343/fd");
  test::write_file(root / "4242/stat",
                   "4242 (python3) S 1 4242 4242 0 -1 0 0 0 0 0 5 6 0 0 20 0 3 0 777 0 0");
  ASSERT_EQ(::symlink("socket:[51234]", (root / "4242/fd/7").c_str()), 0);
  ASSERT_EQ(::symlink("/dev/null", (root / "4242/fd/0").c_str()), 0);
  ASSERT_EQ(::symlink("socket:[999]", (root / "4343/fd/3").c_str()), 0);
  OwnerScan scan = socket_owners(root.path(), {51234});
  ASSERT_EQ(scan.owners.size(), 1u);
  EXPECT_EQ(scan.owners[0].pid, 4242);
  EXPECT_EQ(scan.owners[0].start_ticks, 777u);
  EXPECT_EQ(scan.owners[0].comm, "python3");
}

// A socket that outlives its owner for a moment is waited for; one that stays is reported.
TEST(Ports, WaitPortFreeWaitsForASocketThatGoesAndReportsOneThatStays) {
  const char* brief =
      "import socket, time\n"
      "s = socket.socket()\n"
      "s.bind(('127.0.0.1', 0))\n"
      "s.listen()\n"
      "print(s.getsockname()[1], flush=True)\n"
      "time.sleep(0.4)\n";
  Child child({test::kPython, "-c", brief});
  int port = std::stoi(child.read_line());
  auto sleep_real = [](int64_t ns) { ::usleep(static_cast<useconds_t>(ns / kNsPerUs)); };
  ASSERT_FALSE(listeners_on_port("/proc", port)->empty());
  auto freed = wait_port_free("/proc", port, 10 * kNsPerSec, SystemClock::instance(), sleep_real);
  ASSERT_TRUE(freed.ok()) << freed.error().message;
  EXPECT_TRUE(freed->empty());

  Listener held;
  ManualClock clock;
  int sleeps = 0;
  auto sleep_fake = [&](int64_t ns) {
    ++sleeps;
    clock.advance(ns);
  };
  auto still = wait_port_free("/proc", held.port, 2 * kNsPerSec, clock, sleep_fake, 500 * kNsPerMs);
  ASSERT_TRUE(still.ok()) << still.error().message;
  ASSERT_EQ(still->size(), 1u);
  EXPECT_EQ((*still)[0].port, held.port);
  EXPECT_EQ(sleeps, 4);  // 2 s of waiting in 500 ms polls, then the answer
  // No /proc/net at all: the error, not a wait.
  EXPECT_FALSE(wait_port_free("/nonexistent", held.port, kNsPerSec, clock, sleep_fake).ok());
}

TEST(Ports, PortFromLaunchCommand) {
  using V = std::vector<std::string>;
  EXPECT_EQ(port_from_command(V{"torchrun", "--master_port", "29501", "train.py"}), 29501);
  EXPECT_EQ(port_from_command(V{"torchrun", "--master-port=29502", "train.py"}), 29502);
  EXPECT_EQ(port_from_command(V{"torchrun", "--rdzv-endpoint=node1:29503"}), 29503);
  EXPECT_EQ(port_from_command(V{"torchrun", "--rdzv_endpoint", "[::1]:29504"}), 29504);
  EXPECT_EQ(port_from_command(V{"sh", "-c", "MASTER_PORT=29505 torchrun train.py"}), 29505);
  EXPECT_EQ(port_from_command(V{"env", "MASTER_PORT=29506", "python", "t.py"}), 29506);
  EXPECT_EQ(port_from_command(V{"python", "train.py", "--master_port", "x"}), std::nullopt);
  EXPECT_EQ(port_from_command(V{"python", "train.py"}), std::nullopt);
}

TEST(Hygiene, LeftoverOfEarlierIncarnationHoldingThePortIsFoundAndCleaned) {
  Listener old;
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
  Listener stranger;
  Listener reused;  // a record names its pid, but with another start time
  for (Listener* l : {&stranger, &reused}) {
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
