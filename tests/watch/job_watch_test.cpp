// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// JobWatch over real beacons: the verdict's transitions told once, the learned interval told when
// it moves and restored across a restart, the front end's amendment applied before judging and
// its settlement after.
#include "src/watch/job_watch.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include "src/contract/beacon_writer.h"
#include "src/detect/spec_adapter.h"

namespace stepwatch::watch {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class JobWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fmt::format("sw-jobwatch-{}", ::getpid());
    fs::remove_all(root_);
    contract::Identity id;
    id.dir = root_.string();
    id.job = "jw";
    id.host = "here";
    auto w = contract::BeaconWriter::create(id);
    ASSERT_TRUE(w.ok()) << w.error().message;
    writer_ = std::move(*w);
  }
  void TearDown() override { fs::remove_all(root_); }
  ObserverConfig observer() const {
    ObserverConfig c;
    c.beacon_root = root_.string();
    c.job = "jw";
    c.local_host = "here";
    return c;
  }
  static detect::Config detector(std::optional<int64_t> interval_ns) {
    spec::JobSpec s = spec::default_spec();
    s.expected_interval_ns = interval_ns;
    return detect::config_from_spec(s);
  }
  void steps(int from, int to) {
    for (int i = from; i <= to; ++i) {
      writer_->step(i);
      std::this_thread::sleep_for(5ms);
    }
  }
  static Stamp now() { return SystemClock::instance().now(); }

  fs::path root_;
  std::unique_ptr<contract::BeaconWriter> writer_;
};

TEST_F(JobWatchTest, ATransitionIsToldOnceWithWhatItWas) {
  JobWatch w(observer(), detector(50 * kNsPerMs));
  steps(1, 5);
  Look first = w.look(now());
  EXPECT_EQ(first.verdict.state, detect::State::kHealthy) << first.verdict.summary;
  ASSERT_TRUE(first.changed_from);
  EXPECT_EQ(first.changed_from->first, detect::State::kStarting);
  steps(6, 6);
  EXPECT_FALSE(w.look(now()).changed_from) << "still healthy: nothing to tell";
  std::this_thread::sleep_for(400ms);  // 8 intervals without a step
  Look stalled = w.look(now());
  EXPECT_EQ(stalled.verdict.state, detect::State::kStalled) << stalled.verdict.summary;
  ASSERT_TRUE(stalled.changed_from);
  EXPECT_EQ(stalled.changed_from->first, detect::State::kHealthy);
  EXPECT_EQ(w.state(), detect::State::kStalled);
  EXPECT_FALSE(w.look(now()).changed_from);
}

TEST_F(JobWatchTest, AnIntervalLearnedBeforeARestartJudgesAtOnce) {
  JobWatch fresh(observer(), detector(std::nullopt));
  steps(1, 2);
  Look learning = fresh.look(now());
  EXPECT_EQ(learning.verdict.expected_interval_ns, 0) << "nothing learned yet";
  EXPECT_FALSE(learning.learned);

  JobWatch restored(observer(), detector(std::nullopt),
                    detect::Learned{50 * kNsPerMs, 60 * kNsPerMs, 100});
  Look at_once = restored.look(now());
  EXPECT_EQ(at_once.verdict.expected_interval_ns, 60 * kNsPerMs)  // the learned p90
      << at_once.verdict.summary;
  EXPECT_FALSE(at_once.learned) << "the restored interval is not news";
}

TEST_F(JobWatchTest, TheLearnedIntervalIsToldWhenItMoves) {
  JobWatch w(observer(), detector(std::nullopt));
  bool told = false;
  for (int i = 1; i <= 40 && !told; ++i) {
    steps(i, i);
    told = w.look(now()).learned.has_value();
  }
  EXPECT_TRUE(told) << "40 steps teach an interval";
  ASSERT_TRUE(w.detector().learned());
}

TEST_F(JobWatchTest, TheAmendmentIsJudged) {
  JobWatch w(observer(), detector(50 * kNsPerMs));
  steps(1, 5);
  LookInputs in;
  bool saw_report = false;
  in.amend = [&](detect::Observation& obs, const PollReport& report) {
    saw_report = report.rank_pids.count(0) > 0;
    obs.ranks.clear();  // as if the job's ranks were gone
  };
  Look l = w.look(now(), in);
  EXPECT_TRUE(saw_report) << "the amendment sees this poll's report";
  EXPECT_TRUE(l.observation.ranks.empty());
  EXPECT_NE(l.verdict.state, detect::State::kHealthy) << l.verdict.summary;
}

// The front end's settlement (the agent's, while its own preempt ends the job: E13) is what the
// watch tells and keeps: a verdict held tells no transition, one changed is told from the last.
TEST_F(JobWatchTest, TheSettledVerdictIsTheOneToldAndKept) {
  JobWatch w(observer(), detector(50 * kNsPerMs));
  steps(1, 5);
  std::this_thread::sleep_for(400ms);  // 8 intervals without a step
  const Look stalled = w.look(now());
  ASSERT_EQ(stalled.verdict.state, detect::State::kStalled) << stalled.verdict.summary;
  steps(6, 8);  // a rank's steps on its way out
  LookInputs hold;
  std::optional<detect::State> judged;
  hold.settle = [&](const detect::Observation&, detect::Verdict& v) {
    judged = v.state;
    v.state = stalled.verdict.state;
    v.cause = stalled.verdict.cause;
    v.summary = stalled.verdict.summary;
  };
  Look held = w.look(now(), hold);
  EXPECT_EQ(judged, detect::State::kHealthy) << "the settlement sees the detector's verdict";
  EXPECT_EQ(held.verdict.state, detect::State::kStalled) << held.verdict.summary;
  EXPECT_FALSE(held.changed_from) << "held: nothing to tell";
  EXPECT_EQ(w.state(), detect::State::kStalled);
  LookInputs end;
  end.settle = [](const detect::Observation&, detect::Verdict& v) {
    v.state = detect::State::kPreempted;
    v.cause = detect::Cause::kNone;
  };
  Look ended = w.look(now(), end);
  ASSERT_TRUE(ended.changed_from);
  EXPECT_EQ(ended.changed_from->first, detect::State::kStalled);
  EXPECT_EQ(w.state(), detect::State::kPreempted);
}

}  // namespace
}  // namespace stepwatch::watch
