// Multi-node agents: two Agent instances as two "nodes" (each its own node name, beacon root,
// state dir and specs), one real etcd (tests/support/etcd_server.h), a real page receiver, and
// one 2-rank job whose rank 0 writes under node a's root and rank 1 under node b's. Leases run
// on real time (TTL 1 s); the detector's time is injected into poll_once as real time plus an
// offset, so a stall needs no sleeping, a lease expiry does.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "src/agent/agent.h"
#include "src/common/host.h"
#include "src/contract/beacon_writer.h"
#include "src/coord/etcd_client.h"
#include "tests/support/etcd_server.h"
#include "tests/support/page_receiver.h"

namespace stepwatch::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

class AgentCoordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / fmt::format("sw-coord-{}-{}", ::getpid(), counter_++);
    fs::remove_all(base_);
    for (const char* n : {"a", "b"}) {
      fs::create_directories(base_ / n / "beacons");
      fs::create_directories(base_ / n / "specs");
    }
    t0_ = SystemClock::instance().now();
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string root(const std::string& node) const { return (base_ / node / "beacons").string(); }

  AgentConfig config(const std::string& node, const std::string& endpoint) const {
    AgentConfig c;
    c.beacon_roots = {root(node)};
    c.state_dir = (base_ / node / "state").string();
    c.specs_dir = (base_ / node / "specs").string();
    c.gpu = false;
    CoordConfig k;
    k.endpoints = {endpoint};
    k.node_name = node;
    k.lease_ttl_ns = kNsPerSec;
    k.request_timeout_ns = 500 * kNsPerMs;
    c.coord = k;
    return c;
  }
  std::unique_ptr<Agent> open(const std::string& node, const std::string& endpoint) {
    auto a = Agent::open(config(node, endpoint));
    EXPECT_TRUE(a.ok()) << a.error().message;
    return a.ok() ? std::move(*a) : nullptr;
  }
  // The same spec on both nodes: a step a second, grace 2, data phases of at most 2 s.
  void write_specs(const std::string& job, const std::string& url) {
    for (const char* n : {"a", "b"}) {
      std::ofstream((base_ / n / "specs" / (job + ".toml")).string()) << fmt::format(
          "owner = \"team-llm\"\nexpected_interval = \"1s\"\ngrace_intervals = 2\n"
          "[phases]\ndata = \"2s\"\n"
          "[[runbook.pager]]\nurl = \"{}\"\nretries = 0\ntimeout = \"2s\"\n",
          url);
    }
  }
  std::unique_ptr<contract::BeaconWriter> beacon(const std::string& node, const std::string& job,
                                                 int rank, int world) {
    contract::Identity id;
    id.dir = root(node);
    id.job = job;
    id.host = short_hostname();  // one machine: the node name tells the "nodes" apart
    id.rank = rank;
    id.world_size = world;
    auto w = contract::BeaconWriter::create(id);
    EXPECT_TRUE(w.ok()) << w.error().message;
    return w.ok() ? std::move(*w) : nullptr;
  }
  // Real time now plus `s` seconds of injected time.
  Stamp later(double s) const {
    Stamp n = SystemClock::instance().now();
    auto ns = static_cast<int64_t>(s * 1e9);
    return {n.wall_ns + ns, n.mono_ns + ns};
  }
  static void poll(Agent& a, Stamp at) {
    auto st = a.poll_once(at);
    ASSERT_TRUE(st.ok()) << st.error().message;
  }

  static inline int counter_ = 0;
  fs::path base_;
  Stamp t0_;
};

TEST_F(AgentCoordTest, OneLeaderMergesBothNodesRanksAndPagesOnceNamingTheRemoteCulprit) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_specs("pretrain", rx.url());
  auto w0 = beacon("a", "pretrain", 0, 2);
  auto w1 = beacon("b", "pretrain", 1, 2);
  for (int i = 1; i <= 6; ++i) {
    w0->step(i);
    w1->step(i);
    std::this_thread::sleep_for(2ms);
  }
  auto a = open("a", etcd.endpoint());
  auto b = open("b", etcd.endpoint());
  poll(*a, later(0));  // a publishes first: its key has the lowest create revision
  poll(*b, later(0));
  poll(*a, later(0.1));  // and now reads b's summary
  auto ja = a->job("pretrain");
  ASSERT_TRUE(ja && ja->cluster);
  EXPECT_TRUE(ja->cluster->leads);
  EXPECT_EQ(ja->cluster->leader, "a");
  ASSERT_EQ(ja->observation.ranks.size(), 2u) << ja->verdict.summary;
  EXPECT_EQ(ja->cluster->nodes.size(), 2u);
  EXPECT_EQ(ja->verdict.state, detect::State::kHealthy) << ja->verdict.summary;
  std::set<std::string> hosts;
  for (const auto& r : ja->observation.ranks) hosts.insert(r.host);
  EXPECT_EQ(hosts, (std::set<std::string>{"a", "b"}));
  auto jb = b->job("pretrain");
  ASSERT_TRUE(jb && jb->cluster);
  EXPECT_FALSE(jb->cluster->leads);
  EXPECT_EQ(jb->cluster->leader, "a");
  // A follower shows the leader's view of the whole job (written when a judged it).
  poll(*b, later(0.2));
  jb = b->job("pretrain");
  EXPECT_EQ(jb->observation.ranks.size(), 2u);
  EXPECT_EQ(jb->verdict.summary, a->job("pretrain")->verdict.summary);
  ASSERT_TRUE(jb->cluster);
  EXPECT_EQ(jb->cluster->nodes.size(), 2u);  // every node, as the leader knows them

  // Rank 1, on node b, hangs in a data fetch; rank 0, on a, waits in the next collective.
  w1->phase_begin("data");
  for (double s = 0.5; s <= 4.0; s += 0.5) {
    poll(*b, later(s));
    poll(*a, later(s));
  }
  ASSERT_TRUE(rx.wait_for(1));
  for (int i = 0; i < 5; ++i) {  // a records the delivery; neither pages again
    std::this_thread::sleep_for(20ms);
    poll(*a, later(4.5));
    poll(*b, later(4.5));
  }
  EXPECT_EQ(rx.count(), 1u);
  json page = json::parse(rx.body(0));
  EXPECT_EQ(page["state"], "stalled");
  EXPECT_EQ(page["cause"], "collective");
  ASSERT_FALSE(page["culprits"].empty()) << page.dump();
  EXPECT_EQ(page["culprits"][0]["rank"], 1);
  EXPECT_EQ(page["culprits"][0]["host"], "b");
  EXPECT_EQ(page["host"], "a");
  std::string incident_id = page["incident_id"];
  ja = a->job("pretrain");
  EXPECT_NE(ja->verdict.summary.find("rank 1 on b"), std::string::npos) << ja->verdict.summary;

  // The incident is the job's, in etcd: both nodes list it, with the same id.
  auto from_b = b->incidents("pretrain", 10);
  ASSERT_TRUE(from_b.ok()) << from_b.error().message;
  ASSERT_FALSE(from_b->empty());
  EXPECT_EQ(std::to_string(from_b->front().id), incident_id);
  EXPECT_TRUE(from_b->front().is_open());
  EXPECT_TRUE(from_b->front().delivered_at_ns.has_value());

  // Ack anywhere: acked through node b while a leads.
  auto acked = b->ack("pretrain", "alice", "looking");
  ASSERT_TRUE(acked.ok()) << acked.error().message;
  ASSERT_TRUE(acked->has_value());
  EXPECT_EQ(std::to_string((*acked)->id), incident_id);
  auto from_a = a->incidents("pretrain", 10);
  ASSERT_TRUE(from_a.ok());
  EXPECT_EQ(from_a->front().acked_by, "alice");

  // a stops (as if SIGKILLed or SIGSTOPped): its lease lapses, b takes the job over and goes on
  // with the same incident, without a second page.
  std::this_thread::sleep_for(2500ms);
  for (int i = 0; i < 3; ++i) {
    poll(*b, later(7 + i));
    std::this_thread::sleep_for(20ms);
  }
  jb = b->job("pretrain");
  EXPECT_TRUE(jb->cluster->leads);
  EXPECT_EQ(jb->cluster->leader, "b");
  EXPECT_EQ(jb->verdict.state, detect::State::kStalled) << jb->verdict.summary;
  // b never read a's summary, but the roster a left names a's rank: rank-silent, not missing.
  EXPECT_EQ(jb->observation.ranks.size(), 2u);
  EXPECT_EQ(jb->verdict.cause, detect::Cause::kRankSilent) << jb->verdict.summary;
  ASSERT_FALSE(jb->verdict.culprits.empty());
  EXPECT_EQ(jb->verdict.culprits[0].host, "a");
  EXPECT_EQ(rx.count(), 1u);
  from_b = b->incidents("pretrain", 10);
  ASSERT_TRUE(from_b.ok());
  EXPECT_EQ(std::to_string(from_b->front().id), incident_id);
  EXPECT_TRUE(from_b->front().is_open());

  // a comes back (SIGCONT): its old lease is gone, so it is at the back of the line and its
  // runbook has nothing to write; nobody pages again.
  for (int i = 0; i < 3; ++i) {
    poll(*a, later(10 + i));
    poll(*b, later(10 + i));
  }
  ja = a->job("pretrain");
  EXPECT_FALSE(ja->cluster->leads);
  EXPECT_EQ(ja->cluster->leader, "b");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rx.count(), 1u);
  EXPECT_EQ(a->health().coord->jobs_led, 0u);
  EXPECT_EQ(b->health().coord->jobs_led, 1u);
}

TEST_F(AgentCoordTest, ANodeWhoseSummaryLapsesTurnsItsRanksRankSilent) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_specs("pretrain", rx.url());
  auto w0 = beacon("a", "pretrain", 0, 2);
  auto w1 = beacon("b", "pretrain", 1, 2);
  for (int i = 1; i <= 6; ++i) {
    w0->step(i);
    w1->step(i);
  }
  auto a = open("a", etcd.endpoint());
  auto b = open("b", etcd.endpoint());
  poll(*a, later(0));
  poll(*b, later(0));
  poll(*a, later(0.1));
  ASSERT_EQ(a->job("pretrain")->observation.ranks.size(), 2u);
  b.reset();  // node b dies: its agent is gone, its lease runs out
  std::this_thread::sleep_for(2500ms);
  w0->step(7);
  poll(*a, later(0.2));
  auto ja = a->job("pretrain");
  EXPECT_EQ(ja->verdict.state, detect::State::kStalled) << ja->verdict.summary;
  EXPECT_EQ(ja->verdict.cause, detect::Cause::kRankSilent) << ja->verdict.summary;
  ASSERT_FALSE(ja->verdict.culprits.empty());
  EXPECT_EQ(ja->verdict.culprits[0].rank, 1);
  EXPECT_EQ(ja->verdict.culprits[0].host, "b");
  ASSERT_TRUE(rx.wait_for(1));
  EXPECT_EQ(json::parse(rx.body(0))["cause"], "rank-silent");
}

TEST_F(AgentCoordTest, WithoutEtcdAgentsPageLocallyAndNeverActThenHandBack) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_specs("pretrain", rx.url());
  auto w0 = beacon("a", "pretrain", 0, 1);
  for (int i = 1; i <= 6; ++i) w0->step(i);
  auto a = open("a", etcd.endpoint());
  poll(*a, later(0));
  EXPECT_TRUE(a->health().coord->connected);
  etcd.kill();
  poll(*a, later(5));  // no step for 5 s: stalled, seen without etcd
  auto h = a->health();
  ASSERT_TRUE(h.coord);
  EXPECT_FALSE(h.coord->connected);
  EXPECT_FALSE(h.coord->error.empty());
  ASSERT_TRUE(rx.wait_for(1));  // paged from this node's own incident
  auto local = a->incidents("", 10);
  ASSERT_TRUE(local.ok());
  ASSERT_EQ(local->size(), 1u);
  EXPECT_TRUE(local->front().is_open());

  etcd.restart();  // same data dir: coordination resumes, the job's leader takes the incident
  for (int i = 0; i < 3; ++i) poll(*a, later(6 + i));
  EXPECT_TRUE(a->health().coord->connected);
  local = a->incidents("", 10);
  ASSERT_TRUE(local.ok());
  bool local_open = false;
  for (const auto& i : *local) {
    if (i.id == 1 && i.is_open()) local_open = true;
  }
  EXPECT_FALSE(local_open);
  auto job = a->incidents("pretrain", 10);
  ASSERT_TRUE(job.ok());
  ASSERT_FALSE(job->empty());
  EXPECT_TRUE(job->front().is_open());  // the job's incident, in etcd, opened by its leader
}

// The job's preempt: the leader orders it once the ack timeout passed, each node's agent ends its
// own proven rank and reports, and the leader moves the job to its next incarnation for the
// registered `stepwatch run --coord` launcher.
class AgentCoordPreemptTest : public AgentCoordTest {
 protected:
  void TearDown() override {
    for (pid_t c : children_) {
      ::kill(c, SIGKILL);
      ::waitpid(c, nullptr, 0);
    }
    AgentCoordTest::TearDown();
  }
  // A trainer rank in its own process under node's root: 8 quick steps, then it hangs.
  pid_t hung_rank(const std::string& node, int rank) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    pid_t c = ::fork();
    if (c == 0) {
      ::close(ready[0]);
      contract::Identity id;
      id.dir = root(node);
      id.job = "pretrain";
      id.host = short_hostname();
      id.rank = rank;
      id.world_size = 2;
      auto w = contract::BeaconWriter::create(id);
      if (!w) ::_exit(2);
      for (int i = 1; i <= 8; ++i) (*w)->step(i);
      (*w)->checkpoint_committed("step_8", 8);
      if (::write(ready[1], "r", 1) != 1) ::_exit(3);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char ch = 0;
    EXPECT_EQ(::read(ready[0], &ch, 1), 1);
    ::close(ready[0]);
    children_.push_back(c);
    return c;
  }
  bool ended_within(pid_t pid, int ms, int* status) {
    for (int i = 0; i < ms / 10; ++i) {
      if (::waitpid(pid, status, WNOHANG) == pid) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  std::unique_ptr<Agent> open_preempting(const std::string& node, const std::string& endpoint) {
    AgentConfig c = config(node, endpoint);
    c.preempt_jobs = {"pretrain"};
    auto a = Agent::open(c);
    EXPECT_TRUE(a.ok()) << a.error().message;
    return a.ok() ? std::move(*a) : nullptr;
  }
  void write_preempt_specs(const std::string& url) {
    for (const char* n : {"a", "b"}) {
      std::ofstream((base_ / n / "specs" / "pretrain.toml").string()) << fmt::format(
          "owner = \"team-llm\"\nexpected_interval = \"100ms\"\ngrace_intervals = 2\n"
          "[runbook]\nack_timeout = \"1s\"\npreempt_grace = \"2s\"\n"
          "[[runbook.pager]]\nurl = \"{}\"\nretries = 0\ntimeout = \"2s\"\n",
          url);
    }
  }
  std::vector<pid_t> children_;
};

// Polls past the ack timeout until the caller has what it waits for. The fake clock moves 10 ms
// a poll, from 1.5 s to at most 3.5 s; the ranks' ends are real, and a loaded machine stretches
// them, so the polls go on for up to 30 s of real time rather than a fixed count.
class PollPast {
 public:
  bool next() {
    if (i_ > 0) std::this_thread::sleep_for(20ms);
    ++i_;
    return std::chrono::steady_clock::now() < give_up_;
  }
  double at() const { return 1.5 + 0.01 * std::min(i_ - 1, 200); }

 private:
  int i_ = 0;
  std::chrono::steady_clock::time_point give_up_ = std::chrono::steady_clock::now() + 30s;
};

TEST_F(AgentCoordPreemptTest, EachNodeEndsItsOwnRankOnceAndTheJobMovesToItsNextIncarnation) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_preempt_specs(rx.url());
  pid_t r0 = hung_rank("a", 0);
  pid_t r1 = hung_rank("b", 1);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  // A `stepwatch run --coord` of the job is registered: relaunching is someone's job.
  ASSERT_TRUE(etcd_client.put("/stepwatch/v1/jobs/pretrain/launchers/a", "{}").ok());
  auto a = open_preempting("a", etcd.endpoint());
  auto b = open_preempting("b", etcd.endpoint());
  std::this_thread::sleep_for(400ms);
  poll(*a, later(0));
  poll(*b, later(0));
  poll(*a, later(0.1));
  ASSERT_EQ(a->job("pretrain")->verdict.state, detect::State::kStalled)
      << a->job("pretrain")->verdict.summary;
  int status = 0;
  EXPECT_FALSE(ended_within(r0, 50, &status)) << "the owner has the ack timeout to answer";
  // Past the ack timeout: the leader orders, both nodes carry it out, the leader gathers.
  for (PollPast past; past.next();) {
    poll(*a, later(past.at()));
    poll(*b, later(past.at()));
    auto inc = etcd_client.range("/stepwatch/v1/jobs/pretrain/incarnation");
    if (inc.ok() && !inc->kvs.empty()) break;
  }
  ASSERT_TRUE(ended_within(r0, 5000, &status));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  ASSERT_TRUE(ended_within(r1, 5000, &status));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  children_.clear();

  auto inc = etcd_client.range("/stepwatch/v1/jobs/pretrain/incarnation");
  ASSERT_TRUE(inc.ok());
  ASSERT_EQ(inc->kvs.size(), 1u) << "the job was not moved to its next incarnation";
  json next = json::parse(inc->kvs[0].value);
  EXPECT_EQ(next["incarnation"], 1);
  EXPECT_EQ(next["resume_from"], "step_8");
  EXPECT_EQ(next["by"], "a");
  auto done = etcd_client.range("/stepwatch/v1/jobs/pretrain/done/", {true});
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->kvs.size(), 2u);  // one report per node
  auto incidents = b->incidents("pretrain", 10);
  ASSERT_TRUE(incidents.ok());
  ASSERT_FALSE(incidents->empty());
  EXPECT_FALSE(incidents->front().is_open());
  EXPECT_NE(incidents->front().resolution.find("relaunched as incarnation 1 from step_8"),
            std::string::npos)
      << incidents->front().resolution;
  // The ended ranks are not a new stall, and nothing is ordered or paged again.
  for (int i = 0; i < 5; ++i) {
    poll(*a, later(10 + i));
    poll(*b, later(10 + i));
  }
  EXPECT_EQ(rx.count(), 1u);
  done = etcd_client.range("/stepwatch/v1/jobs/pretrain/done/", {true});
  EXPECT_EQ(done->kvs.size(), 2u);
  auto orders = etcd_client.range("/stepwatch/v1/jobs/pretrain/orders/", {true});
  EXPECT_EQ(orders->kvs.size(), 1u);
  EXPECT_EQ(a->job("pretrain")->actions_total.count("preempt"), 1u);
  EXPECT_EQ(b->job("pretrain")->actions_total.count("preempt"), 1u);
}

TEST_F(AgentCoordPreemptTest, ANodeThatMayNotPreemptRefusesAndTheLeaderPagesItsSurvivors) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_preempt_specs(rx.url());
  pid_t r0 = hung_rank("a", 0);
  pid_t r1 = hung_rank("b", 1);
  auto a = open_preempting("a", etcd.endpoint());
  auto b = open("b", etcd.endpoint());  // b's agent does not list the job in preempt_jobs
  std::this_thread::sleep_for(400ms);
  poll(*a, later(0));
  poll(*b, later(0));
  for (PollPast past; past.next();) {
    poll(*a, later(past.at()));
    poll(*b, later(past.at()));
    if (rx.count() >= 2) break;  // the page, then the one saying the preempt left survivors
  }
  int status = 0;
  ASSERT_TRUE(ended_within(r0, 5000, &status)) << "a ends its own rank";
  EXPECT_FALSE(ended_within(r1, 200, &status)) << "b's agent may not preempt: rank 1 lives";
  ASSERT_TRUE(rx.wait_for(2));
  json escalation = json::parse(rx.body(1));
  EXPECT_NE(escalation["summary"].get<std::string>().find("preempt failed"), std::string::npos)
      << escalation.dump();
  auto done = coord::EtcdClient(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec})
                  .range("/stepwatch/v1/jobs/pretrain/done/", {true});
  ASSERT_TRUE(done.ok());
  ASSERT_EQ(done->kvs.size(), 2u);
  EXPECT_NE(done->kvs[1].value.find("does not list the job in preempt_jobs"), std::string::npos)
      << done->kvs[1].value;
}

// runbook.resume_owner = "slurm": the leader requeues the batch job its launchers name, fenced by
// the restart count they published, through a fake scontrol that keeps Restarts in a file.
class AgentCoordSlurmTest : public AgentCoordPreemptTest {
 protected:
  void write_slurm_specs(const std::string& url, const std::string& runbook = "") {
    std::string scancel = (base_ / "scancel").string();
    std::ofstream(scancel) << fmt::format("#!/bin/sh\necho \"$1\" >> {}/cancels\n", base_.string());
    fs::permissions(scancel, fs::perms::owner_all);
    std::string fake = (base_ / "scontrol").string();
    std::ofstream(fake) << fmt::format(
        "#!/bin/sh\n"
        "n=$(cat {0}/restarts)\n"
        "if [ \"$1\" = show ]; then\n"
        "  echo \"JobId=$4 JobName=train.sh UserId=root(0) JobState=RUNNING Requeue=1 "
        "Restarts=$n BatchHost=a NodeList=a,b\"\n"
        "elif [ \"$1\" = requeue ]; then\n"
        "  echo $((n + 1)) > {0}/restarts; echo \"$2\" >> {0}/requeues\n"
        "fi\n",
        base_.string());
    fs::permissions(fake, fs::perms::owner_all);
    for (const char* n : {"a", "b"}) {
      std::ofstream((base_ / n / "specs" / "pretrain.toml").string()) << fmt::format(
          "owner = \"team-llm\"\nexpected_interval = \"100ms\"\ngrace_intervals = 2\n"
          "[runbook]\nresume_owner = \"slurm\"\nack_timeout = \"1s\"\npreempt_grace = \"2s\"\n{}"
          "[slurm]\nscontrol = \"{}\"\nscancel = \"{}\"\n"
          "[[runbook.pager]]\nurl = \"{}\"\nretries = 0\ntimeout = \"2s\"\n",
          runbook, fake, scancel, url);
    }
  }
  void set_restarts(int n) { std::ofstream((base_ / "restarts").string()) << n << "\n"; }
  std::string requeues() const { return read("requeues"); }
  std::string cancels() const { return read("cancels"); }
  std::string read(const char* name) const {
    std::ifstream f((base_ / name).string());
    return std::string((std::istreambuf_iterator<char>(f)), {});
  }
  // Each node's `stepwatch run --coord` of incarnation 0, as under Slurm job 77 (or outside it).
  void register_launchers(coord::EtcdClient& etcd, std::optional<int> restarts) {
    for (const char* n : {"a", "b"}) {
      json l = {{"node", n}, {"pid", 1}, {"incarnation", 0}, {"started_at_ns", 1}};
      if (restarts) {
        l["scheduler"] = "slurm";
        l["scheduler_job"] = "77";
        l["scheduler_restarts"] = *restarts;
      }
      ASSERT_TRUE(
          etcd.put(fmt::format("/stepwatch/v1/jobs/pretrain/launchers/{}", n), l.dump()).ok());
    }
  }
  // Both hung ranks preempted past the ack timeout, until b sees the job's incident closed; its
  // resolution ("" when it never closed).
  std::string run_to_close(const std::string& endpoint) {
    hung_rank("a", 0);
    hung_rank("b", 1);
    auto a = open_preempting("a", endpoint);
    auto b = open_preempting("b", endpoint);
    std::this_thread::sleep_for(400ms);
    poll(*a, later(0));
    poll(*b, later(0));
    for (PollPast past; past.next();) {
      poll(*a, later(past.at()));
      poll(*b, later(past.at()));
      auto inc = b->incidents("pretrain", 10);
      if (inc.ok() && !inc->empty() && !inc->front().is_open()) return inc->front().resolution;
    }
    return "";
  }
};

TEST_F(AgentCoordSlurmTest, TheLeaderRequeuesTheBatchJobOnceAndRecordsIt) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url());
  set_restarts(0);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  register_launchers(etcd_client, 0);
  std::string resolution = run_to_close(etcd.endpoint());
  EXPECT_NE(resolution.find("requeued Slurm job 77 (Restarts 0 -> 1); next incarnation 1 from "
                            "step_8"),
            std::string::npos)
      << resolution;
  EXPECT_EQ(requeues(), "77\n");
  auto inc = etcd_client.range("/stepwatch/v1/jobs/pretrain/incarnation");
  ASSERT_TRUE(inc.ok());
  ASSERT_EQ(inc->kvs.size(), 1u) << "the requeue is recorded as the next incarnation";
  json next = json::parse(inc->kvs[0].value);
  EXPECT_EQ(next["incarnation"], 1);
  EXPECT_EQ(next["scheduler"], "slurm");
  EXPECT_EQ(next["scheduler_job"], "77");
  EXPECT_EQ(next["by"], "a");
  EXPECT_EQ(rx.count(), 1u);
}

// Someone else (Slurm after a node failure, an operator, a leader that died before recording its
// requeue) moved the count since the launchers started: the fence refuses a second requeue.
TEST_F(AgentCoordSlurmTest, AMovedRestartCountIsNotRequeuedAgain) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url());
  set_restarts(1);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  register_launchers(etcd_client, 0);
  std::string resolution = run_to_close(etcd.endpoint());
  EXPECT_NE(resolution.find("not requeued: Slurm job 77 was requeued already (Restarts=1, this "
                            "incarnation started at 0); the next incarnation is someone else's"),
            std::string::npos)
      << resolution;
  EXPECT_EQ(requeues(), "");
  auto inc = etcd_client.range("/stepwatch/v1/jobs/pretrain/incarnation");
  ASSERT_TRUE(inc.ok());
  EXPECT_TRUE(inc->kvs.empty()) << "nothing recorded: the rerun's launchers move it up";
}

// runbook.resume = false: the job must stay stopped, and a plain end could be requeued by Slurm.
TEST_F(AgentCoordSlurmTest, ResumeOffCancelsTheBatchJob) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url(), "resume = false\n");
  set_restarts(0);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  register_launchers(etcd_client, 0);
  std::string resolution = run_to_close(etcd.endpoint());
  EXPECT_NE(resolution.find("runbook.resume = false: Slurm job 77 cancelled"), std::string::npos)
      << resolution;
  EXPECT_EQ(cancels(), "77\n");
  EXPECT_EQ(requeues(), "");
}

TEST_F(AgentCoordSlurmTest, LaunchersOutsideSlurmAreNotRequeued) {
  test::EtcdServer etcd;
  test::Receiver rx;
  write_slurm_specs(rx.url());
  set_restarts(0);
  coord::EtcdClient etcd_client(coord::EtcdOptions{{etcd.endpoint()}, "", kNsPerSec});
  register_launchers(etcd_client, std::nullopt);
  std::string resolution = run_to_close(etcd.endpoint());
  EXPECT_NE(resolution.find("not requeued: no launcher of incarnation 0 carries a Slurm job id "
                            "(a, b run outside Slurm)"),
            std::string::npos)
      << resolution;
  EXPECT_EQ(requeues(), "");
}

}  // namespace
}  // namespace stepwatch::agent
