// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/spec/size.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace stepwatch::spec {

namespace {
// The unit's size in bytes, or 0 when the unit is unknown.
int64_t unit_bytes(std::string_view unit) {
  struct Unit {
    std::string_view name;
    int64_t bytes;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"B", 1},
      {"KiB", int64_t{1} << 10},
      {"MiB", int64_t{1} << 20},
      {"GiB", int64_t{1} << 30},
      {"TiB", int64_t{1} << 40},
      {"KB", 1'000},
      {"kB", 1'000},
      {"MB", 1'000'000},
      {"GB", 1'000'000'000},
      {"TB", 1'000'000'000'000},
  };
  for (const auto& u : kUnits) {
    if (u.name == unit) return u.bytes;
  }
  return 0;
}
}  // namespace

Result<int64_t> parse_size(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Error{Errc::kParse,
                 fmt::format("invalid size \"{}\": {} (use e.g. 4096, 512KiB, 64MiB, 1GiB, 100MB)",
                             text, why)};
  };
  if (text.empty()) return bad("empty");
  if (text.front() == '-') return bad("negative");
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return bad("expected a number");
  std::string number(text.substr(0, i));
  char* end = nullptr;
  double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return bad("malformed number");
  std::string_view unit = text.substr(i);
  int64_t scale = unit_bytes(unit);
  if (scale == 0) return bad(fmt::format("unknown unit \"{}\"", unit));
  double total = value * static_cast<double>(scale);
  if (!std::isfinite(total) || total > 9.2e18) return bad("too large");
  return static_cast<int64_t>(std::llround(total));
}

std::string format_size(int64_t bytes) {
  static constexpr std::string_view kUnits[] = {"TiB", "GiB", "MiB", "KiB"};
  static constexpr int kShifts[] = {40, 30, 20, 10};
  if (bytes > 0) {
    for (size_t i = 0; i < 4; ++i) {
      int64_t unit = int64_t{1} << kShifts[i];
      if (bytes % unit == 0) return fmt::format("{}{}", bytes / unit, kUnits[i]);
    }
  }
  return fmt::format("{}B", bytes);
}

}  // namespace stepwatch::spec
