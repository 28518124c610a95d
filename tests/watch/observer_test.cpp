// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/watch/observer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "src/contract/beacon_writer.h"
#include "src/contract/names.h"

namespace stepwatch::watch {
namespace {

namespace fs = std::filesystem;

class ObserverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fmt::format("sw-observer-{}", ::getpid());
    fs::remove_all(root_);
  }
  void TearDown() override {
    for (pid_t c : children_) {
      ::kill(c, SIGKILL);
      ::waitpid(c, nullptr, 0);
    }
    fs::remove_all(root_);
  }
  // A child `sleep 60` started with RANK=rank, as a launcher would start an uninstrumented rank.
  pid_t spawn_rank(int rank) {
    pid_t c = ::fork();
    if (c == 0) {
      std::string env_rank = fmt::format("RANK={}", rank);
      char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("60"), nullptr};
      char* const envp[] = {env_rank.data(), const_cast<char*>("WORLD_SIZE=2"), nullptr};
      ::execve("/bin/sleep", argv, envp);
      ::_exit(127);
    }
    children_.push_back(c);
    return c;
  }
  ObserverConfig config() {
    ObserverConfig c;
    c.beacon_root = root_.string();
    c.job = "obs";
    c.local_host = "here";
    c.selector.root_pid = ::getpid();
    return c;
  }
  fs::path root_;
  std::vector<pid_t> children_;
};

const detect::ProcessFacts* facts(const detect::Observation& o, int rank) {
  for (const auto& p : o.procs)
    if (p.rank == rank) return &p;
  return nullptr;
}

TEST_F(ObserverTest, BeaconRanksGetTheirProcessFacts) {
  contract::Identity id;
  id.dir = root_.string();
  id.job = "obs";
  id.world_size = 1;
  auto w = contract::BeaconWriter::create(id);
  ASSERT_TRUE(w.ok()) << w.error().message;
  (*w)->step(7);
  Observer ob(config());
  PollReport rep;
  detect::Observation o = ob.poll(SystemClock::instance().now(), {}, {}, &rep);
  ASSERT_EQ(o.ranks.size(), 1u);
  EXPECT_EQ(*o.ranks[0].step, 7);
  EXPECT_EQ(rep.rank_pids.at(0), ::getpid());
  const auto* f = facts(o, 0);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->alive);
  EXPECT_TRUE(f->same_process);
  EXPECT_FALSE(f->cpu_delta_ns.has_value());  // first poll: no delta yet
  detect::Observation o2 = ob.poll(SystemClock::instance().now());
  EXPECT_TRUE(facts(o2, 0)->cpu_delta_ns.has_value());
}

// A junk or foreign file among the beacons is told once, when first seen, and again only when
// what is wrong with it changes; the verdict never sees it.
TEST_F(ObserverTest, JunkAndForeignBeaconsAreToldOnceAndNotJudged) {
  std::vector<std::unique_ptr<contract::BeaconWriter>> writers;
  for (int rank = 0; rank < 2; ++rank) {
    contract::Identity id;
    id.dir = root_.string();
    id.job = "obs";
    id.rank = rank;
    id.local_rank = rank;
    id.world_size = 2;
    auto w = contract::BeaconWriter::create(id);
    ASSERT_TRUE(w.ok()) << w.error().message;
    (*w)->step(3);
    writers.push_back(std::move(*w));
  }
  // rank 9 of a world of 16: a valid beacon, but not of this job's world of 2.
  contract::Identity foreign;
  foreign.dir = root_.string();
  foreign.job = "obs";
  foreign.rank = 9;
  foreign.local_rank = 1;
  foreign.world_size = 16;
  auto f = contract::BeaconWriter::create(foreign);
  ASSERT_TRUE(f.ok()) << f.error().message;
  std::string junk = (root_ / "obs" / "rank-5.beacon").string();
  {
    std::FILE* out = std::fopen(junk.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    std::string bytes(1024, '\x5a');
    std::fwrite(bytes.data(), 1, bytes.size(), out);
    std::fclose(out);
  }
  Observer ob(config());
  PollReport first;
  detect::Observation o = ob.poll(SystemClock::instance().now(), {}, {}, &first);
  ASSERT_EQ(o.ranks.size(), 2u);  // ranks 0 and 1 only
  std::string told;
  for (const auto& p : first.fresh_problems) told += p.message + "\n";
  EXPECT_NE(told.find("rank-9.beacon: rank 9 is outside the job's world of 2"), std::string::npos)
      << told;
  EXPECT_NE(told.find("rank-5.beacon"), std::string::npos) << told;
  EXPECT_EQ(first.fresh_problems.size(), 2u) << told;

  PollReport second;
  ob.poll(SystemClock::instance().now(), {}, {}, &second);
  EXPECT_TRUE(second.fresh_problems.empty()) << second.fresh_problems.front().message;
  EXPECT_EQ(second.problems.size(), 2u);  // still there, not told again

  // The junk file changes into another fault: told again, that file alone.
  fs::resize_file(junk, 10);
  PollReport third;
  for (int i = 0; i < 20 && third.fresh_problems.empty(); ++i) {
    third = PollReport{};
    ob.poll(SystemClock::instance().now(), {}, {},
            &third);  // size audits come round every few polls
  }
  ASSERT_EQ(third.fresh_problems.size(), 1u);
  EXPECT_NE(third.fresh_problems[0].message.find("rank-5.beacon"), std::string::npos);

  // With the spec's world_size, that is the world.
  ObserverConfig wide = config();
  wide.world_size = 16;
  Observer ob16(wide);
  EXPECT_EQ(ob16.poll(SystemClock::instance().now()).ranks.size(), 3u);
}

TEST_F(ObserverTest, ABeaconWhosePidWasReusedIsNotTheSameProcess) {
  contract::Identity id;
  id.dir = root_.string();
  id.job = "obs";
  {
    auto w = contract::BeaconWriter::create(id);
    ASSERT_TRUE(w.ok());
  }
  // Rewrite the start time: the pid now looks like a different process.
  std::string path = contract::beacon_path(id.dir, id.job, 0);
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint64_t fake_start = 1;
  ASSERT_EQ(::pwrite(fd, &fake_start, sizeof fake_start, 24), 8);
  ::close(fd);
  Observer ob(config());
  detect::Observation o = ob.poll(SystemClock::instance().now());
  const auto* f = facts(o, 0);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->alive);
  EXPECT_FALSE(f->same_process);
}

TEST_F(ObserverTest, UninstrumentedRanksComeFromTheirEnvironment) {
  pid_t r0 = spawn_rank(0);
  pid_t r1 = spawn_rank(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Observer ob(config());
  contract::RankSnapshot log_rank;
  log_rank.source = contract::Source::kLog;
  log_rank.job = "obs";
  log_rank.step = 12;
  log_rank.step_count = 12;
  PollReport rep;
  detect::Observation o =
      ob.poll(SystemClock::instance().now(), log_rank, detect::LogFacts{}, &rep);
  EXPECT_EQ(rep.rank_pids.at(0), r0);
  EXPECT_EQ(rep.rank_pids.at(1), r1);
  ASSERT_EQ(o.ranks.size(), 1u);  // progress from the log, as rank 0
  EXPECT_EQ(o.ranks[0].source, contract::Source::kLog);
  EXPECT_EQ(o.ranks[0].world_size, 2);
  EXPECT_EQ(o.ranks[0].pid, r0);
  ASSERT_NE(facts(o, 1), nullptr);
  EXPECT_EQ(facts(o, 1)->state, 'S');
  EXPECT_FALSE(facts(o, 1)->wchan.empty());  // asleep somewhere in the kernel
  EXPECT_TRUE(o.log.has_value());

  ::kill(r1, SIGKILL);
  ::waitpid(r1, nullptr, 0);
  detect::Observation after = ob.poll(SystemClock::instance().now(), log_rank);
  // Rank 1 is no longer in the tree: it is not reported as alive.
  const auto* f1 = facts(after, 1);
  EXPECT_TRUE(f1 == nullptr || !f1->alive);
}

// Without a selector (the agent): every rank's liveness every poll, but its process details
// only once its record has been quiet for detail_after, and only as far as the budget goes.
class QuietObserverTest : public ObserverTest {
 protected:
  ObserverConfig quiet_config(int64_t detail_after_ns, std::optional<int64_t> budget) {
    ObserverConfig c = config();
    c.selector = {};
    c.detail_after_ns = detail_after_ns;
    c.detail_budget_ns = budget;
    return c;
  }
  std::vector<std::unique_ptr<contract::BeaconWriter>> writers(int n) {
    std::vector<std::unique_ptr<contract::BeaconWriter>> out;
    for (int r = 0; r < n; ++r) {
      contract::Identity id;
      id.dir = root_.string();
      id.job = "obs";
      id.rank = r;
      id.world_size = n;
      auto w = contract::BeaconWriter::create(id);
      if (!w) ADD_FAILURE() << w.error().message;
      (*w)->step(1);
      out.push_back(std::move(*w));
    }
    return out;
  }
};

TEST_F(QuietObserverTest, AdvancingRanksGetLivenessOnlyAndQuietOnesTheirDetails) {
  auto ws = writers(2);
  Observer ob(quiet_config(400 * kNsPerMs, std::nullopt));
  PollReport rep;
  detect::Observation o = ob.poll(SystemClock::instance().now(), {}, {}, &rep);
  EXPECT_EQ(rep.details_read, 0u);
  EXPECT_EQ(rep.details_due, 0u);
  ASSERT_NE(facts(o, 0), nullptr);
  EXPECT_TRUE(facts(o, 0)->alive);
  EXPECT_EQ(facts(o, 0)->state, '?');  // not read: the record just changed

  // Rank 0 keeps stepping; rank 1 goes quiet for longer than detail_after.
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    ws[0]->step(2 + i);
    PollReport r;
    o = ob.poll(SystemClock::instance().now(), {}, {}, &r);
    rep = r;
  }
  EXPECT_EQ(rep.details_due, 1u);
  EXPECT_EQ(rep.details_read, 1u);
  EXPECT_EQ(facts(o, 0)->state, '?');
  EXPECT_NE(facts(o, 1)->state, '?');  // this process: running or sleeping
  EXPECT_TRUE(facts(o, 1)->cpu_delta_ns.has_value()) << "read on two polls: a delta";
}

TEST_F(QuietObserverTest, TheBudgetRationsDetailReadsLongestUnreadFirst) {
  auto ws = writers(3);
  // 1 ns a poll: one read on the first poll, then the debt it ran up waits to be repaid.
  Observer ob(quiet_config(0, 1));
  PollReport rep;
  detect::Observation o = ob.poll(SystemClock::instance().now(), {}, {}, &rep);
  EXPECT_EQ(rep.details_due, 3u);
  EXPECT_EQ(rep.details_read, 1u);
  int read = 0;
  for (int r = 0; r < 3; ++r) read += facts(o, r)->state != '?';
  EXPECT_EQ(read, 1);
  PollReport next;
  ob.poll(SystemClock::instance().now(), {}, {}, &next);
  EXPECT_EQ(next.details_read, 0u);

  // A generous budget reads every due rank, and a rank read before keeps its facts.
  ob.set_detail_budget(kNsPerSec);
  PollReport all;
  o = ob.poll(SystemClock::instance().now(), {}, {}, &all);
  EXPECT_EQ(all.details_read, 3u);
  for (int r = 0; r < 3; ++r) EXPECT_NE(facts(o, r)->state, '?') << r;
}

TEST_F(QuietObserverTest, ARankWhoseProcessExitedIsNotAlive) {
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  pid_t c = ::fork();
  if (c == 0) {
    contract::Identity id;
    id.dir = root_.string();
    id.job = "obs";
    auto w = contract::BeaconWriter::create(id);
    if (w) (*w)->step(3);
    char ok = w ? 'y' : 'n';
    if (::write(pipefd[1], &ok, 1) != 1) ::_exit(2);
    ::pause();
    ::_exit(0);
  }
  children_.push_back(c);
  char ok = 0;
  ASSERT_EQ(::read(pipefd[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  Observer ob(quiet_config(kNsPerSec * 60, std::nullopt));
  detect::Observation o = ob.poll(SystemClock::instance().now());
  ASSERT_NE(facts(o, 0), nullptr);
  EXPECT_TRUE(facts(o, 0)->alive);
  ::kill(c, SIGKILL);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(c), &info, WEXITED | WNOWAIT), 0);  // a zombie now
  o = ob.poll(SystemClock::instance().now());
  EXPECT_FALSE(facts(o, 0)->alive);
  ::close(pipefd[0]);
  ::close(pipefd[1]);
}

// A beacon may name any pid. The agent runs as root, so it reads I/O counters and wchan (what
// ptrace access guards) only of a process that runs as the job directory's owner: otherwise the
// API would publish them for sshd or another user's job.
TEST_F(QuietObserverTest, IoAndWchanOnlyOfProcessesThatRunAsTheJobDirectorysOwner) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a rank that becomes another user";
  auto rank = [&](int r, bool become_nobody) {
    int pipefd[2];
    EXPECT_EQ(::pipe(pipefd), 0);
    pid_t c = ::fork();
    if (c == 0) {
      contract::Identity id;
      id.dir = root_.string();
      id.job = "obs";
      id.rank = r;
      id.world_size = 2;
      auto w = contract::BeaconWriter::create(id);
      if (w) (*w)->step(3);
      bool ok = w.ok() && (!become_nobody || (::setgid(65534) == 0 && ::setuid(65534) == 0));
      char said = ok ? 'y' : 'n';
      if (::write(pipefd[1], &said, 1) != 1) ::_exit(2);
      ::pause();
      ::_exit(0);
    }
    children_.push_back(c);
    char said = 0;
    EXPECT_EQ(::read(pipefd[0], &said, 1), 1);
    EXPECT_EQ(said, 'y');
    ::close(pipefd[0]);
    ::close(pipefd[1]);
  };
  rank(0, false);
  rank(1, true);
  Observer ob(quiet_config(0, std::nullopt));
  detect::Observation o = ob.poll(SystemClock::instance().now());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  o = ob.poll(SystemClock::instance().now());
  ASSERT_NE(facts(o, 0), nullptr);
  ASSERT_NE(facts(o, 1), nullptr);
  EXPECT_FALSE(facts(o, 0)->wchan.empty()) << "the owner's rank sleeps in pause()";
  EXPECT_TRUE(facts(o, 0)->io_delta_bytes.has_value());
  EXPECT_TRUE(facts(o, 1)->wchan.empty()) << facts(o, 1)->wchan;
  EXPECT_FALSE(facts(o, 1)->io_delta_bytes.has_value());
  EXPECT_TRUE(facts(o, 1)->alive);  // liveness and state are still known: anyone may read them
  EXPECT_NE(facts(o, 1)->state, '?');
}

TEST(RankFromEnviron, ReadsRankOrSlurm) {
  EXPECT_FALSE(rank_from_environ("/proc", 999999999).has_value());
  auto root = fs::temp_directory_path() / fmt::format("sw-env-{}", ::getpid());
  fs::create_directories(root / "10");
  fs::create_directories(root / "11");
  {
    std::string env = std::string("PATH=/bin\0SLURM_PROCID=3\0RANK=5\0", 31);
    FILE* f = std::fopen((root / "10" / "environ").c_str(), "w");
    std::fwrite(env.data(), 1, env.size(), f);
    std::fclose(f);
    std::string slurm = std::string("SLURM_PROCID=3\0RANK=x\0", 22);
    f = std::fopen((root / "11" / "environ").c_str(), "w");
    std::fwrite(slurm.data(), 1, slurm.size(), f);
    std::fclose(f);
  }
  EXPECT_EQ(rank_from_environ(root.string(), 10)->rank, 5);
  EXPECT_FALSE(rank_from_environ(root.string(), 10)->from_slurm);
  EXPECT_EQ(rank_from_environ(root.string(), 11)->rank, 3);  // a malformed RANK is ignored
  EXPECT_TRUE(rank_from_environ(root.string(), 11)->from_slurm);
  fs::remove_all(root);
}

TEST(RankFromEnviron, UnderSlurmTheLauncherIsNotRankZero) {
  auto root = fs::temp_directory_path() / fmt::format("sw-env-slurm-{}", ::getpid());
  auto write_env = [&](int pid, std::string_view env) {
    fs::create_directories(root / std::to_string(pid));
    FILE* f = std::fopen((root / std::to_string(pid) / "environ").c_str(), "w");
    std::fwrite(env.data(), 1, env.size(), f);
    std::fclose(f);
  };
  using namespace std::string_view_literals;
  // A batch script's launcher (SLURM_PROCID=0 only) and the two ranks it started (RANK).
  write_env(10, "SLURM_JOB_ID=7\0SLURM_PROCID=0\0"sv);
  write_env(11, "SLURM_PROCID=0\0RANK=0\0"sv);
  write_env(12, "SLURM_PROCID=0\0RANK=1\0"sv);
  EXPECT_EQ(ranks_from_environ(root.string(), {10, 11, 12}),
            (std::map<int, int>{{0, 11}, {1, 12}}));
  // Ranks started by srun itself carry only SLURM_PROCID: then it names them.
  write_env(20, "SLURM_PROCID=0\0"sv);
  write_env(21, "SLURM_PROCID=1\0"sv);
  EXPECT_EQ(ranks_from_environ(root.string(), {20, 21}), (std::map<int, int>{{0, 20}, {1, 21}}));
  EXPECT_TRUE(ranks_from_environ(root.string(), {99}).empty());  // no such process
  fs::remove_all(root);
}

}  // namespace
}  // namespace stepwatch::watch
