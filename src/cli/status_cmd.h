// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch status`: every rank's progress beside its occupancy, read directly from beacons and
// /proc (and NVML when a driver is there); no daemon needed.
#pragma once

#include <string>

namespace stepwatch::cli {

struct StatusArgs {
  std::string dir;  // beacon root
  std::string job;  // empty: every job
  std::string
      spec_path;  // judge with this spec (expected interval, budgets); empty: defaults, learned
  std::string sample = "500ms";  // window for CPU and I/O rates; "0": progress only, no probes
  std::string nvml_lib;
  bool dir_given = false;  // --dir given: read the beacons directly, never the agent
  std::string agent;       // --agent URL
};

int run_status(const StatusArgs& args);

}  // namespace stepwatch::cli
