// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The port readers: /proc/net/tcp{,6} parsed on the checked-in fake tree
// (tests/probe/data/proc/net), socket owners through fd links, and real sockets of real processes.
#include "src/probe/ports.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/contract/test_support.h"
#include "tests/runbook/children.h"

namespace stepwatch::probe {
namespace {

std::string fake_root() {
  return std::string(std::getenv("STEPWATCH_SOURCE_DIR")) + "/tests/probe/data/proc";
}

TEST(Ports, ParsesTheCheckedInProcNetFiles) {
  const std::string root = fake_root();
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
  const std::string root = fake_root();
  // Line 2 of the checked-in tcp: 127.0.0.1:29500 -> 127.0.0.1:50000, ESTABLISHED, uid 1000.
  EXPECT_EQ(connected_socket_uid(root, "127.0.0.1", 29500, "127.0.0.1", 50000),
            std::optional<uint32_t>(1000));
  EXPECT_EQ(connected_socket_uid(root, "::ffff:127.0.0.1", 29500, "::ffff:127.0.0.1", 50000),
            std::optional<uint32_t>(1000));
  EXPECT_EQ(connected_socket_uid(root, "127.0.0.1", 22, "127.0.0.1", 50000),
            std::nullopt);  // only a listener there
  EXPECT_EQ(connected_socket_uid(root, "127.0.0.2", 29500, "127.0.0.1", 50000), std::nullopt);
  // The same client port towards another server is another connection.
  EXPECT_EQ(connected_socket_uid(root, "127.0.0.1", 29500, "127.0.0.1", 50001), std::nullopt);
  // Line 4 is a TIME_WAIT socket (uid 0): a closed connection owns nothing.
  EXPECT_EQ(connected_socket_uid(root, "10.0.0.10", 29500, "10.0.0.11", 54321), std::nullopt);

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
  EXPECT_EQ(connected_socket_uid("/proc", "127.0.0.1", ntohs(mine.sin_port), "127.0.0.1",
                                 ntohs(addr.sin_port)),
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
  test::Child child({test::kPython, "-c", brief});
  int port = std::stoi(child.read_line());
  auto sleep_real = [](int64_t ns) { ::usleep(static_cast<useconds_t>(ns / kNsPerUs)); };
  ASSERT_FALSE(listeners_on_port("/proc", port)->empty());
  auto freed = wait_port_free("/proc", port, 10 * kNsPerSec, SystemClock::instance(), sleep_real);
  ASSERT_TRUE(freed.ok()) << freed.error().message;
  EXPECT_TRUE(freed->empty());

  test::ListeningChild held;
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

}  // namespace
}  // namespace stepwatch::probe
