// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The agent's /metrics page: watch::JobState and watch::AgentHealth rendered in the Prometheus text
// exposition format, version 0.0.4. Pure: the same input gives the same text, byte for byte
// (families in a fixed order, jobs sorted by id, ranks by rank, GPUs by index), so tests
// compare exact text. Names, labels and units are listed in docs/metrics.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "src/serve/node_fault_view.h"
#include "src/watch/job_state.h"

namespace stepwatch::serve {

// The Content-Type an HTTP handler serves render_metrics() with.
inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// Renders every job that is not retired, then the agent's health. Absent values (no step yet,
// no beat, no checkpoint, an unknown interval, a GPU field NVML did not give) are omitted,
// never written as 0 (STYLE rule 3). Ages are taken at the job's last poll (observation.now).
// With node_faults: each listed job's restart storm, each host's implications in the window and
// the suspect hosts (a host that is not suspect has no stepwatch_host_suspect series at all).
std::string render_metrics(const std::vector<watch::JobState>& jobs,
                           const watch::AgentHealth& health,
                           const NodeFaultSnapshot* node_faults = nullptr);

// Label value escaping of the text format: backslash, double quote and line feed.
std::string escape_label_value(std::string_view v);

}  // namespace stepwatch::serve
