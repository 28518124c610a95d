// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Test-side helpers for the fake libnvidia-ml.so (tests/fakes/fake_nvml.c): write a scenario
// file and point STEPWATCH_FAKE_NVML at it, and read the fake's per-call counters.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace stepwatch::testing {

// Writes text to a fresh temporary file and exports it as STEPWATCH_FAKE_NVML for its lifetime.
class FakeNvmlScenario {
 public:
  explicit FakeNvmlScenario(const std::string& text) {
    const char* tmp = std::getenv("TMPDIR");
    path_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/fake-nvml-XXXXXX";
    const int fd = ::mkstemp(path_.data());
    if (fd < 0) throw std::runtime_error("mkstemp failed for " + path_);
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!written) throw std::runtime_error("cannot write " + path_);
    ::setenv("STEPWATCH_FAKE_NVML", path_.c_str(), 1);
  }
  ~FakeNvmlScenario() {
    ::unsetenv("STEPWATCH_FAKE_NVML");
    std::remove(path_.c_str());
  }
  FakeNvmlScenario(const FakeNvmlScenario&) = delete;
  FakeNvmlScenario& operator=(const FakeNvmlScenario&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// How many times the fake at lib_path (already loaded by an open Nvml) was called for `what`
// ("power", "processes_v3", ...) on `device` (-1: all) since its last nvmlInit_v2; -1 when the
// library is not loaded.
inline int fake_nvml_calls(const char* lib_path, const char* what, int device) {
  void* handle = ::dlopen(lib_path, RTLD_NOW | RTLD_NOLOAD);
  if (!handle) return -1;
  using Fn = int (*)(const char*, int);
  auto fn = reinterpret_cast<Fn>(::dlsym(handle, "fake_nvml_calls"));
  const int n = fn ? fn(what, device) : -1;
  ::dlclose(handle);
  return n;
}

}  // namespace stepwatch::testing
