// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The seqlock under load: a writer hammers a real mapped beacon while readers, through their
// own mappings of the same file, check invariants on every consistent read. Then the same with
// the writer in a forked process, and two threads fighting over one writer (EBUSY, never a
// corrupt record). Every loop is bounded by counts, never by time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/common/proc_stat.h"
#include "src/contract/beacon_reader.h"
#include "src/contract/beacon_writer.h"
#include "src/contract/names.h"
#include "tests/contract/test_support.h"

namespace stepwatch::contract {
namespace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STEPWATCH_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || \
    defined(STEPWATCH_TEST_SANITIZED)
constexpr uint64_t kScale = 10;  // sanitizers (and -O0) make every read many times slower
#else
constexpr uint64_t kScale = 1;
#endif
constexpr uint64_t kReadsPerReader = 600'000 / kScale;
constexpr int kCheckpointEvery = 11;
constexpr int kEvalEvery = 7;

// One iteration of the hammering writer. Invariants it keeps at every seqlock boundary:
// step n has loss == n and step_count == n + 1; checkpoints are "ckpt-<step>" at multiples of 11.
int writer_iteration(BeaconWriter& w, int64_t n, char* ckpt_buf, size_t ckpt_size) {
  int bad = 0;
  bad += w.phase_begin("data") != STEPWATCH_OK;
  bad += w.step_loss(n, static_cast<double>(n)) != STEPWATCH_OK;
  bad += w.phase_end() != STEPWATCH_OK;
  if (n % kEvalEvery == 0) {
    bad += w.phase_begin("eval") != STEPWATCH_OK;
    bad += w.beat() != STEPWATCH_OK;
    bad += w.phase_end() != STEPWATCH_OK;
  }
  if (n % kCheckpointEvery == 0) {
    std::snprintf(ckpt_buf, ckpt_size, "ckpt-%lld", static_cast<long long>(n));
    bad += w.checkpoint_committed(ckpt_buf, n) != STEPWATCH_OK;
  }
  bad += w.loss(static_cast<double>(n)) != STEPWATCH_OK;
  return bad;
}

struct ReaderStats {
  uint64_t reads = 0;
  uint64_t ok = 0;
  uint64_t torn = 0;
  uint64_t violations = 0;
  std::vector<std::string> first;  // the first few violations, for the failure message
  void violation(std::string what) {
    ++violations;
    if (first.size() < 8) first.push_back(std::move(what));
  }
};

// What a reader remembers of its previous consistent read: everything here only grows.
struct Seen {
  uint64_t step_count = 0, beat_count = 0, phase_count = 0;
  int64_t updated_mono_ns = 0;
  int64_t ckpt_step = -1;
};

// Checks one consistent snapshot against the writer's invariants and against what this reader
// saw before.
void check_snapshot(const RankSnapshot& s, const std::string& job, int pid, Seen& seen,
                    ReaderStats& st) {
  auto fail = [&](const std::string& what) {
    st.violation(what + " (step_count " + std::to_string(s.step_count) + ", phase " + s.phase +
                 ")");
  };
  if (s.job != job) fail("job " + s.job);
  if (s.pid != pid) fail("pid " + std::to_string(s.pid));
  if (s.step_count == 0) {
    if (s.step) fail("a step without step_count");
  } else {
    if (!s.step) return fail("step_count without a step");
    int64_t n = *s.step;
    if (s.step_count != static_cast<uint64_t>(n) + 1)
      fail("step " + std::to_string(n) + " vs step_count");
    if (!s.loss || *s.loss != static_cast<double>(n)) fail("loss != step " + std::to_string(n));
    size_t want = std::min<uint64_t>(s.step_count, STEPWATCH_RECENT_STEPS);
    if (s.recent.size() != want) {
      fail("recent size " + std::to_string(s.recent.size()));
    } else {
      if (s.recent.back().step != n)
        fail("newest ring entry " + std::to_string(s.recent.back().step));
      if (s.recent.back().mono_ns != s.step_at.mono_ns) fail("newest ring time != step time");
      for (size_t k = 0; k < s.recent.size(); ++k) {
        if (s.recent[k].step != n - static_cast<int64_t>(want - 1 - k))
          fail("ring not consecutive");
        if (k > 0 && s.recent[k].mono_ns < s.recent[k - 1].mono_ns) fail("ring time goes back");
      }
    }
    if (s.phase == "init") fail("init after a step");
  }
  if (s.phase != "init" && s.phase != "data" && s.phase != "eval" && s.phase != "train")
    fail("phase " + s.phase);
  if (s.checkpoint) {
    char want_id[STEPWATCH_CKPT_ID_MAX];
    std::snprintf(want_id, sizeof want_id, "ckpt-%lld", static_cast<long long>(s.checkpoint->step));
    if (s.checkpoint->id != want_id)
      fail("checkpoint " + s.checkpoint->id + " at " + std::to_string(s.checkpoint->step));
    if (s.checkpoint->step % kCheckpointEvery != 0) fail("checkpoint step not a multiple");
    if (!s.step || s.checkpoint->step > *s.step) fail("checkpoint ahead of the step");
  }
  if (s.beat_count > 0 && !s.beat_at) fail("beat count without a time");
  if (s.step_count < seen.step_count) fail("step_count went back");
  if (s.beat_count < seen.beat_count) fail("beat_count went back");
  if (s.phase_count < seen.phase_count) fail("phase_count went back");
  if (s.updated_mono_ns < seen.updated_mono_ns) fail("update time went back");
  int64_t ckpt = s.checkpoint ? s.checkpoint->step : -1;
  if (ckpt < seen.ckpt_step) fail("checkpoint went back");
  seen = {s.step_count, s.beat_count, s.phase_count, s.updated_mono_ns, ckpt};
}

void reader_loop(const std::string& path, const std::string& job, int pid, uint64_t reads,
                 ReaderStats& st) {
  auto m = BeaconMapping::open(path);  // this reader's own mapping of the file
  if (!m) {
    st.violation("open: " + m.error().message);
    return;
  }
  Seen seen;
  for (uint64_t i = 0; i < reads; ++i) {
    ++st.reads;
    auto s = m->read();
    if (s) {
      ++st.ok;
      check_snapshot(*s, job, pid, seen, st);
    } else if (s.error().code == Errc::kTorn) {
      ++st.torn;  // allowed: the reader gave up instead of returning a mixed copy
    } else {
      st.violation("read: " + s.error().message);  // a mixed copy that failed validation
    }
  }
}

void expect_clean(const std::vector<ReaderStats>& stats, uint64_t min_ok) {
  uint64_t reads = 0, ok = 0, torn = 0;
  for (const auto& st : stats) {
    reads += st.reads;
    ok += st.ok;
    torn += st.torn;
    EXPECT_EQ(st.violations, 0u) << ::testing::PrintToString(st.first);
  }
  std::printf("reads %llu, consistent %llu, torn %llu\n", static_cast<unsigned long long>(reads),
              static_cast<unsigned long long>(ok), static_cast<unsigned long long>(torn));
  EXPECT_GE(ok, min_ok) << "readers starved: " << torn << " torn of " << reads;
}

Identity hammer_identity(const std::string& dir) {
  Identity id;
  id.dir = dir;
  id.job = "hammer";
  id.host = "node-1";
  return id;
}

TEST(Concurrency, ThreadsReadWhileAWriterHammers) {
  test::TempDir dir;
  auto w = BeaconWriter::create(hammer_identity(dir.path()));
  ASSERT_TRUE(w.ok()) << w.error().message;
  BeaconWriter& writer = **w;

  constexpr int kReaders = 3;
  std::atomic<int> readers_done{0};
  std::atomic<int64_t> iterations{0};
  std::atomic<int> writer_errors{0};
  std::thread wt([&] {
    char buf[STEPWATCH_CKPT_ID_MAX];
    int64_t n = 0;
    // The writer runs until every reader has done its reads: counted, never timed.
    while (readers_done.load(std::memory_order_acquire) < kReaders) {
      writer_errors += writer_iteration(writer, n, buf, sizeof buf);
      ++n;
    }
    iterations = n;
  });
  std::vector<ReaderStats> stats(kReaders);
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      reader_loop(writer.path(), "hammer", ::getpid(), kReadsPerReader, stats[r]);
      readers_done.fetch_add(1, std::memory_order_release);
    });
  }
  for (auto& t : readers) t.join();
  wt.join();

  EXPECT_EQ(writer_errors.load(), 0) << "a lone writer never sees EBUSY or an error";
  EXPECT_GT(iterations.load(), 1000) << "the writer barely ran";
  expect_clean(stats, kReaders * kReadsPerReader / 10);

  // The final record, read at rest, carries the last iteration exactly.
  auto s = read_beacon_file(writer.path());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(*s->step, iterations.load() - 1);
  EXPECT_EQ(s->step_count, static_cast<uint64_t>(iterations.load()));
  EXPECT_EQ(s->phase, "train");
  Seen seen;
  ReaderStats final_check;
  check_snapshot(*s, "hammer", ::getpid(), seen, final_check);
  EXPECT_EQ(final_check.violations, 0u) << ::testing::PrintToString(final_check.first);
}

// Kills and reaps the forked writer whatever the test's outcome.
struct ChildGuard {
  pid_t pid = -1;
  ~ChildGuard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(Concurrency, ReadersInOneProcessWriterInAnother) {
  test::TempDir dir;
  // A shared page: the parent's "stop" flag and the child's iteration count.
  void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* stop = static_cast<std::atomic<int>*>(page);
  auto* child_iterations = reinterpret_cast<std::atomic<int64_t>*>(static_cast<char*>(page) + 64);
  new (stop) std::atomic<int>(0);
  new (child_iterations) std::atomic<int64_t>(0);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t parent = ::getpid();

  ChildGuard child;
  child.pid = ::fork();
  ASSERT_GE(child.pid, 0);
  if (child.pid == 0) {
    // The writer process. No gtest macros here: the exit status carries the verdict.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(10);
    ::close(ready[0]);
    auto w = BeaconWriter::create(hammer_identity(dir.path()));
    if (!w) ::_exit(11);
    if (::write(ready[1], "r", 1) != 1) ::_exit(12);
    char buf[STEPWATCH_CKPT_ID_MAX];
    int64_t n = 0;
    int errors = 0;
    while (stop->load(std::memory_order_acquire) == 0) {
      errors += writer_iteration(**w, n, buf, sizeof buf);
      ++n;
    }
    child_iterations->store(n, std::memory_order_release);
    if ((*w)->finish(true) != STEPWATCH_OK) ::_exit(13);
    ::_exit(errors == 0 ? 0 : 14);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the writer process did not start";
  ::close(ready[0]);

  std::string path = beacon_path(dir.path(), "hammer", 0);
  // The beacon names the writer process and its start time, not ours. A writer updating
  // without pause can be descheduled mid-update for longer than one read waits (two cores under
  // a sanitizer and a parallel ctest): a torn result is that, and the read is simply repeated.
  // A writer that updates without pause on the other core is inside an update most of the
  // time: repeated for up to 10 s, not a count of tries (51 were seen to fail on an idle 2-core
  // machine).
  auto first = read_beacon_file(path);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!first.ok() && first.error().code == Errc::kTorn &&
         std::chrono::steady_clock::now() < give_up) {
    first = read_beacon_file(path);
  }
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->pid, child.pid);
  auto child_stat = read_proc_stat("/proc", child.pid);
  ASSERT_TRUE(child_stat.ok()) << child_stat.error().message;
  EXPECT_EQ(first->pid_start_ticks, child_stat->start_ticks);

  constexpr int kReaders = 2;
  std::vector<ReaderStats> stats(kReaders);
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back(
        [&, r] { reader_loop(path, "hammer", child.pid, kReadsPerReader / 2, stats[r]); });
  }
  for (auto& t : readers) t.join();
  stop->store(1, std::memory_order_release);

  int status = 0;
  ASSERT_EQ(::waitpid(child.pid, &status, 0), child.pid);
  child.pid = -1;
  ASSERT_TRUE(WIFEXITED(status)) << "writer process died: status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "writer process reported an error";
  expect_clean(stats, kReadsPerReader / 20);

  // After the writer exited, the file still holds its last, consistent record.
  auto last = read_beacon_file(path);
  ASSERT_TRUE(last.ok()) << last.error().message;
  int64_t n = child_iterations->load();
  EXPECT_GT(n, 100);
  EXPECT_EQ(*last->step, n - 1);
  EXPECT_EQ(last->step_count, static_cast<uint64_t>(n));
  EXPECT_EQ(last->status, RankStatus::kFinished);
  ::munmap(page, 4096);
}

// Simulates another thread inside an update through the writer's own mapping.
class HeldSeq {
 public:
  explicit HeldSeq(const BeaconWriter& w) : b_(const_cast<stepwatch_beacon_v1*>(w.record())) {
    s_ = __atomic_load_n(&b_->seq, __ATOMIC_ACQUIRE);
    __atomic_store_n(&b_->seq, s_ + 1, __ATOMIC_RELEASE);
  }
  ~HeldSeq() { __atomic_store_n(&b_->seq, s_ + 2, __ATOMIC_RELEASE); }

 private:
  stepwatch_beacon_v1* b_;
  uint64_t s_;
};

TEST(Concurrency, EveryUpdateReturnsBusyWhileAnotherWriterIsInside) {
  test::TempDir dir;
  auto w = BeaconWriter::create(hammer_identity(dir.path()));
  ASSERT_TRUE(w.ok()) << w.error().message;
  BeaconWriter& writer = **w;
  ASSERT_EQ(writer.step(1), STEPWATCH_OK);
  ASSERT_EQ(writer.phase_begin("eval"), STEPWATCH_OK);
  std::string before;
  {
    HeldSeq held(writer);
    before = test::read_file(writer.path());
    EXPECT_EQ(writer.step(2), STEPWATCH_EBUSY);
    EXPECT_EQ(writer.step_loss(2, 1.0), STEPWATCH_EBUSY);
    EXPECT_EQ(writer.loss(1.0), STEPWATCH_EBUSY);
    EXPECT_EQ(writer.beat(), STEPWATCH_EBUSY);
    EXPECT_EQ(writer.phase_begin("data"), STEPWATCH_EBUSY);
    EXPECT_EQ(writer.phase_end(), STEPWATCH_EBUSY);
    EXPECT_EQ(writer.checkpoint_committed("c", 1), STEPWATCH_EBUSY);
    EXPECT_EQ(writer.finish(true), STEPWATCH_EBUSY);
    EXPECT_EQ(test::read_file(writer.path()), before) << "a busy call writes nothing";
  }
  // The refused phase calls did not move the phase stack.
  ASSERT_EQ(writer.phase_end(), STEPWATCH_OK);
  auto s = read_beacon_file(writer.path());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->phase, "train");
  EXPECT_EQ(*s->step, 1);
  EXPECT_EQ(s->step_count, 1u);
  EXPECT_EQ(writer.phase_end(), STEPWATCH_EPHASE);
}

TEST(Concurrency, TwoThreadsOnOneWriterGetBusyNeverCorruption) {
  test::TempDir dir;
  auto w = BeaconWriter::create(hammer_identity(dir.path()));
  ASSERT_TRUE(w.ok()) << w.error().message;
  BeaconWriter& writer = **w;
  ASSERT_EQ(writer.step(0), STEPWATCH_OK);  // init -> train before the race

  struct Counts {
    uint64_t steps = 0, beats = 0, begins = 0, ends = 0, busy = 0, other = 0;
  };
  constexpr uint64_t kRoundOps = 200'000 / kScale;
  Counts total[2];
  // Rounds until both threads have been turned away at least once; each round is counted.
  for (int round = 0; round < 50 && (total[0].busy == 0 || total[1].busy == 0); ++round) {
    Counts c[2];
    auto body = [&](int t) {
      std::string phase = "thread-" + std::to_string(t);
      for (uint64_t i = 0; i < kRoundOps; ++i) {
        int rc;
        switch (i % 4) {
          case 0:
            rc = writer.step(static_cast<int64_t>(i));
            if (rc == STEPWATCH_OK) ++c[t].steps;
            break;
          case 1:
            rc = writer.beat();
            if (rc == STEPWATCH_OK) ++c[t].beats;
            break;
          case 2:
            rc = writer.phase_begin(phase.c_str());
            if (rc == STEPWATCH_OK) ++c[t].begins;
            if (rc == STEPWATCH_EPHASE) rc = STEPWATCH_OK;  // the other thread filled the stack
            break;
          default:
            rc = writer.phase_end();
            if (rc == STEPWATCH_OK) ++c[t].ends;
            if (rc == STEPWATCH_EPHASE) rc = STEPWATCH_OK;  // the other thread emptied it
            break;
        }
        if (rc == STEPWATCH_EBUSY)
          ++c[t].busy;
        else if (rc != STEPWATCH_OK)
          ++c[t].other;
      }
    };
    std::thread a(body, 0), b(body, 1);
    a.join();
    b.join();
    for (int t = 0; t < 2; ++t) {
      total[t].steps += c[t].steps;
      total[t].beats += c[t].beats;
      total[t].begins += c[t].begins;
      total[t].ends += c[t].ends;
      total[t].busy += c[t].busy;
      total[t].other += c[t].other;
    }
  }
  std::printf("busy: %llu and %llu\n", static_cast<unsigned long long>(total[0].busy),
              static_cast<unsigned long long>(total[1].busy));
  EXPECT_GT(total[0].busy + total[1].busy, 0u) << "two threads on one beacon never collided";
  EXPECT_EQ(total[0].other + total[1].other, 0u);

  // Every accepted call is in the record exactly once; refused ones left no trace.
  auto s = read_beacon_file(writer.path());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->step_count, 1 + total[0].steps + total[1].steps);
  EXPECT_EQ(s->beat_count, total[0].beats + total[1].beats);
  EXPECT_EQ(s->phase_count, 1 + total[0].begins + total[1].begins + total[0].ends + total[1].ends)
      << "one init->train plus one per accepted begin and end";
  uint64_t open = total[0].begins + total[1].begins - total[0].ends - total[1].ends;
  EXPECT_LE(open, static_cast<uint64_t>(STEPWATCH_PHASE_DEPTH));
  // The phase stack is exactly as deep as the accepted calls say.
  for (uint64_t i = 0; i < open; ++i) {
    EXPECT_THAT(read_beacon_file(writer.path())->phase, ::testing::StartsWith("thread-"));
    ASSERT_EQ(writer.phase_end(), STEPWATCH_OK) << i;
  }
  EXPECT_EQ(writer.phase_end(), STEPWATCH_EPHASE);
  EXPECT_EQ(read_beacon_file(writer.path())->phase, "train");
  EXPECT_EQ(__atomic_load_n(&writer.record()->seq, __ATOMIC_ACQUIRE) % 2, 0u);
}

}  // namespace
}  // namespace stepwatch::contract
