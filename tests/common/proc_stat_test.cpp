// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/proc_stat.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace stepwatch {
namespace {

constexpr const char* kStat =
    "4242 (python3 (rank) 1) S 4200 4200 4100 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 7 0 987654 "
    "1000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";

TEST(ProcStat, ParsesFromTheLastParenthesis) {
  auto st = parse_proc_stat(kStat);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(st->pid, 4242);
  EXPECT_EQ(st->comm, "python3 (rank) 1");
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->ppid, 4200);
  EXPECT_EQ(st->pgrp, 4200);
  EXPECT_EQ(st->session, 4100);
  EXPECT_EQ(st->utime_ticks, 150u);
  EXPECT_EQ(st->stime_ticks, 25u);
  EXPECT_EQ(st->num_threads, 7);
  EXPECT_EQ(st->start_ticks, 987654u);
}

TEST(ProcStat, RejectsMalformedText) {
  EXPECT_FALSE(parse_proc_stat("").ok());
  EXPECT_FALSE(parse_proc_stat("12 noparen S 1").ok());
  EXPECT_FALSE(parse_proc_stat("12 (x) S 1 2 3").ok());  // too few fields
  auto r = parse_proc_stat("12 (x) S notanumber 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("field 4"), std::string::npos) << r.error().message;
}

TEST(ProcStat, ReadsAFakeTreeAndReportsAVanishedProcess) {
  auto root = std::filesystem::temp_directory_path() / ("sw-proc-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "4242");
  std::ofstream(root / "4242" / "stat") << kStat;
  auto st = read_proc_stat(root.string(), 4242);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(st->start_ticks, 987654u);
  auto gone = read_proc_stat(root.string(), 999999);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, Errc::kNotFound);
  std::filesystem::remove_all(root);
}

TEST(ProcStat, ReadsThisProcess) {
  auto st = read_proc_stat("/proc", static_cast<int>(::getpid()));
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(st->pid, ::getpid());
  EXPECT_GT(st->start_ticks, 0u);
}

}  // namespace
}  // namespace stepwatch
