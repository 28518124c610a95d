// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one JSON of an incident, a job and an ack, as the agent's API, the supervisor's ack
// endpoint and `stepwatch incidents --json` all write it.
#include "src/serve/json_views.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "src/common/clock.h"

namespace stepwatch::serve {
namespace {

using json = nlohmann::json;

constexpr int64_t kT0 = 1'714'533'164'000'000'000;  // 2024-05-01T03:12:44Z

store::Incident open_incident() {
  store::Incident i;
  i.id = 3;
  i.job = "llm";
  i.incarnation = 2;
  i.opened_at_ns = kT0 + 250 * kNsPerMs;
  i.state = "stalled";
  i.cause = "collective";
  i.summary = "ranks 3,7 stopped";
  i.verdict_json = R"({"state":"stalled","culprits":[3,7]})";
  return i;
}

TEST(IncidentJson, AnOpenIncident) {
  json j = incident_json(open_incident());
  EXPECT_EQ(j["id"], 3);
  EXPECT_EQ(j["job_id"], "llm");
  EXPECT_FALSE(j.contains("job")) << "one name for the job id, as in /api/v1/jobs";
  EXPECT_EQ(j["incarnation"], 2);
  EXPECT_EQ(j["status"], "open");
  EXPECT_EQ(j["state"], "stalled");
  EXPECT_EQ(j["cause"], "collective");
  EXPECT_EQ(j["summary"], "ranks 3,7 stopped");
  EXPECT_EQ(j["verdict"]["culprits"], json::array({3, 7}));
  EXPECT_EQ(j["opened_at"], "2024-05-01T03:12:44Z");
  EXPECT_EQ(j["opened_at_ns"], kT0 + 250 * kNsPerMs) << "the exact time beside the string";
  for (const char* k : {"paged_at", "paged_at_ns", "delivered_at", "delivered_at_ns", "acked_at",
                        "acked_at_ns", "closed_at", "closed_at_ns"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    EXPECT_TRUE(j[k].is_null()) << k << ": not yet is null, never 0";
  }
  EXPECT_FALSE(j.contains("actions")) << "actions only when the caller read them";
}

TEST(IncidentJson, AClosedIncidentWithActions) {
  store::Incident i = open_incident();
  i.paged_at_ns = kT0 + kNsPerSec;
  i.page_result = "sent: webhook 200";
  i.delivered_at_ns = kT0 + 2 * kNsPerSec;
  i.acked_at_ns = kT0 + 60 * kNsPerSec;
  i.acked_by = "alice";
  i.ack_note = "looking";
  i.closed_at_ns = kT0 + 845 * kNsPerSec;
  i.resolution = "recovered";
  std::vector<store::Action> actions = {
      {9, 3, "llm", kT0 + kNsPerSec, "page", true, "webhook"},
      {10, 3, "llm", kT0 + 2 * kNsPerSec, "preempt", false, "EPERM"}};
  json j = incident_json(i, &actions);
  EXPECT_EQ(j["status"], "closed");
  EXPECT_EQ(j["paged_at"], "2024-05-01T03:12:45Z");
  EXPECT_EQ(j["paged_at_ns"], kT0 + kNsPerSec);
  EXPECT_EQ(j["page_result"], "sent: webhook 200");
  EXPECT_EQ(j["delivered_at"], "2024-05-01T03:12:46Z");
  EXPECT_EQ(j["delivered_at_ns"], kT0 + 2 * kNsPerSec);
  EXPECT_EQ(j["acked_at"], "2024-05-01T03:13:44Z");
  EXPECT_EQ(j["acked_by"], "alice");
  EXPECT_EQ(j["ack_note"], "looking");
  EXPECT_EQ(j["closed_at_ns"], kT0 + 845 * kNsPerSec);
  EXPECT_EQ(j["resolution"], "recovered");
  ASSERT_EQ(j["actions"].size(), 2u);
  EXPECT_EQ(j["actions"][0]["id"], 9);
  EXPECT_EQ(j["actions"][0]["at"], "2024-05-01T03:12:45Z");
  EXPECT_EQ(j["actions"][0]["at_ns"], kT0 + kNsPerSec);
  EXPECT_EQ(j["actions"][1]["kind"], "preempt");
  EXPECT_EQ(j["actions"][1]["ok"], false);
  EXPECT_EQ(j["actions"][1]["detail"], "EPERM");

  std::vector<store::Action> none;
  EXPECT_TRUE(incident_json(i, &none)["actions"].is_array());
  EXPECT_TRUE(incident_json(i, &none)["actions"].empty());
}

TEST(IncidentJson, AVerdictThatIsNotJsonStaysTextAndNoneIsNull) {
  store::Incident i = open_incident();
  i.verdict_json = "not json";
  EXPECT_EQ(incident_json(i)["verdict"], "not json");
  i.verdict_json.clear();
  EXPECT_TRUE(incident_json(i)["verdict"].is_null());
}

TEST(IncidentJson, TextThatIsNotUtf8IsReplacedNotThrown) {
  store::Incident i = open_incident();
  i.ack_note = "bad \xff byte";
  std::string text = dump_json(incident_json(i));
  EXPECT_NE(text.find("bad"), std::string::npos);
  EXPECT_EQ(text.find('\n'), std::string::npos) << "one line by default";
  EXPECT_NE(dump_json(incident_json(i), 2).find('\n'), std::string::npos);
}

TEST(AckBody, EmptyOrAnObjectOfStrings) {
  for (const char* empty : {"", "  \r\n\t"}) {
    auto b = parse_ack_body(empty);
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(b->by, "");
    EXPECT_EQ(b->note, "");
  }
  auto b = parse_ack_body(R"({"by": "alice", "note": "looking", "extra": 1})");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->by, "alice");
  EXPECT_EQ(b->note, "looking");
  auto nulls = parse_ack_body(R"({"by": null})");
  ASSERT_TRUE(nulls.ok());
  EXPECT_EQ(nulls->by, "");
}

TEST(AckBody, ErrorsSayWhatIsWrong) {
  struct Case {
    std::string body;
    std::string says;
  } cases[] = {
      {"{not json", "the body must be empty or a JSON object"},
      {"[1,2]", "the body must be empty or a JSON object"},
      {R"({"by": 7})", "\"by\" must be a string"},
      {R"({"note": ["x"]})", "\"note\" must be a string"},
      {json{{"by", std::string(kMaxAckField + 1, 'a')}}.dump(), "\"by\" is longer than 1024 bytes"},
  };
  for (const auto& c : cases) {
    auto b = parse_ack_body(c.body);
    ASSERT_FALSE(b.ok()) << c.body;
    EXPECT_EQ(b.error().code, Errc::kParse);
    EXPECT_NE(b.error().message.find(c.says), std::string::npos) << b.error().message;
  }
  EXPECT_TRUE(parse_ack_body(json{{"by", std::string(kMaxAckField, 'a')}}.dump()).ok());
}

TEST(AckReply, TheSameShapeOnEveryRoute) {
  store::Incident i = open_incident();
  i.acked_at_ns = kT0 + kNsPerSec;
  i.acked_by = "bob";
  json j = ack_reply_json(i, "bob");
  EXPECT_EQ(j["acked"], true);
  EXPECT_EQ(j["incident"], incident_json(i));
  EXPECT_EQ(j["incident_id"], 3);
  EXPECT_EQ(j["by"], "bob");
  EXPECT_EQ(j["message"], "incident 3 of job llm acked by bob");
  json none = no_incident_json("llm");
  EXPECT_EQ(none, json({{"acked", false}, {"error", "job llm has no open incident"}}));
}

TEST(JobJson, SummaryAndDetailSayAbsentAsNull) {
  watch::JobState s;
  s.job = "train-a";
  s.owner = "team";
  s.first_seen_wall_ns = kT0 + 5 * kNsPerMs;
  s.verdict.state = detect::State::kHealthy;
  s.verdict.last_step_age_ns = -1;
  json sum = job_summary_json(s);
  EXPECT_EQ(sum["job_id"], "train-a");
  EXPECT_EQ(sum["state"], "healthy");
  EXPECT_EQ(sum["owner"], "team");
  EXPECT_TRUE(sum["last_step"].is_null());
  EXPECT_TRUE(sum["last_step_age_seconds"].is_null());
  EXPECT_TRUE(sum["expected_interval_seconds"].is_null());
  EXPECT_EQ(sum["ranks"], 0);
  json d = job_detail_json(s);
  EXPECT_EQ(d["job_id"], "train-a");
  EXPECT_EQ(d["first_seen"], "2024-05-01T03:12:44.005Z");
  EXPECT_TRUE(d["last_poll"].is_null());
  EXPECT_TRUE(d["owner_uid"].is_null());
  EXPECT_TRUE(d["recent_intervals_seconds"].empty());
}

// A single node's answers are what they were before multi-node, key for key.
TEST(JobJson, ASingleNodeJobHasNoCluster) {
  watch::JobState s;
  s.job = "train-a";
  s.host = "node-a";
  s.verdict.state = detect::State::kHealthy;
  s.verdict.last_step_age_ns = -1;
  EXPECT_EQ(dump_json(job_summary_json(s)),
            R"({"cause":"none","class":"","expected_interval_seconds":null,"host":"node-a",)"
            R"("job_id":"train-a","last_step":null,"last_step_age_seconds":null,"owner":"",)"
            R"("phase":"","ranks":0,"retired":false,"state":"healthy","summary":""})");
  EXPECT_FALSE(job_detail_json(s).contains("cluster"));
}

watch::JobState clustered() {
  watch::JobState s;
  s.job = "llm";
  s.host = "node-b";
  s.cluster = watch::ClusterState{"node-b", "node-b", true, true, {}};
  // Unsorted on purpose: nodes come out by name, their ranks ascending.
  s.cluster->nodes = {{"node-c", false, true, 12'500 * kNsPerMs, {5, 4}},
                      {"node-b", true, false, 0, {3, 2}},
                      {"node-a", false, false, -1, {}}};
  for (int r = 0; r < 2; ++r) {
    contract::RankSnapshot snap;
    snap.rank = r;
    snap.host = "node-a";
    s.observation.ranks.push_back(snap);
    detect::RankVerdict rv;
    rv.rank = r;
    s.verdict.ranks.push_back(rv);
  }
  return s;
}

TEST(JobJson, AMultiNodeJobShowsItsCluster) {
  const json want = json::parse(R"({
    "node": "node-b", "leader": "node-b", "leads": true, "connected": true,
    "nodes": [
      {"node": "node-a", "leader": false, "lapsed": false, "summary_age_seconds": null, "ranks": []},
      {"node": "node-b", "leader": true, "lapsed": false, "summary_age_seconds": 0.0,
       "ranks": [2, 3]},
      {"node": "node-c", "leader": false, "lapsed": true, "summary_age_seconds": 12.5,
       "ranks": [4, 5]}]})");
  watch::JobState s = clustered();
  EXPECT_EQ(job_summary_json(s)["cluster"], want);
  json d = job_detail_json(s);
  EXPECT_EQ(d["cluster"], want);
  ASSERT_EQ(d["ranks"].size(), 2u);
  EXPECT_EQ(d["ranks"][1]["beacon"]["host"], "node-a") << "each rank names the node it is on";
  EXPECT_TRUE(d["ranks"][1]["beacon"]["sample"].is_null()) << "no sampler: null";

  // A rank's sampler: where its main thread is and for how long it has not moved.
  s.observation.now = Stamp{100 * kNsPerSec, 100 * kNsPerSec};
  s.observation.one_clock = true;
  contract::Sample x;
  x.count = 5;
  x.at = Stamp{99 * kNsPerSec, 99 * kNsPerSec};
  x.moved_at = Stamp{52 * kNsPerSec, 52 * kNsPerSec};
  x.wait = contract::WaitKind::kCollective;
  x.where = "all_reduce (distributed_c10d.py:1536)";
  s.observation.ranks[0].sample = x;
  detect::ProcessFacts p;
  p.rank = 0;
  p.main_cpu_delta_ns = 250 * kNsPerMs;
  p.ctx_switches_delta = 4;
  s.observation.procs.push_back(p);
  json r0 = job_detail_json(s)["ranks"][0];
  EXPECT_EQ(r0["beacon"]["sample"],
            json::parse(R"J({"wait": "collective", "where": "all_reduce (distributed_c10d.py:1536)",
                            "age_seconds": 1.0, "unchanged_seconds": 48.0})J"));
  EXPECT_EQ(r0["process"]["main_thread_cpu_seconds_delta"], 0.25);
  EXPECT_EQ(r0["process"]["main_thread_switches_delta"], 4);

  // etcd unreachable: no leader is known (null, not ""), this node leads nothing.
  s.cluster->leader = "";
  s.cluster->leads = false;
  s.cluster->connected = false;
  json c = job_summary_json(s)["cluster"];
  EXPECT_TRUE(c["leader"].is_null());
  EXPECT_EQ(c["leads"], false);
  EXPECT_EQ(c["connected"], false);
}

watch::AgentHealth health() {
  watch::AgentHealth h;
  h.polls_total = 9;
  h.last_poll_duration_ns = 2 * kNsPerMs;
  h.started_wall_ns = kT0;
  return h;
}

TEST(HealthJson, ASingleNodeAgent) {
  watch::AgentHealth h = health();
  EXPECT_FALSE(agent_failing(h));
  json j = agent_health_json(h, 3, kT0 + 5 * kNsPerSec);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["jobs"], 3);
  EXPECT_EQ(j["polls_total"], 9);
  EXPECT_EQ(j["last_poll"], "2024-05-01T03:12:49.000Z");
  EXPECT_EQ(j["last_poll_duration_seconds"], 0.002);
  EXPECT_EQ(j["started_at"], "2024-05-01T03:12:44.000Z");
  EXPECT_TRUE(j["store_error"].is_null());
  EXPECT_FALSE(j.contains("coord")) << "no [coord]: the answer is as before multi-node";
  EXPECT_TRUE(agent_health_json(h, 0, 0)["last_poll"].is_null());

  h.consecutive_poll_failures = watch::kPollFailuresUnhealthy;
  EXPECT_TRUE(agent_failing(h));
  EXPECT_EQ(agent_health_json(h, 0, 0)["status"], "failing");
  h.consecutive_poll_failures = 0;
  h.store_error = "database or disk is full";
  EXPECT_TRUE(agent_failing(h));
  EXPECT_EQ(agent_health_json(h, 0, 0)["store_error"], "database or disk is full");
}

// E8: a poll held up (by a hung etcd, say) shows in its age, and past 3 intervals and 5 s beyond
// one it reads "lagging", never "failing" (a restart would not make it faster).
TEST(HealthJson, APollThatLagsSaysSo) {
  watch::AgentHealth h = health();
  h.poll_interval_ns = kNsPerSec;
  h.poll_age_ns = 500 * kNsPerMs;
  json j = agent_health_json(h, 1, kT0);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["poll_age_seconds"], 0.5);
  h.poll_age_ns = 6 * kNsPerSec;
  EXPECT_EQ(agent_health_json(h, 1, kT0)["status"], "ok") << "within an interval and 5 s";
  h.poll_age_ns = 6'100 * kNsPerMs;
  EXPECT_EQ(agent_health_json(h, 1, kT0)["status"], "lagging");
  EXPECT_FALSE(agent_failing(h));
  h.poll_age_ns = -1;
  EXPECT_TRUE(agent_health_json(h, 1, kT0)["poll_age_seconds"].is_null()) << "no poll yet";
}

// Lost coordination is shown, never a failure: the agent still observes and pages locally.
TEST(HealthJson, CoordinationLostDoesNotFailHealth) {
  watch::AgentHealth h = health();
  watch::CoordHealth c;
  c.node = "node-a";
  c.connected = true;
  c.lease_age_ns = 1'500 * kNsPerMs;
  c.lease_ttl_ns = 10 * kNsPerSec;
  c.losses_total = 1;
  c.puts_total = 40;
  c.jobs_led = 2;
  h.coord = c;
  json j = agent_health_json(h, 2, kT0);
  EXPECT_EQ(j["coord"], json::parse(R"({"node": "node-a", "connected": true, "error": null,
      "lease_age_seconds": 1.5, "lease_ttl_seconds": 10.0, "losses_total": 1,
      "summaries_published_total": 40, "jobs_led": 2})"));

  h.coord->connected = false;
  h.coord->error = "etcd http://10.0.0.5:2379: connection refused";
  h.coord->lease_age_ns = -1;
  h.coord->lease_ttl_ns = 0;
  h.coord->losses_total = 2;
  h.coord->jobs_led = 0;
  EXPECT_FALSE(agent_failing(h));
  j = agent_health_json(h, 2, kT0);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["coord"]["connected"], false);
  EXPECT_EQ(j["coord"]["error"], "etcd http://10.0.0.5:2379: connection refused");
  EXPECT_TRUE(j["coord"]["lease_age_seconds"].is_null()) << "never renewed: null, not 0";
  EXPECT_TRUE(j["coord"]["lease_ttl_seconds"].is_null());
  EXPECT_EQ(j["coord"]["losses_total"], 2);
}

TEST(NodeFaultJson, SuspectsStormAndIncarnationsNewestFirst) {
  JobNodeFault nf;
  nf.suspects.push_back({"gpu-07",
                         {"culprit in 2 of the last 3 ended incarnations (limit 2 of 3): 5, 7"},
                         "sbatch --exclude=gpu-07"});
  nf.storm = RestartStormView{5, 1800 * kNsPerSec, "5 incarnations started in 12m00s"};
  store::IncarnationRecord running;
  running.job = "llm";
  running.incarnation = 8;
  running.started_ns = kT0;
  running.hosts = {"gpu-07"};
  store::IncarnationRecord failed;
  failed.job = "llm";
  failed.incarnation = 7;
  failed.started_ns = kT0 - 600 * kNsPerSec;
  failed.ended_ns = kT0 - kNsPerSec;
  failed.end_reason = "failed";
  failed.cause = "io";
  failed.culprit_ranks = {3};
  failed.culprit_hosts = {"gpu-07"};
  failed.hosts = {"gpu-07", "gpu-08"};
  failed.checkpoint_step = 4200;
  failed.scheduler_id = "slurm:1234";
  nf.incarnations = {running, failed};
  json j = node_fault_json(nf);
  EXPECT_EQ(j["suspect_hosts"],
            json::parse(R"([{"host": "gpu-07", "evidence": ["culprit in 2 of the last 3 ended )"
                        R"(incarnations (limit 2 of 3): 5, 7"], "exclude_hint": )"
                        R"("sbatch --exclude=gpu-07"}])"));
  EXPECT_EQ(j["restart_storm"], json::parse(R"({"incarnations": 5, "window_seconds": 1800.0,
                                                "evidence": "5 incarnations started in 12m00s"})"));
  EXPECT_EQ(j["incarnations"][0],
            json::parse(R"({"incarnation": 8, "started_at": "2024-05-01T03:12:44.000Z",
              "ended_at": null, "end_reason": null, "cause": "none", "culprit_ranks": [],
              "culprit_hosts": [], "hosts": ["gpu-07"], "checkpoint_step": null,
              "scheduler_id": null})"));
  EXPECT_EQ(j["incarnations"][1],
            json::parse(R"({"incarnation": 7, "started_at": "2024-05-01T03:02:44.000Z",
              "ended_at": "2024-05-01T03:12:43.000Z", "end_reason": "failed", "cause": "io",
              "culprit_ranks": [3], "culprit_hosts": ["gpu-07"], "hosts": ["gpu-07", "gpu-08"],
              "checkpoint_step": 4200, "scheduler_id": "slurm:1234"})"));

  // Nothing known yet: empty lists and a null storm, never a missing key.
  EXPECT_EQ(node_fault_json({}), json::parse(R"({"suspect_hosts": [], "restart_storm": null,
                                                 "incarnations": []})"));
}

TEST(NodeFaultJson, Hosts) {
  NodeFaultSnapshot nf;
  nf.window_ns = 24 * 3600 * kNsPerSec;
  const std::string line = "implicated in 3 jobs in the last 1d00h (limit 3): a#1, b#2, c#3";
  nf.hosts.push_back({"gpu-07", 3, 4, true, {line}});
  nf.hosts.push_back({"gpu-09", 1, 1, false, {}});
  json want = {{"window_seconds", 86400.0},
               {"hosts",
                {{{"host", "gpu-07"},
                  {"jobs_implicated", 3},
                  {"implications", 4},
                  {"suspect", true},
                  {"evidence", {line}}},
                 {{"host", "gpu-09"},
                  {"jobs_implicated", 1},
                  {"implications", 1},
                  {"suspect", false},
                  {"evidence", json::array()}}}}};
  EXPECT_EQ(hosts_json(nf), want);
  EXPECT_EQ(hosts_json({}), json::parse(R"({"window_seconds": null, "hosts": []})"));
}

}  // namespace
}  // namespace stepwatch::serve
