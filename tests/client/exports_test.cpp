// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// libstepwatch.so exports the C ABI and nothing else: no C++ symbols a trainer's own libstdc++
// or another copy of our code could collide with.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string run(const std::string& command, int* status) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

TEST(Exports, OnlyTheCApi) {
  const char* lib = std::getenv("STEPWATCH_LIB");
  ASSERT_NE(lib, nullptr) << "ctest passes STEPWATCH_LIB=$<TARGET_FILE:stepwatch>";
  int status = -1;
  std::string out = run(std::string("nm -D --defined-only '") + lib + "'", &status);
  ASSERT_EQ(status, 0) << "nm failed on " << lib;

  std::set<std::string> symbols;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string addr, type, name;
    fields >> addr >> type >> name;
    if (name.empty()) continue;
    symbols.insert(name);
    EXPECT_EQ(name.rfind("stepwatch_", 0), 0u) << "exported: " << type << " " << name;
  }
  for (const char* api :
       {"stepwatch_options_init", "stepwatch_open", "stepwatch_open_env", "stepwatch_step",
        "stepwatch_step_loss", "stepwatch_loss", "stepwatch_beat", "stepwatch_phase_begin",
        "stepwatch_phase_end", "stepwatch_checkpoint_committed", "stepwatch_finish",
        "stepwatch_close", "stepwatch_path", "stepwatch_strerror", "stepwatch_last_error",
        "stepwatch_abi_version", "stepwatch_sample"}) {
    EXPECT_EQ(symbols.count(api), 1u) << api << " is missing";
  }
  EXPECT_EQ(symbols.size(), 17u) << ::testing::PrintToString(symbols);
}

}  // namespace
