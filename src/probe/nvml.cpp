// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>

namespace stepwatch::probe {

using namespace nvml_abi;  // NOLINT: the X-macro spells NVML's own type names

namespace {
enum Need { kRequired, kOptional };
}  // namespace

struct Nvml::Api {
#define STEPWATCH_NVML_FIELD(symbol, need, ret, params) ret(*symbol) params = nullptr;
  STEPWATCH_NVML_SYMBOLS(STEPWATCH_NVML_FIELD)
#undef STEPWATCH_NVML_FIELD
};

namespace {

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// Fills api from handle; on a missing required symbol returns its name.
std::optional<std::string> resolve(void* handle, Nvml::Api& api) {
#define STEPWATCH_NVML_RESOLVE(symbol, need, ret, params)                      \
  api.symbol = reinterpret_cast<decltype(api.symbol)>(dlsym(handle, #symbol)); \
  if (!api.symbol && (need) == kRequired) return std::string(#symbol);
  STEPWATCH_NVML_SYMBOLS(STEPWATCH_NVML_RESOLVE)
#undef STEPWATCH_NVML_RESOLVE
  return std::nullopt;
}

// Copies a NUL-terminated NVML string out of a fixed buffer (never trusting the terminator).
std::string from_buffer(const char* buf, size_t size) {
  return std::string(buf, std::find(buf, buf + size, '\0'));
}

}  // namespace

Result<std::unique_ptr<Nvml>> Nvml::open(const std::string& explicit_path) {
  std::vector<std::string> candidates;
  if (!explicit_path.empty()) {
    candidates.push_back(explicit_path);
  } else {
    candidates = {"libnvidia-ml.so.1", "libnvidia-ml.so"};
  }

  void* handle = nullptr;
  std::string loaded;
  std::string why;
  for (const auto& name : candidates) {
    dlerror();
    // RTLD_NOW: an incomplete library fails here, not at the first call in a poll loop.
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      loaded = name;
      break;
    }
    why += (why.empty() ? "" : "; ") + dl_error();
  }
  if (!handle) {
    if (!explicit_path.empty()) {
      return Error{Errc::kNotFound,
                   fmt::format("cannot load NVML library {}: {}", explicit_path, why)};
    }
    return Error{
        Errc::kNotFound,
        fmt::format("NVML library not found (tried libnvidia-ml.so.1, libnvidia-ml.so): {}", why)};
  }

  auto api = std::make_unique<Api>();
  if (auto missing = resolve(handle, *api)) {
    dlclose(handle);
    return Error{Errc::kNotFound,
                 fmt::format("NVML library {} lacks required symbol {}", loaded, *missing)};
  }

  const Code rc = api->nvmlInit_v2();
  if (rc != NVML_SUCCESS) {
    std::string text = api->nvmlErrorString ? api->nvmlErrorString(rc) : "";
    dlclose(handle);
    return Error{Errc::kIo,
                 fmt::format("nvmlInit_v2 failed ({}): {} (NVML error {})", loaded,
                             text.empty() ? "no description" : text, static_cast<int>(rc))};
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, std::move(loaded), std::move(api)));
}

Nvml::Nvml(void* handle, std::string library, std::unique_ptr<Api> api)
    : handle_(handle), library_(std::move(library)), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->nvmlShutdown();
  dlclose(handle_);
}

std::string Nvml::describe(Code code) const {
  const char* text = api_->nvmlErrorString ? api_->nvmlErrorString(code) : nullptr;
  if (code == NVML_ERROR_FUNCTION_NOT_FOUND && !text) text = "function not found";
  return fmt::format("{} (NVML error {})", text && *text ? text : "no description",
                     static_cast<int>(code));
}

const char* Nvml::processes_symbol() const {
  if (api_->nvmlDeviceGetComputeRunningProcesses_v3)
    return "nvmlDeviceGetComputeRunningProcesses_v3";
  if (api_->nvmlDeviceGetComputeRunningProcesses) return "nvmlDeviceGetComputeRunningProcesses";
  return "";
}

Nvml::Code Nvml::device_count(unsigned int* count) const {
  return api_->nvmlDeviceGetCount_v2(count);
}

Nvml::Code Nvml::device_handle(unsigned int index, Device* device) const {
  return api_->nvmlDeviceGetHandleByIndex_v2(index, device);
}

Nvml::Code Nvml::name(Device device, std::string* out) const {
  if (!api_->nvmlDeviceGetName) return NVML_ERROR_FUNCTION_NOT_FOUND;
  char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  const Code rc = api_->nvmlDeviceGetName(device, buf, sizeof buf);
  if (rc == NVML_SUCCESS) *out = from_buffer(buf, sizeof buf);
  return rc;
}

Nvml::Code Nvml::uuid(Device device, std::string* out) const {
  if (!api_->nvmlDeviceGetUUID) return NVML_ERROR_FUNCTION_NOT_FOUND;
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  const Code rc = api_->nvmlDeviceGetUUID(device, buf, sizeof buf);
  if (rc == NVML_SUCCESS) *out = from_buffer(buf, sizeof buf);
  return rc;
}

Nvml::Code Nvml::utilization(Device device, nvmlUtilization_t* out) const {
  if (!api_->nvmlDeviceGetUtilizationRates) return NVML_ERROR_FUNCTION_NOT_FOUND;
  return api_->nvmlDeviceGetUtilizationRates(device, out);
}

Nvml::Code Nvml::memory(Device device, nvmlMemory_t* out) const {
  if (!api_->nvmlDeviceGetMemoryInfo) return NVML_ERROR_FUNCTION_NOT_FOUND;
  return api_->nvmlDeviceGetMemoryInfo(device, out);
}

Nvml::Code Nvml::power_mw(Device device, unsigned int* milliwatts) const {
  if (!api_->nvmlDeviceGetPowerUsage) return NVML_ERROR_FUNCTION_NOT_FOUND;
  return api_->nvmlDeviceGetPowerUsage(device, milliwatts);
}

namespace {

// The documented protocol: pass the capacity in *count; NVML_ERROR_INSUFFICIENT_SIZE sets
// *count to what is needed. Processes can appear between calls, so grow with slack and retry.
template <class Info, class Fn>
Nvml::Code list_processes(Fn fn, Nvml::Device device, std::vector<GpuProcess>* out) {
  std::vector<Info> infos(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto count = static_cast<unsigned int>(infos.size());
    const Nvml::Code rc = fn(device, &count, infos.data());
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      infos.resize(std::max<size_t>(count, infos.size()) + 16);
      continue;
    }
    if (rc != NVML_SUCCESS) return rc;
    out->clear();
    for (unsigned int i = 0; i < std::min<size_t>(count, infos.size()); ++i) {
      GpuProcess p;
      p.pid = static_cast<int>(infos[i].pid);
      if (infos[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) p.used_bytes = infos[i].usedGpuMemory;
      out->push_back(p);
    }
    return NVML_SUCCESS;
  }
  return NVML_ERROR_INSUFFICIENT_SIZE;
}

}  // namespace

Nvml::Code Nvml::compute_processes(Device device, std::vector<GpuProcess>* out) const {
  if (api_->nvmlDeviceGetComputeRunningProcesses_v3) {
    return list_processes<nvmlProcessInfo_v2_t>(api_->nvmlDeviceGetComputeRunningProcesses_v3,
                                                device, out);
  }
  if (api_->nvmlDeviceGetComputeRunningProcesses) {
    return list_processes<nvmlProcessInfo_v1_t>(api_->nvmlDeviceGetComputeRunningProcesses, device,
                                                out);
  }
  return NVML_ERROR_FUNCTION_NOT_FOUND;
}

}  // namespace stepwatch::probe
