// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Runs the real `stepwatch` binary (STEPWATCH_BIN, set by ctest) and captures what it printed.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/contract/test_support.h"

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs the binary with args; env entries "NAME=value" are added to (or, "NAME", removed from)
// the current environment.
inline RunResult run(const std::vector<std::string>& args, const std::string& scratch,
                     const std::vector<std::string>& env_changes = {}) {
  const char* bin = std::getenv("STEPWATCH_BIN");
  RunResult r;
  if (bin == nullptr) {
    ADD_FAILURE() << "ctest passes STEPWATCH_BIN=$<TARGET_FILE:stepwatch_bin>";
    return r;
  }
  std::string out_path = scratch + "/stdout", err_path = scratch + "/stderr";
  pid_t pid = ::fork();
  if (pid == 0) {
    int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) ::_exit(126);
    for (const auto& c : env_changes) {
      auto eq = c.find('=');
      if (eq == std::string::npos)
        ::unsetenv(c.c_str());
      else
        ::setenv(c.substr(0, eq).c_str(), c.substr(eq + 1).c_str(), 1);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(bin));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(bin, argv.data());
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) {
    ADD_FAILURE() << "could not run " << bin;
    return r;
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = stepwatch::test::read_file(out_path);
  r.err = stepwatch::test::read_file(err_path);
  return r;
}
