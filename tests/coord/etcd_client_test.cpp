// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The etcd client against a real etcd (tests/support/etcd_server.h), never a mock: the gateway
// ignores unknown JSON fields, so only a real server shows that every field is sent under its
// real name. One etcd serves the tests that only need keys (each under its own prefix); the
// restart and auth tests start their own, and a TcpForwarder cuts one client off.
#include "src/coord/etcd_client.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "tests/support/etcd_server.h"
#include "tests/support/tcp_forwarder.h"

namespace stepwatch::coord {
namespace {

using test::EtcdServer;
using test::TcpForwarder;
using SteadyClock = std::chrono::steady_clock;

// The value of a call that must work; otherwise the test fails with the call and its error.
template <class T>
T must(Result<T> r, const char* what) {
  if (!r.ok()) throw std::runtime_error(std::string(what) + ": " + r.error().message);
  return std::move(r).value();
}
#define MUST(expr) must((expr), #expr)

double seconds_since(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

std::string url(int port) {
  return "http://127.0.0.1:" + std::to_string(port);
}

// A loopback socket bound to a free port; listening or not. Without listen() a connect to it is
// refused; with listen() and no accept() the kernel completes connects into the backlog, so a
// request is sent and never answered.
class Port {
 public:
  explicit Port(bool listening) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        (listening && ::listen(fd_, 16) != 0) ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot bind a loopback port");
    }
    port_ = ntohs(addr.sin_port);
  }
  ~Port() { ::close(fd_); }
  std::string url() const { return coord::url(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

EtcdClient client_for(std::vector<std::string> endpoints, int64_t timeout_ns = 2 * kNsPerSec,
                      std::string token = {}) {
  return EtcdClient(EtcdOptions{std::move(endpoints), std::move(token), timeout_ns});
}

class EtcdClientTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override {
    // etcd is a declared dependency: a missing one fails the test, it is never skipped.
    ASSERT_TRUE(test::etcd_available()) << test::kEtcdMissing;
    if (!server_) server_ = std::make_unique<EtcdServer>();
    prefix_ = std::string("/t/") + testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  EtcdClient client(int64_t timeout_ns = 2 * kNsPerSec) const {
    return client_for({server_->endpoint()}, timeout_ns);
  }
  std::string key(std::string_view rel) const { return prefix_ + "/" + std::string(rel); }

  static std::unique_ptr<EtcdServer> server_;
  std::string prefix_;
};
std::unique_ptr<EtcdServer> EtcdClientTest::server_;

// The one key a range found; the test fails, not crashes, on any other number.
KeyValue only(const RangeResult& r) {
  if (r.kvs.size() != 1) throw std::runtime_error(fmt::format("{} keys, not 1", r.kvs.size()));
  return r.kvs[0];
}

std::vector<std::string> keys_of(const RangeResult& r) {
  std::vector<std::string> keys;
  for (const auto& kv : r.kvs) keys.push_back(kv.key);
  return keys;
}

TEST(PrefixEnd, IncrementsTheLastByteBelow0xff) {
  EXPECT_EQ(prefix_end("a"), "b");
  EXPECT_EQ(prefix_end("/jobs/"), "/jobs0");
  EXPECT_EQ(prefix_end("a\xfe"), "a\xff");
  EXPECT_EQ(prefix_end("a\xff"), "b");
  EXPECT_EQ(prefix_end("a\xff\xff"), "b");
  EXPECT_EQ(prefix_end(std::string(1, '\0')), "\x01");
  EXPECT_EQ(prefix_end(""), std::string(1, '\0'));
  EXPECT_EQ(prefix_end("\xff\xff"), std::string(1, '\0'));
}

TEST(EtcdOptions, UnusableEndpointsAreInvalidArguments) {
  for (auto endpoints : {std::vector<std::string>{}, std::vector<std::string>{"127.0.0.1:2379"},
                         std::vector<std::string>{"https://127.0.0.1:2379"}}) {
    auto r = client_for(endpoints).put("k", "v");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::kInvalidArgument) << r.error().message;
  }
}

TEST_F(EtcdClientTest, PutAndRangeRoundTripBinaryKeysAndValues) {
  auto c = client();
  std::string every_byte;
  for (int i = 0; i < 256; ++i) every_byte += static_cast<char>(i);
  // Lengths 0 to 4 cover every base64 padding; 0x00 and 0xff cover the alphabet's ends.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {key(std::string("nul\0in", 6)), std::string("\0\xff\0", 3)},
      {key("\xff\xfe"), every_byte},
      {key("len0"), ""},
      {key("len1"), "a"},
      {key("len2"), "ab"},
      {key("len3"), "abc"},
      {key("len4"), "abcd"},
  };
  for (const auto& [k, v] : cases) {
    const int64_t rev = MUST(c.put(k, v));
    auto r = MUST(c.range(k));
    ASSERT_EQ(r.kvs.size(), 1u) << k;
    EXPECT_EQ(r.kvs[0].key, k);
    EXPECT_EQ(r.kvs[0].value, v);
    EXPECT_EQ(r.kvs[0].create_revision, rev);
    EXPECT_EQ(r.kvs[0].mod_revision, rev);
    EXPECT_EQ(r.kvs[0].version, 1);
    EXPECT_EQ(r.kvs[0].lease, 0);
    EXPECT_EQ(r.count, 1);
    EXPECT_GE(r.revision, rev);
  }
  // Revisions, versions and an empty range: tests/coord/kv_test.cpp, through this client.
}

// httplib sends headers and body in two writes; with Nagle on, each call waits ~40 ms for the
// server's delayed ACK (20 calls: 800 ms). Without it, 20 reads take a few ms.
TEST_F(EtcdClientTest, CallsDoNotWaitForDelayedAcks) {
  auto c = client();
  MUST(c.put(key("warm"), "v"));
  const auto t0 = SteadyClock::now();
  for (int i = 0; i < 20; ++i) MUST(c.range(key("warm")));
  EXPECT_LT(seconds_since(t0), 0.6);
}

TEST_F(EtcdClientTest, RangeByCreateRevisionIsOldestFirst) {
  auto c = client();
  for (const char* k : {"c", "a", "b"}) MUST(c.put(key("o/") + k, "1"));
  MUST(c.put(key("o/c"), "2"));  // a later write keeps its create revision
  auto r = MUST(c.range(key("o/"), {.prefix = true, .by_create_rev = true}));
  EXPECT_EQ(keys_of(r), (std::vector<std::string>{key("o/c"), key("o/a"), key("o/b")}));
  r = MUST(c.range(key("o/"), {.prefix = true}));
  EXPECT_EQ(keys_of(r), (std::vector<std::string>{key("o/a"), key("o/b"), key("o/c")}));
  r = MUST(c.range(key("o/"), {.prefix = true, .limit = 1, .by_create_rev = true}));
  EXPECT_EQ(keys_of(r), std::vector<std::string>{key("o/c")});
  EXPECT_EQ(r.count, 3);
}

TEST_F(EtcdClientTest, DeleteOneKeyOrAPrefix) {
  auto c = client();
  for (const char* k : {"d/a", "d/b", "d/c", "d0"}) MUST(c.put(key(k), "v"));
  EXPECT_EQ(MUST(c.del(key("d/a"))), 1);
  EXPECT_EQ(MUST(c.del(key("d/a"))), 0);  // proto3 leaves out "deleted": 0
  EXPECT_EQ(MUST(c.del(key("d/"), true)), 2);
  EXPECT_EQ(keys_of(MUST(c.range(key("d"), {.prefix = true}))),
            std::vector<std::string>{key("d0")});
}

TEST_F(EtcdClientTest, CreateOnceHasExactlyOneWinnerAmongThreeRacers) {
  const std::string k = key("incident");
  std::latch start(3);
  std::vector<std::optional<Result<TxnResult>>> results(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto c = client();  // one client per thread
      (void)c.health();   // connected before the race starts
      start.arrive_and_wait();
      results[i] = c.txn({Compare::create_rev(k, 0)}, {TxnOp::put(k, "agent-" + std::to_string(i))},
                         {TxnOp::get(k)});
    });
  }
  for (auto& t : threads) t.join();
  std::string winner;
  for (int i = 0; i < 3; ++i) {
    const TxnResult& t = MUST(*results[i]);
    if (t.succeeded) {
      EXPECT_EQ(winner, "") << "two winners";
      winner = "agent-" + std::to_string(i);
      EXPECT_TRUE(t.ranges.empty());
    }
  }
  ASSERT_NE(winner, "");
  for (int i = 0; i < 3; ++i) {
    const TxnResult& t = results[i]->value();
    if (t.succeeded) continue;
    // The loser's failure branch read the winner's record.
    ASSERT_EQ(t.ranges.size(), 1u);
    EXPECT_EQ(only(t.ranges[0]).value, winner);
    EXPECT_EQ(only(t.ranges[0]).version, 1);
  }
}

// Compares (every target and result), txn branches, fenced writes and a lease's life (grant,
// keepalive, time to live, revoke, its keys) are tested through this client against a real etcd
// in tests/coord/kv_test.cpp, the same scripts as for the in-memory store.

// The gateway drops a misspelled "lease" silently; a dead lease is refused only if it is sent.
TEST_F(EtcdClientTest, PutWithARevokedLeaseIsRefusedNaming404) {
  auto c = client();
  const Lease lease = MUST(c.grant(5));
  ASSERT_TRUE(c.revoke(lease.id).ok());
  auto r = c.put(key("k"), "v", lease.id);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kNotFound);
  EXPECT_EQ(r.error().message, "etcd " + server_->endpoint() +
                                   ": /v3/kv/put: HTTP 404: etcdserver: requested lease not found");
  auto t = c.txn({}, {TxnOp::put(key("k"), "v", lease.id)});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, Errc::kNotFound) << t.error().message;
  EXPECT_TRUE(MUST(c.range(key("k"))).kvs.empty());
  // The same client goes on after the error reply (whose trailer httplib cannot read).
  EXPECT_GT(MUST(c.put(key("k"), "v")), 0);
}

TEST_F(EtcdClientTest, AnExpiredLeaseTakesItsKeysAndKeepaliveSaysZero) {
  auto c = client();
  const Lease lease = MUST(c.grant(1));  // the least etcd allows with --election-timeout 100
  MUST(c.put(key("alive"), "v", lease.id));
  const auto t0 = SteadyClock::now();
  int64_t left = 0;
  while ((left = MUST(c.time_to_live(lease.id))) != -1 && seconds_since(t0) < 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(left, -1);
  EXPECT_LT(seconds_since(t0), 3.0);
  EXPECT_EQ(MUST(c.keepalive(lease.id)), 0);  // proto3 leaves out "TTL"
  EXPECT_TRUE(MUST(c.range(key("alive"))).kvs.empty());
}

TEST_F(EtcdClientTest, Health) {
  EXPECT_TRUE(client().health().ok());
  Port dead(false);
  auto h = client_for({dead.url()}, 300 * kNsPerMs).health();
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().code, Errc::kIo);
}

TEST_F(EtcdClientTest, FailsOverAndThenStartsFromTheEndpointThatAnswered) {
  Port dead(false);
  auto c = client_for({dead.url(), server_->endpoint()}, 300 * kNsPerMs);
  EXPECT_EQ(c.endpoint(), dead.url());  // the first one, before any answer
  MUST(c.put(key("k"), "v"));
  EXPECT_EQ(c.endpoint(), server_->endpoint());
  EXPECT_TRUE(c.health().ok());

  // A server that never answers costs one timeout, once: the next call starts where it worked.
  Port silent(true);
  auto s = client_for({silent.url(), server_->endpoint()}, 300 * kNsPerMs);
  auto t0 = SteadyClock::now();
  EXPECT_EQ(MUST(s.range(key("k"))).kvs.size(), 1u);
  EXPECT_GE(seconds_since(t0), 0.25);
  t0 = SteadyClock::now();
  MUST(s.range(key("k")));
  EXPECT_LT(seconds_since(t0), 0.25);
}

TEST_F(EtcdClientTest, ATxnIsNotResentOnceItMayHaveArrived) {
  Port silent(true);
  auto c = client_for({silent.url(), server_->endpoint()}, 300 * kNsPerMs);
  auto t = c.txn({Compare::create_rev(key("k"), 0)}, {TxnOp::put(key("k"), "v")});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, Errc::kIo);
  EXPECT_NE(t.error().message.find("not resent"), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find(silent.url()), std::string::npos) << t.error().message;
  // A refused connection sent nothing: the txn goes on to the next endpoint.
  Port dead(false);
  auto d = client_for({dead.url(), server_->endpoint()}, 300 * kNsPerMs);
  EXPECT_TRUE(
      MUST(d.txn({Compare::create_rev(key("k"), 0)}, {TxnOp::put(key("k"), "v")})).succeeded);
}

TEST_F(EtcdClientTest, NoEndpointAnsweringIsAnIoErrorNamingEachWithinTheTimeout) {
  Port dead1(false), dead2(false), silent(true);
  auto t0 = SteadyClock::now();
  auto r = client_for({dead1.url(), dead2.url()}, 300 * kNsPerMs).put(key("k"), "v");
  EXPECT_LT(seconds_since(t0), 0.3);  // refused at once
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kIo);
  EXPECT_EQ(r.error().message, "etcd: no endpoint answered /v3/kv/put: " + dead1.url() +
                                   " (cannot connect (refused or unreachable)); " + dead2.url() +
                                   " (cannot connect (refused or unreachable))");
  t0 = SteadyClock::now();
  r = client_for({silent.url()}, 300 * kNsPerMs).put(key("k"), "v");
  const double took = seconds_since(t0);
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 1.0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kIo);
  EXPECT_NE(r.error().message.find(silent.url()), std::string::npos) << r.error().message;
}

TEST_F(EtcdClientTest, DataAndLeasesSurviveAKillAndTheClientReconnects) {
  EtcdServer own;
  auto c = client_for({own.endpoint()}, 500 * kNsPerMs);
  MUST(c.put("k", "before"));
  const Lease lease = MUST(c.grant(60));
  own.kill();
  auto r = c.range("k");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kIo);
  own.restart();
  EXPECT_EQ(only(MUST(c.range("k"))).value, "before");  // the same client, a new connection
  EXPECT_GT(MUST(c.time_to_live(lease.id)), 0);
  MUST(c.put("k", "after"));

  // A clean stop between two calls: the kept connection is found closed, the call still works.
  own.restart();
  EXPECT_EQ(only(MUST(c.range("k"))).value, "after");
}

TEST_F(EtcdClientTest, AForwarderCutPartitionsOneClientAndRestoreHealsIt) {
  TcpForwarder fwd(server_->port());
  auto c = client_for({url(fwd.port())}, 300 * kNsPerMs);
  MUST(c.put(key("k"), "1"));

  fwd.cut();
  auto t0 = SteadyClock::now();
  auto r = c.range(key("k"));
  EXPECT_LT(seconds_since(t0), 0.3);  // reset: fails at once
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kIo);
  EXPECT_EQ(MUST(client().range(key("k"))).kvs.size(), 1u);  // others still reach etcd
  fwd.restore();
  EXPECT_EQ(only(MUST(c.range(key("k")))).value, "1");

  fwd.cut(TcpForwarder::Cut::kBlackhole);
  t0 = SteadyClock::now();
  auto p = c.put(key("k"), "2");
  const double took = seconds_since(t0);
  EXPECT_GE(took, 0.25);  // silent: the read timeout
  EXPECT_LT(took, 1.0);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::kIo);
  fwd.restore();
  MUST(c.put(key("k"), "3"));
  EXPECT_EQ(only(MUST(c.range(key("k")))).value, "3");
}

// A reply etcd itself never sends (a proxy's, a broken gateway's), from a loopback HTTP server
// answering every range with `body`. The value decodes through a table, not a search, and a
// reply laid over several lines is still read.
class OneReply {
 public:
  explicit OneReply(std::string body) {
    server_.Post("/v3/kv/range", [body](const httplib::Request&, httplib::Response& res) {
      res.set_content(body, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");  // listening: a connect waits for accept
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~OneReply() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return coord::url(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(EtcdClientReplies, AValueOutsideTheBase64AlphabetIsAParseErrorNamingIt) {
  OneReply bad(R"({"header":{"revision":"7"},"kvs":[{"key":"YQ==","value":"YW@j"}],"count":"1"})");
  auto r = client_for({bad.url()}).range("a");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kParse);
  EXPECT_NE(r.error().message.find("bad base64 \"YW@j\""), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("/v3/kv/range"), std::string::npos) << r.error().message;
}

TEST(EtcdClientReplies, AReplyOverSeveralLinesOrWithTrailingValuesIsRead) {
  OneReply pretty(
      "{\n  \"header\": {\"revision\": \"7\"},\n  \"kvs\": [{\"key\": \"YQ==\", "
      "\"value\": \"/wA=\", \"mod_revision\": \"5\"}],\n  \"count\": \"1\"\n}\n");
  auto r = client_for({pretty.url()}).range("a");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->revision, 7);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].key, "a");
  EXPECT_EQ(r->kvs[0].value, std::string("\xff\0", 2));
  EXPECT_EQ(r->kvs[0].mod_revision, 5);
  // A streamed reply is values a line: the first is the answer.
  OneReply streamed("{\"header\":{\"revision\":\"9\"},\"count\":\"0\"}\n{\"header\":{}}\n");
  auto s = client_for({streamed.url()}).range("a");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->revision, 9);
  OneReply broken("{\"header\":{\"revision\":");
  auto b = client_for({broken.url()}).range("a");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, Errc::kParse) << b.error().message;
}

TEST_F(EtcdClientTest, TheTokenIsSentAsTheAuthorizationHeader) {
  EtcdServer own;
  const std::string token = own.enable_auth("pw");
  auto anonymous = client_for({own.endpoint()}).put("k", "v");
  ASSERT_FALSE(anonymous.ok());
  EXPECT_NE(anonymous.error().message.find("user name is empty"), std::string::npos)
      << anonymous.error().message;
  auto wrong = client_for({own.endpoint()}, 2 * kNsPerSec, "not-a-token").put("k", "v");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, Errc::kPermission) << wrong.error().message;
  auto c = client_for({own.endpoint()}, 2 * kNsPerSec, token);
  MUST(c.put("k", "v"));
  EXPECT_EQ(only(MUST(c.range("k"))).value, "v");
}

}  // namespace
}  // namespace stepwatch::coord
