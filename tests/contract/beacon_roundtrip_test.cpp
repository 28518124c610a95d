// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Writer + reader round trip: every field the writer stores comes back through the reader.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

#include "src/common/clock.h"
#include "src/common/proc_stat.h"
#include "src/contract/beacon_reader.h"
#include "src/contract/beacon_writer.h"
#include "src/contract/names.h"
#include "tests/contract/test_support.h"

namespace stepwatch::contract {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class BeaconRoundTrip : public ::testing::Test {
 protected:
  Identity identity(int rank = 1, int world = 4) const {
    Identity id;
    id.dir = root_.path() + "/root";
    id.job = "rt-job";
    id.host = "node-7";
    id.rank = rank;
    id.local_rank = rank % 2;
    id.world_size = world;
    id.incarnation = 3;
    return id;
  }
  std::unique_ptr<BeaconWriter> make(const Identity& id) {
    auto w = BeaconWriter::create(id);
    if (!w) ADD_FAILURE() << w.error().message;
    return w ? std::move(*w) : nullptr;
  }
  RankSnapshot read(const BeaconWriter& w) {
    auto s = read_beacon_file(w.path(), {.expected_job = "rt-job"});
    if (!s) {
      ADD_FAILURE() << s.error().message;
      return {};
    }
    return std::move(*s);
  }
  uint64_t seq(const BeaconWriter& w) {
    return __atomic_load_n(&w.record()->seq, __ATOMIC_ACQUIRE);
  }

  test::TempDir root_;
};

TEST_F(BeaconRoundTrip, FreshBeaconHasTheInitialValues) {
  int64_t before_wall = wall_now_ns(), before_mono = mono_now_ns();
  auto w = make(identity());
  int64_t after_wall = wall_now_ns(), after_mono = mono_now_ns();
  ASSERT_TRUE(w);
  EXPECT_EQ(w->path(), root_.path() + "/root/rt-job/rank-1.beacon");
  EXPECT_EQ(std::filesystem::file_size(w->path()), STEPWATCH_BEACON_V1_SIZE);

  RankSnapshot s = read(*w);
  EXPECT_EQ(s.source, Source::kBeacon);
  EXPECT_EQ(s.path, w->path());
  EXPECT_EQ(s.job, "rt-job");
  EXPECT_EQ(s.host, "node-7");
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_EQ(s.world_size, 4);
  EXPECT_EQ(s.incarnation, 3u);
  EXPECT_EQ(s.pid, ::getpid());
  EXPECT_EQ(s.status, RankStatus::kRunning);
  EXPECT_FALSE(s.step.has_value());
  EXPECT_EQ(s.step_count, 0u);
  EXPECT_EQ(s.phase, "init");
  EXPECT_EQ(s.phase_count, 0u);
  EXPECT_FALSE(s.beat_at.has_value());
  EXPECT_EQ(s.beat_count, 0u);
  EXPECT_FALSE(s.checkpoint.has_value());
  EXPECT_FALSE(s.loss.has_value());
  EXPECT_TRUE(s.recent.empty());
  EXPECT_GE(s.created.wall_ns, before_wall);
  EXPECT_LE(s.created.wall_ns, after_wall);
  EXPECT_GE(s.created.mono_ns, before_mono);
  EXPECT_LE(s.created.mono_ns, after_mono);
  EXPECT_EQ(s.phase_since.wall_ns, s.created.wall_ns);
  EXPECT_EQ(s.phase_since.mono_ns, s.created.mono_ns);
  EXPECT_EQ(s.updated_mono_ns, s.created.mono_ns);

  // The bytes on disk, as docs/contract.md lists the initial values.
  stepwatch_beacon_v1 b = test::beacon_from_file(w->path());
  EXPECT_EQ(b.magic, STEPWATCH_BEACON_MAGIC);
  EXPECT_EQ(std::memcmp(&b.magic, "SWBEACON", 8), 0);
  EXPECT_EQ(b.version, 1u);
  EXPECT_EQ(b.size, 1024u);
  EXPECT_EQ(b.seq, 0u);
  EXPECT_EQ(b.step, -1);
  EXPECT_EQ(b.ckpt_step, -1);
  EXPECT_TRUE(std::isnan(b.loss));
  EXPECT_EQ(b.loss_wall_ns, 0);
  EXPECT_EQ(b.beat_wall_ns, 0);
  EXPECT_EQ(b.step_wall_ns, 0);
  for (uint8_t z : b.reserved0) EXPECT_EQ(z, 0);
  for (uint8_t z : b.reserved1) EXPECT_EQ(z, 0);
  EXPECT_EQ(b.sample_seq, 0u);
  EXPECT_EQ(b.sample_count, 0u);
}

TEST_F(BeaconRoundTrip, PidStartTicksIsField22OfProcSelfStat) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  auto self = read_proc_stat("/proc", ::getpid());
  ASSERT_TRUE(self.ok()) << self.error().message;
  ASSERT_GT(self->start_ticks, 0u);
  // Independent check of field 22 (the line after the last ')' starts at field 3).
  std::string stat = test::read_file("/proc/self/stat");
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string tok;
  for (int field = 3; field <= 22; ++field) rest >> tok;
  EXPECT_EQ(std::to_string(self->start_ticks), tok);
  RankSnapshot s = read(*w);
  EXPECT_EQ(s.pid_start_ticks, self->start_ticks);
  EXPECT_EQ(s.pid, ::getpid());
}

TEST_F(BeaconRoundTrip, ProcRootIsInjectable) {
  // A fake /proc with this pid's stat: the writer takes the start time from there.
  std::string proc = root_ / "proc";
  std::filesystem::create_directories(proc + "/" + std::to_string(::getpid()));
  test::write_file(proc + "/" + std::to_string(::getpid()) + "/stat",
                   std::to_string(::getpid()) +
                       " (my trainer) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 987654 0 0\n");
  auto w = BeaconWriter::create(identity(), proc);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(read(**w).pid_start_ticks, 987654u);

  // An unreadable stat is not fatal: the guard is 0 ("unknown").
  auto w2 = BeaconWriter::create(identity(2), root_ / "no-proc-here");
  ASSERT_TRUE(w2.ok()) << w2.error().message;
  EXPECT_EQ(read(**w2).pid_start_ticks, 0u);
}

TEST_F(BeaconRoundTrip, StepStoresEveryProgressField) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  uint64_t seq0 = seq(*w);
  int64_t before = mono_now_ns(), before_wall = wall_now_ns();
  ASSERT_EQ(w->step(5), STEPWATCH_OK);
  int64_t after = mono_now_ns(), after_wall = wall_now_ns();
  EXPECT_EQ(seq(*w), seq0 + 2);

  RankSnapshot s = read(*w);
  ASSERT_TRUE(s.step.has_value());
  EXPECT_EQ(*s.step, 5);
  EXPECT_EQ(s.step_count, 1u);
  EXPECT_GE(s.step_at.mono_ns, before);
  EXPECT_LE(s.step_at.mono_ns, after);
  EXPECT_GE(s.step_at.wall_ns, before_wall);
  EXPECT_LE(s.step_at.wall_ns, after_wall);
  EXPECT_EQ(s.updated_mono_ns, s.step_at.mono_ns);
  EXPECT_EQ(s.updated.wall_ns, s.step_at.wall_ns);
  ASSERT_EQ(s.recent.size(), 1u);
  EXPECT_EQ(s.recent[0].step, 5);
  EXPECT_EQ(s.recent[0].mono_ns, s.step_at.mono_ns);
  EXPECT_FALSE(s.loss.has_value()) << "a plain step does not report a loss";

  // Step numbers are the trainer's: they may jump back on resume; step_count only grows.
  ASSERT_EQ(w->step(100), STEPWATCH_OK);
  ASSERT_EQ(w->step(3), STEPWATCH_OK);
  s = read(*w);
  EXPECT_EQ(*s.step, 3);
  EXPECT_EQ(s.step_count, 3u);
  ASSERT_EQ(s.recent.size(), 3u);
  EXPECT_EQ(s.recent[0].step, 5);
  EXPECT_EQ(s.recent[1].step, 100);
  EXPECT_EQ(s.recent[2].step, 3);
  EXPECT_EQ(seq(*w), seq0 + 6);
}

TEST_F(BeaconRoundTrip, RecentRingIsOldestFirstAcrossWraparound) {
  for (int commits : {1, 2, 15, 16, 17, 31, 32, 33, 40}) {
    SCOPED_TRACE(commits);
    auto w = make(identity());
    ASSERT_TRUE(w);
    for (int i = 0; i < commits; ++i) ASSERT_EQ(w->step(int64_t{10} * i), STEPWATCH_OK);
    RankSnapshot s = read(*w);
    size_t want = std::min<size_t>(commits, STEPWATCH_RECENT_STEPS);
    ASSERT_EQ(s.recent.size(), want);
    for (size_t k = 0; k < want; ++k) {
      EXPECT_EQ(s.recent[k].step,
                int64_t{10} * (commits - static_cast<int>(want) + static_cast<int>(k)))
          << k;
      if (k > 0) {
        EXPECT_GE(s.recent[k].mono_ns, s.recent[k - 1].mono_ns);
      }
    }
    EXPECT_EQ(s.recent.back().step, *s.step);
    EXPECT_EQ(s.recent.back().mono_ns, s.step_at.mono_ns);
    // Slot placement on disk: commit k (1-based) lives in slot (k-1) % 16.
    stepwatch_beacon_v1 b = test::beacon_from_file(w->path());
    EXPECT_EQ(b.recent[(commits - 1) % STEPWATCH_RECENT_STEPS].step, int64_t{10} * (commits - 1));
  }
}

TEST_F(BeaconRoundTrip, FirstStepMovesUnlabeledInitToTrain) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  ASSERT_EQ(w->step(0), STEPWATCH_OK);
  RankSnapshot s = read(*w);
  EXPECT_EQ(s.phase, "train");
  EXPECT_EQ(s.phase_count, 1u);
  EXPECT_EQ(s.phase_since.mono_ns, s.step_at.mono_ns);
  ASSERT_EQ(w->step(1), STEPWATCH_OK);
  s = read(*w);
  EXPECT_EQ(s.phase_count, 1u) << "later steps do not count as phase changes";
}

TEST_F(BeaconRoundTrip, PhasesNestAndRestore) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  ASSERT_EQ(w->step(0), STEPWATCH_OK);  // init -> train
  ASSERT_EQ(w->phase_begin("data"), STEPWATCH_OK);
  RankSnapshot s = read(*w);
  EXPECT_EQ(s.phase, "data");
  EXPECT_EQ(s.phase_count, 2u);
  int64_t data_since = s.phase_since.mono_ns;
  EXPECT_GE(data_since, s.step_at.mono_ns);

  ASSERT_EQ(w->phase_begin("eval"), STEPWATCH_OK);
  EXPECT_EQ(read(*w).phase, "eval");
  ASSERT_EQ(w->step(1), STEPWATCH_OK);
  EXPECT_EQ(read(*w).phase, "eval") << "a step inside a labeled phase keeps the label";
  ASSERT_EQ(w->phase_end(), STEPWATCH_OK);
  s = read(*w);
  EXPECT_EQ(s.phase, "data");
  EXPECT_GE(s.phase_since.mono_ns, data_since) << "returning to a phase restarts its clock";
  ASSERT_EQ(w->phase_end(), STEPWATCH_OK);
  s = read(*w);
  EXPECT_EQ(s.phase, "train");
  EXPECT_EQ(s.phase_count, 5u);
  EXPECT_EQ(w->phase_end(), STEPWATCH_EPHASE) << "phase_end without phase_begin";
  EXPECT_EQ(read(*w).phase_count, 5u);
}

TEST_F(BeaconRoundTrip, PhaseWithoutStepsReturnsToInit) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  ASSERT_EQ(w->phase_begin("compile"), STEPWATCH_OK);
  EXPECT_EQ(read(*w).phase, "compile");
  ASSERT_EQ(w->phase_end(), STEPWATCH_OK);
  EXPECT_EQ(read(*w).phase, "init") << "no step yet: still initialising";
  ASSERT_EQ(w->step(0), STEPWATCH_OK);
  RankSnapshot s = read(*w);
  EXPECT_EQ(s.phase, "train");
  EXPECT_EQ(s.phase_count, 3u);
}

TEST_F(BeaconRoundTrip, CompilePhaseThatContainedStepsEndsInit) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  ASSERT_EQ(w->phase_begin("compile"), STEPWATCH_OK);
  ASSERT_EQ(w->step(0), STEPWATCH_OK);  // the first step compiles the graph
  EXPECT_EQ(read(*w).phase, "compile");
  ASSERT_EQ(w->phase_end(), STEPWATCH_OK);
  EXPECT_EQ(read(*w).phase, "train");

  // The same through two levels: init > compile > warmup.
  auto w2 = make(identity(2));
  ASSERT_TRUE(w2);
  ASSERT_EQ(w2->phase_begin("compile"), STEPWATCH_OK);
  ASSERT_EQ(w2->phase_begin("warmup"), STEPWATCH_OK);
  ASSERT_EQ(w2->step(0), STEPWATCH_OK);
  ASSERT_EQ(w2->phase_end(), STEPWATCH_OK);
  EXPECT_EQ(read(*w2).phase, "compile");
  ASSERT_EQ(w2->phase_end(), STEPWATCH_OK);
  EXPECT_EQ(read(*w2).phase, "train");
}

TEST_F(BeaconRoundTrip, PhaseDepthLimit) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  ASSERT_EQ(w->step(0), STEPWATCH_OK);
  for (int d = 0; d < STEPWATCH_PHASE_DEPTH; ++d) {
    ASSERT_EQ(w->phase_begin(("p" + std::to_string(d)).c_str()), STEPWATCH_OK) << d;
  }
  uint64_t seq_full = seq(*w);
  EXPECT_EQ(w->phase_begin("one-too-many"), STEPWATCH_EPHASE);
  EXPECT_EQ(seq(*w), seq_full) << "a refused call writes nothing";
  EXPECT_EQ(read(*w).phase, "p7");
  for (int d = STEPWATCH_PHASE_DEPTH - 1; d >= 0; --d) {
    EXPECT_EQ(read(*w).phase, "p" + std::to_string(d));
    ASSERT_EQ(w->phase_end(), STEPWATCH_OK) << d;
  }
  EXPECT_EQ(read(*w).phase, "train");
  EXPECT_EQ(w->phase_end(), STEPWATCH_EPHASE);
  // The stack is usable again after hitting the limit.
  ASSERT_EQ(w->phase_begin("eval"), STEPWATCH_OK);
  ASSERT_EQ(w->phase_end(), STEPWATCH_OK);
  EXPECT_EQ(read(*w).phase, "train");
}

TEST_F(BeaconRoundTrip, InvalidPhaseNamesAreRefusedWithoutWriting) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  std::string longest(31, 'x');
  std::string too_long(32, 'x');
  const char* bad[] = {nullptr,   "",           too_long.c_str(),    "has space", "tab\t",
                       "quote\"", "semi;colon", "\xc3\xa9t\xc3\xa9", "new\nline"};
  uint64_t seq0 = seq(*w);
  for (const char* name : bad) {
    EXPECT_EQ(w->phase_begin(name), STEPWATCH_EINVAL) << (name ? name : "(null)");
  }
  EXPECT_EQ(seq(*w), seq0);
  RankSnapshot s = read(*w);
  EXPECT_EQ(s.phase, "init");
  EXPECT_EQ(s.phase_count, 0u);
  // A refused begin does not push: phase_end has nothing to end.
  EXPECT_EQ(w->phase_end(), STEPWATCH_EPHASE);

  ASSERT_EQ(w->phase_begin(longest.c_str()), STEPWATCH_OK);
  EXPECT_EQ(read(*w).phase, longest);
  ASSERT_EQ(w->phase_begin("ckpt:shard-1/of.2_x"), STEPWATCH_OK);
  EXPECT_EQ(read(*w).phase, "ckpt:shard-1/of.2_x");
  ASSERT_EQ(w->phase_end(), STEPWATCH_OK);
  EXPECT_EQ(read(*w).phase, longest) << "a shorter name leaves no tail of the longer one";
}

TEST_F(BeaconRoundTrip, Beats) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  int64_t before = mono_now_ns();
  ASSERT_EQ(w->beat(), STEPWATCH_OK);
  RankSnapshot s = read(*w);
  ASSERT_TRUE(s.beat_at.has_value());
  EXPECT_EQ(s.beat_count, 1u);
  EXPECT_GE(s.beat_at->mono_ns, before);
  EXPECT_GT(s.beat_at->wall_ns, 0);
  EXPECT_EQ(s.updated_mono_ns, s.beat_at->mono_ns);
  ASSERT_EQ(w->beat(), STEPWATCH_OK);
  s = read(*w);
  EXPECT_EQ(s.beat_count, 2u);
  EXPECT_FALSE(s.step.has_value()) << "a beat is not a step";
  EXPECT_EQ(s.phase, "init") << "a beat is not a phase change";
}

TEST_F(BeaconRoundTrip, Checkpoints) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  ASSERT_EQ(w->checkpoint_committed("gs://bucket/run-1/step-000700", 700), STEPWATCH_OK);
  RankSnapshot s = read(*w);
  ASSERT_TRUE(s.checkpoint.has_value());
  EXPECT_EQ(s.checkpoint->id, "gs://bucket/run-1/step-000700");
  EXPECT_EQ(s.checkpoint->step, 700);
  EXPECT_GT(s.checkpoint->at.mono_ns, 0);
  EXPECT_GT(s.checkpoint->at.wall_ns, 0);

  // A shorter id replaces the longer one entirely.
  ASSERT_EQ(w->checkpoint_committed("c8", 800), STEPWATCH_OK);
  s = read(*w);
  EXPECT_EQ(s.checkpoint->id, "c8");
  EXPECT_EQ(s.checkpoint->step, 800);
  stepwatch_beacon_v1 b = test::beacon_from_file(w->path());
  for (size_t i = 2; i < sizeof b.ckpt_id; ++i) EXPECT_EQ(b.ckpt_id[i], '\0') << i;

  // Step 0 is a valid checkpoint step; the longest id fits.
  std::string longest(63, 'c');
  ASSERT_EQ(w->checkpoint_committed(longest.c_str(), 0), STEPWATCH_OK);
  s = read(*w);
  EXPECT_EQ(s.checkpoint->id, longest);
  EXPECT_EQ(s.checkpoint->step, 0);
}

TEST_F(BeaconRoundTrip, InvalidCheckpointsAreRefusedWithoutWriting) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  ASSERT_EQ(w->checkpoint_committed("good", 1), STEPWATCH_OK);
  uint64_t seq0 = seq(*w);
  std::string too_long(64, 'c');
  struct Case {
    const char* id;
    int64_t step;
  } cases[] = {{nullptr, 1}, {"", 1},     {too_long.c_str(), 1}, {"a b", 1}, {"a\"b", 1},
               {"a'b", 1},   {"a\\b", 1}, {"\x7f", 1},           {"ok", -1}};
  for (const auto& c : cases) {
    EXPECT_EQ(w->checkpoint_committed(c.id, c.step), STEPWATCH_EINVAL)
        << (c.id ? c.id : "(null)") << " " << c.step;
  }
  EXPECT_EQ(seq(*w), seq0);
  RankSnapshot s = read(*w);
  EXPECT_EQ(s.checkpoint->id, "good");
  EXPECT_EQ(s.checkpoint->step, 1);
}

TEST_F(BeaconRoundTrip, LossReportedOrNot) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  EXPECT_FALSE(read(*w).loss.has_value()) << "NaN with no time: never reported";

  ASSERT_EQ(w->loss(std::numeric_limits<double>::quiet_NaN()), STEPWATCH_OK);
  RankSnapshot s = read(*w);
  ASSERT_TRUE(s.loss.has_value()) << "a reported NaN is a diverged run, not 'no loss'";
  EXPECT_TRUE(std::isnan(*s.loss));
  EXPECT_GT(s.loss_at.mono_ns, 0);

  ASSERT_EQ(w->loss(1.5), STEPWATCH_OK);
  EXPECT_EQ(*read(*w).loss, 1.5);

  ASSERT_EQ(w->step_loss(3, 2.25), STEPWATCH_OK);
  s = read(*w);
  EXPECT_EQ(*s.step, 3);
  EXPECT_EQ(*s.loss, 2.25);
  EXPECT_EQ(s.loss_at.mono_ns, s.step_at.mono_ns);
  EXPECT_EQ(s.loss_at.wall_ns, s.step_at.wall_ns);
  int64_t loss_time = s.loss_at.mono_ns;

  ASSERT_EQ(w->step(4), STEPWATCH_OK);
  s = read(*w);
  EXPECT_EQ(*s.loss, 2.25) << "a plain step keeps the last loss";
  EXPECT_EQ(s.loss_at.mono_ns, loss_time);

  ASSERT_EQ(w->step_loss(5, std::numeric_limits<double>::infinity()), STEPWATCH_OK);
  EXPECT_TRUE(std::isinf(*read(*w).loss));
  ASSERT_EQ(w->step_loss(6, -0.0), STEPWATCH_OK);
  EXPECT_EQ(*read(*w).loss, 0.0);
}

TEST_F(BeaconRoundTrip, StepLossWithNaNIsReported) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  ASSERT_EQ(w->step_loss(0, std::nan("")), STEPWATCH_OK);
  RankSnapshot s = read(*w);
  ASSERT_TRUE(s.loss.has_value());
  EXPECT_TRUE(std::isnan(*s.loss));
}

TEST_F(BeaconRoundTrip, FinishOkAndFailed) {
  auto ok = make(identity(0));
  auto failed = make(identity(1));
  ASSERT_TRUE(ok && failed);
  ASSERT_EQ(ok->step(9), STEPWATCH_OK);
  ASSERT_EQ(ok->finish(true), STEPWATCH_OK);
  ASSERT_EQ(failed->finish(false), STEPWATCH_OK);
  RankSnapshot s = read(*ok);
  EXPECT_EQ(s.status, RankStatus::kFinished);
  EXPECT_EQ(*s.step, 9) << "finishing keeps the progress";
  EXPECT_EQ(read(*failed).status, RankStatus::kFailed);
  EXPECT_EQ(test::beacon_from_file(ok->path()).status, STEPWATCH_STATUS_FINISHED);
  EXPECT_EQ(test::beacon_from_file(failed->path()).status, STEPWATCH_STATUS_FAILED);
}

TEST_F(BeaconRoundTrip, EveryUpdateMovesUpdateTimeAndSeq) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  std::vector<std::function<int()>> ops = {
      [&] { return w->step(1); },
      [&] { return w->step_loss(2, 0.5); },
      [&] { return w->loss(0.25); },
      [&] { return w->beat(); },
      [&] { return w->phase_begin("eval"); },
      [&] { return w->phase_end(); },
      [&] { return w->checkpoint_committed("c", 2); },
      [&] { return w->finish(true); },
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    uint64_t s0 = seq(*w);
    int64_t u0 = read(*w).updated_mono_ns;
    ASSERT_EQ(ops[i](), STEPWATCH_OK) << i;
    EXPECT_EQ(seq(*w), s0 + 2) << i;
    EXPECT_GE(read(*w).updated_mono_ns, u0) << i;
  }
}

TEST_F(BeaconRoundTrip, TheSamplerBlockRoundTripsAndMovesOnlyWhenThePositionChanges) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  EXPECT_FALSE(read(*w).sample.has_value());  // no sampler yet: a 1.0 record
  ASSERT_EQ(w->sample(0xfeedface12345678, STEPWATCH_WAIT_COLLECTIVE,
                      "all_reduce (distributed_c10d.py:1536)"),
            STEPWATCH_OK);
  RankSnapshot a = read(*w);
  ASSERT_TRUE(a.sample.has_value());
  EXPECT_EQ(a.sample->count, 1u);
  EXPECT_EQ(a.sample->hash, 0xfeedface12345678u);
  EXPECT_EQ(a.sample->wait, WaitKind::kCollective);
  EXPECT_EQ(a.sample->where, "all_reduce (distributed_c10d.py:1536)");
  EXPECT_EQ(a.sample->moved_at.mono_ns, a.sample->at.mono_ns);
  EXPECT_GT(a.sample->at.wall_ns, 0);

  // The same position again: the sample's stamp moves, the moved stamp does not.
  ::usleep(2000);
  ASSERT_EQ(w->sample(0xfeedface12345678, STEPWATCH_WAIT_COLLECTIVE, "ignored: unchanged"),
            STEPWATCH_OK);
  RankSnapshot b = read(*w);
  EXPECT_EQ(b.sample->count, 2u);
  EXPECT_GT(b.sample->at.mono_ns, a.sample->at.mono_ns);
  EXPECT_EQ(b.sample->moved_at.mono_ns, a.sample->moved_at.mono_ns);
  EXPECT_EQ(b.sample->where, "all_reduce (distributed_c10d.py:1536)");

  // Another wait kind at the same frames is a move too.
  ASSERT_EQ(w->sample(0xfeedface12345678, STEPWATCH_WAIT_NONE, nullptr), STEPWATCH_OK);
  RankSnapshot c = read(*w);
  EXPECT_GT(c.sample->moved_at.mono_ns, b.sample->moved_at.mono_ns);
  EXPECT_EQ(c.sample->wait, WaitKind::kNone);
  EXPECT_EQ(c.sample->where, "");

  // A sample is not a record update: the step path's seq and update time stay.
  uint64_t s0 = seq(*w);
  ASSERT_EQ(w->sample(7, STEPWATCH_WAIT_STORE, "x"), STEPWATCH_OK);
  EXPECT_EQ(seq(*w), s0);
  EXPECT_EQ(read(*w).updated_mono_ns, c.updated_mono_ns);
}

TEST_F(BeaconRoundTrip, SamplerLabelsAreCutAndCleanedAndBadWaitsRefused) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  std::string long_label(100, 'x');
  long_label[3] = '\n';
  ASSERT_EQ(w->sample(1, STEPWATCH_WAIT_NONE, long_label.c_str()), STEPWATCH_OK);
  RankSnapshot a = read(*w);
  ASSERT_TRUE(a.sample.has_value());
  EXPECT_EQ(a.sample->where.size(), STEPWATCH_WHERE_MAX - 1);
  EXPECT_EQ(a.sample->where.substr(0, 5), "xxx?x");
  EXPECT_EQ(w->sample(2, STEPWATCH_WAIT_MAX + 1, "x"), STEPWATCH_EINVAL);
  EXPECT_EQ(read(*w).sample->count, 1u);  // nothing written
}

TEST_F(BeaconRoundTrip, ASamplerInsideItsUpdateNeverMakesAStepBusy) {
  auto w = make(identity());
  ASSERT_TRUE(w);
  // Hold the sampler block's lock as a sampler thread would mid-update.
  auto* b = const_cast<stepwatch_beacon_v1*>(w->record());
  uint64_t held = 0;
  ASSERT_TRUE(seq_begin(&b->sample_seq, &held));
  EXPECT_EQ(w->step(1), STEPWATCH_OK);
  EXPECT_EQ(w->beat(), STEPWATCH_OK);
  EXPECT_EQ(w->sample(1, STEPWATCH_WAIT_NONE, "x"), STEPWATCH_EBUSY);  // the second sampler waits
  // A reader still gets the record; the block being written is absent for this read.
  RankSnapshot r = read(*w);
  EXPECT_EQ(r.step, 1);
  EXPECT_FALSE(r.sample.has_value());
  seq_end(&b->sample_seq, held);
  EXPECT_EQ(w->sample(1, STEPWATCH_WAIT_NONE, "x"), STEPWATCH_OK);
  EXPECT_TRUE(read(*w).sample.has_value());
}

TEST_F(BeaconRoundTrip, ReopeningARankReplacesTheFileAtomically) {
  Identity id = identity();
  auto first = make(id);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->step(10), STEPWATCH_OK);
  auto old_map = BeaconMapping::open(first->path());
  ASSERT_TRUE(old_map.ok()) << old_map.error().message;

  id.incarnation = 4;
  auto second = make(id);  // the restarted rank
  ASSERT_TRUE(second);
  ASSERT_EQ(second->path(), first->path());

  auto new_map = BeaconMapping::open(second->path());
  ASSERT_TRUE(new_map.ok()) << new_map.error().message;
  EXPECT_NE(new_map->inode(), old_map->inode()) << "a new file, not the old one rewritten";
  auto fresh = new_map->read();
  ASSERT_TRUE(fresh.ok()) << fresh.error().message;
  EXPECT_FALSE(fresh->step.has_value());
  EXPECT_EQ(fresh->incarnation, 4u);

  // Whoever still maps the old file sees the old record whole, and the old writer's updates
  // no longer reach the path.
  auto old_snap = old_map->read();
  ASSERT_TRUE(old_snap.ok()) << old_snap.error().message;
  EXPECT_EQ(*old_snap->step, 10);
  EXPECT_EQ(old_snap->incarnation, 3u);
  ASSERT_EQ(first->step(11), STEPWATCH_OK);
  EXPECT_EQ(*old_map->read()->step, 11);
  EXPECT_FALSE(read(*second).step.has_value());

  EXPECT_THAT(test::list_dir(root_.path() + "/root/rt-job"), ElementsAre("rank-1.beacon"))
      << "no temporary files left behind";
}

TEST_F(BeaconRoundTrip, FailedCreateLeavesNoTemporaryFile) {
  Identity id = identity();
  std::string job = root_.path() + "/root/rt-job";
  std::filesystem::create_directories(job + "/rank-1.beacon/occupied");  // rename(2) onto it fails
  auto w = BeaconWriter::create(id);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, Errc::kIo);
  EXPECT_THAT(w.error().message, HasSubstr(job + "/rank-1.beacon"));
  EXPECT_THAT(w.error().message, HasSubstr("rename"));
  EXPECT_THAT(test::list_dir(job), ElementsAre("rank-1.beacon"));
}

TEST_F(BeaconRoundTrip, CreatesTheRootShared) {
  Identity id = identity();
  id.dir = root_.path() + "/a/b/stepwatch";
  auto w = make(id);
  ASSERT_TRUE(w);
  struct stat st {};
  ASSERT_EQ(::stat(id.dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u) << "the root is shared like /tmp";
  ASSERT_EQ(::stat((id.dir + "/rt-job").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));

  // A root that is a file is an error naming it.
  Identity bad = identity();
  bad.dir = root_ / "plain-file";
  test::write_file(bad.dir, "x");
  auto w2 = BeaconWriter::create(bad);
  ASSERT_FALSE(w2.ok());
  EXPECT_EQ(w2.error().code, Errc::kIo);
  EXPECT_THAT(w2.error().message, HasSubstr(bad.dir));
}

TEST_F(BeaconRoundTrip, CreateValidatesIdentity) {
  Identity id = identity();
  id.job = "../escape";
  auto w = BeaconWriter::create(id);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, Errc::kInvalidArgument);
  EXPECT_THAT(w.error().message, HasSubstr("job id"));
  EXPECT_FALSE(std::filesystem::exists(root_.path() + "/escape"));

  id = identity();
  id.host = "bad host";
  auto w2 = BeaconWriter::create(id);
  ASSERT_FALSE(w2.ok());
  EXPECT_THAT(w2.error().message, HasSubstr("host"));
}

}  // namespace
}  // namespace stepwatch::contract
