// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The scratch path of a fuzz target that needs files (read_trace takes a path, the /proc
// readers a root, the agent a state directory): /dev/shm/stepwatch-fuzz-<kind>-<pid>, one per
// process. Removed at exit; what a crashed run left behind (its process is gone) is removed
// when the next run starts.
#pragma once

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace stepwatch::fuzz {

// One kind per fuzz target: the first call decides.
inline const std::string& scratch_path(const char* kind) {
  static const std::string* path = [kind] {
    namespace fs = std::filesystem;
    std::string prefix = fmt::format("stepwatch-fuzz-{}-", kind);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
      std::string name = e.path().filename().string();
      int pid = name.starts_with(prefix) ? std::atoi(name.c_str() + prefix.size()) : 0;
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
    }
    // Never destroyed: the handler that removes the path runs after static destructors.
    auto* p = new std::string(fmt::format("/dev/shm/{}{}", prefix, ::getpid()));
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(*path, ignored);
    });
    return p;
  }();
  return *path;
}

}  // namespace stepwatch::fuzz
