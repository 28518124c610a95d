// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The C ABI of libstepwatch.so, called the way a trainer calls it.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "src/contract/beacon_reader.h"
#include "stepwatch/stepwatch.h"
#include "tests/contract/test_support.h"

namespace {

using stepwatch::contract::RankSnapshot;
using stepwatch::contract::read_beacon_file;
using ::testing::HasSubstr;

const int kAllCodes[] = {STEPWATCH_OK,     STEPWATCH_EINVAL,   STEPWATCH_ENOJOB, STEPWATCH_ENORANK,
                         STEPWATCH_EIO,    STEPWATCH_ENULL,    STEPWATCH_EBUSY,  STEPWATCH_ENOMEM,
                         STEPWATCH_EPHASE, STEPWATCH_EINTERNAL};

class CApi : public ::testing::Test {
 protected:
  void SetUp() override { env_.clear_identity(); }
  void TearDown() override { stepwatch_close(sw_); }

  stepwatch_options options(const char* job = "c-api", int rank = 0, int world = 1) {
    stepwatch_options o;
    stepwatch_options_init(&o);
    root_s_ = root_ / "root";
    o.dir = root_s_.c_str();
    o.job = job;
    o.rank = rank;
    o.world_size = world;
    return o;
  }
  RankSnapshot read() {
    auto s = read_beacon_file(stepwatch_path(sw_));
    if (!s) {
      ADD_FAILURE() << s.error().message;
      return {};
    }
    return *s;
  }

  stepwatch::test::ScopedEnv env_;
  stepwatch::test::TempDir root_;
  std::string root_s_;
  stepwatch_t* sw_ = nullptr;
};

TEST_F(CApi, EveryCallOnANullHandleIsENULL) {
  EXPECT_EQ(stepwatch_step(nullptr, 1), STEPWATCH_ENULL);
  EXPECT_EQ(stepwatch_step(nullptr, -1), STEPWATCH_ENULL) << "the handle is checked first";
  EXPECT_EQ(stepwatch_step_loss(nullptr, 1, 0.5), STEPWATCH_ENULL);
  EXPECT_EQ(stepwatch_loss(nullptr, 0.5), STEPWATCH_ENULL);
  EXPECT_EQ(stepwatch_beat(nullptr), STEPWATCH_ENULL);
  EXPECT_EQ(stepwatch_phase_begin(nullptr, "eval"), STEPWATCH_ENULL);
  EXPECT_EQ(stepwatch_phase_begin(nullptr, nullptr), STEPWATCH_ENULL);
  EXPECT_EQ(stepwatch_phase_end(nullptr), STEPWATCH_ENULL);
  EXPECT_EQ(stepwatch_checkpoint_committed(nullptr, "c", 1), STEPWATCH_ENULL);
  EXPECT_EQ(stepwatch_finish(nullptr, 1), STEPWATCH_ENULL);
  EXPECT_STREQ(stepwatch_path(nullptr), "");
  stepwatch_close(nullptr);         // a no-op
  stepwatch_options_init(nullptr);  // a no-op
}

TEST_F(CApi, StrerrorForEveryCode) {
  std::set<std::string> texts;
  for (int code : kAllCodes) {
    const char* t = stepwatch_strerror(code);
    ASSERT_NE(t, nullptr) << code;
    EXPECT_GT(std::strlen(t), 1u) << code;
    EXPECT_STRNE(t, stepwatch_strerror(12345)) << code << " has its own text";
    texts.insert(t);
  }
  EXPECT_EQ(texts.size(), std::size(kAllCodes)) << "every code has distinct text";
  EXPECT_STREQ(stepwatch_strerror(STEPWATCH_OK), "ok");
  EXPECT_THAT(stepwatch_strerror(STEPWATCH_ENOJOB), HasSubstr("STEPWATCH_JOB"));
  EXPECT_THAT(stepwatch_strerror(STEPWATCH_EBUSY), HasSubstr("busy"));
  for (int unknown : {1, -10, -100, 12345}) {
    EXPECT_STREQ(stepwatch_strerror(unknown), "unknown stepwatch error code") << unknown;
  }
  // The codes are the documented negative values.
  EXPECT_EQ(STEPWATCH_EINVAL, -1);
  EXPECT_EQ(STEPWATCH_EINTERNAL, -9);
  EXPECT_EQ(stepwatch_abi_version(), STEPWATCH_ABI_VERSION);
  EXPECT_EQ(stepwatch_abi_version(), 1);
}

TEST_F(CApi, OptionsInit) {
  stepwatch_options o;
  std::memset(&o, 0x5a, sizeof o);
  stepwatch_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof(stepwatch_options));
  EXPECT_EQ(o.dir, nullptr);
  EXPECT_EQ(o.job, nullptr);
  EXPECT_EQ(o.rank, -1);
  EXPECT_EQ(o.local_rank, -1);
  EXPECT_EQ(o.world_size, -1);
  EXPECT_EQ(o.incarnation, -1);
}

TEST_F(CApi, OpenWithOptions) {
  stepwatch_options o = options("c-api", 2, 4);
  o.local_rank = 0;
  o.incarnation = 6;
  ASSERT_EQ(stepwatch_open(&o, &sw_), STEPWATCH_OK) << stepwatch_last_error();
  ASSERT_NE(sw_, nullptr);
  EXPECT_STREQ(stepwatch_last_error(), "") << "success clears the detail";
  EXPECT_EQ(std::string(stepwatch_path(sw_)), root_s_ + "/c-api/rank-2.beacon");
  RankSnapshot s = read();
  EXPECT_EQ(s.job, "c-api");
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.local_rank, 0);
  EXPECT_EQ(s.world_size, 4);
  EXPECT_EQ(s.incarnation, 6u);
  EXPECT_EQ(s.pid, ::getpid());
}

TEST_F(CApi, OpenFromTheEnvironment) {
  std::string dir = root_ / "env-root";
  env_.set("STEPWATCH_DIR", dir.c_str());
  env_.set("STEPWATCH_JOB", "from-env");
  env_.set("RANK", "1");
  env_.set("LOCAL_RANK", "1");
  env_.set("WORLD_SIZE", "2");
  env_.set("STEPWATCH_INCARNATION", "3");
  ASSERT_EQ(stepwatch_open_env(&sw_), STEPWATCH_OK) << stepwatch_last_error();
  EXPECT_EQ(std::string(stepwatch_path(sw_)), dir + "/from-env/rank-1.beacon");
  RankSnapshot s = read();
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.incarnation, 3u);
  stepwatch_close(sw_);
  sw_ = nullptr;
  // NULL options mean the same as stepwatch_open_env.
  ASSERT_EQ(stepwatch_open(nullptr, &sw_), STEPWATCH_OK) << stepwatch_last_error();
  EXPECT_EQ(std::string(stepwatch_path(sw_)), dir + "/from-env/rank-1.beacon");
}

struct OpenFailure {
  const char* name;
  std::vector<std::pair<const char*, const char*>> env;
  int code;
  std::string detail_has;
};

TEST_F(CApi, FailedOpensSayWhy) {
  std::string file = root_ / "a-file";
  stepwatch::test::write_file(file, "x");
  std::string under_file = file + "/root";
  const std::vector<OpenFailure> table = {
      {"no job", {}, STEPWATCH_ENOJOB, "STEPWATCH_JOB"},
      {"invalid job", {{"STEPWATCH_JOB", "../x"}}, STEPWATCH_EINVAL, "job id"},
      {"malformed RANK", {{"STEPWATCH_JOB", "j"}, {"RANK", "x"}}, STEPWATCH_ENORANK, "RANK=\"x\""},
      {"rank >= world",
       {{"STEPWATCH_JOB", "j"}, {"RANK", "2"}, {"WORLD_SIZE", "2"}},
       STEPWATCH_ENORANK,
       "RANK=2"},
      {"world without rank",
       {{"STEPWATCH_JOB", "j"}, {"WORLD_SIZE", "2"}},
       STEPWATCH_ENORANK,
       "WORLD_SIZE=2"},
      {"slurm rank malformed",
       {{"STEPWATCH_JOB", "j"}, {"SLURM_PROCID", "1.5"}},
       STEPWATCH_ENORANK,
       "SLURM_PROCID"},
      {"directory under a file",
       {{"STEPWATCH_JOB", "j"}, {"STEPWATCH_DIR", under_file.c_str()}},
       STEPWATCH_EIO,
       under_file},
  };
  for (const auto& c : table) {
    SCOPED_TRACE(c.name);
    stepwatch::test::ScopedEnv env;
    env.clear_identity();
    for (auto& [k, v] : c.env) env.set(k, v);
    stepwatch_t* sw = reinterpret_cast<stepwatch_t*>(0x1);  // overwritten with NULL on failure
    EXPECT_EQ(stepwatch_open_env(&sw), c.code) << stepwatch_last_error();
    EXPECT_EQ(sw, nullptr);
    EXPECT_THAT(stepwatch_last_error(), HasSubstr(c.detail_has));
  }
}

TEST_F(CApi, OpenArgumentErrors) {
  stepwatch_options o = options();
  EXPECT_EQ(stepwatch_open(&o, nullptr), STEPWATCH_EINVAL);
  EXPECT_THAT(stepwatch_last_error(), HasSubstr("out is NULL"));
  EXPECT_EQ(stepwatch_open_env(nullptr), STEPWATCH_EINVAL);

  // An options struct from an older, smaller header is refused, not misread.
  o.struct_size = sizeof(stepwatch_options) - 1;
  EXPECT_EQ(stepwatch_open(&o, &sw_), STEPWATCH_EINVAL);
  EXPECT_EQ(sw_, nullptr);
  EXPECT_THAT(stepwatch_last_error(), HasSubstr("struct_size"));
  o.struct_size = 0;
  EXPECT_EQ(stepwatch_open(&o, &sw_), STEPWATCH_EINVAL);

  o = options("bad job");
  EXPECT_EQ(stepwatch_open(&o, &sw_), STEPWATCH_EINVAL);
  EXPECT_THAT(stepwatch_last_error(), HasSubstr("bad job"));
  o = options("ok", 5, 2);
  EXPECT_EQ(stepwatch_open(&o, &sw_), STEPWATCH_ENORANK);
  EXPECT_THAT(stepwatch_last_error(), HasSubstr("rank=5"));
}

TEST_F(CApi, LastErrorIsPerThread) {
  stepwatch_t* sw = nullptr;
  ASSERT_EQ(stepwatch_open_env(&sw), STEPWATCH_ENOJOB);
  std::string mine = stepwatch_last_error();
  std::string theirs;
  std::thread([&] {
    stepwatch_options o = options("bad job");
    stepwatch_t* other = nullptr;
    EXPECT_EQ(stepwatch_open(&o, &other), STEPWATCH_EINVAL);
    theirs = stepwatch_last_error();
  }).join();
  EXPECT_EQ(stepwatch_last_error(), mine);
  EXPECT_NE(theirs, mine);
}

TEST_F(CApi, FullRoundTrip) {
  stepwatch_options o = options();
  ASSERT_EQ(stepwatch_open(&o, &sw_), STEPWATCH_OK) << stepwatch_last_error();
  EXPECT_EQ(read().phase, "init");
  ASSERT_EQ(stepwatch_phase_begin(sw_, "compile"), STEPWATCH_OK);
  ASSERT_EQ(stepwatch_step(sw_, 0), STEPWATCH_OK);
  ASSERT_EQ(stepwatch_phase_end(sw_), STEPWATCH_OK);
  EXPECT_EQ(read().phase, "train");
  ASSERT_EQ(stepwatch_step_loss(sw_, 1, 2.5), STEPWATCH_OK);
  ASSERT_EQ(stepwatch_loss(sw_, 2.0), STEPWATCH_OK);
  ASSERT_EQ(stepwatch_phase_begin(sw_, "eval"), STEPWATCH_OK);
  ASSERT_EQ(stepwatch_beat(sw_), STEPWATCH_OK);
  EXPECT_EQ(read().phase, "eval");
  ASSERT_EQ(stepwatch_phase_end(sw_), STEPWATCH_OK);
  ASSERT_EQ(stepwatch_checkpoint_committed(sw_, "ckpt-1", 1), STEPWATCH_OK);
  RankSnapshot s = read();
  EXPECT_EQ(*s.step, 1);
  EXPECT_EQ(s.step_count, 2u);
  EXPECT_EQ(*s.loss, 2.0);
  EXPECT_EQ(s.beat_count, 1u);
  EXPECT_EQ(s.phase, "train");
  EXPECT_EQ(s.checkpoint->id, "ckpt-1");
  EXPECT_EQ(stepwatch_phase_end(sw_), STEPWATCH_EPHASE);
  EXPECT_EQ(stepwatch_phase_begin(sw_, "no spaces"), STEPWATCH_EINVAL);
  EXPECT_EQ(stepwatch_phase_begin(sw_, nullptr), STEPWATCH_EINVAL);
  EXPECT_EQ(stepwatch_checkpoint_committed(sw_, nullptr, 1), STEPWATCH_EINVAL);
  EXPECT_EQ(stepwatch_checkpoint_committed(sw_, "c", -1), STEPWATCH_EINVAL);
  ASSERT_EQ(stepwatch_finish(sw_, 0), STEPWATCH_OK);
  EXPECT_EQ(read().status, stepwatch::contract::RankStatus::kFailed);
  ASSERT_EQ(stepwatch_finish(sw_, 7), STEPWATCH_OK);  // any non-zero is "ok"
  EXPECT_EQ(read().status, stepwatch::contract::RankStatus::kFinished);

  // Closing keeps the file for the watchdog.
  std::string path = stepwatch_path(sw_);
  stepwatch_close(sw_);
  sw_ = nullptr;
  auto after = read_beacon_file(path);
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_EQ(*after->step, 1);
}

TEST_F(CApi, NegativeStepIsEINVALAndWritesNothing) {
  stepwatch_options o = options();
  ASSERT_EQ(stepwatch_open(&o, &sw_), STEPWATCH_OK) << stepwatch_last_error();
  ASSERT_EQ(stepwatch_step(sw_, 4), STEPWATCH_OK);
  std::string before = stepwatch::test::read_file(stepwatch_path(sw_));
  EXPECT_EQ(stepwatch_step(sw_, -1), STEPWATCH_EINVAL);
  EXPECT_EQ(stepwatch_step(sw_, INT64_MIN), STEPWATCH_EINVAL);
  EXPECT_EQ(stepwatch_step_loss(sw_, -2, 1.0), STEPWATCH_EINVAL);
  EXPECT_EQ(stepwatch::test::read_file(stepwatch_path(sw_)), before);
  EXPECT_EQ(*read().step, 4);
  ASSERT_EQ(stepwatch_step(sw_, INT64_MAX), STEPWATCH_OK);
  EXPECT_EQ(*read().step, INT64_MAX);
}

TEST_F(CApi, BusyWhileAnotherWriterIsInside) {
  stepwatch_options o = options();
  ASSERT_EQ(stepwatch_open(&o, &sw_), STEPWATCH_OK) << stepwatch_last_error();
  // Another writer (here: a second mapping) holds the sequence lock.
  auto* b = static_cast<stepwatch_beacon_v1*>(nullptr);
  int fd = ::open(stepwatch_path(sw_), O_RDWR);
  ASSERT_GE(fd, 0);
  void* mem = ::mmap(nullptr, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(mem, MAP_FAILED);
  b = static_cast<stepwatch_beacon_v1*>(mem);
  uint64_t seq = __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE);
  __atomic_store_n(&b->seq, seq + 1, __ATOMIC_RELEASE);
  EXPECT_EQ(stepwatch_step(sw_, 1), STEPWATCH_EBUSY);
  EXPECT_EQ(stepwatch_beat(sw_), STEPWATCH_EBUSY);
  EXPECT_EQ(stepwatch_phase_begin(sw_, "eval"), STEPWATCH_EBUSY);
  __atomic_store_n(&b->seq, seq + 2, __ATOMIC_RELEASE);
  ::munmap(mem, sizeof *b);
  EXPECT_EQ(stepwatch_step(sw_, 1), STEPWATCH_OK);
  EXPECT_EQ(read().step_count, 1u);
}

}  // namespace
