// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/gpu_probe.h"

#include <fmt/format.h>

#include "src/common/clock.h"
#include "src/common/log.h"

namespace stepwatch::probe {

using namespace nvml_abi;  // NOLINT: NVML's own code names read best unqualified here

const char* support_name(Support s) {
  switch (s) {
    case Support::kSupported:
      return "supported";
    case Support::kNotSupported:
      return "not-supported";
    case Support::kNoPermission:
      return "no-permission";
    case Support::kNoSymbol:
      return "no-symbol";
  }
  return "unknown";
}

namespace {

// Codes that say "this device will not answer this query": recorded once, never retried.
Support classify(Nvml::Code rc) {
  switch (rc) {
    case NVML_ERROR_NOT_SUPPORTED:
      return Support::kNotSupported;
    case NVML_ERROR_NO_PERMISSION:
      return Support::kNoPermission;
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return Support::kNoSymbol;
    default:
      return Support::kSupported;
  }
}

// Codes after which the rest of this device's queries are pointless for this poll.
bool device_unreachable(Nvml::Code rc) {
  return rc == NVML_ERROR_GPU_IS_LOST || rc == NVML_ERROR_RESET_REQUIRED ||
         rc == NVML_ERROR_UNINITIALIZED || rc == NVML_ERROR_DRIVER_NOT_LOADED;
}

constexpr const char* kProcessSymbols =
    "nvmlDeviceGetComputeRunningProcesses_v3/nvmlDeviceGetComputeRunningProcesses";

}  // namespace

GpuProbe::GpuProbe(std::shared_ptr<Nvml> nvml, NoticeSink notices)
    : nvml_(std::move(nvml)), notices_(std::move(notices)) {
  if (!nvml_) {
    open_error_ = Error{Errc::kInvalidArgument, "GpuProbe: no NVML library"};
    return;
  }
  unsigned int count = 0;
  const Nvml::Code rc = nvml_->device_count(&count);
  if (rc != NVML_SUCCESS) {
    open_error_ = Error{Errc::kIo, "nvmlDeviceGetCount_v2: " + nvml_->describe(rc)};
    notice(fmt::format("gpu probe: cannot list devices: {}", open_error_->message));
    return;
  }
  devices_.resize(count);
  for (unsigned int i = 0; i < count; ++i) {
    devices_[i].index = i;
    open_device(devices_[i]);
  }
}

std::string GpuProbe::label(const DeviceState& d) const {
  return d.name ? fmt::format("gpu {} ({})", d.index, *d.name) : fmt::format("gpu {}", d.index);
}

void GpuProbe::notice(const std::string& text) const {
  if (notices_) {
    notices_(text);
  } else {
    log_warn("{}", text);
  }
}

bool GpuProbe::on_failure(DeviceState& d, Support& cap, const char* what, const char* symbol,
                          Nvml::Code rc, GpuDevice* out) {
  const Support s = classify(rc);
  if (s != Support::kSupported) {
    cap = s;
    notice(fmt::format("{}: {} {} ({}: {}); reported as absent, not polled again", label(d), what,
                       support_name(s), symbol, nvml_->describe(rc)));
    return false;
  }
  std::string err = fmt::format("{}: {}", symbol, nvml_->describe(rc));
  out->error = out->error ? *out->error + "; " + err : err;
  return device_unreachable(rc);
}

Nvml::Code GpuProbe::open_device(DeviceState& d) {
  Nvml::Device handle{};
  const Nvml::Code rc = nvml_->device_handle(d.index, &handle);
  if (rc != NVML_SUCCESS) return rc;  // poll() tries again
  d.handle = handle;
  // One read of each kind records what this device supports (and reports what it does not);
  // its values and transient errors are dropped here: poll() reports those.
  GpuDevice scratch;
  read_values(d, scratch);
  return NVML_SUCCESS;
}

void GpuProbe::read_device(DeviceState& d, GpuDevice& out) {
  out.index = d.index;
  if (!d.handle) {
    const Nvml::Code rc = open_device(d);
    if (rc != NVML_SUCCESS) {
      out.error = "nvmlDeviceGetHandleByIndex_v2: " + nvml_->describe(rc);
      return;
    }
  }
  read_values(d, out);
}

void GpuProbe::read_values(DeviceState& d, GpuDevice& out) {
  const Nvml::Device h = *d.handle;
  const GpuCapabilities& caps = d.caps;
  bool lost = false;
  std::string text;
  Nvml::Code rc = NVML_SUCCESS;

  // Identity is static: read once, retried only while it failed with a transient error.
  if (!d.name && caps.name == Support::kSupported) {
    rc = nvml_->name(h, &text);
    if (rc == NVML_SUCCESS) {
      d.name = text;
    } else {
      lost = on_failure(d, d.caps.name, "name", "nvmlDeviceGetName", rc, &out);
    }
  }
  if (!lost && !d.uuid && caps.uuid == Support::kSupported) {
    rc = nvml_->uuid(h, &text);
    if (rc == NVML_SUCCESS) {
      d.uuid = text;
    } else {
      lost = on_failure(d, d.caps.uuid, "uuid", "nvmlDeviceGetUUID", rc, &out);
    }
  }
  if (!lost && caps.utilization == Support::kSupported) {
    nvmlUtilization_t util{};
    rc = nvml_->utilization(h, &util);
    if (rc == NVML_SUCCESS) {
      out.sm_util_pct = util.gpu;
      out.mem_util_pct = util.memory;
    } else {
      lost = on_failure(d, d.caps.utilization, "utilization", "nvmlDeviceGetUtilizationRates", rc,
                        &out);
    }
  }
  if (!lost && caps.memory == Support::kSupported) {
    nvmlMemory_t mem{};
    rc = nvml_->memory(h, &mem);
    if (rc == NVML_SUCCESS) {
      out.mem_used_bytes = mem.used;
      out.mem_total_bytes = mem.total;
    } else {
      lost = on_failure(d, d.caps.memory, "memory", "nvmlDeviceGetMemoryInfo", rc, &out);
    }
  }
  if (!lost && caps.power == Support::kSupported) {
    unsigned int mw = 0;
    rc = nvml_->power_mw(h, &mw);
    if (rc == NVML_SUCCESS) {
      out.power_w = mw / 1000.0;  // NVML reports milliwatts
    } else {
      lost = on_failure(d, d.caps.power, "power", "nvmlDeviceGetPowerUsage", rc, &out);
    }
  }
  if (!lost && caps.processes == Support::kSupported) {
    std::vector<GpuProcess> procs;
    rc = nvml_->compute_processes(h, &procs);
    if (rc == NVML_SUCCESS) {
      out.processes = std::move(procs);
    } else {
      lost = on_failure(d, d.caps.processes, "processes", kProcessSymbols, rc, &out);
    }
  }

  if (lost) {  // half a reading from a device that fell off the bus is no reading
    GpuDevice blank;
    blank.index = d.index;
    blank.error = out.error;
    out = std::move(blank);
  }
  out.name = d.name;
  out.uuid = d.uuid;
}

Result<GpuSnapshot> GpuProbe::poll() {
  if (open_error_) return *open_error_;
  GpuSnapshot snap;
  snap.mono_ns = mono_now_ns();
  snap.devices.resize(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) {
    DeviceState& d = devices_[i];
    GpuDevice& out = snap.devices[i];
    read_device(d, out);
    out.caps = d.caps;
    // Errors are reported on the transition, not on every poll they persist.
    if (out.error && !d.failing) {
      notice(fmt::format("{}: {}; its values are absent until it answers again", label(d),
                         *out.error));
    } else if (!out.error && d.failing) {
      notice(fmt::format("{}: answering again", label(d)));
    }
    d.failing = out.error.has_value();
  }
  return snap;
}

std::vector<GpuCapabilities> GpuProbe::capabilities() const {
  std::vector<GpuCapabilities> caps;
  for (const auto& d : devices_) caps.push_back(d.caps);
  return caps;
}

ProcessMap map_processes(const GpuSnapshot& snapshot, const std::set<int>& job_pids,
                         const std::set<int>& incarnation_pids) {
  ProcessMap map;
  for (const auto& dev : snapshot.devices) {
    if (!dev.processes) {
      map.unknown_gpus.push_back(dev.index);
      continue;
    }
    bool held = false;
    for (const auto& p : *dev.processes) {
      if (incarnation_pids.count(p.pid)) {
        held = true;
      } else {
        map.leftovers.push_back(
            GpuHolder{dev.index, p.pid, p.used_bytes, job_pids.count(p.pid) > 0});
      }
    }
    if (held) map.job_gpus.push_back(dev.index);
  }
  return map;
}

}  // namespace stepwatch::probe
