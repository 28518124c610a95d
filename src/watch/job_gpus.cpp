// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/watch/job_gpus.h"

namespace stepwatch::watch {

std::vector<const probe::GpuDevice*> devices_held(const probe::GpuSnapshot& snapshot,
                                                  const std::set<int>& pids) {
  std::vector<const probe::GpuDevice*> out;
  for (const auto& d : snapshot.devices) {
    if (!d.processes) continue;
    for (const auto& p : *d.processes) {
      if (pids.count(static_cast<int>(p.pid))) {
        out.push_back(&d);
        break;
      }
    }
  }
  return out;
}

probe::GpuSnapshot job_gpus(const probe::GpuSnapshot& snapshot, const std::set<int>& pids) {
  probe::GpuSnapshot out;
  out.mono_ns = snapshot.mono_ns;
  for (const probe::GpuDevice* d : devices_held(snapshot, pids)) out.devices.push_back(*d);
  return out;
}

std::vector<int> gpu_holders(const probe::GpuSnapshot& snapshot, const std::set<int>& pids) {
  std::vector<int> out;
  for (int pid : pids) {
    if (!devices_held(snapshot, {pid}).empty()) out.push_back(pid);
  }
  return out;
}

}  // namespace stepwatch::watch
