// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Which agent the CLI trusts: on loopback, only one whose listening sockets belong to root or to
// the CLI's own user (read from a /proc/net/tcp written by the test).
#include "src/cli/agent_client.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace stepwatch::cli {
namespace {

namespace fs = std::filesystem;

class AgentListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sw-agent-client-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ / "net");
    // 127.0.0.1:9465 held by uid 1001 (an impostor), 0.0.0.0:9466 by root, [::]:9467 by uid 1000;
    // a connection (not LISTEN) on 9468 of uid 1001 does not count.
    std::ofstream(root_ / "net" / "tcp")
        << "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
           "timeout inode\n"
        << "   0: 0100007F:24F9 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001      "
           "  0 7001 1 0 100 0 0 10 0\n"
        << "   1: 00000000:24FA 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0      "
           "  0 7002 1 0 100 0 0 10 0\n"
        << "   2: 0100007F:24FC 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1001      "
           "  0 7004 1 0 20 4 30 10 -1\n";
    std::ofstream(root_ / "net" / "tcp6")
        << "  sl  local_address                         remote_address                        st "
           "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        << "   0: 00000000000000000000000000000000:24FB 00000000000000000000000000000000:0000 0A "
           "00000000:00000000 00:00000000 00000000  1000        0 7003 1 0 100 0 0 10 0\n";
  }
  void TearDown() override { fs::remove_all(root_); }
  Status trusted(const std::string& url, uint32_t me) {
    return agent_listener_trusted(url, me, root_.string());
  }
  fs::path root_;
};

TEST_F(AgentListenerTest, AnotherUsersListenerIsRefusedAndNamed) {
  Status s = trusted("http://127.0.0.1:9465", 1000);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::kPermission);
  EXPECT_NE(s.error().message.find("http://127.0.0.1:9465 is served by a process of uid 1001"),
            std::string::npos)
      << s.error().message;
  EXPECT_FALSE(trusted("http://localhost:9465/", 1000).ok());
  EXPECT_FALSE(trusted("http://[::1]:9467", 1001).ok());  // the IPv6 wildcard of uid 1000
}

TEST_F(AgentListenerTest, RootsOrMyOwnListenerIsTrusted) {
  EXPECT_TRUE(trusted("http://127.0.0.1:9466", 1000).ok());  // root's
  EXPECT_TRUE(trusted("http://127.0.0.1:9465", 1001).ok());  // my own agent
  EXPECT_TRUE(trusted("http://[::1]:9467", 1000).ok());
  EXPECT_TRUE(trusted("http://127.0.0.1:9468", 1000).ok());  // only a connection: nobody listens
}

TEST_F(AgentListenerTest, RemoteUrlsAreNotCheckedAndBadPortsAreNamed) {
  EXPECT_TRUE(trusted("http://10.0.0.5:9465", 1000).ok());
  Status bad = trusted("http://127.0.0.1:99999", 1000);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("not a port"), std::string::npos) << bad.error().message;
}

TEST_F(AgentListenerTest, FindAgentSendsNothingToAnImpostor) {
  if (::getuid() == 1001) GTEST_SKIP() << "this test's impostor uid is ours";
  auto found = find_agent("http://127.0.0.1:9465", root_.string());
  ASSERT_FALSE(found.ok());  // an error, not a fallback: nothing was asked of it
  EXPECT_EQ(found.error().code, Errc::kPermission);
}

// The token file is read like every small file a user hands us: an empty one, a FIFO (which would
// block a plain read forever) and a missing one are refused at once, naming the file.
TEST_F(AgentListenerTest, ATokenFileThatIsEmptyAFifoOrMissingIsRefusedAtOnce) {
  std::ofstream(root_ / "empty");
  ASSERT_EQ(::mkfifo((root_ / "fifo").c_str(), 0600), 0);
  for (const char* name : {"empty", "fifo", "missing"}) {
    ::setenv("STEPWATCH_AGENT_TOKEN_FILE", (root_ / name).c_str(), 1);
    testing::internal::CaptureStderr();
    int rc = ack_through_agent("http://127.0.0.1:1", "job", "alice", "");
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2) << name << ": " << err;
    EXPECT_NE(err.find((root_ / name).string()), std::string::npos) << err;
  }
  ::unsetenv("STEPWATCH_AGENT_TOKEN_FILE");
}

}  // namespace
}  // namespace stepwatch::cli
