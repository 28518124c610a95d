// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The agent over real beacons (BeaconWriter into a temp root), a real store, its API over real
// HTTP on 127.0.0.1 (port 0) and a real page receiver. Time is injected into poll_once.
#include "src/agent/agent.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "src/common/host.h"
#include "src/common/limits.h"
#include "src/common/proc_stat.h"
#include "src/contract/beacon_writer.h"
#include "src/probe/nvml.h"
#include "src/serve/agent_api.h"
#include "src/serve/metrics.h"
#include "tests/fakes/fake_nvml_scenario.h"
#include "tests/support/page_receiver.h"

namespace stepwatch::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using serve::ApiConfig;
using serve::ApiServer;

using test::Receiver;

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / fmt::format("sw-agent-{}-{}", ::getpid(), counter_++);
    fs::remove_all(base_);
    fs::create_directories(root());
    fs::create_directories(specs());
    t0_ = SystemClock::instance().now();
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string root() const { return (base_ / "beacons").string(); }
  std::string specs() const { return (base_ / "specs").string(); }
  std::string state() const { return (base_ / "state").string(); }

  AgentConfig config() const {
    AgentConfig c;
    c.beacon_roots = {root()};
    c.state_dir = state();
    c.specs_dir = specs();
    c.gpu = false;
    c.retire_after_ns = 60 * kNsPerSec;
    return c;
  }
  std::unique_ptr<Agent> open_agent() {
    auto a = Agent::open(config());
    EXPECT_TRUE(a.ok()) << a.error().message;
    return a.ok() ? std::move(*a) : nullptr;
  }
  // A job whose spec expects a step every second and pages `url`.
  void write_spec(const std::string& job, const std::string& url,
                  const std::string& interval = "1s", const std::string& top = "") {
    std::ofstream(specs() + "/" + job + ".toml") << fmt::format(
        "{}owner = \"team-llm\"\nexpected_interval = \"{}\"\ngrace_intervals = 2\n"
        "[[runbook.pager]]\nurl = \"{}\"\nretries = 0\ntimeout = \"2s\"\n",
        top, interval, url);
  }
  std::unique_ptr<contract::BeaconWriter> beacon(const std::string& job, int rank = 0,
                                                 int world = 1) {
    contract::Identity id;
    id.dir = root();
    id.job = job;
    id.host = short_hostname();
    id.rank = rank;
    id.world_size = world;
    auto w = contract::BeaconWriter::create(id);
    EXPECT_TRUE(w.ok()) << w.error().message;
    return w.ok() ? std::move(*w) : nullptr;
  }
  // Real time moved forward by `s` seconds.
  Stamp at(double s) const {
    auto ns = static_cast<int64_t>(s * 1e9);
    return {t0_.wall_ns + ns, t0_.mono_ns + ns};
  }
  static std::optional<watch::JobState> find(const std::vector<watch::JobState>& jobs,
                                             const std::string& id) {
    for (const auto& j : jobs) {
      if (j.job == id) return j;
    }
    return std::nullopt;
  }

  static inline int counter_ = 0;
  fs::path base_;
  Stamp t0_;
};

httplib::Client client(const ApiServer& api) {
  httplib::Client c("127.0.0.1", api.port());
  c.set_connection_timeout(2s);
  c.set_read_timeout(5s);
  return c;
}

TEST_F(AgentTest, JobAppearsWhenItsBeaconsDo) {
  auto a = open_agent();
  ASSERT_TRUE(a->poll_once(at(0)).ok());
  EXPECT_TRUE(a->jobs().empty());
  auto w = beacon("train-a");
  w->step(1);
  ASSERT_TRUE(a->poll_once(at(0.1)).ok());
  auto jobs = a->jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].job, "train-a");
  EXPECT_EQ(jobs[0].owner, "");  // no spec: defaults
  EXPECT_EQ(a->health().beacons_read_total, 1u);
  EXPECT_EQ(a->health().polls_total, 2u);
}

TEST_F(AgentTest, MissingBeaconRootIsNoJobsYet) {
  auto c = config();
  c.beacon_roots = {(base_ / "not-yet").string()};
  auto a = Agent::open(c);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE((*a)->poll_once(at(0)).ok());
  EXPECT_EQ((*a)->health().read_errors_total, 0u);
}

TEST_F(AgentTest, StallPagesOnceAcrossPollsAndRestartsAndAcksOverHttp) {
  Receiver rx;
  write_spec("train-a", rx.url());
  auto w = beacon("train-a");
  for (int i = 1; i <= 8; ++i) {
    w->step(i);
    std::this_thread::sleep_for(2ms);
  }
  auto a = open_agent();
  ApiConfig ac;
  ac.port = 0;
  ac.bearer_token = "s3cret";
  ac.metrics = [] { return std::string("stepwatch_up 1\n"); };
  ApiServer api(*a, ac);
  ASSERT_TRUE(api.start().ok());
  auto http = client(api);

  ASSERT_TRUE(a->poll_once(at(0.5)).ok());
  auto healthy = a->job("train-a");
  ASSERT_TRUE(healthy);
  EXPECT_EQ(healthy->verdict.state, detect::State::kHealthy) << healthy->verdict.summary;
  EXPECT_EQ(healthy->owner, "team-llm");

  // No step for 10 s against 1 s x grace 2: stalled.
  ASSERT_TRUE(a->poll_once(at(10)).ok());
  ASSERT_TRUE(rx.wait_for(1));
  ASSERT_TRUE(a->poll_once(at(11)).ok());
  ASSERT_TRUE(a->poll_once(at(12)).ok());
  auto res = http.Get("/api/v1/jobs");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  json list = json::parse(res->body)["jobs"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["job_id"], "train-a");
  EXPECT_EQ(list[0]["state"], "stalled");
  EXPECT_EQ(list[0]["owner"], "team-llm");
  EXPECT_EQ(list[0]["last_step"], 8);
  EXPECT_EQ(list[0]["ranks"], 1);
  EXPECT_EQ(list[0]["retired"], false);
  EXPECT_DOUBLE_EQ(list[0]["expected_interval_seconds"].get<double>(), 1.0);
  EXPECT_GT(list[0]["last_step_age_seconds"].get<double>(), 9.0);

  res = http.Get("/api/v1/jobs/train-a");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  json detail = json::parse(res->body);
  EXPECT_EQ(detail["state"], "stalled");
  EXPECT_EQ(detail["job_id"], "train-a");
  EXPECT_EQ(detail["recent_intervals_seconds"].size(), 7u);
  ASSERT_EQ(detail["ranks"].size(), 1u);
  EXPECT_EQ(detail["ranks"][0]["process"]["alive"], true);
  EXPECT_EQ(detail["ranks"][0]["beacon"]["pid"], ::getpid());
  EXPECT_TRUE(detail["ranks"][0]["gpu"].is_null());  // no GPU evidence: absent, not zero

  res = http.Get("/api/v1/jobs/nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_TRUE(json::parse(res->body).contains("error"));

  // Ack: without the token 401, a wrong one 401, unknown job 404, then acked.
  std::string body = R"({"by":"alice","note":"looking"})";
  res = http.Post("/api/v1/jobs/train-a/ack", body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  httplib::Headers bad = {{"Authorization", "Bearer nope"}};
  res = http.Post("/api/v1/jobs/train-a/ack", bad, body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  httplib::Headers good = {{"Authorization", "Bearer s3cret"}};
  res = http.Post("/api/v1/jobs/nope/ack", good, body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  res = http.Post("/api/v1/jobs/train-a/ack", good, "{not json", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  res = http.Post("/api/v1/jobs/train-a/ack", good, body, "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  json acked = json::parse(res->body);
  EXPECT_EQ(acked["incident"]["acked_by"], "alice");
  EXPECT_EQ(acked["incident"]["status"], "acked");

  res = http.Get("/api/v1/incidents?job=train-a");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  json incs = json::parse(res->body)["incidents"];
  ASSERT_EQ(incs.size(), 1u);
  EXPECT_EQ(incs[0]["state"], "stalled");
  EXPECT_EQ(incs[0]["ack_note"], "looking");
  EXPECT_TRUE(incs[0]["paged_at"].is_string());

  res = http.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["polls_total"], 4);
  // The wrong method on a known path is 405 with Allow (D20), after the token check.
  res = http.Delete("/api/v1/jobs/train-a", good);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  EXPECT_EQ(res->get_header_value("Allow"), "GET");
  res = http.Put("/api/v1/jobs/train-a/ack", good, "", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
  EXPECT_EQ(res->get_header_value("Allow"), "POST");
  res = http.Delete("/api/v1/jobs/train-a");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401) << "no token: refused before anything else";
  res = http.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), serve::kMetricsContentType);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");

  // A restarted agent on the same state dir joins the open incident: no second page.
  api.stop();
  a.reset();
  auto b = open_agent();
  ASSERT_TRUE(b->poll_once(at(13)).ok());
  ASSERT_TRUE(b->poll_once(at(14)).ok());
  EXPECT_EQ(b->job("train-a")->verdict.state, detect::State::kStalled);
  b.reset();  // waits for any page in flight
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(rx.count(), 1u);
  json page = json::parse(rx.body(0));
  EXPECT_EQ(page["job"], "train-a");
  EXPECT_EQ(page["state"], "stalled");
  EXPECT_EQ(page["owner"], "team-llm");
  EXPECT_EQ(page["last_step"], 8);
}

// Runs SQL on the agent's store through a connection of its own (what another process could do).
void exec_sql(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close_v2(h);
}

// D4: a store that refuses writes (here: triggers that fail every insert, as a full disk would)
// never silences a page, and /healthz says why until the store takes writes again.
TEST_F(AgentTest, AStoreThatRefusesWritesStillPagesAndHealthSaysWhy) {
  Receiver rx;
  write_spec("train-d4", rx.url());
  auto w = beacon("train-d4");
  for (int i = 1; i <= 8; ++i) {
    w->step(i);
    std::this_thread::sleep_for(2ms);
  }
  auto a = open_agent();
  ASSERT_TRUE(a->poll_once(at(0.5)).ok());
  std::string db = state() + "/stepwatch.db";
  for (const char* table : {"incidents", "actions", "transitions"}) {
    exec_sql(db, fmt::format("CREATE TRIGGER refuse_{0} BEFORE INSERT ON {0} BEGIN SELECT "
                             "RAISE(ABORT, 'database or disk is full'); END;",
                             table));
  }
  ASSERT_TRUE(a->poll_once(at(10)).ok());
  ASSERT_TRUE(rx.wait_for(1)) << "paged from memory";
  ASSERT_TRUE(a->poll_once(at(11)).ok());
  EXPECT_NE(a->health().store_error.find("database or disk is full"), std::string::npos)
      << a->health().store_error;
  EXPECT_GT(a->health().store_errors_total, 0u);
  auto none = a->incidents("train-d4", 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  for (const char* table : {"incidents", "actions", "transitions"}) {
    exec_sql(db, fmt::format("DROP TRIGGER refuse_{};", table));
  }
  ASSERT_TRUE(a->poll_once(at(12)).ok());
  EXPECT_EQ(a->health().store_error, "");
  auto incs = a->incidents("train-d4", 0);
  ASSERT_TRUE(incs.ok());
  ASSERT_EQ(incs->size(), 1u) << "recorded once the store took it";
  EXPECT_TRUE((*incs)[0].delivered_at_ns.has_value()) << (*incs)[0].page_result;
  ASSERT_TRUE(a->poll_once(at(13)).ok());
  a.reset();
  EXPECT_EQ(rx.count(), 1u) << "recording it did not page again";
}

// D8: an open incident whose job is gone when the agent starts is closed; an open incident of an
// earlier run of a job id does not swallow the new run's page.
TEST_F(AgentTest, IncidentsOfRunsThatAreGoneAreClosedAndANewRunIsPaged) {
  Receiver rx;
  {
    auto st = store::Store::open(state());
    ASSERT_TRUE(st.ok());
    for (const char* job : {"vanished", "train-d8"}) {
      store::NewIncident ni;
      ni.job = job;
      ni.at_ns = t0_.wall_ns - 3600 * kNsPerSec;
      ni.state = "stalled";
      auto ref = st->open_incident(ni);
      ASSERT_TRUE(ref.ok());
      ASSERT_TRUE(*st->claim_page(ref->id, ni.at_ns));
      ASSERT_TRUE(st->mark_paged(ref->id, ni.at_ns, "sent", true).ok());
    }
  }
  write_spec("train-d8", rx.url());
  auto w = beacon("train-d8");  // a new run: its beacon is created now
  for (int i = 1; i <= 8; ++i) {
    w->step(i);
    std::this_thread::sleep_for(2ms);
  }
  auto a = open_agent();
  ASSERT_TRUE(a->poll_once(at(0.5)).ok());
  ASSERT_TRUE(a->poll_once(at(10)).ok());
  ASSERT_TRUE(rx.wait_for(1)) << "the new run's stall is paged";
  auto all = a->incidents("", 0);
  ASSERT_TRUE(all.ok());
  int open = 0;
  for (const auto& inc : *all) {
    if (inc.job == "vanished" || inc.id <= 2) {
      EXPECT_FALSE(inc.is_open()) << inc.job;
      EXPECT_NE(inc.resolution.find("no longer observed"), std::string::npos) << inc.resolution;
    } else {
      ++open;
      EXPECT_EQ(inc.job, "train-d8");
    }
  }
  EXPECT_EQ(open, 1);
}

// D10: a webhook that takes seconds to answer holds up no poll, not even when the incident it
// pages for closes meanwhile.
TEST_F(AgentTest, ASlowWebhookHoldsUpNoPoll) {
  Receiver rx;
  rx.delay_ms = 4000;
  std::ofstream(specs() + "/train-d10.toml") << fmt::format(
      "expected_interval = \"100ms\"\ngrace_intervals = 2\n"
      "[[runbook.pager]]\nurl = \"{}\"\nretries = 0\ntimeout = \"10s\"\n",
      rx.url());
  auto w = beacon("train-d10");
  for (int i = 1; i <= 8; ++i) w->step(i);
  auto a = open_agent();
  auto timed = [&] {
    auto from = std::chrono::steady_clock::now();
    EXPECT_TRUE(a->poll_once(SystemClock::instance().now()).ok());
    return std::chrono::steady_clock::now() - from;
  };
  std::this_thread::sleep_for(600ms);  // 6 intervals without a step
  EXPECT_LT(timed(), 2s);              // stalled: the page goes out, answered only in 4 s
  EXPECT_EQ(a->job("train-d10")->verdict.state, detect::State::kStalled);
  for (int i = 9; i <= 12; ++i) {  // the job recovers while the page is in flight
    w->step(i);
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_LT(timed(), 2s) << "the recovery closed the incident without waiting for its page";
  auto incs = a->incidents("train-d10", 0);
  ASSERT_TRUE(incs.ok());
  ASSERT_EQ(incs->size(), 1u);
  EXPECT_EQ((*incs)[0].resolution, "recovered");
  a.reset();  // waits for the page and records it
  EXPECT_EQ(rx.count(), 1u);
  auto st = store::Store::open(state());
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE((*st->incident((*incs)[0].id))->delivered_at_ns.has_value());
}

TEST_F(AgentTest, AckWithoutTokenConfiguredNeedsNoHeaderAndNoIncidentIs404) {
  auto w = beacon("train-b");
  w->step(1);
  auto a = open_agent();
  ApiConfig ac;
  ac.port = 0;
  ApiServer api(*a, ac);
  ASSERT_TRUE(api.start().ok());
  ASSERT_TRUE(a->poll_once(at(0.1)).ok());
  auto http = client(api);
  auto res = http.Post("/api/v1/jobs/train-b/ack", "", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);  // known job, nothing open
  EXPECT_EQ(json::parse(res->body)["acked"], false);
  res = http.Get("/metrics");  // no hook set: not served
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

// Without a token, an ack is taken from the job directory's owner (or root, or the agent's
// user), known by the uid of the client's socket: another local user is refused.
TEST_F(AgentTest, WithoutATokenAnotherUsersAckIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a client of another uid";
  Receiver rx;
  write_spec("owned", rx.url(), "100ms");
  auto w = beacon("owned");
  for (int i = 1; i <= 8; ++i) w->step(i);
  auto a = open_agent();
  ApiConfig ac;
  ac.port = 0;
  ApiServer api(*a, ac);
  ASSERT_TRUE(api.start().ok());
  std::this_thread::sleep_for(600ms);
  ASSERT_TRUE(a->poll_once(SystemClock::instance().now()).ok());
  ASSERT_EQ(a->job("owned")->verdict.state, detect::State::kStalled);
  EXPECT_EQ(a->job("owned")->owner_uid, std::optional<uint32_t>(0));

  // The client runs as nobody in a process of its own. The child only makes async-signal-safe
  // calls before exec: this process has threads (the API server, page deliveries), and a child
  // that allocates after fork can hang on a lock one of them held (it did under ASan).
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  std::string port = std::to_string(api.port());
  const char* script =
      "import sys, urllib.request, urllib.error\n"
      "req = urllib.request.Request('http://127.0.0.1:' + sys.argv[1] + "
      "'/api/v1/jobs/owned/ack', data=b'{\"by\": \"mallory\"}', "
      "headers={'Content-Type': 'application/json'})\n"
      "try:\n    print(urllib.request.urlopen(req, timeout=20).status)\n"
      "except urllib.error.HTTPError as e:\n    print(e.code)\n";
  pid_t c = ::fork();
  if (c == 0) {
    ::dup2(pipefd[1], 1);
    if (::setgid(65534) == 0 && ::setuid(65534) == 0)
      ::execl("/usr/bin/python3", "python3", "-c", script, port.c_str(),
              static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipefd[1]);
  std::string out;
  char buf[64];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int wstatus = 0;
  ::waitpid(c, &wstatus, 0);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "client as nobody: " << out;
  int status = std::atoi(out.c_str());
  EXPECT_EQ(status, 403);
  auto incs = a->incidents("owned", 10);
  ASSERT_TRUE(incs.ok());
  ASSERT_EQ(incs->size(), 1u);
  EXPECT_EQ((*incs)[0].acked_by, "");

  auto http = client(api);  // root: the owner here
  auto res = http.Post("/api/v1/jobs/owned/ack", R"({"by": "alice"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ((*a->incidents("owned", 10))[0].acked_by, "alice");
}

TEST_F(AgentTest, RecoveryClosesTheIncident) {
  Receiver rx;
  write_spec("train-c", rx.url(), "100ms");
  auto w = beacon("train-c");
  for (int i = 1; i <= 8; ++i) w->step(i);
  auto a = open_agent();
  std::this_thread::sleep_for(600ms);  // 6 intervals without a step (real time: the beacon's clock)
  ASSERT_TRUE(a->poll_once(SystemClock::instance().now()).ok());
  EXPECT_EQ(a->job("train-c")->verdict.state, detect::State::kStalled);
  for (int i = 9; i <= 12; ++i) {
    w->step(i);
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(a->poll_once(SystemClock::instance().now()).ok());
  EXPECT_NE(a->job("train-c")->verdict.state, detect::State::kStalled);
  auto incs = a->incidents("train-c", 10);
  ASSERT_TRUE(incs.ok());
  ASSERT_EQ(incs->size(), 1u);
  EXPECT_EQ((*incs)[0].resolution, "recovered");
  EXPECT_EQ(a->job("train-c")->incidents_total, 1u);
  a.reset();
  EXPECT_EQ(rx.count(), 1u);
}

TEST_F(AgentTest, SymlinksAndJunkAreSkippedAndCounted) {
  auto w = beacon("train-a");
  w->step(1);
  std::ofstream(root() + "/junk.txt") << "not a job";
  fs::create_directory_symlink(root() + "/train-a", root() + "/linked-job");
  fs::create_directories(root() + "/train-d");
  fs::create_symlink(w->path(), root() + "/train-d/rank-0.beacon");
  auto a = open_agent();
  ASSERT_TRUE(a->poll_once(at(0.1)).ok());
  auto h = a->health();
  EXPECT_EQ(h.read_errors_total, 3u);  // the junk file, the linked job, the linked beacon
  EXPECT_EQ(h.beacons_read_total, 1u);
  auto jobs = a->jobs();
  EXPECT_TRUE(find(jobs, "train-a"));
  EXPECT_FALSE(find(jobs, "linked-job"));
  auto d = find(jobs, "train-d");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->observation.ranks.empty());
}

// Thousands of ranks on a node: a pidfd each (above descriptor 1023), and the API keeps
// answering; a rank that stops stepping gets its process details, the advancing ones only their
// liveness.
TEST_F(AgentTest, ThousandsOfRanksKeepTheApiAnsweringAndOnlyQuietRanksAreReadInDetail) {
  raise_fd_limit();  // as `stepwatch agent` does
  constexpr int kRanks = 1500;
  std::vector<std::unique_ptr<contract::BeaconWriter>> ws;
  for (int r = 0; r < kRanks; ++r) {
    ws.push_back(beacon("big", r, kRanks));
    ASSERT_TRUE(ws.back());
    ws.back()->step(1);
  }
  auto a = open_agent();
  ApiConfig ac;
  ac.port = 0;
  ApiServer api(*a, ac);
  ASSERT_TRUE(api.start().ok());
  for (int p = 0; p < 3; ++p) {
    for (int r = 1; r < kRanks; ++r) ws[r]->step(2 + p);  // rank 0 stays quiet
    ASSERT_TRUE(a->poll_once(at(1.0 + p)).ok());
  }
  auto http = client(api);
  auto res = http.Get("/api/v1/jobs/big");
  ASSERT_TRUE(res) << "the API must answer with " << kRanks << " pidfds held";
  ASSERT_EQ(res->status, 200);
  auto j = json::parse(res->body);
  EXPECT_EQ(j["ranks"].size(), static_cast<size_t>(kRanks));
  auto job = a->job("big");
  ASSERT_TRUE(job);
  const auto& procs = job->observation.procs;
  ASSERT_EQ(procs.size(), static_cast<size_t>(kRanks));
  EXPECT_NE(procs[0].state, '?') << "quiet for two polls: its process was read";
  for (int r = 1; r < kRanks; ++r) {
    ASSERT_TRUE(procs[r].alive);
    ASSERT_EQ(procs[r].state, '?') << "rank " << r << " advances: liveness only";
  }
}

// NVML is read once per poll for the whole node, not once per job: on a node with hundreds of
// jobs, per-job reads would cost seconds. Each job still gets the devices its ranks hold.
TEST_F(AgentTest, GpusAreReadOncePerPollAndSharedByEveryJob) {
  testing::FakeNvmlScenario scenario(fmt::format(R"(devices 2
device 0 name NVIDIA Fake H200
device 0 util 91 40
device 0 memory 150000000000 42000000000
device 0 power_mw 500000
device 0 process {} 1073741824
device 1 name NVIDIA Fake H200 #2
device 1 util 0 0
device 1 memory 150000000000 0
device 1 power_mw 70000
)",
                                                 ::getpid()));
  auto nvml = probe::Nvml::open(FAKE_NVML_LIB);
  ASSERT_TRUE(nvml.ok()) << nvml.error().message;
  AgentDeps deps;
  deps.gpu = std::make_shared<probe::GpuProbe>(std::shared_ptr<probe::Nvml>(std::move(*nvml)),
                                               [](const std::string&) {});
  std::vector<std::unique_ptr<contract::BeaconWriter>> ws;
  for (const char* job : {"gpu-a", "gpu-b", "gpu-c"}) {
    ws.push_back(beacon(job));
    ws.back()->step(1);
  }
  auto a = Agent::open(config(), deps);
  ASSERT_TRUE(a.ok()) << a.error().message;
  int before = testing::fake_nvml_calls(FAKE_NVML_LIB, "util", 0);
  for (int p = 0; p < 4; ++p) ASSERT_TRUE((*a)->poll_once(at(0.5 * (p + 1))).ok());
  EXPECT_EQ(testing::fake_nvml_calls(FAKE_NVML_LIB, "util", 0) - before, 4)
      << "one read per poll, three jobs";
  for (const char* job : {"gpu-a", "gpu-b", "gpu-c"}) {
    auto s = (*a)->job(job);
    ASSERT_TRUE(s) << job;
    ASSERT_TRUE(s->gpus) << job;
    ASSERT_EQ(s->gpus->devices.size(), 1u) << "only the device this job's rank holds";
    EXPECT_EQ(s->gpus->devices[0].index, 0u);
    ASSERT_EQ(s->observation.gpus.size(), 1u);
    EXPECT_EQ(s->observation.gpus[0].sm_util_pct, 91);
  }
}

// Junk in the beacon root and in a job's directory, by the thousand: the real job is watched,
// every bad entry is counted, and the problems reported per poll stay bounded.
TEST_F(AgentTest, AFloodOfJunkIsCountedAndSkippedWhileTheRealJobIsWatched) {
  auto w = beacon("real");
  w->step(4);
  for (int i = 0; i < 1500; ++i) std::ofstream(root() + "/junk-" + std::to_string(i)) << "x";
  for (int r = 1; r < 1001; ++r)
    std::ofstream(root() + "/real/rank-" + std::to_string(r) + ".beacon") << "junk";
  auto a = open_agent();
  ASSERT_TRUE(a->poll_once(at(0.5)).ok());
  auto h = a->health();
  EXPECT_EQ(h.read_errors_total, 2500u);
  EXPECT_EQ(h.beacons_read_total, 1u);
  auto jobs = a->jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].job, "real");
  ASSERT_EQ(jobs[0].observation.ranks.size(), 1u);
  EXPECT_EQ(jobs[0].observation.ranks[0].step, 4);
  w->step(5);
  ASSERT_TRUE(a->poll_once(at(1.0)).ok());
  EXPECT_EQ(a->job("real")->observation.ranks[0].step, 5);
  EXPECT_EQ(a->health().read_errors_total, 5000u);
}

// Alertmanager resolves an alert that is not re-sent within its resolve_timeout (5 minutes by
// default): while the incident stays open the agent re-sends the same alert every minute, and
// resolves it (endsAt) when the job recovers.
TEST_F(AgentTest, AnOpenIncidentKeepsItsAlertmanagerAlertAliveAndRecoveryResolvesIt) {
  Receiver rx;
  std::ofstream(specs() + "/train-am.toml") << fmt::format(
      "owner = \"team-llm\"\nexpected_interval = \"100ms\"\ngrace_intervals = 2\n"
      "[[runbook.pager]]\nkind = \"alertmanager\"\nurl = \"{}\"\nretries = 0\ntimeout = \"2s\"\n",
      rx.base());
  auto w = beacon("train-am");
  for (int i = 1; i <= 8; ++i) w->step(i);
  auto a = open_agent();
  std::this_thread::sleep_for(600ms);
  Stamp stalled_at = SystemClock::instance().now();
  auto later = [&](int s) {
    return Stamp{stalled_at.wall_ns + s * kNsPerSec, stalled_at.mono_ns + s * kNsPerSec};
  };
  ASSERT_TRUE(a->poll_once(stalled_at).ok());
  ASSERT_EQ(a->job("train-am")->verdict.state, detect::State::kStalled);
  ASSERT_TRUE(rx.wait_for(1));
  ASSERT_TRUE(a->poll_once(later(30)).ok());
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rx.count(), 1u) << "not re-sent within a minute";
  ASSERT_TRUE(a->poll_once(later(61)).ok());
  ASSERT_TRUE(rx.wait_for(2)) << "re-sent after a minute";
  auto first = json::parse(rx.body(0)), again = json::parse(rx.body(1));
  EXPECT_EQ(first[0]["labels"], again[0]["labels"]) << "the same alert, not a new one";
  EXPECT_FALSE(again[0].contains("endsAt"));

  // A restarted agent joins the open incident without paging again, and refreshes the alert at
  // once (it may have gone unrefreshed while the agent was down).
  a.reset();
  a = open_agent();
  ASSERT_TRUE(a->poll_once(later(62)).ok());
  ASSERT_TRUE(rx.wait_for(3));
  EXPECT_EQ(json::parse(rx.body(2))[0]["labels"]["job_id"], "train-am");

  for (int i = 9; i <= 12; ++i) {
    w->step(i);
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(a->poll_once(SystemClock::instance().now()).ok());
  ASSERT_NE(a->job("train-am")->verdict.state, detect::State::kStalled);
  ASSERT_TRUE(rx.wait_for(4)) << "recovery resolves the alert";
  auto resolved = json::parse(rx.body(3));
  EXPECT_EQ(resolved[0]["labels"], first[0]["labels"]);
  EXPECT_TRUE(resolved[0].contains("endsAt"));
  a.reset();
  EXPECT_EQ(rx.count(), 4u);
}

// Preemption by the agent: only for jobs in preempt_jobs whose spec enables auto_preempt, after
// the ack timeout, and only for processes proven to be the job's (the beacon's writer, same
// user, same start time).
class AgentPreemptTest : public AgentTest {
 protected:
  void TearDown() override {
    for (pid_t c : children_) {
      ::kill(c, SIGKILL);
      ::waitpid(c, nullptr, 0);
    }
    AgentTest::TearDown();
  }
  void preempt_spec(const std::string& job) {
    std::ofstream(specs() + "/" + job + ".toml")
        << "owner = \"team-llm\"\nexpected_interval = \"100ms\"\ngrace_intervals = 2\n"
           "[runbook]\nack_timeout = \"1s\"\npreempt_grace = \"2s\"\n";
  }
  std::unique_ptr<Agent> open_preempting_agent(std::vector<std::string> patterns) {
    AgentConfig c = config();
    c.preempt_jobs = std::move(patterns);
    auto a = Agent::open(c);
    EXPECT_TRUE(a.ok()) << a.error().message;
    return a.ok() ? std::move(*a) : nullptr;
  }
  // A trainer rank in its own process: writes its beacon (8 quick steps), then hangs.
  // `steps_out`: it wakes on SIGTERM and, like a trainer saving on its way out, writes a few
  // quick steps for about half a second before it exits 0 (E13's transient "healthy").
  pid_t hung_rank(const std::string& job, bool steps_out = false) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    pid_t c = ::fork();
    if (c == 0) {
      ::close(ready[0]);
      if (steps_out) ::signal(SIGTERM, [](int) {});
      contract::Identity id;
      id.dir = root();
      id.job = job;
      id.host = short_hostname();
      auto w = contract::BeaconWriter::create(id);
      if (!w) ::_exit(2);
      for (int i = 1; i <= 8; ++i) (*w)->step(i);
      if (::write(ready[1], "r", 1) != 1) ::_exit(3);
      do ::pause();  // until SIGTERM (handled only when it steps out)
      while (!steps_out);
      for (int i = 9; i <= 18; ++i) {
        (*w)->step(i);
        ::usleep(50'000);
      }
      ::_exit(0);
    }
    ::close(ready[1]);
    char ch = 0;
    EXPECT_EQ(::read(ready[0], &ch, 1), 1);
    ::close(ready[0]);
    children_.push_back(c);
    return c;
  }
  pid_t sleeper() {
    pid_t c = ::fork();
    if (c == 0) {
      ::execl("/bin/sleep", "sleep", "60", nullptr);
      ::_exit(127);
    }
    children_.push_back(c);
    return c;
  }
  // Whether `pid` ended within `ms` (reaping it), and how.
  bool ended_within(pid_t pid, int ms, int* status) {
    for (int i = 0; i < ms / 10; ++i) {
      if (::waitpid(pid, status, WNOHANG) == pid) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  std::vector<pid_t> children_;
};

TEST_F(AgentPreemptTest, AStallPastTheAckTimeoutPreemptsTheProvenRankOnce) {
  preempt_spec("victim");
  pid_t rank = hung_rank("victim");
  auto a = open_preempting_agent({"vic*"});
  std::this_thread::sleep_for(600ms);
  Stamp t = SystemClock::instance().now();
  auto after = [&](double s) {
    auto ns = static_cast<int64_t>(s * 1e9);
    return Stamp{t.wall_ns + ns, t.mono_ns + ns};
  };
  ASSERT_TRUE(a->poll_once(t).ok());
  ASSERT_EQ(a->job("victim")->verdict.state, detect::State::kStalled);
  ASSERT_TRUE(a->poll_once(after(0.5)).ok());
  int status = 0;
  EXPECT_FALSE(ended_within(rank, 100, &status)) << "the owner has the ack timeout (1s) to answer";
  ASSERT_TRUE(a->poll_once(after(1.2)).ok());
  // The artifact is collected first, on the agent's act thread: a loaded machine has taken 2.5 s
  // and more. The wait ends as soon as the rank does.
  ASSERT_TRUE(ended_within(rank, 30000, &status)) << "preempted after the ack timeout";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  children_.clear();
  for (int i = 0; i < 100 && a->job("victim")->actions_total.count("preempt") == 0; ++i) {
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(a->poll_once(after(1.3 + 0.01 * i)).ok());
  }
  EXPECT_EQ(a->job("victim")->actions_total.at("preempt"), 1u);
  auto incs = a->incidents("victim", 10);
  ASSERT_TRUE(incs.ok());
  ASSERT_EQ(incs->size(), 1u);
  EXPECT_NE((*incs)[0].resolution.find("preempted by the agent"), std::string::npos)
      << (*incs)[0].resolution;
  // The silence of the processes it ended is not a new incident.
  ASSERT_TRUE(a->poll_once(after(5)).ok());
  ASSERT_TRUE(a->poll_once(after(6)).ok());
  EXPECT_EQ(a->incidents("victim", 10)->size(), 1u);
}

// E13: while its preempt runs the job keeps the verdict it is preempted on (the rank's steps on
// its way out are not a recovery, its exit not a finish), and once every rank here is ended by
// the preempt the job reads "preempted", never "finished", in the API and metrics.
TEST_F(AgentPreemptTest, APreemptedJobReadsPreemptedAndNeverHealthyOnTheWay) {
  preempt_spec("steps-out");
  pid_t rank = hung_rank("steps-out", true);
  auto a = open_preempting_agent({"steps-*"});
  std::this_thread::sleep_for(600ms);
  std::vector<detect::State> seen;
  auto poll = [&] {
    ASSERT_TRUE(a->poll_once(SystemClock::instance().now()).ok());
    seen.push_back(a->job("steps-out")->verdict.state);
  };
  poll();
  ASSERT_EQ(seen.back(), detect::State::kStalled);
  int status = 0;
  bool ended = false;
  for (int i = 0; i < 400 && !ended; ++i) {  // real time: the ack timeout (1s), then the preempt
    std::this_thread::sleep_for(50ms);
    poll();
    ended = ::waitpid(rank, &status, WNOHANG) == rank;
  }
  ASSERT_TRUE(ended) << "preempted after the ack timeout";
  children_.clear();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "it stepped out on SIGTERM";
  for (int i = 0; i < 100 && a->job("steps-out")->actions_total.count("preempt") == 0; ++i) {
    std::this_thread::sleep_for(20ms);
    poll();
  }
  ASSERT_EQ(a->job("steps-out")->actions_total.count("preempt"), 1u);
  poll();
  poll();
  for (size_t i = 0; i < seen.size(); ++i) {
    const detect::State s = seen[i];
    EXPECT_TRUE(s == detect::State::kStalled || s == detect::State::kPreempted)
        << "poll " << i << ": " << detect::state_name(s);
  }
  auto job = a->job("steps-out");
  EXPECT_EQ(job->verdict.state, detect::State::kPreempted) << job->verdict.summary;
  EXPECT_NE(job->verdict.summary.find("this node's preempt"), std::string::npos)
      << job->verdict.summary;
  EXPECT_TRUE(job->retired);
  // Retired, it stops exporting (as a finished job does); until then its one-hot state says it.
  watch::JobState live = *job;
  live.retired = false;
  const std::string metrics = serve::render_metrics({live}, a->health());
  EXPECT_NE(metrics.find(R"(state="preempted"} 1)"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find(R"(state="finished"} 0)"), std::string::npos) << metrics;
  auto incs = a->incidents("steps-out", 10);
  ASSERT_TRUE(incs.ok());
  ASSERT_EQ(incs->size(), 1u) << "the steps on its way out opened nothing new";
}

TEST_F(AgentPreemptTest, ABeaconNamingAProcessThatIsNotItsWriterGetsNothingSignalled) {
  preempt_spec("victim-forged");
  pid_t other = sleeper();  // same user, right start time, but it never mapped the beacon
  std::this_thread::sleep_for(50ms);
  auto w = beacon("victim-forged");
  for (int i = 1; i <= 8; ++i) w->step(i);
  auto st = read_proc_stat("/proc", other);
  ASSERT_TRUE(st.ok());
  int fd = ::open(w->path().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  int32_t pid = other;
  uint64_t start = st->start_ticks;
  ASSERT_EQ(::pwrite(fd, &pid, sizeof pid, offsetof(stepwatch_beacon_v1, pid)), 4);
  ASSERT_EQ(::pwrite(fd, &start, sizeof start, offsetof(stepwatch_beacon_v1, pid_start_ticks)), 8);
  ::close(fd);
  auto a = open_preempting_agent({"victim-forged"});
  std::this_thread::sleep_for(600ms);
  Stamp t = SystemClock::instance().now();
  ASSERT_TRUE(a->poll_once(t).ok());
  ASSERT_EQ(a->job("victim-forged")->verdict.state, detect::State::kStalled);
  ASSERT_TRUE(a->poll_once({t.wall_ns + 2 * kNsPerSec, t.mono_ns + 2 * kNsPerSec}).ok());
  ASSERT_TRUE(a->poll_once({t.wall_ns + 3 * kNsPerSec, t.mono_ns + 3 * kNsPerSec}).ok());
  int status = 0;
  EXPECT_FALSE(ended_within(other, 300, &status)) << "an unproven process is never signalled";
  EXPECT_EQ(a->job("victim-forged")->actions_total.count("preempt"), 0u);
  auto incs = a->incidents("victim-forged", 10);
  ASSERT_TRUE(incs.ok());
  ASSERT_EQ(incs->size(), 1u);
  EXPECT_FALSE((*incs)[0].closed_at_ns.has_value()) << "the incident stays open for a human";
}

TEST_F(AgentPreemptTest, AJobNotListedInPreemptJobsIsOnlyObserved) {
  preempt_spec("keep-me");
  pid_t rank = hung_rank("keep-me");
  auto a = open_preempting_agent({"victim*"});
  std::this_thread::sleep_for(600ms);
  Stamp t = SystemClock::instance().now();
  for (int s = 0; s < 4; ++s)
    ASSERT_TRUE(a->poll_once({t.wall_ns + s * kNsPerSec, t.mono_ns + s * kNsPerSec}).ok());
  EXPECT_EQ(a->job("keep-me")->verdict.state, detect::State::kStalled);
  int status = 0;
  EXPECT_FALSE(ended_within(rank, 300, &status));
}

TEST_F(AgentTest, RetiredJobsStayListedThenVanish) {
  auto done = beacon("done");
  done->step(1);
  done->finish(true);
  auto gone = beacon("gone");
  gone->step(1);
  auto a = open_agent();
  ASSERT_TRUE(a->poll_once(at(0.1)).ok());
  EXPECT_EQ(a->job("done")->verdict.state, detect::State::kFinished);
  EXPECT_TRUE(a->job("done")->retired);
  EXPECT_FALSE(a->job("gone")->retired);

  gone.reset();
  fs::remove_all(root() + "/gone");
  ASSERT_TRUE(a->poll_once(at(1)).ok());
  ASSERT_TRUE(a->job("gone"));
  EXPECT_TRUE(a->job("gone")->retired);
  ASSERT_TRUE(a->poll_once(at(59)).ok());  // retire_after is 60 s
  EXPECT_EQ(a->jobs().size(), 2u);
  ASSERT_TRUE(a->poll_once(at(62)).ok());
  EXPECT_TRUE(a->jobs().empty());
  // History stays in the store.
  auto incs = a->incidents("", 0);
  ASSERT_TRUE(incs.ok());
}

// D1: one sparse progress.jsonl of 100 GiB once made every poll fail in std::bad_alloc, every
// job frozen "healthy" and no stall paged. Now it costs one bounded read, and the real job
// beside it stalls and is paged on time.
TEST_F(AgentTest, AHugeSparseProgressFileBesideAStalledJobFreezesNothing) {
  Receiver rx;
  write_spec("victim", rx.url());
  auto w = beacon("victim");
  for (int i = 1; i <= 8; ++i) {
    w->step(i);
    std::this_thread::sleep_for(2ms);
  }
  fs::create_directories(root() + "/hostile");
  std::string sparse = root() + "/hostile/progress.jsonl";
  std::ofstream(sparse) << R"({"job":"hostile","rank":0,"time":1,"step":1})"
                        << "\n";
  ASSERT_EQ(::truncate(sparse.c_str(), int64_t{100} << 30), 0);
  auto a = open_agent();
  ASSERT_TRUE(a->poll_once(at(0.5)).ok());
  EXPECT_EQ(a->job("victim")->verdict.state, detect::State::kHealthy);
  ASSERT_TRUE(a->job("hostile").has_value()) << "the hostile job is watched too";
  ASSERT_TRUE(a->poll_once(at(10)).ok());
  EXPECT_EQ(a->job("victim")->verdict.state, detect::State::kStalled);
  EXPECT_TRUE(rx.wait_for(1)) << "the stall beside the hostile file is paged";
  EXPECT_GT(a->health().read_errors_total, 0u);  // the skip is counted
  EXPECT_EQ(a->health().consecutive_poll_failures, 0u);
}

// A poll that keeps failing as a whole makes /healthz fail (and the metric that alerts rise).
TEST_F(AgentTest, PollsThatKeepFailingMakeHealthFail) {
  auto c = config();
  std::string not_a_dir = (base_ / "a-file").string();
  std::ofstream(not_a_dir) << "x";
  c.beacon_roots = {not_a_dir};
  c.poll_interval_ns = 10 * kNsPerMs;
  auto a = Agent::open(c);
  ASSERT_TRUE(a.ok()) << a.error().message;
  ApiConfig ac;
  ac.port = 0;
  ApiServer api(**a, ac);
  ASSERT_TRUE(api.start().ok());
  auto http = client(api);
  auto res = http.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << "no poll yet is not a failure";
  std::atomic<bool> stop{false};
  std::thread t([&] { (*a)->run(stop); });
  for (int i = 0;
       i < 500 && (*a)->health().consecutive_poll_failures < watch::kPollFailuresUnhealthy; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  stop = true;
  t.join();
  EXPECT_GE((*a)->health().consecutive_poll_failures, watch::kPollFailuresUnhealthy);
  res = http.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(json::parse(res->body)["status"], "failing");
}

TEST_F(AgentTest, RunPollsUntilStopped) {
  auto c = config();
  c.poll_interval_ns = 20 * kNsPerMs;
  auto a = Agent::open(c);
  ASSERT_TRUE(a.ok());
  std::atomic<bool> stop{false};
  std::thread t([&] { (*a)->run(stop); });
  for (int i = 0; i < 500 && (*a)->health().polls_total < 3; ++i) std::this_thread::sleep_for(5ms);
  stop = true;
  t.join();
  EXPECT_GE((*a)->health().polls_total, 3u);
}

// Anyone can create a job directory with any job id: a spec (its budgets, its pagers) applies
// only to a directory owned by a user it names, by default whoever wrote the spec file.
TEST_F(AgentTest, ASpecAppliesOnlyToTheUsersItNames) {
  Receiver rx;
  const uint32_t me = ::getuid();
  write_spec("mine", rx.url(), "100ms", fmt::format("users = [\"{}\"]\n", me));
  write_spec("theirs", rx.url(), "100ms", fmt::format("users = [\"{}\"]\n", me + 1));
  write_spec("by-file-owner", rx.url(), "100ms");
  std::vector<std::unique_ptr<contract::BeaconWriter>> ws;
  for (const char* job : {"mine", "theirs", "by-file-owner"}) {
    ws.push_back(beacon(job));
    for (int i = 1; i <= 8; ++i) ws.back()->step(i);
  }
  auto a = open_agent();
  std::this_thread::sleep_for(600ms);
  ASSERT_TRUE(a->poll_once(SystemClock::instance().now()).ok());
  EXPECT_EQ(a->job("mine")->verdict.state, detect::State::kStalled);
  EXPECT_EQ(a->job("mine")->owner, "team-llm");
  EXPECT_EQ(a->job("by-file-owner")->verdict.state, detect::State::kStalled);
  // Not its users' directory: the defaults (an interval still being learned), nobody paged.
  EXPECT_EQ(a->job("theirs")->owner, "");
  EXPECT_NE(a->job("theirs")->verdict.state, detect::State::kStalled);
  a.reset();
  EXPECT_EQ(rx.count(), 2u);
}

TEST_F(AgentTest, OneUsersJobDirectoriesAreBoundedInJobsIncidentsAndLogLines) {
  AgentConfig c = config();
  c.max_jobs_per_user = 3;
  c.incidents_per_user_per_hour = 2;
  c.log_lines_per_user_per_minute = 4;
  std::vector<std::unique_ptr<contract::BeaconWriter>> ws;
  for (int j = 0; j < 5; ++j) {
    std::string job = fmt::format("flood-{}", j);
    std::ofstream(specs() + "/" + job + ".toml")
        << "expected_interval = \"100ms\"\ngrace_intervals = 2\n";
    ws.push_back(beacon(job));
    for (int i = 1; i <= 8; ++i) ws.back()->step(i);
  }
  auto a = Agent::open(c);
  ASSERT_TRUE(a.ok()) << a.error().message;
  std::this_thread::sleep_for(600ms);
  Stamp now = SystemClock::instance().now();
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE((*a)->poll_once(now).ok());
  std::string said = ::testing::internal::GetCapturedStderr();
  size_t job_lines = 0;
  for (size_t at = said.find("agent: job flood-"); at != std::string::npos;
       at = said.find("agent: job flood-", at + 1))
    ++job_lines;
  for (size_t at = said.find("agent: watching job flood-"); at != std::string::npos;
       at = said.find("agent: watching job flood-", at + 1))
    ++job_lines;
  EXPECT_EQ(job_lines, 4u) << said;  // 3 watched, 3 transitions, 2 incidents: 8 lines, 4 told
  EXPECT_NE(said.find(fmt::format("agent: uid {}: more than 4 lines about its jobs in a minute",
                                  ::getuid())),
            std::string::npos)
      << said;
  const std::string too_many =
      fmt::format("uid {} has more than 3 job directories under {}", ::getuid(), root());
  ASSERT_NE(said.find(too_many), std::string::npos) << said;
  EXPECT_EQ(said.find(too_many, said.find(too_many) + 1), std::string::npos)
      << "said once, not per job";
  EXPECT_NE(said.find("2 incidents opened in the last hour (incidents_per_user_per_hour): job "
                      "flood-2 is stalled"),
            std::string::npos)
      << said;
  auto jobs = (*a)->jobs();
  ASSERT_EQ(jobs.size(), 3u);  // the first three in listing order; the rest are not watched
  for (const auto& j : jobs) EXPECT_EQ(j.verdict.state, detect::State::kStalled) << j.job;
  auto incs = (*a)->incidents("", 100);
  ASSERT_TRUE(incs.ok());
  EXPECT_EQ(incs->size(), 2u);  // the third stalled job waits for room in the hour
  ASSERT_TRUE((*a)->poll_once({now.wall_ns + kNsPerSec, now.mono_ns + kNsPerSec}).ok());
  EXPECT_EQ((*a)->incidents("", 100)->size(), 2u);
  const int64_t hour = 3600 * kNsPerSec;
  ASSERT_TRUE((*a)->poll_once({now.wall_ns + hour, now.mono_ns + hour}).ok());
  EXPECT_EQ((*a)->incidents("", 100)->size(), 3u);
  EXPECT_EQ((*a)->jobs().size(), 3u);
}

TEST_F(AgentTest, TheStoreIsPrunedByAgeAndSizeAtTheFirstPoll) {
  const Stamp now = SystemClock::instance().now();
  {
    auto st = store::Store::open(state());
    ASSERT_TRUE(st.ok()) << st.error().message;
    auto old = st->open_incident(
        {"ancient", 0, now.wall_ns - 40LL * 86400 * kNsPerSec, "stalled", "none", "old", ""});
    ASSERT_TRUE(old.ok());
    ASSERT_TRUE(
        st->close_incident(old->id, now.wall_ns - 39LL * 86400 * kNsPerSec, "recovered").ok());
    for (int k = 0; k < 300; ++k) {  // ~3 MiB of recent history for one job
      auto ref = st->open_incident({"busy", 0, now.wall_ns - 1000 * kNsPerSec + k, "stalled",
                                    "none", std::string(10000, 'x'), ""});
      ASSERT_TRUE(ref.ok());
      ASSERT_TRUE(st->close_incident(ref->id, now.wall_ns - 999 * kNsPerSec + k, "recovered").ok());
    }
    ASSERT_GT(*st->used_bytes(), 2LL << 20);
  }
  AgentConfig c = config();
  c.max_store_size = 1LL << 20;
  auto a = Agent::open(c);
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE((*a)->poll_once(now).ok());
  EXPECT_TRUE((*a)->incidents("ancient", 10)->empty());
  auto busy = (*a)->incidents("busy", 1000);
  ASSERT_TRUE(busy.ok());
  EXPECT_GT(busy->size(), 0u);    // the newest are kept
  EXPECT_LT(busy->size(), 100u);  // the rest went to fit max_store_size
  auto st = store::Store::open(state());
  EXPECT_LE(*st->used_bytes(), 1LL << 20);
}

TEST_F(AgentTest, ApiRefusesABusyPort) {
  auto a = open_agent();
  ApiConfig ac;
  ac.port = 0;
  ApiServer first(*a, ac);
  ASSERT_TRUE(first.start().ok());
  ac.port = first.port();
  ApiServer second(*a, ac);
  auto st = second.start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find(fmt::format("127.0.0.1:{}", first.port())), std::string::npos);
}

}  // namespace
}  // namespace stepwatch::agent
