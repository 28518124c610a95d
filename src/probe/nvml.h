// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// NVML loaded with dlopen through our own declarations of the few types and entry points we
// use (STYLE rule 2): no CUDA or NVML headers at build time, and a machine without the library,
// or with one that lacks a required symbol, gets "no GPU evidence" with a reason, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/common/result.h"

namespace stepwatch::probe {

// The subset of nvml.h we use, declared by hand. Layouts and values are taken from the NVML API
// reference (docs.nvidia.com/deploy/nvml-api: nvmlReturn_t, nvmlUtilization_t, nvmlMemory_t,
// nvmlProcessInfo_v1_t, nvmlProcessInfo_t) and cross-checked against nvtop's own declarations
// (github.com/Syllo/nvtop, src/extract_gpuinfo_nvidia.c).
namespace nvml_abi {

// An enum in nvml.h; int-sized in the C ABI. A fixed underlying type keeps codes this build
// does not know (a newer driver's) representable.
enum nvmlReturn_t : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_UNKNOWN = 999,
};

struct nvmlDevice_st;  // opaque; only ever handled through the pointer
using nvmlDevice_t = nvmlDevice_st*;

struct nvmlUtilization_t {
  unsigned int gpu;     // percent of the sample period in which a kernel ran (SM busy)
  unsigned int memory;  // percent of the sample period in which device memory was read/written
};

struct nvmlMemory_t {  // the v1 layout taken by the unversioned nvmlDeviceGetMemoryInfo
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// Taken by the unversioned nvmlDeviceGetComputeRunningProcesses (nvml.h names it
// nvmlProcessInfo_v1_t since API 11; it was nvmlProcessInfo_t in API 10).
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes; NVML_VALUE_NOT_AVAILABLE when unknown
};

// Taken by nvmlDeviceGetComputeRunningProcesses_v2 and _v3 (nvmlProcessInfo_v2_t, which nvml.h
// 11+ also calls nvmlProcessInfo_t).
struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;      // MIG only
  unsigned int computeInstanceId;  // MIG only
};

static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16);
static_assert(sizeof(nvmlProcessInfo_v2_t) == 24);

constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;
constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;

}  // namespace nvml_abi

// Every NVML entry point stepwatch calls, listed once: X(symbol, need, return type, parameters).
// A missing kRequired symbol fails Nvml::open; a missing kOptional one leaves its pointer null
// and the wrapper answers NVML_ERROR_FUNCTION_NOT_FOUND (as DCGM's loader does).
// clang-format off
#define STEPWATCH_NVML_SYMBOLS(X)                                            \
  X(nvmlInit_v2, kRequired, nvmlReturn_t, (void))                            \
  X(nvmlShutdown, kRequired, nvmlReturn_t, (void))                           \
  X(nvmlErrorString, kOptional, const char*, (nvmlReturn_t result))          \
  X(nvmlDeviceGetCount_v2, kRequired, nvmlReturn_t, (unsigned int* count))   \
  X(nvmlDeviceGetHandleByIndex_v2, kRequired, nvmlReturn_t,                  \
    (unsigned int index, nvmlDevice_t* device))                              \
  X(nvmlDeviceGetName, kOptional, nvmlReturn_t,                              \
    (nvmlDevice_t device, char* name, unsigned int length))                  \
  X(nvmlDeviceGetUUID, kOptional, nvmlReturn_t,                              \
    (nvmlDevice_t device, char* uuid, unsigned int length))                  \
  X(nvmlDeviceGetUtilizationRates, kOptional, nvmlReturn_t,                  \
    (nvmlDevice_t device, nvmlUtilization_t* utilization))                  \
  X(nvmlDeviceGetMemoryInfo, kOptional, nvmlReturn_t,                        \
    (nvmlDevice_t device, nvmlMemory_t* memory))                            \
  X(nvmlDeviceGetPowerUsage, kOptional, nvmlReturn_t,                        \
    (nvmlDevice_t device, unsigned int* milliwatts))                         \
  X(nvmlDeviceGetComputeRunningProcesses_v3, kOptional, nvmlReturn_t,        \
    (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_v2_t* infos)) \
  X(nvmlDeviceGetComputeRunningProcesses, kOptional, nvmlReturn_t,           \
    (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_v1_t* infos))
// clang-format on

// One process holding a compute context on a GPU.
struct GpuProcess {
  int pid = 0;  // as the driver sees it: the host pid namespace
  // Absent when the driver cannot say (NVML_VALUE_NOT_AVAILABLE).
  std::optional<uint64_t> used_bytes;
};

// A loaded, initialised NVML. Calls return the NVML code; values land in the out-parameter only
// on NVML_SUCCESS. Not thread-safe: one poller owns it.
class Nvml {
 public:
  using Code = nvml_abi::nvmlReturn_t;
  using Device = nvml_abi::nvmlDevice_t;

  // Loads explicit_path if given (and nothing else), otherwise libnvidia-ml.so.1, then
  // libnvidia-ml.so; resolves the symbol table and calls nvmlInit_v2. The error message is the
  // reason there is no GPU evidence (kNotFound: no library or a required symbol; kIo: init).
  static Result<std::unique_ptr<Nvml>> open(const std::string& explicit_path = "");

  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  const std::string& library() const { return library_; }  // the name or path that loaded
  // "GPU is lost (NVML error 15)": the driver's text when it has nvmlErrorString.
  std::string describe(Code code) const;
  // The entry point used for the process list, or "" when the library has neither.
  const char* processes_symbol() const;

  Code device_count(unsigned int* count) const;
  Code device_handle(unsigned int index, Device* device) const;
  Code name(Device device, std::string* out) const;
  Code uuid(Device device, std::string* out) const;
  Code utilization(Device device, nvml_abi::nvmlUtilization_t* out) const;
  Code memory(Device device, nvml_abi::nvmlMemory_t* out) const;
  Code power_mw(Device device, unsigned int* milliwatts) const;
  Code compute_processes(Device device, std::vector<GpuProcess>* out) const;

  struct Api;  // the function pointers generated from STEPWATCH_NVML_SYMBOLS

 private:
  Nvml(void* handle, std::string library, std::unique_ptr<Api> api);

  void* handle_ = nullptr;
  std::string library_;
  std::unique_ptr<Api> api_;
};

}  // namespace stepwatch::probe
