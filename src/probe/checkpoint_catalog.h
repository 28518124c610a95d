// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The checkpoint catalog: which generations in a checkpoint directory are committed. A generation
// is committed once its commit marker exists (the trainer writes it last); a directory without
// its marker is in flight and never a resume point; a marker with no data beside it is an
// inconsistency, reported and never resumed from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/common/result.h"

namespace stepwatch::probe {

struct Generation {
  std::string id;               // the generation's directory name ("step_000120")
  std::string path;             // its full path
  std::optional<int64_t> step;  // the last number in its name, when it has one
  int64_t marker_wall_ns = 0;   // when the marker was written (mtime); 0 when none
  uint64_t data_bytes = 0;      // bytes of everything but the marker
};

struct Catalog {
  std::vector<Generation> committed;     // marker and data present; oldest first
  std::vector<Generation> in_flight;     // no marker yet
  std::vector<Generation> inconsistent;  // a marker without data
  std::vector<std::string> problems;     // one line per inconsistency or unreadable entry

  // The newest committed generation: highest step, else newest marker.
  const Generation* latest() const;
};

// `marker` is "DIR_GLOB/MARKER_FILE", e.g. "step_*/COMMITTED". A missing directory is an empty
// catalog (nothing saved yet), not an error; an invalid pattern is.
Result<Catalog> scan_checkpoints(const std::string& dir, const std::string& marker);

}  // namespace stepwatch::probe
