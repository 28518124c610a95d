// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/common/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace stepwatch {

namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::mutex g_mu;
}  // namespace

void set_log_level(LogLevel level) {
  g_level.store(level);
}
LogLevel log_level() {
  return g_level.load(std::memory_order_relaxed);
}

void log_line(LogLevel level, std::string_view message) {
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  std::lock_guard lock(g_mu);
  std::fprintf(stderr, "stepwatch: %s: %.*s\n", kNames[static_cast<int>(level)],
               static_cast<int>(message.size()), message.data());
}

}  // namespace stepwatch
