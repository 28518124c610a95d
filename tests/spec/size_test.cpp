// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/spec/size.h"

#include <gtest/gtest.h>

namespace stepwatch::spec {
namespace {

TEST(ParseSize, BinaryAndDecimalUnits) {
  struct Case {
    const char* text;
    int64_t bytes;
  } cases[] = {
      {"4096", 4096},         {"100B", 100},
      {"512KiB", 512 << 10},  {"64MiB", 64 << 20},
      {"1.5GiB", 3LL << 29},  {"2TiB", 2LL << 40},
      {"1KB", 1000},          {"100MB", 100'000'000},
      {"1GB", 1'000'000'000}, {"0", 0},
  };
  for (const auto& c : cases) {
    auto r = parse_size(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.error().message;
    EXPECT_EQ(*r, c.bytes) << c.text;
  }
}

TEST(ParseSize, RejectsWithAReason) {
  for (const char* bad :
       {"", "-1MiB", "64M", "64 MiB", "MiB", "1.2.3KiB", "64mib", "99999999TiB"}) {
    auto r = parse_size(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Errc::kParse);
    EXPECT_NE(r.error().message.find("invalid size"), std::string::npos) << r.error().message;
  }
  EXPECT_NE(parse_size("64M").error().message.find("unknown unit \"M\""), std::string::npos);
}

TEST(FormatSize, UsesTheLargestExactUnit) {
  EXPECT_EQ(format_size(64 << 20), "64MiB");
  EXPECT_EQ(format_size(1536 << 10), "1536KiB");
  EXPECT_EQ(format_size(100), "100B");
  EXPECT_EQ(format_size(0), "0B");
  EXPECT_EQ(format_size(2LL << 40), "2TiB");
}

}  // namespace
}  // namespace stepwatch::spec
