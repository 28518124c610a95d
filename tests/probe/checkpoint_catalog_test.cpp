// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/checkpoint_catalog.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace stepwatch::probe {
namespace {

namespace fs = std::filesystem;

class CheckpointCatalog : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("sw-ckpt-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void generation(const std::string& name, bool data, bool marker) {
    fs::create_directories(dir_ / name);
    if (data) {
      fs::create_directories(dir_ / name / "shards");
      std::ofstream(dir_ / name / "shards" / "model-00001.pt") << std::string(1000, 'x');
    }
    if (marker) std::ofstream(dir_ / name / "COMMITTED") << "ok\n";
  }
  fs::path dir_;
};

TEST_F(CheckpointCatalog, CommittedInFlightAndInconsistent) {
  generation("step_100", true, true);
  generation("step_200", true, true);
  generation("step_300", true, false);  // still being written
  generation("step_250", false, true);  // a marker with nothing beside it
  generation("other", true, true);      // does not match the glob
  std::ofstream(dir_ / "step_400") << "a file, not a generation";
  auto cat = scan_checkpoints(dir_.string(), "step_*/COMMITTED");
  ASSERT_TRUE(cat.ok()) << cat.error().message;
  ASSERT_EQ(cat->committed.size(), 2u);
  EXPECT_EQ(cat->committed[0].id, "step_100");
  EXPECT_EQ(cat->committed[1].id, "step_200");
  EXPECT_EQ(*cat->committed[1].step, 200);
  EXPECT_EQ(cat->committed[1].data_bytes, 1000u);
  EXPECT_GT(cat->committed[1].marker_wall_ns, 0);
  ASSERT_EQ(cat->in_flight.size(), 1u);
  EXPECT_EQ(cat->in_flight[0].id, "step_300");
  ASSERT_EQ(cat->inconsistent.size(), 1u);
  EXPECT_EQ(cat->inconsistent[0].id, "step_250");
  ASSERT_EQ(cat->problems.size(), 1u);
  EXPECT_NE(cat->problems[0].find("no data"), std::string::npos);
  ASSERT_NE(cat->latest(), nullptr);
  EXPECT_EQ(cat->latest()->id, "step_200");  // never the in-flight 300 or the empty 250
}

TEST_F(CheckpointCatalog, MissingDirectoryIsEmptyAndBadPatternIsAnError) {
  auto none = scan_checkpoints((dir_ / "nothing-yet").string(), "step_*/COMMITTED");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->committed.empty());
  EXPECT_EQ(none->latest(), nullptr);
  for (const char* bad : {"COMMITTED", "/COMMITTED", "step_*/", "a/b/c"}) {
    auto r = scan_checkpoints(dir_.string(), bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
  }
}

TEST_F(CheckpointCatalog, NamesWithoutNumbersOrderByMarkerTime) {
  generation("ckpt-a", true, true);
  generation("ckpt-b", true, true);
  fs::last_write_time(dir_ / "ckpt-a" / "COMMITTED",
                      fs::file_time_type::clock::now() - std::chrono::hours(1));
  auto cat = scan_checkpoints(dir_.string(), "ckpt-*/COMMITTED");
  ASSERT_TRUE(cat.ok());
  ASSERT_EQ(cat->committed.size(), 2u);
  EXPECT_FALSE(cat->committed[0].step.has_value());
  EXPECT_EQ(cat->latest()->id, "ckpt-b");
}

}  // namespace
}  // namespace stepwatch::probe
