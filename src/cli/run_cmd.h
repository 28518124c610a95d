// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch run`, `stepwatch ack`: resolving the command line into the supervisor's options.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/probe/gpu_probe.h"
#include "src/runbook/hygiene.h"

namespace stepwatch::cli {

struct RunArgs {
  std::vector<std::string> argv;
  std::string spec_path;
  std::string job;
  std::string dir;
  std::string state_dir;
  std::string trace;
  int ack_port = 0;
  std::string nvml_lib;
  std::optional<int> master_port;
  std::string poll;        // a duration; empty: from the spec
  bool new_store = false;  // --new-store: an empty (0-byte) stepwatch.db becomes a new store
  // Multi-node (--coord): the per-node launcher; every one empty when not given.
  std::string coord;        // etcd endpoints, comma-separated http:// URLs
  std::string node;         // default: the short host name
  std::string prefix;       // default /stepwatch/v1
  std::string lease_ttl;    // default 10s
  std::string resume_wait;  // default 10m
  std::string grace;        // default 30s
};

// The state directory when none is given: $STEPWATCH_STATE_DIR, $XDG_STATE_HOME/stepwatch,
// ~/.local/state/stepwatch.
std::string default_state_dir();

// `stepwatch run`; with --coord, the per-node launcher of a multi-node job (run_launcher).
int run_supervisor(const RunArgs& args);
int run_launcher(const RunArgs& args);

struct AckArgs {
  std::string job;
  std::string state_dir;
  std::string by;
  std::string note;
  std::string agent;  // --agent URL; without --state-dir, a running agent takes the ack
};
// Acknowledges the job's open incident in the store; 0 acked, 1 none open, 2 store unusable.
int run_ack(const AckArgs& args);

// For `stepwatch doctor`: the processes the store recorded for the job (every incarnation), and
// the GPUs as NVML sees them now (nullopt without a driver).
Result<std::vector<runbook::RecordedProcess>> load_recorded_processes(const std::string& state_dir,
                                                                      const std::string& job);
std::optional<probe::GpuSnapshot> gpu_snapshot_now();

}  // namespace stepwatch::cli
