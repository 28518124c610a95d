// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The trainer's output as evidence: with no [log] table the preset is "auto", which says
// nothing until a line is unmistakably one framework's, then reads the log as that framework's.
#include "src/supervise/log_feed.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/probe/log_presets.h"

namespace stepwatch::supervise {
namespace {

constexpr int64_t kSec = kNsPerSec;

std::unique_ptr<LogFeed> feed_for(const spec::LogContract& log) {
  auto f = LogFeed::create(log, 16);
  EXPECT_TRUE(f.ok()) << f.error().message;
  return std::move(*f);
}

// The spec's names (spec.h) and the probe's pattern table (probe/log_presets.cpp) are one list:
// the same names in the same order, so each name the spec admits compiles here.
TEST(LogFeed, TheSpecNamesEveryPresetOfTheProbeInItsOrder) {
  std::vector<std::string> spec_names, probe_names;
  for (auto name : spec::kLogPresetNames) spec_names.emplace_back(name);
  for (const auto& p : probe::log_presets()) probe_names.emplace_back(p.name);
  EXPECT_EQ(spec_names, probe_names);
  for (size_t i = 0; i < std::size(spec::kLogPresetNames); ++i) {
    spec::LogContract log;
    log.preset = static_cast<spec::LogPreset>(i);
    EXPECT_EQ(probe::find_log_preset(spec::log_preset_name(log.preset)), &probe::log_presets()[i]);
    auto f = LogFeed::create(log, 16);
    EXPECT_TRUE(f.ok()) << spec::kLogPresetNames[i] << ": " << f.error().message;
  }
}

TEST(LogFeed, AutoByDefaultSaysNothingUntilItPicksThenReadsAndTellsThePickOnce) {
  spec::LogContract log = spec::default_spec().log;
  ASSERT_EQ(log.preset, spec::LogPreset::kAuto);
  auto f = feed_for(log);
  f->reset(1000 * kSec);
  f->feed("loading the data set", 1001 * kSec);
  f->feed("step 12 loss 2.3", 1002 * kSec);  // anybody's line: no preset picks on it
  EXPECT_FALSE(f->progress("j", 0).has_value()) << "no rank, hence no init stall, before a pick";
  EXPECT_FALSE(f->take_pick().has_value());

  f->feed("GPU available: True (cuda), used: True", 1003 * kSec);
  f->feed("Epoch 0:  50%|#####     | 1/2 [00:00<00:00,  6.54it/s, loss=2.29, v_num=0]",
          1004 * kSec);
  auto pick = f->take_pick();
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->rfind("lightning", 0), 0u) << *pick;
  EXPECT_FALSE(f->take_pick().has_value()) << "told once";
  auto r = f->progress("j", 0);
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->step.has_value());
  EXPECT_EQ(*r->step, 1);
}

TEST(LogFeed, NoneReadsNothingAndOwnPatternsWithoutAPresetReadFromTheFirstLine) {
  spec::LogContract none;
  none.preset = spec::LogPreset::kNone;
  auto off = feed_for(none);
  off->feed("GPU available: True (cuda), used: True", kSec);
  EXPECT_FALSE(off->has_contract());
  EXPECT_FALSE(off->progress("j", 0).has_value());

  auto parsed = spec::check_spec("[log]\nstep_pattern = 'it (?P<step>\\d+)'\n", "t.toml");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed.spec.log.preset, spec::LogPreset::kNone)
      << "your patterns alone, as before auto";
  auto own = feed_for(parsed.spec.log);
  own->reset(0);
  own->feed("it 7", kSec);
  auto r = own->progress("j", 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r->step, 7);
  EXPECT_FALSE(own->take_pick().has_value());
}

}  // namespace
}  // namespace stepwatch::supervise
