// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Human durations and UTC times: "250ms", "2s", "1.5m", "1h30m", "90" (seconds). Used by specs and
// the CLI, and printed back the same way ("1m05s") so a page reads like the spec that caused it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/common/result.h"

namespace stepwatch {

// Parses a non-negative duration into nanoseconds. Errors say what was wrong and what is allowed.
Result<int64_t> parse_duration(std::string_view text);

// Formats nanoseconds compactly: 850ms, 12.3s, 4m05s, 2h03m, 3d04h. Negative values get a '-'.
std::string format_duration(int64_t ns);

// A wall-clock time (ns since the Unix epoch) as RFC 3339 UTC, so two on-call engineers in
// different zones read the same time: "2024-05-01T03:12:44Z", or with kMillis
// "2024-05-01T03:12:44.123Z". Times before the epoch round down; one gmtime cannot represent
// is written "@<ns>ns".
enum class UtcPrecision { kSeconds, kMillis };
std::string format_utc(int64_t wall_ns, UtcPrecision precision = UtcPrecision::kSeconds);

}  // namespace stepwatch
