// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// GPU evidence from NVML: per device SM and memory utilisation, memory, power and the processes
// holding compute contexts. Occupancy is evidence, never the verdict (DESIGN.md). Capabilities
// are probed once per device at open; what a device does not support stays absent (never 0) and
// is reported once; a device that fails mid-run is absent for that poll, with the error, while
// the other devices still report (STYLE rule 3).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/probe/nvml.h"

namespace stepwatch::probe {

// What a device answered to one kind of query when it was probed (or later, if it changed).
enum class Support {
  kSupported,     // answered NVML_SUCCESS, or failed in a way worth retrying every poll
  kNotSupported,  // NVML_ERROR_NOT_SUPPORTED: never asked again
  kNoPermission,  // NVML_ERROR_NO_PERMISSION: never asked again
  kNoSymbol,      // the loaded library lacks the entry point
};
const char* support_name(Support s);

struct GpuCapabilities {
  Support name = Support::kSupported;
  Support uuid = Support::kSupported;
  Support utilization = Support::kSupported;  // sm_util_pct and mem_util_pct
  Support memory = Support::kSupported;       // mem_used_bytes and mem_total_bytes
  Support power = Support::kSupported;
  Support processes = Support::kSupported;
};

struct GpuDevice {
  unsigned int index = 0;
  std::optional<std::string> name;
  std::optional<std::string> uuid;
  std::optional<unsigned int> sm_util_pct;   // NVML "gpu" utilisation: share of time a kernel ran
  std::optional<unsigned int> mem_util_pct;  // share of time device memory was read or written
  std::optional<uint64_t> mem_used_bytes;
  std::optional<uint64_t> mem_total_bytes;
  std::optional<double> power_w;
  std::optional<std::vector<GpuProcess>> processes;  // absent: unknown; empty: none running
  std::optional<std::string> error;  // set when a query failed this poll: "nvml...: GPU is lost"
  GpuCapabilities caps;
};

struct GpuSnapshot {
  int64_t mono_ns = 0;  // when the poll started (CLOCK_MONOTONIC)
  std::vector<GpuDevice> devices;
};

class GpuProbe {
 public:
  // Receives each one-time notice ("gpu 0 (H200): power not supported ..."). Defaults to the log.
  using NoticeSink = std::function<void(const std::string&)>;

  explicit GpuProbe(std::shared_ptr<Nvml> nvml, NoticeSink notices = {});

  // Reads every device. Fails only when the device list itself could not be read at open.
  Result<GpuSnapshot> poll();

  // The per-device capabilities recorded at open (updated if a device later says NOT_SUPPORTED).
  std::vector<GpuCapabilities> capabilities() const;

 private:
  struct DeviceState {
    unsigned int index = 0;
    std::optional<Nvml::Device> handle;
    std::optional<std::string> name;
    std::optional<std::string> uuid;
    GpuCapabilities caps;
    bool failing = false;  // the last poll had an error: its recovery is reported once too
  };

  Nvml::Code open_device(DeviceState& d);            // gets the handle and probes the capabilities
  void read_device(DeviceState& d, GpuDevice& out);  // gets a missing handle, then reads
  void read_values(DeviceState& d, GpuDevice& out);
  // Handles a non-success code: demotes the capability (and reports it once) or records the
  // error. Returns true when the device is unreachable for the rest of this poll.
  bool on_failure(DeviceState& d, Support& cap, const char* what, const char* symbol, Nvml::Code rc,
                  GpuDevice* out);
  std::string label(const DeviceState& d) const;
  void notice(const std::string& text) const;

  std::shared_ptr<Nvml> nvml_;
  NoticeSink notices_;
  std::vector<DeviceState> devices_;
  std::optional<Error> open_error_;
};

// Who holds GPU memory, seen against the job. job_pids: every pid the supervisor attributes to
// the job, from any incarnation; incarnation_pids: the pids of the current incarnation.
struct GpuHolder {
  unsigned int gpu = 0;
  int pid = 0;
  std::optional<uint64_t> used_bytes;
  bool job_pid = false;  // true: a pid of an earlier incarnation; false: unknown to the job
};

struct ProcessMap {
  std::vector<unsigned int> job_gpus;      // GPUs on which a current-incarnation pid holds memory
  std::vector<GpuHolder> leftovers;        // holders outside the current incarnation, on any GPU:
                                           // with job_pid set, the restart-stuck fingerprint
  std::vector<unsigned int> unknown_gpus;  // GPUs whose process list is absent this poll
};

ProcessMap map_processes(const GpuSnapshot& snapshot, const std::set<int>& job_pids,
                         const std::set<int>& incarnation_pids);

}  // namespace stepwatch::probe
