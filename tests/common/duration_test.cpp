// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/duration.h"

#include <gtest/gtest.h>

#include "src/common/clock.h"

namespace stepwatch {
namespace {

TEST(ParseDuration, AcceptsUnitsAndCompounds) {
  struct Case {
    const char* text;
    int64_t ns;
  } cases[] = {
      {"90", 90 * kNsPerSec},
      {"2s", 2 * kNsPerSec},
      {"250ms", 250 * kNsPerMs},
      {"1.5m", 90 * kNsPerSec},
      {"1h30m", 5400 * kNsPerSec},
      {"2d", 2 * 86400 * kNsPerSec},
      {"10us", 10 * kNsPerUs},
      {"7ns", 7},
      {"0s", 0},
      {"18min", 18 * 60 * kNsPerSec},
  };
  for (const auto& c : cases) {
    auto r = parse_duration(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.error().message;
    EXPECT_EQ(*r, c.ns) << c.text;
  }
}

TEST(ParseDuration, RejectsWithAReason) {
  for (const char* bad : {"", "-5s", "abc", "5x", "1.2.3s", "5 s", "1h30", "s"}) {
    auto r = parse_duration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Errc::kParse);
    EXPECT_NE(r.error().message.find("invalid duration"), std::string::npos) << r.error().message;
  }
  EXPECT_NE(parse_duration("-5s").error().message.find("negative"), std::string::npos);
  EXPECT_NE(parse_duration("5x").error().message.find("unknown unit \"x\""), std::string::npos);
}

TEST(FormatDuration, IsCompact) {
  EXPECT_EQ(format_duration(850 * kNsPerMs), "850ms");
  EXPECT_EQ(format_duration(12'300 * kNsPerMs), "12.3s");
  EXPECT_EQ(format_duration(245 * kNsPerSec), "4m05s");
  EXPECT_EQ(format_duration(7380 * kNsPerSec), "2h03m");
  EXPECT_EQ(format_duration(-2 * kNsPerSec), "-2.0s");
  EXPECT_EQ(format_duration(3 * 86400 * kNsPerSec + 4 * 3600 * kNsPerSec), "3d04h");
}

TEST(FormatUtc, SecondsAndMilliseconds) {
  struct Case {
    int64_t ns;
    UtcPrecision precision;
    const char* want;
  } cases[] = {
      {1'714'533'164 * kNsPerSec, UtcPrecision::kSeconds, "2024-05-01T03:12:44Z"},
      {1'714'533'164 * kNsPerSec + 999 * kNsPerMs, UtcPrecision::kSeconds,
       "2024-05-01T03:12:44Z"},  // cut, never rounded up
      {1'700'000'000 * kNsPerSec + 123 * kNsPerMs, UtcPrecision::kMillis,
       "2023-11-14T22:13:20.123Z"},
      {0, UtcPrecision::kMillis, "1970-01-01T00:00:00.000Z"},
      {0, UtcPrecision::kSeconds, "1970-01-01T00:00:00Z"},
      {-1, UtcPrecision::kMillis, "1969-12-31T23:59:59.999Z"},
      {-kNsPerSec, UtcPrecision::kSeconds, "1969-12-31T23:59:59Z"},
  };
  for (const auto& c : cases) EXPECT_EQ(format_utc(c.ns, c.precision), c.want) << c.ns;
  EXPECT_EQ(format_utc(1'714'533'164 * kNsPerSec), "2024-05-01T03:12:44Z") << "seconds by default";
}

}  // namespace
}  // namespace stepwatch
