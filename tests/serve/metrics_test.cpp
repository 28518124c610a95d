// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/serve/metrics.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "src/detect/verdict.h"
#include "src/store/records.h"

namespace stepwatch::serve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kWall = 1'700'000'100 * kNsPerSec;
constexpr int64_t kMono = 2'000 * kNsPerSec;

Stamp mono_ago(int64_t sec) {
  return {kWall - sec * kNsPerSec, kMono - sec * kNsPerSec};
}

// Two ranks on node-a: rank 0 has a step, a beat and a checkpoint; rank 1 is still in init.
// One GPU whose power NVML did not give.
watch::JobState sample_job() {
  watch::JobState j;
  j.job = "train-1";
  j.owner = "ml-team";
  j.job_class = "llm";
  j.host = "node-a";
  j.observation.now = {kWall, kMono};
  j.observation.local_host = "node-a";

  contract::RankSnapshot r1;  // pushed first: the output is sorted by rank anyway
  r1.rank = 1;
  r1.host = "";  // unknown host: the job's host, ages by the monotonic clock
  r1.phase = "init";
  r1.phase_since = mono_ago(30);
  j.observation.ranks.push_back(r1);

  contract::RankSnapshot r0;
  r0.rank = 0;
  r0.host = "node-a";
  r0.step = 42;
  r0.step_at = mono_ago(10);
  r0.phase = "train";
  r0.phase_since = mono_ago(5);
  r0.beat_at = mono_ago(2);
  r0.checkpoint = contract::CheckpointMark{"gen-40", 40, mono_ago(100)};
  j.observation.ranks.push_back(r0);

  j.verdict.state = detect::State::kSlow;
  j.verdict.last_step = 42;
  j.verdict.last_step_age_ns = 10 * kNsPerSec;
  j.verdict.expected_interval_ns = 2'500 * kNsPerMs;

  probe::GpuSnapshot g;
  probe::GpuDevice d;
  d.index = 0;
  d.sm_util_pct = 87;
  d.mem_used_bytes = 1024;
  g.devices.push_back(d);
  j.gpus = g;

  j.incidents_total = 1;
  j.actions_total = {{"page", 1}, {"ack", 2}};
  return j;
}

watch::AgentHealth sample_health() {
  watch::AgentHealth h;
  h.last_poll_duration_ns = 1'500 * kNsPerUs;
  h.polls_total = 10;
  h.beacons_read_total = 20;
  h.read_errors_total = 0;
  h.started_wall_ns = 1'700'000'000 * kNsPerSec;
  h.consecutive_poll_failures = 2;
  h.job_poll_failures_total = 7;
  h.store_errors_total = 3;
  return h;
}

// The job as its leader node-a sees it: node-b reports rank 1 (its summary lapsed).
watch::JobState clustered_job() {
  watch::JobState j = sample_job();
  j.job = "train-2";
  j.cluster = watch::ClusterState{"node-a", "node-a", true, true, {}};
  j.cluster->nodes = {{"node-a", true, false, 0, {0}},
                      {"node-b", false, true, 12 * kNsPerSec, {1}}};
  return j;
}

watch::AgentHealth coord_health() {
  watch::AgentHealth h = sample_health();
  watch::CoordHealth c;
  c.node = "node-a";
  c.connected = true;
  c.lease_age_ns = 1'250 * kNsPerMs;
  c.lease_ttl_ns = 10 * kNsPerSec;
  c.losses_total = 2;
  c.puts_total = 345;
  c.jobs_led = 1;
  h.coord = c;
  return h;
}

TEST(Metrics, ExactExposition) {
  const std::string expected =
      R"(# HELP stepwatch_job_info The job's owner and class from its spec; always 1.
# TYPE stepwatch_job_info gauge
stepwatch_job_info{job_id="train-1",host="node-a",owner="ml-team",job_class="llm"} 1
# HELP stepwatch_job_state 1 for the job's current verdict state, 0 for the others.
# TYPE stepwatch_job_state gauge
stepwatch_job_state{job_id="train-1",state="starting"} 0
stepwatch_job_state{job_id="train-1",state="healthy"} 0
stepwatch_job_state{job_id="train-1",state="slow"} 1
stepwatch_job_state{job_id="train-1",state="suspect"} 0
stepwatch_job_state{job_id="train-1",state="stalled"} 0
stepwatch_job_state{job_id="train-1",state="dead"} 0
stepwatch_job_state{job_id="train-1",state="finished"} 0
stepwatch_job_state{job_id="train-1",state="preempted"} 0
# HELP stepwatch_job_cause 1 for the cause of the job's verdict (none unless stalled), 0 for the others.
# TYPE stepwatch_job_cause gauge
stepwatch_job_cause{job_id="train-1",cause="none"} 1
stepwatch_job_cause{job_id="train-1",cause="collective"} 0
stepwatch_job_cause{job_id="train-1",cause="io"} 0
stepwatch_job_cause{job_id="train-1",cause="host"} 0
stepwatch_job_cause{job_id="train-1",cause="init"} 0
stepwatch_job_cause{job_id="train-1",cause="phase-overrun"} 0
stepwatch_job_cause{job_id="train-1",cause="rank-silent"} 0
stepwatch_job_cause{job_id="train-1",cause="unknown"} 0
# HELP stepwatch_job_step Highest step any rank of the job committed.
# TYPE stepwatch_job_step gauge
stepwatch_job_step{job_id="train-1"} 42
# HELP stepwatch_job_step_age_seconds Age of the newest step of the job's slowest rank.
# TYPE stepwatch_job_step_age_seconds gauge
stepwatch_job_step_age_seconds{job_id="train-1"} 10
# HELP stepwatch_job_expected_interval_seconds How long a step normally takes, from the spec or learned from the run.
# TYPE stepwatch_job_expected_interval_seconds gauge
stepwatch_job_expected_interval_seconds{job_id="train-1"} 2.5
# HELP stepwatch_rank_step Last step the rank committed.
# TYPE stepwatch_rank_step gauge
stepwatch_rank_step{job_id="train-1",rank="0",host="node-a"} 42
# HELP stepwatch_rank_step_age_seconds Time since the rank committed its last step.
# TYPE stepwatch_rank_step_age_seconds gauge
stepwatch_rank_step_age_seconds{job_id="train-1",rank="0",host="node-a"} 10
# HELP stepwatch_rank_phase_info The rank's current phase; always 1.
# TYPE stepwatch_rank_phase_info gauge
stepwatch_rank_phase_info{job_id="train-1",rank="0",host="node-a",phase="train"} 1
stepwatch_rank_phase_info{job_id="train-1",rank="1",host="node-a",phase="init"} 1
# HELP stepwatch_rank_phase_age_seconds Time since the rank entered its current phase.
# TYPE stepwatch_rank_phase_age_seconds gauge
stepwatch_rank_phase_age_seconds{job_id="train-1",rank="0",host="node-a"} 5
stepwatch_rank_phase_age_seconds{job_id="train-1",rank="1",host="node-a"} 30
# HELP stepwatch_rank_beat_age_seconds Time since the rank's last beat inside a long phase.
# TYPE stepwatch_rank_beat_age_seconds gauge
stepwatch_rank_beat_age_seconds{job_id="train-1",rank="0",host="node-a"} 2
# HELP stepwatch_rank_checkpoint_step Step of the rank's last committed checkpoint.
# TYPE stepwatch_rank_checkpoint_step gauge
stepwatch_rank_checkpoint_step{job_id="train-1",rank="0",host="node-a"} 40
# HELP stepwatch_rank_checkpoint_age_seconds Time since the rank's last checkpoint commit.
# TYPE stepwatch_rank_checkpoint_age_seconds gauge
stepwatch_rank_checkpoint_age_seconds{job_id="train-1",rank="0",host="node-a"} 100
# HELP stepwatch_gpu_sm_utilization_ratio Share of time a kernel ran on a GPU the job holds (0..1).
# TYPE stepwatch_gpu_sm_utilization_ratio gauge
stepwatch_gpu_sm_utilization_ratio{job_id="train-1",host="node-a",gpu="0"} 0.87
# HELP stepwatch_gpu_memory_used_bytes Device memory in use on a GPU the job holds.
# TYPE stepwatch_gpu_memory_used_bytes gauge
stepwatch_gpu_memory_used_bytes{job_id="train-1",host="node-a",gpu="0"} 1024
# HELP stepwatch_job_incidents_total Incidents opened for the job since the agent started.
# TYPE stepwatch_job_incidents_total counter
stepwatch_job_incidents_total{job_id="train-1"} 1
# HELP stepwatch_job_actions_total Runbook actions taken for the job since the agent started, by action.
# TYPE stepwatch_job_actions_total counter
stepwatch_job_actions_total{job_id="train-1",action="ack"} 2
stepwatch_job_actions_total{job_id="train-1",action="cleanup"} 0
stepwatch_job_actions_total{job_id="train-1",action="collect"} 0
stepwatch_job_actions_total{job_id="train-1",action="note"} 0
stepwatch_job_actions_total{job_id="train-1",action="page"} 1
stepwatch_job_actions_total{job_id="train-1",action="page-failed"} 0
stepwatch_job_actions_total{job_id="train-1",action="preempt"} 0
stepwatch_job_actions_total{job_id="train-1",action="restart"} 0
stepwatch_job_actions_total{job_id="train-1",action="resume"} 0
# HELP stepwatch_agent_poll_duration_seconds How long the agent's last poll of all jobs took.
# TYPE stepwatch_agent_poll_duration_seconds gauge
stepwatch_agent_poll_duration_seconds 0.0015
# HELP stepwatch_agent_polls_total Polls the agent has completed.
# TYPE stepwatch_agent_polls_total counter
stepwatch_agent_polls_total 10
# HELP stepwatch_agent_beacons_read_total Beacon records the agent has read.
# TYPE stepwatch_agent_beacons_read_total counter
stepwatch_agent_beacons_read_total 20
# HELP stepwatch_agent_read_errors_total Beacon or probe reads that failed.
# TYPE stepwatch_agent_read_errors_total counter
stepwatch_agent_read_errors_total 0
# HELP stepwatch_agent_start_time_seconds When the agent started, in seconds since the Unix epoch.
# TYPE stepwatch_agent_start_time_seconds gauge
stepwatch_agent_start_time_seconds 1700000000
# HELP stepwatch_agent_consecutive_poll_failures Polls in a row that failed as a whole: no job is being watched.
# TYPE stepwatch_agent_consecutive_poll_failures gauge
stepwatch_agent_consecutive_poll_failures 2
# HELP stepwatch_agent_job_poll_failures_total Polls of one job that failed while the others went on.
# TYPE stepwatch_agent_job_poll_failures_total counter
stepwatch_agent_job_poll_failures_total 7
# HELP stepwatch_agent_store_errors_total Store writes that failed; pages went out regardless.
# TYPE stepwatch_agent_store_errors_total counter
stepwatch_agent_store_errors_total 3
)";
  EXPECT_EQ(render_metrics({sample_job()}, sample_health()), expected);
}

// A multi-node job adds stepwatch_job_leader after the cause; an agent with [coord] adds its
// coordination after its own health. Everything else is the single-node page, byte for byte.
TEST(Metrics, ExactExpositionOfAClusterAndItsCoordination) {
  const std::string single = render_metrics({sample_job()}, sample_health());
  watch::JobState follower = clustered_job();
  follower.job = "train-3";
  follower.cluster->leader = "node-b";
  follower.cluster->leads = false;
  watch::JobState unknown = clustered_job();
  unknown.job = "train-4";
  unknown.cluster->leader = "";  // etcd unreachable: no leader known
  unknown.cluster->leads = false;
  unknown.cluster->connected = false;

  std::string expected = single;
  // Only the leader family is new among the job families; the others gain the clustered jobs.
  std::string text =
      render_metrics({sample_job(), clustered_job(), follower, unknown}, coord_health());
  const std::string leader_block =
      R"(# HELP stepwatch_job_leader 1 when this node leads the multi-node job (its verdict and incident), else 0.
# TYPE stepwatch_job_leader gauge
stepwatch_job_leader{job_id="train-2",host="node-a",leader="node-a"} 1
stepwatch_job_leader{job_id="train-3",host="node-a",leader="node-b"} 0
stepwatch_job_leader{job_id="train-4",host="node-a",leader=""} 0
)";
  const std::string coord_block =
      R"(# HELP stepwatch_agent_coord_connected 1 while the agent reaches etcd and holds its node lease, else 0.
# TYPE stepwatch_agent_coord_connected gauge
stepwatch_agent_coord_connected{node="node-a"} 1
# HELP stepwatch_agent_coord_lease_age_seconds Time since the agent last renewed its node lease in etcd.
# TYPE stepwatch_agent_coord_lease_age_seconds gauge
stepwatch_agent_coord_lease_age_seconds 1.25
# HELP stepwatch_agent_coord_lease_ttl_seconds TTL of the agent's node lease in etcd.
# TYPE stepwatch_agent_coord_lease_ttl_seconds gauge
stepwatch_agent_coord_lease_ttl_seconds 10
# HELP stepwatch_agent_coord_losses_total Times the agent lost its coordination through etcd.
# TYPE stepwatch_agent_coord_losses_total counter
stepwatch_agent_coord_losses_total 2
# HELP stepwatch_agent_coord_summaries_published_total Job summaries the agent published to etcd.
# TYPE stepwatch_agent_coord_summaries_published_total counter
stepwatch_agent_coord_summaries_published_total 345
# HELP stepwatch_agent_coord_jobs_led Multi-node jobs this node leads now.
# TYPE stepwatch_agent_coord_jobs_led gauge
stepwatch_agent_coord_jobs_led 1
)";
  // With the clustered jobs' own lines taken out, the page is the single-node one plus the two
  // new blocks, each in its place.
  std::string kept;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    bool other_job = line.find("job_id=\"train-") != std::string::npos &&
                     line.find("job_id=\"train-1\"") == std::string::npos &&
                     line.rfind("stepwatch_job_leader{", 0) != 0;
    if (!other_job) kept += line + "\n";
  }
  const size_t at = expected.find("# HELP stepwatch_job_step ");
  ASSERT_NE(at, std::string::npos);
  expected.insert(at, leader_block);
  expected += coord_block;
  EXPECT_EQ(kept, expected);
  EXPECT_THAT(text, HasSubstr("stepwatch_job_step{job_id=\"train-2\"} 42\n"));
  EXPECT_THAT(text,
              HasSubstr("stepwatch_rank_step{job_id=\"train-2\",rank=\"0\",host=\"node-a\"} 42\n"));
}

TEST(Metrics, CoordinationLostAndNeverRenewed) {
  watch::AgentHealth h = coord_health();
  h.coord->connected = false;
  h.coord->error = "etcd: connection refused";
  h.coord->lease_age_ns = -1;
  h.coord->lease_ttl_ns = 0;
  h.coord->jobs_led = 0;
  std::string text = render_metrics({sample_job()}, h);
  EXPECT_THAT(text, HasSubstr("\nstepwatch_agent_coord_connected{node=\"node-a\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("\nstepwatch_agent_coord_jobs_led 0\n"));
  EXPECT_THAT(text, HasSubstr("\nstepwatch_agent_coord_losses_total 2\n"));
  EXPECT_THAT(text, Not(HasSubstr("stepwatch_agent_coord_lease_age_seconds")))
      << "never renewed: absent, not 0";
  EXPECT_THAT(text, Not(HasSubstr("stepwatch_agent_coord_lease_ttl_seconds")));
  EXPECT_THAT(text, Not(HasSubstr("stepwatch_job_leader"))) << "a single-node job";

  // Neither a single-node job nor an agent without [coord] shows any of it.
  std::string single = render_metrics({sample_job()}, sample_health());
  EXPECT_THAT(single, Not(HasSubstr("coord")));
  EXPECT_THAT(single, Not(HasSubstr("leader")));
  // A retired clustered job stops exporting its leadership with the rest.
  watch::JobState gone = clustered_job();
  gone.retired = true;
  EXPECT_THAT(render_metrics({gone}, {}), Not(HasSubstr("stepwatch_job_leader")));
}

TEST(Metrics, EscapesLabelValues) {
  EXPECT_EQ(escape_label_value(R"(a\b"c)"
                               "\nd"),
            R"(a\\b\"c\nd)");
  watch::JobState j = sample_job();
  // ranks[1] is rank 0 (sample_job pushes rank 1 first).
  j.observation.ranks[1].phase = "eval \"val\"\nshard\\2";
  j.observation.ranks[1].host = "node\"b";
  std::string text = render_metrics({j}, {});
  EXPECT_THAT(
      text,
      HasSubstr(
          R"(stepwatch_rank_phase_info{job_id="train-1",rank="0",host="node\"b",phase="eval \"val\"\nshard\\2"} 1)"
          "\n"));
}

TEST(Metrics, StateAndCauseAreOneHot) {
  watch::JobState j = sample_job();
  j.verdict.state = detect::State::kStalled;
  j.verdict.cause = detect::Cause::kPhaseOverrun;
  std::string text = render_metrics({j}, {});
  EXPECT_THAT(text, HasSubstr("stepwatch_job_state{job_id=\"train-1\",state=\"stalled\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("stepwatch_job_state{job_id=\"train-1\",state=\"slow\"} 0\n"));
  EXPECT_THAT(text,
              HasSubstr("stepwatch_job_cause{job_id=\"train-1\",cause=\"phase-overrun\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("stepwatch_job_cause{job_id=\"train-1\",cause=\"none\"} 0\n"));
  std::istringstream in(text);
  int states = 0, causes = 0, state_ones = 0, cause_ones = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("stepwatch_job_state{", 0) == 0) {
      ++states;
      state_ones += line.back() == '1';
    } else if (line.rfind("stepwatch_job_cause{", 0) == 0) {
      ++causes;
      cause_ones += line.back() == '1';
    }
  }
  EXPECT_EQ(states, 8);
  EXPECT_EQ(causes, 8);
  EXPECT_EQ(state_ones, 1);
  EXPECT_EQ(cause_ones, 1);
}

// The backticked words of the table row of docs/<file> that starts with `row`.
std::set<std::string> documented(const std::string& file, const std::string& row) {
  const char* dir = std::getenv("STEPWATCH_SOURCE_DIR");
  std::ifstream in(std::string(dir != nullptr ? dir : ".") + "/docs/" + file);
  EXPECT_TRUE(in) << "docs/" << file << " not found";
  static const std::regex kWord("`([a-z-]+)`");
  std::set<std::string> words;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(row)) continue;
    const auto from = line.cbegin() + static_cast<std::ptrdiff_t>(row.size());
    for (std::sregex_iterator it(from, line.cend(), kWord), end; it != end; ++it)
      words.insert((*it)[1]);
    return words;
  }
  ADD_FAILURE() << "docs/" << file << " has no row " << row;
  return words;
}

// What an exporter or API client reads from the docs is every state and cause there is (a new
// one, like "preempted", is added to the docs with it).
TEST(Metrics, TheDocsListEveryStateAndCause) {
  std::set<std::string> states, causes;
  for (detect::State s : detect::kAllStates) states.insert(detect::state_name(s));
  for (detect::Cause c : detect::kAllCauses) causes.insert(detect::cause_name(c));
  EXPECT_EQ(documented("metrics.md", "| `stepwatch_job_state` |"), states);
  EXPECT_EQ(documented("metrics.md", "| `stepwatch_job_cause` |"), causes);
  EXPECT_EQ(documented("api.md", "| `state` |"), states);
  EXPECT_EQ(documented("api.md", "| `cause` |"), causes);
}

TEST(Metrics, AbsentValuesAreOmitted) {
  watch::JobState j = sample_job();
  j.verdict.last_step.reset();
  j.verdict.expected_interval_ns = 0;
  j.gpus.reset();
  for (auto& r : j.observation.ranks) {
    r.step.reset();
    r.beat_at.reset();
    r.checkpoint.reset();
  }
  std::string text = render_metrics({j}, watch::AgentHealth{});
  for (const char* family :
       {"stepwatch_job_step", "stepwatch_job_expected_interval_seconds", "stepwatch_rank_step",
        "stepwatch_rank_beat_age_seconds", "stepwatch_rank_checkpoint", "stepwatch_gpu_",
        "stepwatch_agent_poll_duration_seconds", "stepwatch_agent_start_time_seconds"}) {
    EXPECT_THAT(text, Not(HasSubstr(family))) << family;
  }
  // Counters are real counts: zero is a value, not an absence.
  EXPECT_THAT(text, HasSubstr("\nstepwatch_agent_polls_total 0\n"));
  EXPECT_THAT(text, HasSubstr("stepwatch_rank_phase_age_seconds{job_id=\"train-1\",rank=\"1\""));
}

TEST(Metrics, AgesFromAnotherHostUseTheWallClock) {
  watch::JobState j = sample_job();
  auto& r0 = j.observation.ranks[1];
  ASSERT_EQ(r0.rank, 0);
  r0.host = "node-b";
  r0.step_at = {kWall - 7 * kNsPerSec, 1};  // its monotonic clock means nothing here
  std::string text = render_metrics({j}, {});
  EXPECT_THAT(
      text,
      HasSubstr(
          "stepwatch_rank_step_age_seconds{job_id=\"train-1\",rank=\"0\",host=\"node-b\"} 7\n"));
}

TEST(Metrics, CountersAndOrdering) {
  watch::JobState a = sample_job();
  watch::JobState b = sample_job();
  b.job = "a-first";
  b.incidents_total = 3;
  b.actions_total = {{"preempt", 4}};
  watch::JobState gone = sample_job();
  gone.job = "gone";
  gone.retired = true;
  std::string text = render_metrics({a, b, gone}, sample_health());
  EXPECT_THAT(text, HasSubstr("stepwatch_job_incidents_total{job_id=\"a-first\"} 3\n"
                              "stepwatch_job_incidents_total{job_id=\"train-1\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("stepwatch_job_actions_total{job_id=\"a-first\",action=\"preempt\"} 4\n"
                        "stepwatch_job_actions_total{job_id=\"a-first\",action=\"restart\"} 0\n"
                        "stepwatch_job_actions_total{job_id=\"a-first\",action=\"resume\"} 0\n"
                        "stepwatch_job_actions_total{job_id=\"train-1\",action=\"ack\"} 2\n"));
  EXPECT_THAT(text, Not(HasSubstr("\"gone\"")));
  EXPECT_EQ(text, render_metrics({b, gone, a}, sample_health()));  // input order does not matter
}

// Counters start at 0 for every action kind, so increase() sees a job's first page, preempt or
// failed page (the alert rules' StepwatchPageNotDelivered); a kind the list does not know is
// still exported, in name order.
TEST(Metrics, EveryActionCounterStartsAtZero) {
  watch::JobState j = sample_job();
  j.actions_total = {{"zz-new-kind", 1}};
  const std::string text = render_metrics({j}, sample_health());
  std::string want;
  for (std::string_view kind : store::action_kind::kAll)
    want +=
        fmt::format("stepwatch_job_actions_total{{job_id=\"train-1\",action=\"{}\"}} 0\n", kind);
  want += "stepwatch_job_actions_total{job_id=\"train-1\",action=\"zz-new-kind\"} 1\n";
  EXPECT_THAT(text, HasSubstr(want));
  EXPECT_TRUE(
      std::is_sorted(std::begin(store::action_kind::kAll), std::end(store::action_kind::kAll)))
      << "kAll is in name order, as the exposition is";
}

// The node-fault rules' view: a retired job's storm is not exported, hosts are sorted, and a
// host that is not suspect has no suspect series (absent, not 0).
NodeFaultSnapshot node_faults() {
  NodeFaultSnapshot nf;
  nf.window_ns = 24 * 3600 * kNsPerSec;
  nf.jobs["train-1"].storm = RestartStormView{5, 1800 * kNsPerSec, "5 incarnations ..."};
  nf.jobs["gone"].storm = RestartStormView{6, 1800 * kNsPerSec, "6 incarnations ..."};
  nf.hosts.push_back({"gpu-09", 1, 1, false, {}});
  nf.hosts.push_back({"gpu-07", 3, 4, true, {"implicated in 3 jobs ..."}});
  return nf;
}

TEST(Metrics, SuspectHostsImplicationsAndStorms) {
  watch::JobState gone = sample_job();
  gone.job = "gone";
  gone.retired = true;
  NodeFaultSnapshot nf = node_faults();
  std::string text = render_metrics({sample_job(), gone}, sample_health(), &nf);
  EXPECT_THAT(text, HasSubstr("# HELP stepwatch_job_restart_storm 1 while the job is in a restart "
                              "storm (too many incarnations started in the window); absent "
                              "otherwise.\n# TYPE stepwatch_job_restart_storm gauge\n"
                              "stepwatch_job_restart_storm{job_id=\"train-1\"} 1\n# HELP "));
  EXPECT_THAT(text, HasSubstr("# TYPE stepwatch_host_suspect gauge\n"
                              "stepwatch_host_suspect{host=\"gpu-07\"} 1\n# HELP "));
  EXPECT_THAT(text, HasSubstr("# TYPE stepwatch_host_implications gauge\n"
                              "stepwatch_host_implications{host=\"gpu-07\"} 4\n"
                              "stepwatch_host_implications{host=\"gpu-09\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("gpu-09\"} 0")));
  EXPECT_THAT(text, Not(HasSubstr("\"gone\"")));

  // No storm, no suspect: the families are absent, not 0; no snapshot: the page is as before.
  NodeFaultSnapshot calm;
  calm.hosts.push_back({"gpu-09", 1, 1, false, {}});
  text = render_metrics({sample_job()}, sample_health(), &calm);
  EXPECT_THAT(text, Not(HasSubstr("stepwatch_job_restart_storm")));
  EXPECT_THAT(text, Not(HasSubstr("stepwatch_host_suspect")));
  EXPECT_THAT(text, HasSubstr("stepwatch_host_implications{host=\"gpu-09\"} 1\n"));
  EXPECT_EQ(render_metrics({sample_job()}, sample_health(), nullptr),
            render_metrics({sample_job()}, sample_health()));
}

// Every sample line is `name{labels} value` with valid names, and every family has exactly one
// HELP and one TYPE line, both before its first sample, with its samples contiguous.
TEST(Metrics, ParsesBack) {
  watch::JobState odd = sample_job();
  odd.job = "odd";
  odd.observation.ranks[0].phase = "a\"b\\c\nd";
  NodeFaultSnapshot nf = node_faults();
  std::string text = render_metrics({sample_job(), odd, clustered_job()}, coord_health(), &nf);
  ASSERT_FALSE(text.empty());
  ASSERT_EQ(text.back(), '\n');

  const std::regex name_re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  const std::regex sample_re(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? (NaN|[+-]Inf|-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?))");
  const std::regex help_re("# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+");
  const std::regex type_re("# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge)");
  std::map<std::string, int> helps, types;
  std::set<std::string> finished;  // families whose samples are over
  std::string current;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, help_re)) {
      ++helps[m[1]];
      if (!current.empty()) finished.insert(current);
      current = m[1];
    } else if (std::regex_match(line, m, type_re)) {
      ++types[m[1]];
      EXPECT_EQ(m[1], current) << line;
      if (m[2] == "counter") {
        EXPECT_TRUE(m[1].str().ends_with("_total")) << line;
      }
    } else {
      ASSERT_TRUE(std::regex_match(line, m, sample_re)) << line;
      EXPECT_TRUE(std::regex_match(m[1].str(), name_re));
      EXPECT_EQ(m[1], current) << "sample outside its family: " << line;
      EXPECT_EQ(helps[m[1]], 1) << line;
      EXPECT_EQ(types[m[1]], 1) << line;
      EXPECT_FALSE(finished.count(m[1])) << line;
      EXPECT_TRUE(m[1].str().starts_with("stepwatch_")) << line;
    }
  }
  for (const auto& [name, n] : helps) EXPECT_EQ(n, 1) << name;
  for (const auto& [name, n] : types) EXPECT_EQ(n, 1) << name;
}

#ifdef STEPWATCH_PROMTOOL
// The real parser and linter: promtool check metrics reads the exposition from stdin.
TEST(Metrics, PromtoolAcceptsTheExposition) {
  watch::JobState odd = sample_job();
  odd.job = "odd";
  odd.observation.ranks[0].phase = "a\"b\\c\nd";
  NodeFaultSnapshot nf = node_faults();
  std::string text = render_metrics({sample_job(), odd, clustered_job()}, coord_health(), &nf);
  std::string cmd = std::string(STEPWATCH_PROMTOOL) + " check metrics 2>&1";
  FILE* p = popen(cmd.c_str(), "w");
  ASSERT_NE(p, nullptr);
  fwrite(text.data(), 1, text.size(), p);
  int rc = pclose(p);
  EXPECT_EQ(rc, 0) << "promtool check metrics rejected the exposition (its output is above)";
}
#endif

}  // namespace
}  // namespace stepwatch::serve
