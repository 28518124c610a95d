// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch run --coord`, the per-node launcher of a multi-node job: the real binary, real
// child processes and signals, and a real etcd (tests/support/etcd_server.h). The test plays
// the job's leader: it writes <prefix>/jobs/<job>/incarnation as the leader would.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/contract/beacon_writer.h"
#include "src/contract/names.h"
#include "src/coord/etcd_client.h"
#include "src/coord/etcd_ledger.h"
#include "src/coord/incarnation.h"
#include "tests/cli/run_binary.h"
#include "tests/support/etcd_server.h"
#include "tests/support/temp_dir.h"

namespace stepwatch {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr const char* kPrefix = "/swtest";

// The job: says what it was given, optionally leaves a process of its group behind, and runs
// until the test creates $DONE.
constexpr const char* kJobScript = R"(#!/bin/sh
echo "inc=$STEPWATCH_INCARNATION resume=$STEPWATCH_RESUME_CHECKPOINT job=$STEPWATCH_JOB pid=$$" >> "$LOG"
if [ -n "$BG" ]; then sleep 300 & echo "bg=$!" >> "$LOG"; fi
while [ ! -e "$DONE" ]; do sleep 0.05; done
exit 0
)";

bool eventually(const std::function<bool()>& pred, double seconds) {
  auto until = SteadyClock::now() + std::chrono::duration<double>(seconds);
  while (SteadyClock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

bool alive(pid_t pid) {
  return ::kill(pid, 0) == 0;
}

// A process's state letter from /proc ('Z' zombie); '?' when gone.
char proc_state(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), {});
  auto close = s.rfind(')');
  return close == std::string::npos || close + 2 >= s.size() ? '?' : s[close + 2];
}

struct Line {
  std::string inc, resume, job;
  pid_t pid = 0;
};

class RunCoord : public ::testing::Test {
 protected:
  // One etcd for the whole suite, created on the main thread (it dies with that thread).
  static void SetUpTestSuite() { etcd_ = new test::EtcdServer(); }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }

  void SetUp() override {
    job_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    script_ = dir_ / "job.sh";
    std::ofstream(script_) << kJobScript;
  }

  void TearDown() override {
    if (launcher_ > 0 && !exit_) {
      ::kill(launcher_, SIGKILL);
      ::waitpid(launcher_, nullptr, 0);
    }
    for (pid_t p : pids_to_reap_) ::kill(p, SIGKILL);
  }

  coord::EtcdClient& etcd() {
    if (!client_) client_.emplace(coord::EtcdOptions{{etcd_->endpoint()}, "", kNsPerSec});
    return *client_;
  }

  // Starts `stepwatch run --coord` in the background, its output in files of the test's dir.
  void start(std::vector<std::string> extra = {}, const std::string& bg = "",
             std::vector<std::pair<std::string, std::string>> env = {}) {
    const char* bin = std::getenv("STEPWATCH_BIN");
    ASSERT_NE(bin, nullptr) << "ctest passes STEPWATCH_BIN";
    std::vector<std::string> args = {
        bin,       "run",      "--coord", etcd_->endpoint(), "--job", job_,    "--node",
        "n1",      "--prefix", kPrefix,   "--lease-ttl",     "2s",    "--dir", dir_ / "beacons",
        "--grace", "2s"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", "/bin/sh", script_});
    std::string out = dir_ / "stdout", err = dir_ / "stderr", log = dir_ / "log",
                done = dir_ / "done";
    exit_.reset();  // a second launcher of the test: its own exit is waited for
    pid_t pid = ::fork();
    if (pid == 0) {
      int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) ::_exit(126);
      ::setenv("LOG", log.c_str(), 1);
      ::setenv("DONE", done.c_str(), 1);
      if (!bg.empty()) ::setenv("BG", bg.c_str(), 1);
      ::unsetenv("STEPWATCH_JOB");
      ::unsetenv("MASTER_PORT");
      for (const char* v : {"SLURM_JOB_ID", "SLURM_RESTART_COUNT", "SLURMD_NODENAME",
                            "KUBERNETES_SERVICE_HOST", "STEPWATCH_INCARNATION"})
        ::unsetenv(v);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin, argv.data());
      ::_exit(127);
    }
    ASSERT_GT(pid, 0);
    launcher_ = pid;
  }

  // The launcher's exit status once it exited within `seconds`.
  std::optional<int> wait_exit(double seconds) {
    eventually(
        [&] {
          int st = 0;
          if (::waitpid(launcher_, &st, WNOHANG) == launcher_)
            exit_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
          return exit_.has_value();
        },
        seconds);
    return exit_;
  }

  std::vector<Line> lines() const {
    std::vector<Line> out;
    std::ifstream f(dir_ / "log");
    std::string l;
    while (std::getline(f, l)) {
      if (l.rfind("inc=", 0) != 0) continue;
      Line x;
      auto field = [&](const std::string& name) {
        auto at = l.find(name + "=");
        if (at == std::string::npos) return std::string();
        at += name.size() + 1;
        return l.substr(at, l.find(' ', at) - at);
      };
      x.inc = field("inc");
      x.resume = field("resume");
      x.job = field("job");
      x.pid = std::atoi(field("pid").c_str());
      out.push_back(x);
    }
    return out;
  }

  std::optional<pid_t> background_pid() const {
    std::ifstream f(dir_ / "log");
    std::string l;
    while (std::getline(f, l)) {
      if (l.rfind("bg=", 0) == 0) return std::atoi(l.c_str() + 3);
    }
    return std::nullopt;
  }

  bool launches(size_t n, double seconds = 5) {
    return eventually([&] { return lines().size() >= n; }, seconds);
  }

  std::optional<coord::LauncherRecord> launcher_key() {
    auto r = etcd().range(coord::launcher_key(kPrefix, job_, "n1"));
    if (!r || r->kvs.empty()) return std::nullopt;
    auto rec = coord::launcher_from_json(r->kvs[0].value, "launcher key");
    if (!rec) return std::nullopt;
    return *rec;
  }

  void bump(int64_t incarnation, const std::string& resume_from = "",
            const std::string& scheduler = "", bool barrier = false) {
    coord::IncarnationRecord r;
    r.incarnation = incarnation;
    r.barrier = barrier;
    r.resume_from = resume_from;
    r.incident = 7;
    r.by = "leader-node";
    r.at_ns = wall_now_ns();
    r.scheduler = scheduler;
    r.scheduler_job = scheduler.empty() ? "" : "4242";
    // What a launcher checks before it obeys (E12): incident 7 is one of the job's (closed), and
    // its leader is a node of the job under a lease.
    auto lease = etcd().grant(60);
    ASSERT_TRUE(lease.ok()) << lease.error().message;
    ASSERT_TRUE(
        etcd()
            .put(kPrefix + std::string("/jobs/") + job_ + "/nodes/leader-node", "{}", lease->id)
            .ok());
    ASSERT_TRUE(etcd().put(coord::closed_incident_key(kPrefix, job_, 7), "{}").ok());
    auto put = etcd().put(coord::incarnation_key(kPrefix, job_), coord::incarnation_to_json(r));
    ASSERT_TRUE(put.ok()) << put.error().message;
  }

  // The leader's start barrier: the launchers waiting for `incarnation` launch it.
  void release(int64_t incarnation) {
    coord::StartRecord s{incarnation, "leader-node", wall_now_ns(), {"n1"}};
    auto put = etcd().put(coord::start_key(kPrefix, job_), coord::start_to_json(s));
    ASSERT_TRUE(put.ok()) << put.error().message;
  }

  void forge(const std::string& record) {
    auto put = etcd().put(coord::incarnation_key(kPrefix, job_), record);
    ASSERT_TRUE(put.ok()) << put.error().message;
  }

  void finish() { std::ofstream(dir_ / "done") << "done\n"; }

  std::string err() const { return test::read_file(dir_ / "stderr"); }

  static test::EtcdServer* etcd_;
  test::TempDir dir_;
  std::string job_, script_;
  std::optional<coord::EtcdClient> client_;
  pid_t launcher_ = 0;
  std::optional<int> exit_;
  std::vector<pid_t> pids_to_reap_;
};

test::EtcdServer* RunCoord::etcd_ = nullptr;

TEST_F(RunCoord, LaunchesIncarnationZeroRegistersAndFinishes) {
  start();
  ASSERT_TRUE(launches(1)) << err();
  auto l = lines();
  EXPECT_EQ(l[0].inc, "0");
  EXPECT_EQ(l[0].resume, "");
  EXPECT_EQ(l[0].job, job_);
  ASSERT_TRUE(eventually([&] { return launcher_key().has_value(); }, 3)) << err();
  auto key = *launcher_key();
  EXPECT_EQ(key.node, "n1");
  EXPECT_EQ(key.pid, launcher_);
  EXPECT_EQ(key.incarnation, 0);
  EXPECT_GT(key.started_at_ns, 0);

  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
  EXPECT_FALSE(launcher_key().has_value()) << "the launcher key goes with the launcher";
  EXPECT_NE(err().find("finished on n1"), std::string::npos) << err();
}

TEST_F(RunCoord, RelaunchesWhenTheIncarnationMovesWhileRunning) {
  start();
  ASSERT_TRUE(launches(1)) << err();
  pid_t first = lines()[0].pid;
  bump(1, "step_20");
  ASSERT_TRUE(launches(2)) << err();
  auto l = lines();
  EXPECT_EQ(l[1].inc, "1");
  EXPECT_EQ(l[1].resume, "step_20");
  EXPECT_NE(l[1].pid, first);
  EXPECT_FALSE(alive(first)) << "the old incarnation's group was ended";
  ASSERT_TRUE(eventually([&] { return launcher_key() && launcher_key()->incarnation == 1; }, 3))
      << err();
  EXPECT_NE(err().find("moved to 1 (by leader-node, incident 7)"), std::string::npos) << err();

  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
  EXPECT_EQ(lines().size(), 2u);
}

TEST_F(RunCoord, AJobKilledElsewhereWaitsForTheBumpThenCleansAndRelaunches) {
  start({}, "yes");
  ASSERT_TRUE(launches(1)) << err();
  ASSERT_TRUE(eventually([&] { return background_pid().has_value(); }, 3));
  pid_t first = lines()[0].pid, left = *background_pid();
  pids_to_reap_.push_back(left);
  ASSERT_EQ(::kill(first, SIGKILL), 0);  // as this node's agent preempting its ranks would
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_EQ(lines().size(), 1u) << "no relaunch before the incarnation moves";
  EXPECT_FALSE(wait_exit(0).has_value()) << err();
  EXPECT_TRUE(alive(left));
  EXPECT_TRUE(launcher_key().has_value()) << "still registered while it waits: " << err();
  EXPECT_NE(err().find("ended with status 137: waiting up to"), std::string::npos) << err();

  bump(1);
  ASSERT_TRUE(launches(2)) << err();
  EXPECT_EQ(lines()[1].inc, "1");
  EXPECT_EQ(lines()[1].resume, "");
  char st = proc_state(left);
  EXPECT_TRUE(st == '?' || st == 'Z')
      << "the old group's leftover was cleaned up, state " << st << ": " << err();
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

TEST_F(RunCoord, AJobKilledWithoutABumpEndsWithItsStatus) {
  start({"--resume-wait", "700ms"});
  ASSERT_TRUE(launches(1)) << err();
  ASSERT_EQ(::kill(lines()[0].pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit(5), 137) << err();
  EXPECT_NE(err().find("never moved past 0 within 700ms"), std::string::npos) << err();
  EXPECT_FALSE(launcher_key().has_value());
  EXPECT_EQ(lines().size(), 1u);
}

TEST_F(RunCoord, EtcdLostKeepsTheJobRunningAndNothingRelaunches) {
  start();
  ASSERT_TRUE(launches(1)) << err();
  pid_t first = lines()[0].pid;
  ASSERT_TRUE(eventually([&] { return launcher_key().has_value(); }, 3));
  etcd_->kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(alive(first));
  EXPECT_EQ(lines().size(), 1u);
  EXPECT_FALSE(wait_exit(0).has_value()) << err();
  etcd_->restart();
  ASSERT_TRUE(eventually([&] { return launcher_key().has_value(); }, 8)) << err();
  std::string e = err();
  size_t first_lost = e.find("coordination lost");
  ASSERT_NE(first_lost, std::string::npos) << e;
  EXPECT_EQ(e.find("coordination lost", first_lost + 1), std::string::npos) << "said once: " << e;
  EXPECT_NE(e.find("the job keeps running as it is"), std::string::npos) << e;

  bump(1);
  ASSERT_TRUE(launches(2, 8)) << err();
  EXPECT_EQ(lines()[1].inc, "1");
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

TEST_F(RunCoord, SigtermGoesToTheJobAndDeregisters) {
  start();
  ASSERT_TRUE(launches(1)) << err();
  pid_t first = lines()[0].pid;
  ASSERT_TRUE(eventually([&] { return launcher_key().has_value(); }, 3));
  ASSERT_EQ(::kill(launcher_, SIGTERM), 0);
  EXPECT_EQ(wait_exit(5), 128 + SIGTERM) << err();
  EXPECT_FALSE(alive(first));
  EXPECT_FALSE(launcher_key().has_value());
}

TEST_F(RunCoord, StartsWithTheIncarnationInEtcd) {
  bump(4, "ckpt-9");
  start();
  ASSERT_TRUE(launches(1)) << err();
  EXPECT_EQ(lines()[0].inc, "4");
  EXPECT_EQ(lines()[0].resume, "ckpt-9");
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

// An incarnation moved with "barrier": the launcher ends the old one and cleans up, says in its
// launcher key that it is ready, and launches only once the leader's start key names it.
TEST_F(RunCoord, WaitsAtTheStartBarrierUntilTheLeaderStartsIt) {
  start({}, "yes");
  ASSERT_TRUE(launches(1)) << err();
  ASSERT_TRUE(eventually([&] { return background_pid().has_value(); }, 3));
  pid_t first = lines()[0].pid, left = *background_pid();
  pids_to_reap_.push_back(left);
  ASSERT_TRUE(eventually([&] { return launcher_key().has_value(); }, 3));
  EXPECT_TRUE(launcher_key()->barrier) << "it says it starts at the barrier";
  EXPECT_FALSE(launcher_key()->ready);
  bump(1, "step_20", "", /*barrier=*/true);
  ASSERT_TRUE(eventually([&] { return launcher_key() && launcher_key()->ready == 1; }, 8)) << err();
  EXPECT_FALSE(alive(first)) << "the old incarnation ended before it said ready";
  char st = proc_state(left);
  EXPECT_TRUE(st == '?' || st == 'Z') << "and its leftover was cleaned up: " << st;
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_EQ(lines().size(), 1u) << "nothing launches before the barrier: " << err();
  EXPECT_NE(err().find("incarnation 1: cleanup done on n1; waiting at the start barrier"),
            std::string::npos)
      << err();
  release(0);  // an earlier incarnation's start releases nothing
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(lines().size(), 1u) << err();

  release(1);
  ASSERT_TRUE(launches(2)) << err();
  EXPECT_EQ(lines()[1].inc, "1");
  EXPECT_EQ(lines()[1].resume, "step_20");
  EXPECT_NE(err().find("incarnation 1: every node is ready: starting after"), std::string::npos)
      << err();
  ASSERT_TRUE(eventually(
      [&] { return launcher_key() && !launcher_key()->ready && launcher_key()->incarnation == 1; },
      3))
      << err();
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

// A barrier the leader never releases (a node that never got ready, a leader gone for good):
// past resume_wait nothing was launched, the launcher says so and exits 3, deregistered.
TEST_F(RunCoord, ABarrierNotReleasedWithinResumeWaitLaunchesNothing) {
  start({"--resume-wait", "1s"});
  ASSERT_TRUE(launches(1)) << err();
  bump(1, "", "", /*barrier=*/true);
  EXPECT_EQ(wait_exit(8), 3) << err();
  EXPECT_EQ(lines().size(), 1u);
  EXPECT_NE(err().find("the start barrier of incarnation 1 was not released within 1.0s: nothing "
                       "was launched"),
            std::string::npos)
      << err();
  EXPECT_FALSE(launcher_key().has_value());
}

// A launcher started after its incarnation was preempted (the job's open incident ordered it,
// the leader has not moved it yet: a launcher that died and was started again) waits for the
// next incarnation, registered, rather than start a preempted incarnation's rank alone.
TEST_F(RunCoord, ALauncherStartedAfterItsIncarnationWasPreemptedWaitsForTheNext) {
  const std::string base = kPrefix + std::string("/jobs/") + job_ + "/";
  ASSERT_TRUE(etcd().put(coord::incident_key(kPrefix, job_), R"({"job":"x"})").ok());
  auto open = etcd().range(coord::incident_key(kPrefix, job_));
  ASSERT_TRUE(open.ok() && open->kvs.size() == 1u);
  auto id = coord::incident_id_of(open->kvs[0]);
  ASSERT_TRUE(id.ok()) << id.error().message;
  ASSERT_TRUE(etcd()
                  .put(base + fmt::format("orders/{:020d}", *id),
                       fmt::format(R"({{"incident":{},"incarnation":0,"by":"leader-node"}})", *id))
                  .ok());
  start();
  ASSERT_TRUE(eventually([&] { return launcher_key().has_value(); }, 5)) << err();
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_TRUE(lines().empty()) << "incarnation 0 was preempted: not launched again";
  EXPECT_NE(err().find(fmt::format("incarnation 0 was preempted (incident {}) before this "
                                   "launcher started: waiting up to",
                                   *id)),
            std::string::npos)
      << err();
  // The leader moves it (its incident still open): incarnation 1 launches.
  coord::IncarnationRecord r;
  r.incarnation = 1;
  r.incident = *id;
  r.by = "leader-node";
  auto lease = etcd().grant(60);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd().put(base + "nodes/leader-node", "{}", lease->id).ok());
  ASSERT_TRUE(
      etcd().put(coord::incarnation_key(kPrefix, job_), coord::incarnation_to_json(r)).ok());
  ASSERT_TRUE(launches(1)) << err();
  EXPECT_EQ(lines()[0].inc, "1");
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

// With the incident closed (resume = false, say) an order of the incarnation holds nothing: a
// launcher started again for the same job launches it.
TEST_F(RunCoord, AnOrderOfAClosedIncidentHoldsNothing) {
  const std::string base = kPrefix + std::string("/jobs/") + job_ + "/";
  ASSERT_TRUE(etcd()
                  .put(base + "orders/00000000000000000005",
                       R"({"incident":5,"incarnation":0,"by":"leader-node"})")
                  .ok());
  start();
  ASSERT_TRUE(launches(1)) << err();
  EXPECT_EQ(lines()[0].inc, "0");
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

// Under Slurm: the launcher key names the batch job and its restart count (what the leader's
// requeue is fenced by), and a rerun whose SLURM_RESTART_COUNT is above etcd's incarnation
// launches that and moves etcd's up.
TEST_F(RunCoord, UnderSlurmPublishesTheBatchJobAndMovesTheIncarnationUp) {
  bump(1, "ckpt-1");
  start({}, "", {{"SLURM_JOB_ID", "4242"}, {"SLURM_RESTART_COUNT", "2"}});
  ASSERT_TRUE(launches(1)) << err();
  EXPECT_EQ(lines()[0].inc, "2");
  EXPECT_EQ(lines()[0].resume, "ckpt-1") << "the resume point named before carries over";
  auto moved = coord::read_incarnation(etcd(), coord::incarnation_key(kPrefix, job_));
  ASSERT_TRUE(moved.ok()) << moved.error().message;
  EXPECT_EQ(moved->record.incarnation, 2);
  EXPECT_EQ(moved->record.by, "n1");
  EXPECT_EQ(moved->record.scheduler, "slurm");
  EXPECT_EQ(moved->record.scheduler_job, "4242");
  ASSERT_TRUE(eventually([&] { return launcher_key().has_value(); }, 3)) << err();
  auto key = *launcher_key();
  EXPECT_EQ(key.incarnation, 2);
  EXPECT_EQ(key.scheduler, "slurm");
  EXPECT_EQ(key.scheduler_job, "4242");
  EXPECT_EQ(key.scheduler_restarts, 2);
  EXPECT_NE(err().find("incarnation 1 -> 2: Slurm job 4242 restarted (SLURM_RESTART_COUNT=2)"),
            std::string::npos)
      << err();
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

// A restart nobody recorded (an operator's requeue): the incarnation moves up, and it resumes from
// the newest checkpoint every rank committed as the leader recorded it, not from the older one
// the incarnation's record named (issue 30). A key older than the record's point moves nothing
// back; a bad key is said and passed over.
TEST_F(RunCoord, UnderSlurmARequeueNobodyRecordedResumesFromTheNewestCheckpoint) {
  bump(1, "step_10");
  const std::string key = coord::checkpoint_key(kPrefix, job_);
  ASSERT_TRUE(
      etcd().put(key, coord::checkpoint_to_json({"step_40", 40, 1, "n9", wall_now_ns()})).ok());
  start({}, "", {{"SLURM_JOB_ID", "4242"}, {"SLURM_RESTART_COUNT", "2"}});
  ASSERT_TRUE(launches(1)) << err();
  EXPECT_EQ(lines()[0].inc, "2");
  EXPECT_EQ(lines()[0].resume, "step_40");
  EXPECT_NE(err().find("incarnation 2 resumes from step_40 (step 40), the newest checkpoint every "
                       "rank committed (as n9 recorded it in incarnation 1), not step_10 that the "
                       "incarnation's record names"),
            std::string::npos)
      << err();
  EXPECT_NE(err().find("launched incarnation 2 resuming from step_40"), std::string::npos) << err();
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

TEST_F(RunCoord, ACheckpointKeyOlderThanTheRecordOrBadIsPassedOver) {
  coord::IncarnationRecord r;
  r.incarnation = 0;
  r.resume_from = "step_60";
  r.resume_step = 60;
  ASSERT_TRUE(
      etcd().put(coord::incarnation_key(kPrefix, job_), coord::incarnation_to_json(r)).ok());
  const std::string key = coord::checkpoint_key(kPrefix, job_);
  ASSERT_TRUE(etcd().put(key, coord::checkpoint_to_json({"step_40", 40, 0, "n9", 1})).ok());
  start();
  ASSERT_TRUE(launches(1)) << err();
  EXPECT_EQ(lines()[0].resume, "step_60") << "never back";
  EXPECT_EQ(err().find("the newest checkpoint every rank committed"), std::string::npos) << err();
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();

  ASSERT_TRUE(etcd().put(key, R"({"id":"a\"b","step":90})").ok());
  ::unlink(std::string(dir_ / "done").c_str());
  start();
  ASSERT_TRUE(launches(2)) << err();
  EXPECT_EQ(lines()[1].resume, "step_60");
  EXPECT_NE(err().find("etcd key " + key + ": field \"id\""), std::string::npos) << err();
  EXPECT_NE(err().find("(not used: incarnation 0 resumes from step_60)"), std::string::npos)
      << err();
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

TEST_F(RunCoord, UnderSlurmTheIncarnationInEtcdWinsWhenAhead) {
  bump(3, "ckpt-3");
  start({}, "", {{"SLURM_JOB_ID", "4242"}, {"SLURM_RESTART_COUNT", "1"}});
  ASSERT_TRUE(launches(1)) << err();
  EXPECT_EQ(lines()[0].inc, "3");
  EXPECT_EQ(lines()[0].resume, "ckpt-3");
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

// A rerun's first launch of a later incarnation removes the beacons its earlier incarnation's dead
// ranks left (proven stale): the agents would otherwise judge them along with the new ones.
TEST_F(RunCoord, UnderSlurmTheRerunRemovesTheEarlierIncarnationsStaleBeacons) {
  std::string path = contract::beacon_path(dir_ / "beacons", job_, 0);
  pid_t rank = ::fork();
  if (rank == 0) {
    contract::Identity id;
    id.dir = dir_ / "beacons";
    id.job = job_;
    id.host = "n1";
    id.incarnation = 0;
    auto w = contract::BeaconWriter::create(id);
    if (!w) ::_exit(2);
    (*w)->step(1);
    ::_exit(0);  // dies without a word: its beacon stays
  }
  ASSERT_GT(rank, 0);
  int st = 0;
  ASSERT_EQ(::waitpid(rank, &st, 0), rank);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  ASSERT_TRUE(std::ifstream(path).good());
  start({}, "", {{"SLURM_JOB_ID", "4242"}, {"SLURM_RESTART_COUNT", "1"}});
  ASSERT_TRUE(launches(1)) << err();
  EXPECT_EQ(lines()[0].inc, "1");
  EXPECT_FALSE(std::ifstream(path).good()) << err();
  EXPECT_NE(err().find("cleanup: removed " + path), std::string::npos) << err();
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

// Under Kubernetes (KUBERNETES_SERVICE_HOST set): STEPWATCH_INCARNATION, a JobSet's restart
// attempt, above etcd's incarnation is a restart the leader did not order (a crashed pod, a lost
// node): it launches that and moves etcd's up, so the pods of the same attempt agree.
TEST_F(RunCoord, UnderKubernetesARestartAttemptAboveEtcdsMovesItUp) {
  bump(1, "step_20");
  start({}, "", {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"STEPWATCH_INCARNATION", "3"}});
  ASSERT_TRUE(launches(1)) << err();
  EXPECT_EQ(lines()[0].inc, "3");
  auto r = coord::read_incarnation(etcd(), coord::incarnation_key(kPrefix, job_));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->record.incarnation, 3);
  EXPECT_EQ(r->record.scheduler, "kubernetes");
  EXPECT_NE(err().find("incarnation 1 -> 3: Kubernetes restarted the job (STEPWATCH_INCARNATION=3) "
                       "without it being recorded"),
            std::string::npos)
      << err();
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

// The job's leader stopped the job under Kubernetes (runbook.resume = false: 75): the launcher
// exits 75, which the pod failure policy stops the JobSet on, and says so.
TEST_F(RunCoord, UnderKubernetesALeadersStopExitsWithItsCode) {
  start({}, "", {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}});
  ASSERT_TRUE(launches(1)) << err();
  coord::IncarnationRecord r;
  r.incarnation = 1;
  r.incident = 7;
  r.by = "leader-node";
  r.scheduler = "kubernetes";
  r.exit_code = 75;
  bump(0);  // the leader node and incident 7, as bump() makes them
  ASSERT_TRUE(
      etcd().put(coord::incarnation_key(kPrefix, job_), coord::incarnation_to_json(r)).ok());
  EXPECT_EQ(wait_exit(8), 75) << err();
  EXPECT_NE(err().find("the job's leader stopped it (runbook.resume = false), and Kubernetes is "
                       "not to restart it"),
            std::string::npos)
      << err();
  EXPECT_NE(err().find("exiting with 75, the status the scheduler stops the job on"),
            std::string::npos)
      << err();
  EXPECT_EQ(lines().size(), 1u);
}

// The leader requeued the batch job and recorded it: nothing is relaunched here (Slurm's requeue
// kills the step and starts the next incarnation); the launcher exits with the job's status.
TEST_F(RunCoord, UnderSlurmARequeueIsLeftToSlurm) {
  start({}, "", {{"SLURM_JOB_ID", "4242"}});
  ASSERT_TRUE(launches(1)) << err();
  ASSERT_TRUE(eventually([&] { return launcher_key().has_value(); }, 3)) << err();
  EXPECT_EQ(launcher_key()->scheduler_restarts, 0) << "unset on the first run: 0";
  ASSERT_EQ(::kill(lines()[0].pid, SIGKILL), 0);  // this node's agent preempted its rank
  ASSERT_TRUE(eventually([&] { return err().find("waiting up to") != std::string::npos; }, 3))
      << err();
  bump(1, "step_20", "slurm");
  EXPECT_EQ(wait_exit(5), 137) << err();
  EXPECT_EQ(lines().size(), 1u) << "no relaunch of its own";
  EXPECT_NE(err().find("Slurm job 4242 was requeued and starts it"), std::string::npos) << err();
  EXPECT_FALSE(launcher_key().has_value());
}

TEST_F(RunCoord, UnderSlurmARequeueWhileTheJobRunsEndsIt) {
  start({}, "", {{"SLURM_JOB_ID", "4242"}});
  ASSERT_TRUE(launches(1)) << err();
  pid_t first = lines()[0].pid;
  bump(1, "", "slurm");
  EXPECT_EQ(wait_exit(8), 128 + SIGTERM) << err();
  EXPECT_FALSE(alive(first));
  EXPECT_EQ(lines().size(), 1u);
}

// E12: anyone who can write under the prefix could move the incarnation. A launcher obeys only a
// move that names an incident of the job and a node of it under its lease (or, with no
// incident, a restart of its own Slurm job); a forged one is said once and changes nothing.
TEST_F(RunCoord, AForgedIncarnationRestartsAndEndsNothing) {
  start({}, "", {{"SLURM_JOB_ID", "4242"}});
  ASSERT_TRUE(launches(1)) << err();
  pid_t first = lines()[0].pid;
  forge(R"({"incarnation":1,"by":"attacker","at_ns":0})");
  ASSERT_TRUE(eventually(
      [&] { return err().find("incarnation 1 (by attacker) is not obeyed") != std::string::npos; },
      5))
      << err();
  forge(R"({"incarnation":2,"by":"attacker","at_ns":0,"scheduler":"slurm","scheduler_job":"1"})");
  forge(R"({"incarnation":3,"by":"n9","incident":7,"at_ns":0})");
  ASSERT_TRUE(eventually(
      [&] { return err().find("incident 7 is not one of the job's") != std::string::npos; }, 5))
      << err();
  EXPECT_NE(err().find("no restart of this launcher's Slurm job 4242"), std::string::npos) << err();
  EXPECT_TRUE(alive(first)) << "the running incarnation was neither ended nor relaunched";
  EXPECT_EQ(lines().size(), 1u);
  bump(4, "step_20");  // the leader's own move, with its proof
  ASSERT_TRUE(launches(2)) << err();
  EXPECT_EQ(lines()[1].inc, "4");
  finish();
  EXPECT_EQ(wait_exit(5), 0) << err();
}

// Flags: each mistake is named, nothing is launched (exit 2); etcd unreachable at start: 3.
TEST(RunCoordFlags, ErrorsNameTheFlag) {
  test::TempDir dir;
  std::string marker = dir / "launched";
  std::vector<std::string> cmd = {"--", "/bin/sh", "-c", "touch " + marker};
  struct Case {
    std::vector<std::string> args;
    int code;
    const char* says;
  } cases[] = {
      {{"--coord", "http://127.0.0.1:1"}, 2, "no job id: give --job, set STEPWATCH_JOB, or run"},
      {{"--coord", "etcd://127.0.0.1:2379", "--job", "j"}, 2, "--coord: \"etcd://127.0.0.1:2379\""},
      {{"--coord", ",", "--job", "j"}, 2, "--coord: no etcd endpoint"},
      {{"--coord", "http://127.0.0.1:1", "--job", "j", "--spec", "x.toml"},
       2,
       "--spec has no place"},
      {{"--coord", "http://127.0.0.1:1", "--job", "j", "--lease-ttl", "1500ms"},
       2,
       "--lease-ttl must be whole seconds"},
      {{"--coord", "http://127.0.0.1:1", "--job", "j", "--resume-wait", "soon"},
       2,
       "--resume-wait"},
      {{"--coord", "http://127.0.0.1:1", "--job", "j", "--node", "a/b"}, 2, "--node \"a/b\""},
      {{"--coord", "http://127.0.0.1:1", "--job", "j", "--prefix", "sw/"}, 2, "--prefix must"},
      {{"--coord", "http://127.0.0.1:1", "--job", "../j"}, 2, "--job: "},
      {{"--job", "j", "--node", "n1"}, 2, "--node is for the multi-node launcher"},
      {{"--coord", "http://127.0.0.1:1", "--job", "j", "--resume-wait", "300ms"},
       3,
       "nothing was launched"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), cmd.begin(), cmd.end());
    auto r = run(args, dir.path(), {"STEPWATCH_JOB"});
    EXPECT_EQ(r.exit_code, c.code) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_FALSE(std::ifstream(marker).good()) << "nothing is launched: " << r.err;
  }
}

}  // namespace
}  // namespace stepwatch
