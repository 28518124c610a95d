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

}  // namespace
}  // namespace stepwatch
