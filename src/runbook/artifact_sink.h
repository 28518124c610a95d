// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The pieces of artifact collection that are not about processes: the size-bounded writer of the
// incident directory, the manifest, and the tools it needs (gdb, ptrace). Internal to the runbook
// module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "src/runbook/artifact.h"

namespace stepwatch::runbook {

// Writes files into the incident directory until max_bytes is used up: the file that crosses the
// limit is cut, later ones are skipped; both are recorded in the report (truncated, notes).
class ArtifactSink {
 public:
  ArtifactSink(std::string dir, int64_t max_bytes, ArtifactReport& report);

  // `name` is relative to the directory and may contain one level of subdirectory.
  void put(const std::string& name, std::string_view content);

 private:
  std::string dir_;
  uint64_t max_bytes_;
  ArtifactReport& report_;
};

// Writes manifest.txt: every file with its size, the limits, and the notes. Never counted against
// max_bytes: it is what explains a truncated artifact.
void write_manifest(const ArtifactRequest& request, ArtifactReport& report);

// A path containing '/' as given if executable, else the first executable match in PATH.
std::optional<std::string> find_executable(const std::string& name);
// Why this process cannot ptrace others, when that is known without trying (Yama scope 3, or a
// non-root user without CAP_SYS_PTRACE under Yama scope 2); nullopt: try, and let gdb say.
std::optional<std::string> ptrace_blocked();

}  // namespace stepwatch::runbook
