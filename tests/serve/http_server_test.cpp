// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// HttpListener over real sockets on 127.0.0.1, port 0: where a connection waits for its first
// byte (issue 26, E9: silent connections once held every worker and kept /healthz waiting), the
// cap on silent connections per peer, and a stop() that waits for no silent client.
#include "src/serve/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "tests/support/loopback.h"

namespace stepwatch::serve {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::connect_loopback;

Status serve_healthz(HttpListener& listener, int threads, SilenceLimits limits = {}) {
  return listener.start(
      [](httplib::Server& s) {
        s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
          res.set_content("ok\n", "text/plain");
        });
      },
      "127.0.0.1", 0, threads, 1024, {}, limits);
}

// Whether the server closes `fd` within `limit` (end of file or a reset, after whatever it sent:
// a request cut off at stop() is answered 400 first).
bool closed_within(int fd, std::chrono::milliseconds limit) {
  auto deadline = Clock::now() + limit;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) <= 0) return false;
    char buf[512];
    if (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) return true;
  }
}

bool still_open(int fd) {
  return !closed_within(fd, 0ms);
}

int get_healthz(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2s);
  c.set_read_timeout(5s);
  auto res = c.Get("/healthz");
  return res ? res->status : -1;
}

struct Fds {
  std::vector<int> fds;
  ~Fds() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
};

TEST(HttpListener, ASilentConnectionIsClosedAfterTheFirstByteTimeout) {
  HttpListener listener("test server");
  ASSERT_TRUE(serve_healthz(listener, 4).ok());
  Fds silent{{connect_loopback(listener.port())}};
  ASSERT_GE(silent.fds[0], 0);
  auto t0 = Clock::now();
  EXPECT_TRUE(closed_within(silent.fds[0], 5s)) << "still open 5 s after connecting";
  EXPECT_GE(Clock::now() - t0, 500ms) << "closed before it had the first-byte timeout (1 s)";
  EXPECT_EQ(get_healthz(listener.port()), 200);
}

// A connection that has sent nothing waits for its first byte without a worker: with one worker,
// a request is answered while silent connections are open.
TEST(HttpListener, SilentConnectionsHoldNoWorker) {
  HttpListener listener("test server");
  ASSERT_TRUE(serve_healthz(listener, 1, {.first_byte_timeout = 30s}).ok());
  Fds silent;
  for (int i = 0; i < 3; ++i) silent.fds.push_back(connect_loopback(listener.port()));
  for (int fd : silent.fds) ASSERT_GE(fd, 0);
  EXPECT_EQ(get_healthz(listener.port()), 200);
  for (int fd : silent.fds) EXPECT_TRUE(still_open(fd)) << "a silent connection was dropped";
}

// One silent connection more than the cap from the same address closes that address's oldest;
// the rest wait their first-byte timeout and are served when they speak.
TEST(HttpListener, OverThePerPeerCapTheOldestSilentConnectionIsClosed) {
  HttpListener listener("test server");
  ASSERT_TRUE(serve_healthz(listener, 4, {.first_byte_timeout = 30s, .silent_per_peer = 4}).ok());
  Fds silent;
  for (int i = 0; i < 6; ++i) {
    silent.fds.push_back(connect_loopback(listener.port()));
    ASSERT_GE(silent.fds.back(), 0);
  }
  EXPECT_TRUE(closed_within(silent.fds[0], 5s)) << "the oldest is kept over the cap";
  EXPECT_TRUE(closed_within(silent.fds[1], 5s)) << "the second oldest is kept over the cap";
  std::this_thread::sleep_for(1500ms);  // longer than a 1 s first-byte timeout
  for (size_t i = 2; i < silent.fds.size(); ++i)
    EXPECT_TRUE(still_open(silent.fds[i])) << "connection " << i << " under the cap was closed";
  // The cap counts silent connections only: requests from the same address are answered.
  EXPECT_EQ(get_healthz(listener.port()), 200);
  std::string get = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_EQ(::write(silent.fds[5], get.data(), get.size()), static_cast<ssize_t>(get.size()));
  timeval tv{5, 0};
  ::setsockopt(silent.fds[5], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[256] = {};
  ssize_t n = ::read(silent.fds[5], buf, sizeof buf - 1);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 200", 0), 0u) << buf;
}

// stop() closes silent connections and requests still being read at once, rather than waiting
// for their timeouts (30 s of silence, 5 s to read a request).
TEST(HttpListener, StopWaitsForNoSilentOrUnfinishedClient) {
  HttpListener listener("test server");
  ASSERT_TRUE(serve_healthz(listener, 4, {.first_byte_timeout = 30s}).ok());
  Fds clients;
  for (int i = 0; i < 5; ++i) clients.fds.push_back(connect_loopback(listener.port()));
  int unfinished = connect_loopback(listener.port());
  clients.fds.push_back(unfinished);
  for (int fd : clients.fds) ASSERT_GE(fd, 0);
  std::string head = "GET /healthz HTTP/1.1\r\n";  // and never the blank line
  ASSERT_EQ(::write(unfinished, head.data(), head.size()), static_cast<ssize_t>(head.size()));
  std::this_thread::sleep_for(200ms);  // every one accepted, the unfinished one being read
  auto t0 = Clock::now();
  listener.stop();
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_FALSE(listener.running());
  for (int fd : clients.fds) EXPECT_TRUE(closed_within(fd, 5s));
}

}  // namespace
}  // namespace stepwatch::serve
