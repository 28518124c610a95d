// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The pager against real receivers: a cpp-httplib server on 127.0.0.1 (port 0) that records each
// request, and real child processes for the command target.
#include "src/runbook/pager.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "src/common/host.h"
#include "tests/fakes/fake_sleep.h"
#include "tests/support/page_receiver.h"
#include "tests/support/temp_dir.h"

namespace stepwatch::runbook {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Received {
  std::string method, path, content_type, body;
};

// A real HTTP receiver that records requests and answers with `respond` (default 200).
class Receiver {
 public:
  using Respond = std::function<void(int n, const httplib::Request&, httplib::Response&)>;

  explicit Receiver(Respond respond = {}) : respond_(std::move(respond)) {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      int n;
      {
        std::lock_guard lock(mu_);
        requests_.push_back({req.method, req.path, req.get_header_value("Content-Type"), req.body});
        n = static_cast<int>(requests_.size());
      }
      res.status = 200;
      if (respond_) respond_(n, req, res);
    };
    server_.Post(".*", handler);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  std::string url(const std::string& path) const {
    return fmt::format("http://127.0.0.1:{}{}", port_, path);
  }
  std::vector<Received> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  Respond respond_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Received> requests_;
};

PageMessage sample_message() {
  PageMessage m;
  m.job = "llm-7b";
  m.owner = "alice";
  m.state = "stalled";
  m.cause = "collective";
  m.summary = "stalled: no step for 95s (expected 2.5s); rank 3 behind";
  m.last_step = 41;
  m.last_step_age_ns = 95'250 * kNsPerMs;
  m.expected_interval_ns = 2'500 * kNsPerMs;
  m.culprits = {{3, "behind: step 40 while others are at 41"}};
  m.evidence = {page_evidence_line("phase", "train", 3, 95 * kNsPerSec),
                page_evidence_line("wchan", "futex_wait_queue")};
  m.incident_id = "inc-42";
  m.incarnation = 2;
  m.host = "node-a";
  m.started_wall_ns = 1'700'000'000 * kNsPerSec;
  m.verdict_json = R"({"state":"stalled","cause":"collective","culprits":[{"rank":3}]})";
  return m;
}

spec::Pager http_target(spec::PagerKind kind, std::string url, int retries = 0,
                        int64_t timeout_ns = 2 * kNsPerSec) {
  spec::Pager p;
  p.kind = kind;
  p.url = std::move(url);
  p.retries = retries;
  p.timeout_ns = timeout_ns;
  return p;
}

spec::Pager command_target(std::vector<std::string> argv, int retries = 0,
                           int64_t timeout_ns = 5 * kNsPerSec) {
  spec::Pager p;
  p.kind = spec::PagerKind::kCommand;
  p.command = std::move(argv);
  p.retries = retries;
  p.timeout_ns = timeout_ns;
  return p;
}

using test::TempDir;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- documents ------------------------------------------------------------------------------

TEST(PageJson, CarriesEveryFieldUnderStableNames) {
  json j = json::parse(page_json(sample_message()));
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["job"], "llm-7b");
  EXPECT_EQ(j["owner"], "alice");
  EXPECT_EQ(j["state"], "stalled");
  EXPECT_EQ(j["cause"], "collective");
  EXPECT_EQ(j["summary"], "stalled: no step for 95s (expected 2.5s); rank 3 behind");
  EXPECT_EQ(j["last_step"], 41);
  EXPECT_DOUBLE_EQ(j["last_step_age_seconds"].get<double>(), 95.25);
  EXPECT_DOUBLE_EQ(j["expected_interval_seconds"].get<double>(), 2.5);
  ASSERT_EQ(j["culprits"].size(), 1u);
  EXPECT_EQ(j["culprits"][0]["rank"], 3);
  EXPECT_EQ(j["culprits"][0]["reason"], "behind: step 40 while others are at 41");
  ASSERT_EQ(j["evidence"].size(), 2u);
  EXPECT_EQ(j["evidence"][0], "rank 3 phase = train (1m35s ago)");
  EXPECT_EQ(j["evidence"][1], "wchan = futex_wait_queue");
  EXPECT_EQ(j["incident_id"], "inc-42");
  EXPECT_EQ(j["incarnation"], 2);
  EXPECT_EQ(j["host"], "node-a");
  EXPECT_EQ(j["started_at"], "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(j["ack_command"], "stepwatch ack llm-7b");
  ASSERT_TRUE(j["verdict"].is_object());
  EXPECT_EQ(j["verdict"]["culprits"][0]["rank"], 3);
}

TEST(PageJson, UnknownValuesAreNullAndBadTextNeverThrows) {
  PageMessage m;
  m.job = "j";
  m.summary = std::string("bad utf8 \xff\xfe here");
  m.verdict_json = "{not json";
  std::string text;
  ASSERT_NO_THROW(text = page_json(m));
  json j = json::parse(text);
  EXPECT_TRUE(j["last_step"].is_null());
  EXPECT_TRUE(j["last_step_age_seconds"].is_null());
  EXPECT_TRUE(j["expected_interval_seconds"].is_null());
  EXPECT_TRUE(j["verdict"].is_null());
  EXPECT_TRUE(j["culprits"].is_array());
  EXPECT_TRUE(j["evidence"].is_array());
  ASSERT_NO_THROW(alertmanager_json(m));
}

TEST(PageJson, ACulpritsHostIsShownOnlyForAMultiNodeJob) {
  PageMessage m = sample_message();
  json single = json::parse(page_json(m));
  EXPECT_FALSE(single["culprits"][0].contains("host"));
  EXPECT_NE(page_text(m).find("\n  rank 3: behind"), std::string::npos) << page_text(m);
  m.culprits = {{3, "behind: step 40 while others are at 41", "node-b"}};
  json multi = json::parse(page_json(m));
  EXPECT_EQ(multi["culprits"][0]["host"], "node-b");
  EXPECT_NE(page_text(m).find("\n  rank 3 on node-b: behind"), std::string::npos) << page_text(m);
}

TEST(PageJson, AckHintQuotesOddJobIds) {
  PageMessage m;
  m.job = "it's odd";
  EXPECT_EQ(ack_hint(m), R"(stepwatch ack 'it'\''s odd')");
  m.ack_command = "stepwatch ack --port 9999 x";
  EXPECT_EQ(ack_hint(m), "stepwatch ack --port 9999 x");
}

TEST(AlertmanagerJson, OneAlertWithLabelsAnnotationsAndStart) {
  json j = json::parse(alertmanager_json(sample_message()));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  const json& a = j[0];
  EXPECT_EQ(a["labels"]["alertname"], "StepwatchJobStalled");
  EXPECT_EQ(a["labels"]["job_id"], "llm-7b");
  EXPECT_EQ(a["labels"]["state"], "stalled");
  EXPECT_EQ(a["labels"]["cause"], "collective");
  EXPECT_EQ(a["labels"]["severity"], "page");
  EXPECT_EQ(a["labels"]["owner"], "alice");
  for (const auto& [k, v] : a["labels"].items()) EXPECT_TRUE(v.is_string()) << k;
  for (const auto& [k, v] : a["annotations"].items()) EXPECT_TRUE(v.is_string()) << k;
  EXPECT_EQ(a["annotations"]["summary"], sample_message().summary);
  std::string d = a["annotations"]["description"];
  EXPECT_NE(d.find("rank 3: behind"), std::string::npos) << d;
  EXPECT_NE(d.find("wchan = futex_wait_queue"), std::string::npos) << d;
  EXPECT_NE(d.find("ack with: stepwatch ack llm-7b"), std::string::npos) << d;
  EXPECT_EQ(a["startsAt"], "2023-11-14T22:13:20.000Z");
  EXPECT_FALSE(a.contains("endsAt"));  // still firing: Alertmanager times it out itself

  PageMessage dead = sample_message();
  dead.state = "dead";
  dead.cause = "";
  dead.owner = "";
  json d2 = json::parse(alertmanager_json(dead))[0];
  EXPECT_EQ(d2["labels"]["alertname"], "StepwatchRankDead");
  EXPECT_EQ(d2["labels"]["cause"], "none");
  EXPECT_FALSE(d2["labels"].contains("owner"));

  // What follows a preempt has alerts of its own, routed apart from the stall.
  for (auto [state, name] : {std::pair{"restart-storm", "StepwatchRestartStorm"},
                             std::pair{"restart-blocked", "StepwatchRestartBlocked"}}) {
    PageMessage m = sample_message();
    m.state = state;
    EXPECT_EQ(json::parse(alertmanager_json(m))[0]["labels"]["alertname"], name) << state;
  }
}

TEST(AlertmanagerJson, AlertsUrl) {
  EXPECT_EQ(alertmanager_alerts_url("http://am:9093"), "http://am:9093/api/v2/alerts");
  EXPECT_EQ(alertmanager_alerts_url("http://am:9093/"), "http://am:9093/api/v2/alerts");
  EXPECT_EQ(alertmanager_alerts_url("http://h/am/"), "http://h/am/api/v2/alerts");
  EXPECT_EQ(alertmanager_alerts_url("http://h/api/v2/alerts"), "http://h/api/v2/alerts");
}

TEST(Backoff, DoublesUpToTheCap) {
  PagerOptions o;
  EXPECT_EQ(backoff_ns(o, 1), 500 * kNsPerMs);
  EXPECT_EQ(backoff_ns(o, 2), 1 * kNsPerSec);
  EXPECT_EQ(backoff_ns(o, 3), 2 * kNsPerSec);
  EXPECT_EQ(backoff_ns(o, 5), 8 * kNsPerSec);
  EXPECT_EQ(backoff_ns(o, 40), 8 * kNsPerSec);
}

// ---- HTTP targets ---------------------------------------------------------------------------

TEST(PagerHttp, WebhookPostsThePageJson) {
  Receiver rx;
  auto r = page_one(http_target(spec::PagerKind::kWebhook, rx.url("/hooks/stepwatch?team=ml")),
                    sample_message());
  EXPECT_TRUE(r.ok) << r.detail;
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.http_status, 200);
  // The target as results, logs and the API show it: the path (where a webhook's secret lives)
  // is left out.
  EXPECT_EQ(r.target, "webhook " + rx.url("/…"));
  EXPECT_EQ(r.detail, rx.url("/…") + ": HTTP 200");
  auto reqs = rx.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].path, "/hooks/stepwatch");
  EXPECT_EQ(reqs[0].content_type, "application/json");
  json j = json::parse(reqs[0].body);
  EXPECT_EQ(j["job"], "llm-7b");
  EXPECT_EQ(j["state"], "stalled");
  EXPECT_EQ(j["last_step"], 41);
  EXPECT_EQ(j["culprits"][0]["rank"], 3);
  EXPECT_EQ(j["ack_command"], "stepwatch ack llm-7b");
  EXPECT_EQ(j["verdict"]["state"], "stalled");
}

TEST(PagerHttp, AlertmanagerPostsToApiV2Alerts) {
  Receiver rx;
  auto r = page_one(http_target(spec::PagerKind::kAlertmanager, rx.url("/")), sample_message());
  EXPECT_TRUE(r.ok) << r.detail;
  auto reqs = rx.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].path, "/api/v2/alerts");
  EXPECT_EQ(reqs[0].content_type, "application/json");
  json j = json::parse(reqs[0].body);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["labels"]["alertname"], "StepwatchJobStalled");
  EXPECT_EQ(j[0]["labels"]["job_id"], "llm-7b");
  EXPECT_EQ(j[0]["labels"]["severity"], "page");
  EXPECT_TRUE(j[0]["annotations"]["summary"].is_string());
  EXPECT_TRUE(j[0]["annotations"]["description"].is_string());
  std::string starts = j[0]["startsAt"];
  EXPECT_TRUE(std::regex_match(starts, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
      << starts;
}

TEST(PagerHttp, RetriesAfterServerErrorsWithBackoff) {
  Receiver rx([](int n, const httplib::Request&, httplib::Response& res) {
    if (n <= 2) res.status = 500;
  });
  test::FakeSleep sleep;
  auto r = page_one(http_target(spec::PagerKind::kWebhook, rx.url("/hook"), /*retries=*/3),
                    sample_message(), sleep.options());
  EXPECT_TRUE(r.ok) << r.detail;
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(rx.requests().size(), 3u);
  EXPECT_EQ(sleep.waits, (std::vector<int64_t>{500 * kNsPerMs, 1 * kNsPerSec}));
}

TEST(PagerHttp, UnreachableTargetFailsAfterRetriesWithoutThrowing) {
  std::string url = fmt::format("http://127.0.0.1:{}/hook", test::closed_port());
  test::FakeSleep sleep;
  PageResult r;
  ASSERT_NO_THROW(r = page_one(http_target(spec::PagerKind::kWebhook, url, /*retries=*/2),
                               sample_message(), sleep.options()));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.http_status, 0);
  EXPECT_NE(r.detail.find(redact_url(url) + ": cannot connect"), std::string::npos) << r.detail;
  EXPECT_EQ(r.detail.find("/hook"), std::string::npos) << r.detail;
  EXPECT_EQ(sleep.waits.size(), 2u);
}

TEST(PagerHttp, SlowReceiverIsAFailedAttempt) {
  Receiver rx([](int, const httplib::Request&, httplib::Response&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  });
  auto t0 = std::chrono::steady_clock::now();
  auto r = page_one(http_target(spec::PagerKind::kWebhook, rx.url("/slow"), 0, 300 * kNsPerMs),
                    sample_message());
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_NE(r.detail.find("no answer within 300ms"), std::string::npos) << r.detail;
  EXPECT_LT(took, std::chrono::milliseconds(1200));
}

TEST(PagerHttp, ClientErrorsAreNotRetried) {
  Receiver rx([](int, const httplib::Request&, httplib::Response& res) {
    res.status = 400;
    res.set_content("bad alert", "text/plain");
  });
  test::FakeSleep sleep;
  auto r = page_one(http_target(spec::PagerKind::kAlertmanager, rx.url(""), /*retries=*/3),
                    sample_message(), sleep.options());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.http_status, 400);
  EXPECT_NE(r.detail.find("HTTP 400: bad alert"), std::string::npos) << r.detail;
  EXPECT_TRUE(sleep.waits.empty());
}

TEST(PagerHttp, BadUrlsFailAtOnce) {
  const std::pair<std::string, std::string> cases[] = {
      {"ftp://host/x", "\"ftp://host/…\": scheme \"ftp\" is not http or https"},
      {"no-scheme", "\"<not a URL>\" is not an http:// URL"},
      {"http:///path", "\"http:///…\" has no host"},
      {"http://user:pw@host/", "\"http://host\": credentials in the URL are not supported"}};
  for (const auto& [url, said] : cases) {
    auto r = page_one(http_target(spec::PagerKind::kWebhook, url, 3), sample_message());
    EXPECT_FALSE(r.ok) << url;
    EXPECT_EQ(r.attempts, 1) << url << ": " << r.detail;
    EXPECT_EQ(r.detail, said);  // never the credentials
  }
}

TEST(PagerHttp, HttpsIsVerifiedOrClearlyUnsupported) {
  if (!https_supported()) {
    auto r = page_one(http_target(spec::PagerKind::kWebhook, "https://127.0.0.1:1/x", 3),
                      sample_message());
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.attempts, 1);
    EXPECT_NE(r.detail.find("https not supported in this build"), std::string::npos) << r.detail;
    return;
  }
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  // A self-signed receiver: the page must not be delivered to an unverified peer.
  TempDir dir;
  std::string cmd = fmt::format(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout {} -out {} "
      ">/dev/null 2>&1",
      dir / "key.pem", dir / "cert.pem");
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "no openssl command to make a certificate";
  httplib::SSLServer tls((dir / "cert.pem").c_str(), (dir / "key.pem").c_str());
  ASSERT_TRUE(tls.is_valid());
  std::atomic<int> hits{0};
  tls.Post(".*", [&](const httplib::Request&, httplib::Response&) { ++hits; });
  int port = tls.bind_to_any_port("127.0.0.1");
  std::thread t([&] { tls.listen_after_bind(); });
  while (!tls.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto r = page_one(
      http_target(spec::PagerKind::kWebhook, fmt::format("https://127.0.0.1:{}/x", port), 0),
      sample_message());
  tls.stop();
  t.join();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(hits.load(), 0);
  EXPECT_NE(r.detail.find("https://127.0.0.1"), std::string::npos) << r.detail;
  EXPECT_EQ(r.detail.find("not supported"), std::string::npos) << r.detail;
#endif
}

// ---- command targets ------------------------------------------------------------------------

TEST(PagerCommand, GetsThePageOnStdinAndInItsEnvironment) {
  TempDir dir;
  std::string script = dir / "notify.sh";
  std::ofstream(script) << "cat > \"$0.stdin\"\n"
                           "env | grep '^STEPWATCH_PAGE_' | sort > \"$0.env\"\n"
                           "printf '%s' \"$1\" > \"$0.args\"\n";
  auto r = page_one(command_target({"/bin/sh", script, "--job={job}"}), sample_message());
  EXPECT_TRUE(r.ok) << r.detail;
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.target, "command /bin/sh");
  json j = json::parse(read_file(script + ".stdin"));
  EXPECT_EQ(j["job"], "llm-7b");
  EXPECT_EQ(j["incident_id"], "inc-42");
  EXPECT_EQ(j["culprits"][0]["rank"], 3);
  std::string env = read_file(script + ".env");
  EXPECT_NE(env.find("STEPWATCH_PAGE_JOB=llm-7b\n"), std::string::npos) << env;
  EXPECT_NE(env.find("STEPWATCH_PAGE_STATE=stalled\n"), std::string::npos) << env;
  EXPECT_NE(env.find("STEPWATCH_PAGE_CAUSE=collective\n"), std::string::npos) << env;
  EXPECT_NE(env.find("STEPWATCH_PAGE_SUMMARY=" + sample_message().summary + "\n"),
            std::string::npos)
      << env;
  EXPECT_EQ(read_file(script + ".args"), "--job=llm-7b");
}

TEST(PagerCommand, NonZeroExitIsAFailureWithItsOutput) {
  test::FakeSleep sleep;
  auto r = page_one(command_target({"/bin/sh", "-c", "echo 'no route to pager' >&2; exit 1"},
                                   /*retries=*/1),
                    sample_message(), sleep.options());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.detail.find("exited with status 1: no route to pager"), std::string::npos)
      << r.detail;
  EXPECT_EQ(sleep.waits.size(), 1u);
}

TEST(PagerCommand, HangingCommandIsKilledWithItsChildren) {
  TempDir dir;
  std::string pidfile = dir / "pid";
  auto t0 = std::chrono::steady_clock::now();
  auto r = page_one(command_target({"/bin/sh", "-c", "sleep 30 & echo $! > " + pidfile + "; wait"},
                                   0, 300 * kNsPerMs),
                    sample_message());
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_NE(r.detail.find("timed out after 300ms"), std::string::npos) << r.detail;
  EXPECT_LT(took, std::chrono::seconds(3));
  // The background sleep was in the command's process group: gone too (reaped by init).
  pid_t grandchild = std::stoi(read_file(pidfile));
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::string stat = read_file(fmt::format("/proc/{}/stat", grandchild));
    gone = stat.empty() || stat.find(") Z ") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "pid " << grandchild << " survived the timeout";
}

TEST(PagerCommand, MissingProgramFailsAtOnce) {
  test::FakeSleep sleep;
  auto r = page_one(command_target({"/nonexistent/notify", "{job}"}, /*retries=*/3),
                    sample_message(), sleep.options());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_NE(r.detail.find("cannot run /nonexistent/notify: No such file or directory"),
            std::string::npos)
      << r.detail;
  EXPECT_TRUE(sleep.waits.empty());
}

TEST(PagerCommand, CommandThatIgnoresStdinDoesNotKillUs) {
  PageMessage m = sample_message();
  m.verdict_json = json{{"padding", std::string(2 << 20, 'x')}}.dump();  // more than a pipe holds
  auto r = page_one(command_target({"/bin/true"}), m);
  EXPECT_TRUE(r.ok) << r.detail;
  EXPECT_EQ(r.exit_code, 0);
}

// ---- all targets ----------------------------------------------------------------------------

TEST(PageAll, SendsToEveryTargetAndReportsEach) {
  Receiver rx;
  TempDir dir;
  std::vector<spec::Pager> targets = {
      http_target(spec::PagerKind::kWebhook, rx.url("/hook")),
      http_target(spec::PagerKind::kWebhook,
                  fmt::format("http://127.0.0.1:{}/", test::closed_port())),
      command_target({"/bin/sh", "-c", "cat > " + dir / "page.json"}),
  };
  test::FakeSleep sleep;
  auto results = page_all(targets, sample_message(), sleep.options());
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].ok) << results[0].detail;
  EXPECT_FALSE(results[1].ok);
  EXPECT_EQ(results[1].attempts, 1 + targets[1].retries);
  EXPECT_EQ(results[1].kind, spec::PagerKind::kWebhook);
  EXPECT_TRUE(results[2].ok) << results[2].detail;
  EXPECT_EQ(results[2].kind, spec::PagerKind::kCommand);
  EXPECT_EQ(rx.requests().size(), 1u);
  EXPECT_EQ(json::parse(read_file(dir / "page.json"))["job"], "llm-7b");
}

TEST(PageAll, SleeperCanStopTheRetries) {
  std::string url = fmt::format("http://127.0.0.1:{}/", test::closed_port());
  PagerOptions o;
  o.sleep = [](int64_t) { return false; };
  auto results = page_all({http_target(spec::PagerKind::kWebhook, url, 5)}, sample_message(), o);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].ok);
  EXPECT_EQ(results[0].attempts, 1);
  EXPECT_NE(results[0].detail.find("stopping"), std::string::npos) << results[0].detail;
}

TEST(PageAll, NoTargetsNoResults) {
  EXPECT_TRUE(page_all({}, sample_message()).empty());
}

}  // namespace
}  // namespace stepwatch::runbook
