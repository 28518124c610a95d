// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the contract, client and cli tests: the temporary directory
// (tests/support/temp_dir.h), a scoped environment, file helpers and a hand-built valid beacon
// record.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "stepwatch/beacon_v1.h"
#include "tests/support/temp_dir.h"

namespace stepwatch::test {

// Sets or unsets environment variables for a scope and restores the previous values after.
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto& [name, value] : vars) set(name, value);
  }
  ~ScopedEnv() {
    for (auto& [name, old] : saved_) {
      if (old)
        ::setenv(name.c_str(), old->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  // value == nullptr unsets the variable.
  void set(const char* name, const char* value) {
    if (saved_.find(name) == saved_.end()) {
      const char* old = ::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  // Clears every variable the client reads, so the test decides the whole identity.
  void clear_identity() {
    for (const char* n :
         {"STEPWATCH_DIR", "STEPWATCH_JOB", "STEPWATCH_INCARNATION", "RANK", "LOCAL_RANK",
          "WORLD_SIZE", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"}) {
      set(n, nullptr);
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

inline void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

inline void append_file(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot append to " + path);
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Sorted names in a directory, dot files included.
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string_view as_bytes(const stepwatch_beacon_v1& b) {
  return std::string_view(reinterpret_cast<const char*>(&b), sizeof b);
}

inline stepwatch_beacon_v1 beacon_from_file(const std::string& path) {
  std::string bytes = read_file(path);
  if (bytes.size() != sizeof(stepwatch_beacon_v1))
    throw std::runtime_error(path + ": not 1024 bytes");
  stepwatch_beacon_v1 b;
  std::memcpy(&b, bytes.data(), sizeof b);
  return b;
}

// A valid record built by hand (not by the writer): rank 0 of 1, job "job-1", one step.
inline stepwatch_beacon_v1 valid_record(const char* job = "job-1") {
  stepwatch_beacon_v1 b;
  std::memset(&b, 0, sizeof b);
  b.magic = STEPWATCH_BEACON_MAGIC;
  b.version = STEPWATCH_BEACON_VERSION;
  b.size = sizeof b;
  b.seq = 4;
  b.pid_start_ticks = 1234;
  b.pid = 4242;
  b.rank = 0;
  b.local_rank = 0;
  b.world_size = 1;
  b.status = STEPWATCH_STATUS_RUNNING;
  b.created_wall_ns = 1'700'000'000'000'000'000;
  b.created_mono_ns = 1'000'000'000;
  b.step = 7;
  b.step_count = 1;
  b.step_wall_ns = b.created_wall_ns + 5;
  b.step_mono_ns = b.created_mono_ns + 5;
  b.phase_wall_ns = b.created_wall_ns;
  b.phase_mono_ns = b.created_mono_ns;
  b.ckpt_step = -1;
  b.loss = std::nan("");
  b.update_mono_ns = b.step_mono_ns;
  b.recent[0] = {7, b.step_mono_ns};
  std::snprintf(b.job, sizeof b.job, "%s", job);
  std::snprintf(b.host, sizeof b.host, "%s", "node-1");
  std::snprintf(b.phase, sizeof b.phase, "%s", "train");
  return b;
}

}  // namespace stepwatch::test
