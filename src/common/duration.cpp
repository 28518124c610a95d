// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/duration.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include "src/common/clock.h"

namespace stepwatch {

namespace {
// Returns the unit's length in ns, or 0 when the unit is unknown.
int64_t unit_ns(std::string_view unit) {
  if (unit == "ns") return 1;
  if (unit == "us") return kNsPerUs;
  if (unit == "ms") return kNsPerMs;
  if (unit == "s" || unit.empty()) return kNsPerSec;
  if (unit == "m" || unit == "min") return 60 * kNsPerSec;
  if (unit == "h") return 3600 * kNsPerSec;
  if (unit == "d") return 86400 * kNsPerSec;
  return 0;
}
}  // namespace

Result<int64_t> parse_duration(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Error{
        Errc::kParse,
        fmt::format("invalid duration \"{}\": {} (use e.g. 500ms, 2s, 1.5m, 1h30m)", text, why)};
  };
  if (text.empty()) return bad("empty");
  if (text.front() == '-') return bad("negative");
  double total = 0;
  size_t i = 0;
  bool bare_number = true;
  int parts = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
      ++i;
    if (i == start) return bad("expected a number");
    std::string number(text.substr(start, i - start));
    char* end = nullptr;
    double value = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size()) return bad("malformed number");
    size_t ustart = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit = text.substr(ustart, i - ustart);
    if (!unit.empty()) bare_number = false;
    if (unit.empty() && i < text.size()) return bad("unexpected character");
    if (unit.empty() && parts > 0) return bad("missing unit");
    int64_t scale = unit_ns(unit);
    if (scale == 0) return bad(fmt::format("unknown unit \"{}\"", unit));
    total += value * static_cast<double>(scale);
    ++parts;
  }
  (void)bare_number;
  if (!std::isfinite(total) || total > 9.2e18) return bad("too large");
  return static_cast<int64_t>(std::llround(total));
}

std::string format_duration(int64_t ns) {
  if (ns < 0) return "-" + format_duration(-ns);
  if (ns < kNsPerMs) return fmt::format("{}us", ns / kNsPerUs);
  if (ns < kNsPerSec) return fmt::format("{}ms", ns / kNsPerMs);
  if (ns < 60 * kNsPerSec) return fmt::format("{:.1f}s", static_cast<double>(ns) / kNsPerSec);
  int64_t s = ns / kNsPerSec;
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{:02}h", s / 86400, (s % 86400) / 3600);
}

std::string format_utc(int64_t wall_ns, UtcPrecision precision) {
  // Floor division, so that -1 ns is 23:59:59.999 of the day before.
  int64_t secs = wall_ns / kNsPerSec;
  if (wall_ns % kNsPerSec < 0) --secs;
  const int64_t ms = (wall_ns - secs * kNsPerSec) / kNsPerMs;
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  if (::gmtime_r(&t, &tm) == nullptr) return fmt::format("@{}ns", wall_ns);
  std::string out = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900,
                                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  if (precision == UtcPrecision::kMillis) out += fmt::format(".{:03}", ms);
  return out + "Z";
}

}  // namespace stepwatch
