// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The supervisor's ack endpoint over real HTTP on 127.0.0.1, port 0: the ack route with the
// agent's request and reply.
#include "src/serve/ack_routes.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "src/common/limits.h"
#include "tests/support/loopback.h"

namespace stepwatch::serve {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using test::connect_loopback;

httplib::Client client(const AckServer& s) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_connection_timeout(2s);
  c.set_read_timeout(5s);
  return c;
}

// An incident as the store returns it once acked.
store::Incident acked_incident(const AckRequest& r) {
  store::Incident i;
  i.id = 7;
  i.job = r.job;
  i.opened_at_ns = 1'714'533'164'000'000'000;  // 2024-05-01T03:12:44Z
  i.state = "stalled";
  i.acked_at_ns = i.opened_at_ns + 60'000'000'000;
  i.acked_by = r.by;
  i.ack_note = r.note;
  return i;
}

// A supervisor stand-in: one incident that is open until acked.
struct FakeSupervisor {
  std::mutex mu;
  bool open = true;
  std::vector<AckRequest> acks;

  AckServerConfig config() {
    AckServerConfig c;
    c.job = "llm-7b";
    c.on_ack = [this](const AckRequest& r) -> AckResult {
      std::lock_guard lock(mu);
      acks.push_back(r);
      if (!open) return std::optional<store::Incident>();
      return std::optional<store::Incident>(acked_incident(r));
    };
    c.status = [this] {
      std::lock_guard lock(mu);
      return json{{"verdict", {{"state", "stalled"}}}, {"incident", open ? json("inc-7") : json()}}
          .dump();
    };
    return c;
  }
};

TEST(AckServer, AcksTheOpenIncident) {
  FakeSupervisor sup;
  AckServer server(sup.config());
  ASSERT_TRUE(server.start().ok());
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.address(), fmt::format("127.0.0.1:{}", server.port()));
  auto c = client(server);
  auto res = c.Post("/ack", R"({"by":"alice","note":"looking at rank 3"})", "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200) << res->body;
  json j = json::parse(res->body);
  EXPECT_EQ(j["acked"], true);
  EXPECT_EQ(j["incident_id"], 7);
  EXPECT_EQ(j["incident"]["state"], "stalled");
  // The incident as the agent's API and `stepwatch incidents --json` show it.
  EXPECT_EQ(j["incident"]["id"], 7);
  EXPECT_EQ(j["incident"]["job_id"], "llm-7b");
  EXPECT_EQ(j["incident"]["status"], "acked");
  EXPECT_EQ(j["incident"]["acked_by"], "alice");
  EXPECT_EQ(j["incident"]["ack_note"], "looking at rank 3");
  EXPECT_EQ(j["incident"]["opened_at"], "2024-05-01T03:12:44Z");
  EXPECT_EQ(j["by"], "alice");
  EXPECT_EQ(j["message"], "incident 7 of job llm-7b acked by alice");
  std::lock_guard lock(sup.mu);
  ASSERT_EQ(sup.acks.size(), 1u);
  EXPECT_EQ(sup.acks[0].job, "llm-7b");
  EXPECT_EQ(sup.acks[0].by, "alice");
  EXPECT_EQ(sup.acks[0].note, "looking at rank 3");
  EXPECT_EQ(sup.acks[0].remote_addr, "127.0.0.1");
}

// The agent's path to the same route: POST /api/v1/jobs/{id}/ack, for this endpoint's job only.
TEST(AckServer, TheAgentsPathAcksThisJobOnly) {
  FakeSupervisor sup;
  AckServer server(sup.config());
  ASSERT_TRUE(server.start().ok());
  auto c = client(server);
  auto res = c.Post("/api/v1/jobs/llm-7b/ack", R"({"by":"dana"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["incident"]["acked_by"], "dana");
  auto other = c.Post("/api/v1/jobs/other/ack", R"({"by":"dana"})", "application/json");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  EXPECT_NE(json::parse(other->body)["error"].get<std::string>().find("no job other"),
            std::string::npos)
      << other->body;
  auto get = c.Get("/api/v1/jobs/llm-7b/ack");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  std::lock_guard lock(sup.mu);
  EXPECT_EQ(sup.acks.size(), 1u) << "only this job's ack reached the supervisor";
}

TEST(AckServer, EmptyBodyIsAnAnonymousAck) {
  FakeSupervisor sup;
  AckServer server(sup.config());
  ASSERT_TRUE(server.start().ok());
  auto res = client(server).Post("/ack", "", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  // Nobody named: the peer is, as on the agent's route.
  EXPECT_EQ(json::parse(res->body)["by"], "api 127.0.0.1");
  EXPECT_EQ(json::parse(res->body)["incident"]["acked_by"], "api 127.0.0.1");
}

TEST(AckServer, NoOpenIncidentIs404) {
  FakeSupervisor sup;
  sup.open = false;
  AckServer server(sup.config());
  ASSERT_TRUE(server.start().ok());
  auto res = client(server).Post("/ack", R"({"by":"bob"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  json j = json::parse(res->body);
  EXPECT_EQ(j["acked"], false);
  EXPECT_EQ(j["error"], "job llm-7b has no open incident");

  AckServer bare(AckServerConfig{});  // no callback at all: nothing to ack
  ASSERT_TRUE(bare.start().ok());
  auto res2 = client(bare).Post("/ack", "", "application/json");
  ASSERT_TRUE(res2);
  EXPECT_EQ(res2->status, 404);
}

TEST(AckServer, MalformedBodiesAre400AndNeverReachTheSupervisor) {
  FakeSupervisor sup;
  AckServer server(sup.config());
  ASSERT_TRUE(server.start().ok());
  auto c = client(server);
  const std::vector<std::string> bodies = {"{not json", "[1,2]", R"({"by": 7})",
                                           R"({"note": ["x"]})",
                                           json{{"by", std::string(5000, 'a')}}.dump()};
  for (const std::string& body : bodies) {
    auto res = c.Post("/ack", body, "application/json");
    ASSERT_TRUE(res) << body;
    EXPECT_EQ(res->status, 400) << body;
    EXPECT_TRUE(json::parse(res->body).contains("error")) << res->body;
  }
  std::lock_guard lock(sup.mu);
  EXPECT_TRUE(sup.acks.empty());
}

TEST(AckServer, StatusAndHealthz) {
  FakeSupervisor sup;
  AckServer server(sup.config());
  ASSERT_TRUE(server.start().ok());
  auto c = client(server);
  auto res = c.Get("/status");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  json j = json::parse(res->body);
  EXPECT_EQ(j["verdict"]["state"], "stalled");
  EXPECT_EQ(j["incident"], "inc-7");
  auto h = c.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->body, "ok\n");
  auto missing = c.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST(AckServer, WrongMethodsAre405) {
  FakeSupervisor sup;
  AckServer server(sup.config());
  ASSERT_TRUE(server.start().ok());
  auto c = client(server);
  auto get = c.Get("/ack");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  auto del = c.Delete("/ack");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 405);
  auto post_status = c.Post("/status", "", "application/json");
  ASSERT_TRUE(post_status);
  EXPECT_EQ(post_status->status, 405);
  EXPECT_EQ(post_status->get_header_value("Allow"), "GET");
  std::lock_guard lock(sup.mu);
  EXPECT_TRUE(sup.acks.empty());
}

TEST(AckServer, BearerTokenGuardsAck) {
  FakeSupervisor sup;
  AckServerConfig config = sup.config();
  config.bearer_token = "s3cret-token";
  AckServer server(config);
  ASSERT_TRUE(server.start().ok());
  auto c = client(server);
  auto none = c.Post("/ack", "", "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer realm=\"stepwatch\"");
  auto wrong = c.Post("/ack", {{"Authorization", "Bearer s3cret-tokeX"}}, "", "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto prefix = c.Post("/ack", {{"Authorization", "Bearer s3cret"}}, "", "application/json");
  ASSERT_TRUE(prefix);
  EXPECT_EQ(prefix->status, 401);
  {
    std::lock_guard lock(sup.mu);
    EXPECT_TRUE(sup.acks.empty());
  }
  auto right = c.Post("/ack", {{"Authorization", "Bearer s3cret-token"}}, R"({"by":"carol"})",
                      "application/json");
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200) << right->body;
  // Reading the status stays open to local callers.
  auto status = c.Get("/status");
  ASSERT_TRUE(status);
  EXPECT_EQ(status->status, 200);
}

// D20 and D2: the token is checked before the body is read or validated, the scheme in any
// case, one Authorization header only; a chunked body is refused before any of it is read.
TEST(AckServer, TheTokenComesBeforeTheBodyAndChunkedBodiesAreRefused) {
  FakeSupervisor sup;
  AckServerConfig config = sup.config();
  config.bearer_token = "s3cret-token";
  AckServer server(config);
  ASSERT_TRUE(server.start().ok());
  auto c = client(server);
  auto malformed = c.Post("/ack", "{not json", "application/json");
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->status, 401) << "an unauthenticated client learns nothing about the body";
  httplib::Headers two = {{"Authorization", "Bearer s3cret-token"},
                          {"Authorization", "Bearer other"}};
  auto twice = c.Post("/ack", two, "", "application/json");
  ASSERT_TRUE(twice);
  EXPECT_EQ(twice->status, 401);
  auto lower = c.Post("/ack", {{"Authorization", "bearer s3cret-token"}}, "", "application/json");
  ASSERT_TRUE(lower);
  EXPECT_EQ(lower->status, 200) << lower->body;

  // Headers of a chunked body, and no body at all: the answer comes without waiting for one.
  int fd = connect_loopback(server.port());
  ASSERT_GE(fd, 0);
  std::string head =
      "POST /ack HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret-token\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  ASSERT_EQ(::write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[512] = {};
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 411", 0), 0u) << buf;
  std::lock_guard lock(sup.mu);
  EXPECT_EQ(sup.acks.size(), 1u)
      << "only the authenticated, well-formed ack reached the supervisor";
}

// D12: on loopback, a foreign Host (DNS rebinding) is refused, and so is a foreign Origin on an
// ack (a form or script of another site): neither reaches the supervisor.
TEST(AckServer, AForeignHostOrOriginIsRefused) {
  FakeSupervisor sup;
  AckServer server(sup.config());
  ASSERT_TRUE(server.start().ok());
  auto c = client(server);
  auto rebound = c.Get("/status", {{"Host", "evil.example"}});
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 403);
  auto csrf = c.Post("/ack", {{"Origin", "http://evil.example"}}, R"({"by":"csrf"})", "text/plain");
  ASSERT_TRUE(csrf);
  EXPECT_EQ(csrf->status, 403);
  auto null_origin = c.Post("/ack", {{"Origin", "null"}}, "", "text/plain");
  ASSERT_TRUE(null_origin);
  EXPECT_EQ(null_origin->status, 403);
  {
    std::lock_guard lock(sup.mu);
    EXPECT_TRUE(sup.acks.empty());
  }
  std::string own = fmt::format("http://127.0.0.1:{}", server.port());
  auto same = c.Post("/ack", {{"Origin", own}}, "", "application/json");
  ASSERT_TRUE(same);
  EXPECT_EQ(same->status, 200) << same->body;
  auto by_name = c.Get("/status", {{"Host", fmt::format("localhost:{}", server.port())}});
  ASSERT_TRUE(by_name);
  EXPECT_EQ(by_name->status, 200);
}

// D9: 100 idle connections once made every request wait behind them (a pool of 4 workers, each
// held up to the read timeout). Now each idle one holds a thread of its own and requests are
// answered at once, up to the cap.
TEST(AckServer, AHundredIdleConnectionsDoNotDelayARequest) {
  FakeSupervisor sup;
  AckServer server(sup.config());
  ASSERT_TRUE(server.start().ok());
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) {
    int fd = connect_loopback(server.port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);  // connected, says nothing
  }
  std::this_thread::sleep_for(200ms);  // every one accepted and waiting for its request line
  auto t0 = std::chrono::steady_clock::now();
  auto res = client(server).Get("/healthz");
  auto took = std::chrono::steady_clock::now() - t0;
  for (int fd : idle) ::close(fd);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_LT(took, 1s) << "answered behind 100 idle connections";
}

// E9: each silent connection once held one of the 128 workers for its 1 s first-byte wait, so
// 1000 of them kept a request waiting 7 s (past this client's 5 s). Now they wait in one thread
// (at most 256 of them from one address) and the request is answered at once.
TEST(AckServer, AThousandSilentConnectionsDoNotDelayHealthz) {
  constexpr int kSilent = 1000;
  // Both ends of every connection are in this process.
  if (uint64_t limit = raise_fd_limit(); limit < 2 * kSilent + 100)
    GTEST_SKIP() << "the hard limit on open files (" << limit << ") is below " << 2 * kSilent + 100;
  FakeSupervisor sup;
  AckServer server(sup.config());
  ASSERT_TRUE(server.start().ok());
  std::vector<int> silent;
  for (int i = 0; i < kSilent; ++i) {
    int fd = connect_loopback(server.port());
    ASSERT_GE(fd, 0);
    silent.push_back(fd);  // connected, says nothing
  }
  auto t0 = std::chrono::steady_clock::now();
  auto res = client(server).Get("/healthz");
  auto took = std::chrono::steady_clock::now() - t0;
  for (int fd : silent) ::close(fd);
  ASSERT_TRUE(res) << httplib::to_string(res.error()) << " behind " << kSilent
                   << " silent connections";
  EXPECT_EQ(res->status, 200);
  EXPECT_LT(took, 2s) << "answered behind " << kSilent << " silent connections";
}

TEST(AckServer, PortInUseNamesTheAddress) {
  AckServer first(AckServerConfig{});
  ASSERT_TRUE(first.start().ok());
  AckServerConfig config;
  config.port = first.port();
  AckServer second(config);
  Status st = second.start();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Errc::kIo);
  EXPECT_NE(st.error().message.find(fmt::format("127.0.0.1:{}", first.port())), std::string::npos)
      << st.error().message;
  EXPECT_FALSE(second.running());
  auto h = client(first).Get("/healthz");  // the first one is untouched
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST(AckServer, StopWaitsForTheRequestInFlight) {
  std::atomic<bool> entered{false};
  std::atomic<int> calls{0};
  AckServerConfig config;
  config.status = [&] {
    ++calls;
    entered = true;
    std::this_thread::sleep_for(400ms);
    return std::string(R"({"slow":true})");
  };
  AckServer server(config);
  ASSERT_TRUE(server.start().ok());
  int port = server.port();
  int status = 0;
  std::string body;
  std::thread request([&] {
    auto res = client(server).Get("/status");
    if (res) {
      status = res->status;
      body = res->body;
    }
  });
  while (!entered) std::this_thread::sleep_for(1ms);
  auto t0 = std::chrono::steady_clock::now();
  server.stop();
  auto took = std::chrono::steady_clock::now() - t0;
  request.join();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(json::parse(body)["slow"], true);
  EXPECT_LT(took, 3s);
  EXPECT_FALSE(server.running());
  EXPECT_EQ(server.port(), 0);
  // Nothing listens any more, and no callback runs after stop() returned.
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(1s);
  EXPECT_FALSE(c.Get("/status"));
  EXPECT_EQ(calls.load(), 1);
}

TEST(AckServer, StopRightAfterStartAndRestart) {
  AckServer server(AckServerConfig{});
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(server.start().ok());
    EXPECT_TRUE(server.running());
    EXPECT_FALSE(server.start().ok());  // already listening
    server.stop();
    server.stop();  // idempotent
    EXPECT_FALSE(server.running());
  }
  ASSERT_TRUE(server.start().ok());
  auto h = client(server).Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST(AckServer, CallbackExceptionsBecome500) {
  AckServerConfig config;
  config.on_ack = [](const AckRequest&) -> AckResult { throw std::runtime_error("store is gone"); };
  config.status = []() -> std::string { throw 42; };
  AckServer server(config);
  ASSERT_TRUE(server.start().ok());
  auto c = client(server);
  auto res = c.Post("/ack", "", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  EXPECT_NE(json::parse(res->body)["error"].get<std::string>().find("store is gone"),
            std::string::npos);
  auto st = c.Get("/status");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->status, 500);
  auto h = c.Get("/healthz");  // still serving
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST(AckServer, AStoreErrorIs500AndNamesTheCause) {
  AckServerConfig config;
  config.job = "llm-7b";
  config.on_ack = [](const AckRequest&) -> AckResult {
    return Error{Errc::kIo, "/state/stepwatch.db: disk I/O error"};
  };
  AckServer server(config);
  ASSERT_TRUE(server.start().ok());
  auto res = client(server).Post("/ack", "", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  EXPECT_EQ(json::parse(res->body)["error"], "/state/stepwatch.db: disk I/O error");
}

TEST(AckServer, ConcurrentAcksAllReachTheCallback) {
  std::atomic<int> acks{0};
  AckServerConfig config;
  config.on_ack = [&](const AckRequest& r) -> AckResult {
    ++acks;
    return std::optional<store::Incident>(acked_incident(r));
  };
  AckServer server(config);
  ASSERT_TRUE(server.start().ok());
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      auto c = client(server);
      for (int i = 0; i < 10; ++i) {
        auto res = c.Post("/ack", R"({"by":"x"})", "application/json");
        if (res && res->status == 200) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 60);
  EXPECT_EQ(acks.load(), 60);
}

}  // namespace
}  // namespace stepwatch::serve
