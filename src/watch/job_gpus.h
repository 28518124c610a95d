// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Which GPUs a job holds: the one answer to "on which devices does one of these pids hold
// memory", for the observer (a rank's GPU), the agent (the job's devices in the API) and
// `stepwatch run` (whether a preempted incarnation still holds GPU memory).
#pragma once

#include <set>
#include <vector>

#include "src/probe/gpu_probe.h"

namespace stepwatch::watch {

// The devices on which one of `pids` holds memory, in the snapshot's order. A device whose
// process list is unknown (absent) holds nothing that can be proven.
std::vector<const probe::GpuDevice*> devices_held(const probe::GpuSnapshot& snapshot,
                                                  const std::set<int>& pids);

// The snapshot narrowed to those devices.
probe::GpuSnapshot job_gpus(const probe::GpuSnapshot& snapshot, const std::set<int>& pids);

// The pids among `pids` that hold memory on some device, each once, ascending.
std::vector<int> gpu_holders(const probe::GpuSnapshot& snapshot, const std::set<int>& pids);

}  // namespace stepwatch::watch
