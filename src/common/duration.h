// Human durations: "250ms", "2s", "1.5m", "1h30m", "90" (seconds). Used by specs and the CLI,
// and printed back the same way ("1m05s") so a page reads like the spec that caused it.
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

}  // namespace stepwatch
