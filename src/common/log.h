// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Minimal leveled logging to stderr. Lines name the object and the cause; a caller that would
// repeat the same line every tick says it once (the agent's note_problem), and lines that
// anyone could make the agent write are bounded per user (src/agent/per_user.h).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace stepwatch {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_line(LogLevel level, std::string_view message);

template <class... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kInfo)
    log_line(LogLevel::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kWarn)
    log_line(LogLevel::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void log_error(fmt::format_string<Args...> f, Args&&... args) {
  log_line(LogLevel::kError, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace stepwatch
