// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The agent's node-fault history (src/agent/agent_history.cpp) over real beacons (a new
// BeaconWriter per incarnation), a real store, its API and /metrics over real HTTP on 127.0.0.1
// (port 0) and a real page receiver. Time is injected into poll_once; some histories are seeded
// into the store directly, as an earlier agent or `stepwatch run` would have left them.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "src/agent/agent.h"
#include "src/common/host.h"
#include "src/contract/beacon_writer.h"
#include "src/runbook/node_fault_history.h"
#include "src/serve/agent_api.h"
#include "src/serve/metrics.h"
#include "src/store/store.h"
#include "tests/support/page_receiver.h"

namespace stepwatch::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

class AgentHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / fmt::format("sw-agent-hist-{}-{}", ::getpid(), counter_++);
    fs::remove_all(base_);
    fs::create_directories(root());
    fs::create_directories(specs());
    t0_ = SystemClock::instance().now();
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string root() const { return (base_ / "beacons").string(); }
  std::string specs() const { return (base_ / "specs").string(); }
  std::string state() const { return (base_ / "state").string(); }

  std::unique_ptr<Agent> open_agent() {
    AgentConfig c;
    c.beacon_roots = {root()};
    c.state_dir = state();
    c.specs_dir = specs();
    c.gpu = false;
    c.retire_after_ns = 3600 * kNsPerSec;
    auto a = Agent::open(c);
    EXPECT_TRUE(a.ok()) << a.error().message;
    return a.ok() ? std::move(*a) : nullptr;
  }
  // A step every second, grace 2; `pager`: pages go there.
  void write_spec(const std::string& job, const std::string& pager = "") {
    std::string s = "owner = \"team-llm\"\nexpected_interval = \"1s\"\ngrace_intervals = 2\n";
    if (!pager.empty())
      s += fmt::format("[[runbook.pager]]\nurl = \"{}\"\nretries = 0\ntimeout = \"2s\"\n", pager);
    std::ofstream(specs() + "/" + job + ".toml") << s;
  }
  // Incarnation `n` of a two-rank job: rank 0 reaches step 9, rank 1 only 8 (the lagging rank,
  // a stall's culprit), or both 9 when `even`.
  void start_incarnation(const std::string& job, uint32_t n, bool even = false) {
    writers_.clear();
    for (int rank = 0; rank < 2; ++rank) {
      contract::Identity id;
      id.dir = root();
      id.job = job;
      id.host = short_hostname();
      id.rank = rank;
      id.world_size = 2;
      id.incarnation = n;
      auto w = contract::BeaconWriter::create(id);
      ASSERT_TRUE(w.ok()) << w.error().message;
      writers_.push_back(std::move(*w));
    }
    for (int i = 1; i <= 9; ++i) {
      writers_[0]->step(i);
      if (i < 9 || even) writers_[1]->step(i);
    }
  }
  Stamp at(double s) const {
    auto ns = static_cast<int64_t>(s * 1e9);
    return {t0_.wall_ns + ns, t0_.mono_ns + ns};
  }
  store::Store open_store() {
    auto s = store::Store::open(state());
    EXPECT_TRUE(s.ok()) << s.error().message;
    return std::move(*s);
  }
  // An ended incarnation of `job`, as a run before this agent recorded it.
  static store::IncarnationRecord ended(const std::string& job, int64_t n, int64_t started,
                                        const std::string& cause, std::vector<int> ranks,
                                        std::vector<std::string> culprit_hosts) {
    store::IncarnationRecord r;
    r.job = job;
    r.incarnation = n;
    r.started_ns = started;
    r.ended_ns = started + 60 * kNsPerSec;
    r.end_reason = "failed";
    r.cause = cause;
    r.culprit_ranks = std::move(ranks);
    r.culprit_hosts = std::move(culprit_hosts);
    r.hosts = r.culprit_hosts.empty() ? std::vector<std::string>{"gpu-07"} : r.culprit_hosts;
    return r;
  }

  static inline int counter_ = 0;
  fs::path base_;
  Stamp t0_;
  std::vector<std::unique_ptr<contract::BeaconWriter>> writers_;
};

// The agent's API with /metrics as `stepwatch agent` wires it.
struct Api {
  explicit Api(Agent& a) : server(a, config(a)) { EXPECT_TRUE(server.start().ok()); }
  static serve::ApiConfig config(Agent& a) {
    serve::ApiConfig c;
    c.port = 0;
    c.metrics = [&a] {
      auto nf = a.node_faults();
      return serve::render_metrics(a.jobs(), a.health(), nf.get());
    };
    return c;
  }
  json get(const std::string& path) {
    httplib::Client c("127.0.0.1", server.port());
    c.set_read_timeout(5s);
    auto res = c.Get(path);
    EXPECT_TRUE(res) << path;
    if (!res) return nullptr;
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    return json::parse(res->body);
  }
  std::string metrics() {
    httplib::Client c("127.0.0.1", server.port());
    auto res = c.Get("/metrics");
    return res ? res->body : "";
  }
  serve::ApiServer server;
};

TEST_F(AgentHistoryTest, ACulpritHostOfTwoEndedIncarnationsIsSuspectInTheApiAndMetrics) {
  write_spec("llm");
  auto a = open_agent();
  Api api(*a);
  const std::string host = short_hostname();

  start_incarnation("llm", 0);
  ASSERT_TRUE(a->poll_once(at(0.2)).ok());
  ASSERT_TRUE(a->poll_once(at(10)).ok());
  auto j = a->job("llm");
  ASSERT_TRUE(j);
  ASSERT_EQ(j->verdict.state, detect::State::kStalled) << j->verdict.summary;
  ASSERT_EQ(j->verdict.culprits.size(), 1u) << j->verdict.summary;
  EXPECT_EQ(j->verdict.culprits[0].rank, 1);

  start_incarnation("llm", 1);  // the scheduler restarted it; it stalls the same way
  ASSERT_TRUE(a->poll_once(at(20)).ok());
  json nf = api.get("/api/v1/jobs/llm")["node_fault"];
  EXPECT_TRUE(nf["suspect_hosts"].empty()) << nf.dump();  // one ended incarnation: 1 of 1
  ASSERT_TRUE(a->poll_once(at(30)).ok());

  start_incarnation("llm", 2);
  ASSERT_TRUE(a->poll_once(at(40)).ok());
  nf = api.get("/api/v1/jobs/llm")["node_fault"];
  ASSERT_EQ(nf["suspect_hosts"].size(), 1u) << nf.dump();
  EXPECT_EQ(nf["suspect_hosts"][0]["host"], host);
  EXPECT_THAT(nf["suspect_hosts"][0]["evidence"][0].get<std::string>(),
              HasSubstr("culprit in 2 of the last 2 ended incarnations"));
  EXPECT_EQ(nf["suspect_hosts"][0]["exclude_hint"],
            fmt::format("exclude {} from the job's next placement", host));
  EXPECT_TRUE(nf["restart_storm"].is_null());
  ASSERT_EQ(nf["incarnations"].size(), 3u);
  const json& running = nf["incarnations"][0];
  EXPECT_EQ(running["incarnation"], 2);
  EXPECT_TRUE(running["ended_at"].is_null());
  EXPECT_TRUE(running["end_reason"].is_null());
  const json& failed = nf["incarnations"][1];
  EXPECT_EQ(failed["incarnation"], 1);
  EXPECT_EQ(failed["end_reason"], "failed");
  EXPECT_EQ(failed["cause"], "collective");
  EXPECT_EQ(failed["culprit_ranks"], json::array({1}));
  EXPECT_EQ(failed["culprit_hosts"], json::array({host}));
  EXPECT_EQ(failed["hosts"], json::array({host}));
  EXPECT_FALSE(failed["ended_at"].is_null());

  json hosts = api.get("/api/v1/hosts");
  EXPECT_DOUBLE_EQ(hosts["window_seconds"].get<double>(), 86400.0);
  ASSERT_EQ(hosts["hosts"].size(), 1u) << hosts.dump();
  EXPECT_EQ(hosts["hosts"][0]["host"], host);
  EXPECT_EQ(hosts["hosts"][0]["jobs_implicated"], 1);
  EXPECT_EQ(hosts["hosts"][0]["implications"], 2);
  EXPECT_EQ(hosts["hosts"][0]["suspect"], true);  // by the job's own rule, not the cross-job one
  EXPECT_THAT(hosts["hosts"][0]["evidence"][0].get<std::string>(),
              HasSubstr("job llm: culprit in 2 of the last 2"));

  std::string m = api.metrics();
  EXPECT_THAT(m, HasSubstr(fmt::format("stepwatch_host_suspect{{host=\"{}\"}} 1\n", host)));
  EXPECT_THAT(m, HasSubstr(fmt::format("stepwatch_host_implications{{host=\"{}\"}} 2\n", host)));
  EXPECT_THAT(m, HasSubstr("# TYPE stepwatch_host_suspect gauge\n"));
  EXPECT_THAT(m, Not(HasSubstr("stepwatch_job_restart_storm")));
}

TEST_F(AgentHistoryTest, ACollectiveHangWithoutALaggingRankNamesNobody) {
  // Two ended incarnations that hung in a collective with every rank waiting: nothing singles
  // out a host, so nothing is implicated and nobody is suspect (docs/node-fault.md).
  {
    store::Store s = open_store();
    runbook::StoreHistory h(s);
    int64_t start = t0_.wall_ns - 3600 * kNsPerSec;
    for (int64_t n = 0; n < 2; ++n) {
      store::IncarnationRecord r =
          ended("llm", n, start + n * 600 * kNsPerSec, "collective", {}, {"gpu-07", "gpu-08"});
      ASSERT_TRUE(runbook::record_ended(h, r).ok());
    }
  }
  write_spec("llm");
  auto a = open_agent();
  Api api(*a);
  start_incarnation("llm", 2, /*even=*/true);
  ASSERT_TRUE(a->poll_once(at(0.2)).ok());
  json nf = api.get("/api/v1/jobs/llm")["node_fault"];
  EXPECT_TRUE(nf["suspect_hosts"].empty()) << nf.dump();
  ASSERT_EQ(nf["incarnations"].size(), 3u);
  EXPECT_EQ(nf["incarnations"][1]["cause"], "collective");
  EXPECT_TRUE(nf["incarnations"][1]["culprit_ranks"].empty());
  EXPECT_TRUE(api.get("/api/v1/hosts")["hosts"].empty());
  std::string m = api.metrics();
  EXPECT_THAT(m, Not(HasSubstr("stepwatch_host_suspect")));
  EXPECT_THAT(m, Not(HasSubstr("stepwatch_host_implications")));
}

TEST_F(AgentHistoryTest, FiveIncarnationsInHalfAnHourAreARestartStorm) {
  write_spec("llm");
  auto a = open_agent();
  Api api(*a);
  for (uint32_t n = 0; n < 4; ++n) {
    start_incarnation("llm", n, /*even=*/true);
    ASSERT_TRUE(a->poll_once(at(0.2 + 0.05 * n)).ok());
  }
  EXPECT_TRUE(api.get("/api/v1/jobs/llm")["node_fault"]["restart_storm"].is_null());
  EXPECT_THAT(api.metrics(), Not(HasSubstr("stepwatch_job_restart_storm")));

  start_incarnation("llm", 4, /*even=*/true);
  ASSERT_TRUE(a->poll_once(at(0.4)).ok());
  json storm = api.get("/api/v1/jobs/llm")["node_fault"]["restart_storm"];
  ASSERT_FALSE(storm.is_null());
  EXPECT_EQ(storm["incarnations"], 5);
  EXPECT_DOUBLE_EQ(storm["window_seconds"].get<double>(), 1800.0);
  EXPECT_THAT(storm["evidence"].get<std::string>(),
              HasSubstr("(limit 5 in 30m00s): 0, 1, 2, 3, 4"));
  EXPECT_THAT(api.metrics(), HasSubstr("stepwatch_job_restart_storm{job_id=\"llm\"} 1\n"));
  // Restarts that only look fine say so: none of them is a failure with a culprit.
  json incs = api.get("/api/v1/jobs/llm")["node_fault"]["incarnations"];
  EXPECT_EQ(incs[1]["end_reason"], "restarted");
  // Four short runs in a row on this host: the (weak) short-run rule names it, though nothing
  // implicated it; the page would show the storm beside it (docs/node-fault.md).
  json hosts = api.get("/api/v1/hosts")["hosts"];
  ASSERT_EQ(hosts.size(), 1u) << hosts.dump();
  EXPECT_EQ(hosts[0]["implications"], 0);
  EXPECT_EQ(hosts[0]["suspect"], true);
  EXPECT_THAT(hosts[0]["evidence"][0].get<std::string>(),
              HasSubstr("job llm: in 4 consecutive incarnations that each ended, not finished"));
}

TEST_F(AgentHistoryTest, ARestartedAgentRecordsNoIncarnationTwice) {
  write_spec("llm");
  const std::string host = short_hostname();
  int64_t started_1 = 0;
  {
    auto a = open_agent();
    start_incarnation("llm", 0);
    ASSERT_TRUE(a->poll_once(at(0.2)).ok());
    ASSERT_TRUE(a->poll_once(at(10)).ok());  // stalled, rank 1 the culprit
    start_incarnation("llm", 1);
    ASSERT_TRUE(a->poll_once(at(11)).ok());  // 0 ended; 1 runs
    auto nf = a->node_faults();
    ASSERT_TRUE(nf);
    ASSERT_EQ(nf->jobs.at("llm").incarnations.size(), 2u);
    started_1 = nf->jobs.at("llm").incarnations[0].started_ns;
  }
  {
    auto b = open_agent();  // a new agent over the same store sees incarnation 1 running
    ASSERT_TRUE(b->poll_once(at(12)).ok());
    ASSERT_TRUE(b->poll_once(at(20)).ok());
    start_incarnation("llm", 2, /*even=*/true);
    ASSERT_TRUE(b->poll_once(at(21)).ok());  // 1 ended
    for (auto& w : writers_) w->finish(true);
    ASSERT_TRUE(b->poll_once(at(22)).ok());  // 2 finished
  }
  {
    auto c = open_agent();  // and another: incarnation 2 is there, finished, and stays ended once
    ASSERT_TRUE(c->poll_once(at(23)).ok());
    ASSERT_TRUE(c->poll_once(at(24)).ok());
  }
  store::Store s = open_store();
  auto incs = s.incarnations("llm", 0);
  ASSERT_TRUE(incs.ok());
  ASSERT_EQ(incs->size(), 3u);
  EXPECT_EQ((*incs)[0].end_reason, "finished");
  EXPECT_EQ((*incs)[0].ended_ns, at(22).wall_ns);  // not moved by the third agent
  EXPECT_EQ((*incs)[1].end_reason, "failed");
  EXPECT_EQ((*incs)[1].started_ns, started_1);  // kept across the restart
  EXPECT_EQ((*incs)[2].end_reason, "failed");
  auto impl = s.implications(0);
  ASSERT_TRUE(impl.ok());
  ASSERT_EQ(impl->size(), 2u);  // incarnations 0 and 1 blamed the host, once each
  for (const auto& i : *impl) EXPECT_EQ(i.host, host);
}

TEST_F(AgentHistoryTest, ThePageNamesTheSuspectHostWithItsEvidenceAndHint) {
  test::Receiver rx;
  write_spec("llm", rx.url());
  {
    store::Store s = open_store();
    runbook::StoreHistory h(s);
    int64_t start = t0_.wall_ns - 3600 * kNsPerSec;
    for (int64_t n = 0; n < 2; ++n) {
      ASSERT_TRUE(runbook::record_ended(
                      h, ended("llm", n, start + n * 600 * kNsPerSec, "io", {3}, {"gpu-07"}))
                      .ok());
    }
  }
  auto a = open_agent();
  start_incarnation("llm", 2);
  ASSERT_TRUE(a->poll_once(at(0.2)).ok());
  ASSERT_TRUE(a->poll_once(at(10)).ok());
  ASSERT_TRUE(rx.wait_for(1));
  json page = json::parse(rx.body(0));
  ASSERT_EQ(page["suspect_hosts"].size(), 1u) << page.dump();
  EXPECT_EQ(page["suspect_hosts"][0]["host"], "gpu-07");
  EXPECT_THAT(page["suspect_hosts"][0]["evidence"][0].get<std::string>(),
              HasSubstr("culprit in 2 of the last 2 ended incarnations (limit 2 of 3): 0, 1"));
  EXPECT_EQ(page["suspect_hosts"][0]["exclude_hint"],
            "exclude gpu-07 from the job's next placement");
}

}  // namespace
}  // namespace stepwatch::agent
