// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// stepwatch.hpp: the RAII handle and scoped phase over the C ABI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "src/contract/beacon_reader.h"
#include "stepwatch/stepwatch.hpp"
#include "tests/contract/test_support.h"

namespace {

using stepwatch::OnDestroy;
using stepwatch::contract::RankStatus;
using ::testing::HasSubstr;

static_assert(!std::is_copy_constructible_v<stepwatch::Handle>);
static_assert(std::is_nothrow_move_constructible_v<stepwatch::Handle>);
static_assert(noexcept(stepwatch::Handle::from_env()));

class CppHeader : public ::testing::Test {
 public:
  void SetUp() override { env_.clear_identity(); }
  stepwatch::Handle open(int rank = 0, OnDestroy on_destroy = OnDestroy::kFailIfUnwinding) {
    stepwatch_options o;
    stepwatch_options_init(&o);
    root_s_ = root_ / "root";
    o.dir = root_s_.c_str();
    o.job = "cpp";
    o.rank = rank;
    o.world_size = 2;
    return stepwatch::Handle::open(o, on_destroy);
  }
  // The status a beacon file says, read after its handle is gone.
  RankStatus status_of(const std::string& path) {
    auto s = stepwatch::contract::read_beacon_file(path);
    if (!s) {
      ADD_FAILURE() << s.error().message;
      return RankStatus::kRunning;
    }
    return s->status;
  }
  std::string phase(const stepwatch::Handle& h) {
    auto s = stepwatch::contract::read_beacon_file(h.path());
    if (!s) {
      ADD_FAILURE() << s.error().message;
      return "";
    }
    return s->phase;
  }
  stepwatch::test::ScopedEnv env_;
  stepwatch::test::TempDir root_;
  std::string root_s_;
};

TEST_F(CppHeader, FromEnvWithoutAJobIsDisabledNotThrown) {
  stepwatch::Handle h = stepwatch::Handle::from_env();
  EXPECT_FALSE(h.enabled());
  EXPECT_FALSE(static_cast<bool>(h));
  EXPECT_EQ(h.raw(), nullptr);
  EXPECT_EQ(h.open_code(), STEPWATCH_ENOJOB);
  EXPECT_THAT(h.open_error(), HasSubstr("STEPWATCH_JOB"));
  // Every call is a harmless ENULL: the trainer keeps running.
  EXPECT_EQ(h.step(1), STEPWATCH_ENULL);
  EXPECT_EQ(h.step(1, 0.5), STEPWATCH_ENULL);
  EXPECT_EQ(h.loss(0.5), STEPWATCH_ENULL);
  EXPECT_EQ(h.beat(), STEPWATCH_ENULL);
  EXPECT_EQ(h.phase_begin("eval"), STEPWATCH_ENULL);
  EXPECT_EQ(h.phase_end(), STEPWATCH_ENULL);
  EXPECT_EQ(h.checkpoint_committed("c", 1), STEPWATCH_ENULL);
  EXPECT_EQ(h.finish(), STEPWATCH_ENULL);
  EXPECT_STREQ(h.path(), "");
  {
    stepwatch::ScopedPhase p(h, "eval");
    EXPECT_EQ(p.code(), STEPWATCH_ENULL);
  }
  stepwatch::Handle never_opened;
  EXPECT_EQ(never_opened.open_code(), STEPWATCH_ENULL);
}

TEST_F(CppHeader, FromEnvWithAJob) {
  std::string dir = root_ / "env";
  env_.set("STEPWATCH_DIR", dir.c_str());
  env_.set("STEPWATCH_JOB", "cpp-env");
  stepwatch::Handle h = stepwatch::Handle::from_env();
  ASSERT_TRUE(h.enabled()) << h.open_error();
  EXPECT_EQ(h.open_code(), STEPWATCH_OK);
  EXPECT_EQ(h.open_error(), "");
  EXPECT_EQ(std::string(h.path()), dir + "/cpp-env/rank-0.beacon");
}

TEST_F(CppHeader, OpenErrorNamesTheVariable) {
  env_.set("STEPWATCH_JOB", "j");
  env_.set("WORLD_SIZE", "4");
  stepwatch::Handle h = stepwatch::Handle::from_env();
  EXPECT_FALSE(h.enabled());
  EXPECT_EQ(h.open_code(), STEPWATCH_ENORANK);
  EXPECT_THAT(h.open_error(), HasSubstr("WORLD_SIZE=4"));
}

TEST_F(CppHeader, ScopedPhaseRestoresThePhase) {
  stepwatch::Handle h = open();
  ASSERT_TRUE(h) << h.open_error();
  ASSERT_EQ(h.step(0, 1.0), STEPWATCH_OK);
  EXPECT_EQ(phase(h), "train");
  {
    stepwatch::ScopedPhase eval(h, "eval");
    EXPECT_EQ(eval.code(), STEPWATCH_OK);
    EXPECT_EQ(phase(h), "eval");
    {
      stepwatch::ScopedPhase shard(h, "ckpt:shard-3");
      EXPECT_EQ(phase(h), "ckpt:shard-3");
    }
    EXPECT_EQ(phase(h), "eval");
    // A refused phase does not end the enclosing one when it goes out of scope.
    {
      stepwatch::ScopedPhase bad(h, "not valid");
      EXPECT_EQ(bad.code(), STEPWATCH_EINVAL);
    }
    EXPECT_EQ(phase(h), "eval");
  }
  EXPECT_EQ(phase(h), "train");
  EXPECT_EQ(h.phase_end(), STEPWATCH_EPHASE) << "the scopes left nothing open";
}

TEST_F(CppHeader, StepsLossAndCheckpoint) {
  stepwatch::Handle h = open(1);
  ASSERT_TRUE(h) << h.open_error();
  ASSERT_EQ(h.step(7), STEPWATCH_OK);
  ASSERT_EQ(h.step(8, 0.25), STEPWATCH_OK);
  ASSERT_EQ(h.beat(), STEPWATCH_OK);
  ASSERT_EQ(h.checkpoint_committed("c-8", 8), STEPWATCH_OK);
  ASSERT_EQ(h.finish(false), STEPWATCH_OK);
  auto s = stepwatch::contract::read_beacon_file(h.path());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(*s->step, 8);
  EXPECT_EQ(*s->loss, 0.25);
  EXPECT_EQ(s->beat_count, 1u);
  EXPECT_EQ(s->checkpoint->id, "c-8");
  EXPECT_EQ(s->status, stepwatch::contract::RankStatus::kFailed);
  EXPECT_EQ(h.step(-1), STEPWATCH_EINVAL);
}

TEST_F(CppHeader, MovesTransferTheHandle) {
  stepwatch::Handle a = open(0);
  ASSERT_TRUE(a) << a.open_error();
  stepwatch_t* raw = a.raw();
  stepwatch::Handle b(std::move(a));
  EXPECT_FALSE(
      a.enabled());  // NOLINT(bugprone-use-after-move): the moved-from state is part of the API
  EXPECT_EQ(a.step(1), STEPWATCH_ENULL);
  EXPECT_EQ(b.raw(), raw);
  EXPECT_EQ(b.open_code(), STEPWATCH_OK);
  EXPECT_EQ(b.step(1), STEPWATCH_OK);

  stepwatch::Handle c = open(1);
  ASSERT_TRUE(c);
  std::string c_path = c.path();
  c = std::move(b);  // closes rank 1's handle, takes rank 0's
  EXPECT_EQ(c.raw(), raw);
  EXPECT_EQ(c.step(2), STEPWATCH_OK);
  auto s = stepwatch::contract::read_beacon_file(c.path());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s->step, 2);
  EXPECT_TRUE(stepwatch::contract::read_beacon_file(c_path).ok()) << "closing keeps the file";

  stepwatch::Handle& self = c;
  c = std::move(self);
  EXPECT_EQ(c.raw(), raw) << "self-move keeps the handle";
}

// ---- what a handle says when it is destroyed without finish() ----

TEST_F(CppHeader, NormalDestructionSaysNothingByDefault) {
  std::string path;
  {
    stepwatch::Handle h = open();
    ASSERT_TRUE(h) << h.open_error();
    EXPECT_EQ(h.on_destroy(), OnDestroy::kFailIfUnwinding);
    ASSERT_EQ(h.step(1), STEPWATCH_OK);
    path = h.path();
  }
  // A destructor cannot tell `return 0` from `return 1` or an early scope exit: the watchdog
  // judges the rank from its process's exit.
  EXPECT_EQ(status_of(path), RankStatus::kRunning);
}

TEST_F(CppHeader, UnwindingSaysFailed) {
  std::string path;
  try {
    stepwatch::Handle h = open();
    ASSERT_TRUE(h) << h.open_error();
    ASSERT_EQ(h.step(1), STEPWATCH_OK);
    path = h.path();
    throw std::runtime_error("the training loop threw");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(status_of(path), RankStatus::kFailed);
}

TEST_F(CppHeader, FinishOrFailSaysFinishedOnNormalDestruction) {
  std::string finished, failed;
  {
    stepwatch::Handle h = open(0, OnDestroy::kFinishOrFail);
    ASSERT_TRUE(h) << h.open_error();
    finished = h.path();
  }
  try {
    stepwatch::Handle h = open(1);
    h.set_on_destroy(OnDestroy::kFinishOrFail);
    failed = h.path();
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(status_of(finished), RankStatus::kFinished);
  EXPECT_EQ(status_of(failed), RankStatus::kFailed);
}

TEST_F(CppHeader, NothingNeverWritesAtDestruction) {
  std::string path;
  try {
    stepwatch::Handle h = open(0, OnDestroy::kNothing);
    path = h.path();
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(status_of(path), RankStatus::kRunning);
}

TEST_F(CppHeader, AnExplicitFinishIsFinal) {
  std::string finished, failed;
  try {
    stepwatch::Handle h = open(0);
    finished = h.path();
    ASSERT_EQ(h.finish(true), STEPWATCH_OK);
    throw std::runtime_error("after the end");  // e.g. a crash in teardown code
  } catch (const std::runtime_error&) {
  }
  {
    stepwatch::Handle h = open(1, OnDestroy::kFinishOrFail);
    failed = h.path();
    ASSERT_EQ(h.finish(false), STEPWATCH_OK);
  }
  EXPECT_EQ(status_of(finished), RankStatus::kFinished);
  EXPECT_EQ(status_of(failed), RankStatus::kFailed);
}

// Opens a handle inside a destructor that runs while an exception unwinds: that handle is not
// itself being unwound when it goes out of scope.
struct OpensWhileUnwinding {
  CppHeader* test;
  int rank;
  OnDestroy on_destroy;
  std::string* path;
  ~OpensWhileUnwinding() {
    stepwatch::Handle h = test->open(rank, on_destroy);
    *path = h.path();
  }
};

TEST_F(CppHeader, AHandleOpenedDuringUnwindingIsNotUnwound) {
  std::string quiet, finished;
  try {
    OpensWhileUnwinding a{this, 0, OnDestroy::kFailIfUnwinding, &quiet};
    OpensWhileUnwinding b{this, 1, OnDestroy::kFinishOrFail, &finished};
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  ASSERT_FALSE(quiet.empty());
  EXPECT_EQ(status_of(quiet), RankStatus::kRunning);
  EXPECT_EQ(status_of(finished), RankStatus::kFinished);
}

TEST_F(CppHeader, MovesCarryThePolicyAndAReplacedHandleEnds) {
  std::string moved_path, replaced_path;
  {
    stepwatch::Handle a = open(0, OnDestroy::kFinishOrFail);
    moved_path = a.path();
    stepwatch::Handle b(std::move(a));
    EXPECT_EQ(b.on_destroy(), OnDestroy::kFinishOrFail);
    stepwatch::Handle c = open(1, OnDestroy::kFinishOrFail);
    replaced_path = c.path();
    c = std::move(b);  // rank 1's handle ends here, as at destruction
    EXPECT_EQ(status_of(replaced_path), RankStatus::kFinished);
    EXPECT_EQ(status_of(moved_path), RankStatus::kRunning);
  }  // a and b are empty; c (rank 0) ends
  EXPECT_EQ(status_of(moved_path), RankStatus::kFinished);
}

}  // namespace
