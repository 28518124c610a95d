// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/trace/trace_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/detect/sim.h"

namespace stepwatch::trace {
namespace {

using detect::Observation;
using detect::Verdict;
using detect::testing::kSec;
using detect::testing::SimJob;

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("sw-trace-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(TraceFile, ReaderKeepsGoodLinesAndReportsBadOnesWithLineNumbers) {
  SimJob job(1);
  std::string path = temp_path("mixed.jsonl");
  {
    TraceHeader h;
    h.job = "sim";
    h.local_host = "node1";
    h.poll_ns = kSec;
    auto w = TraceWriter::open(path, h);
    ASSERT_TRUE(w.ok()) << w.error().message;
    for (int i = 0; i < 3; ++i) {
      job.advance(kSec);
      job.step_all(i);
      ASSERT_TRUE(w->write_observation(job.observe()).ok());
    }
    Verdict v;
    ASSERT_TRUE(w->write_verdict(v).ok());
  }
  {
    std::ofstream out(path, std::ios::app);
    out << "this is not json\n";
    Observation back = job.observe();
    back.now.mono_ns -= 10 * kSec;
    back.now.wall_ns -= 10 * kSec;
    out << observation_to_json(back) << "\n";
    job.advance(kSec);
    out << observation_to_json(job.observe()) << "\n";
  }
  auto t = read_trace(path);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->header.job, "sim");
  EXPECT_EQ(t->header.poll_ns, kSec);
  EXPECT_EQ(t->observations.size(), 4u);
  ASSERT_EQ(t->problems.size(), 2u);
  EXPECT_NE(t->problems[0].message.find("mixed.jsonl:6: not valid JSON"), std::string::npos)
      << t->problems[0].message;
  EXPECT_NE(t->problems[1].message.find(":7: observation time goes backwards"), std::string::npos)
      << t->problems[1].message;
  EXPECT_EQ(t->observations[0].local_host, "node1");  // taken from the header

  auto missing = read_trace(temp_path("nope.jsonl"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kNotFound);
}

}  // namespace
}  // namespace stepwatch::trace
