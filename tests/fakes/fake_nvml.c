// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
/* A fake libnvidia-ml.so: exports the NVML entry points stepwatch uses, with values scripted in
 * a text file, so the real dlopen/dlsym path of src/probe/nvml.cpp runs in CI without a GPU
 * (STYLE rule 8).
 *
 * The file is named by the environment variable STEPWATCH_FAKE_NVML and read at every
 * nvmlInit_v2 (so one test process can load several scenarios). Unset, unreadable or malformed,
 * nvmlInit_v2 fails with NVML_ERROR_UNKNOWN and says why on stderr. One directive a line; a line
 * whose first non-blank character is '#' is a comment (names may contain '#'); N is a device
 * index:
 *
 *   init_error CODE              nvmlInit_v2 returns CODE (e.g. 9, driver not loaded)
 *   devices COUNT                number of devices (at most 16)
 *   device N name TEXT...        the rest of the line, spaces included
 *   device N uuid TEXT
 *   device N util SM MEM         percentages (nvmlUtilization_t gpu, memory)
 *   device N memory TOTAL USED   bytes; free = TOTAL - USED
 *   device N power_mw MW         milliwatts, as nvmlDeviceGetPowerUsage reports
 *   device N process PID BYTES   a compute process; BYTES may be "na" (NVML_VALUE_NOT_AVAILABLE)
 *   device N process_range FIRST COUNT BYTES   COUNT processes with pids FIRST, FIRST+1, ...
 *   device N unsupported WHAT    WHAT in name|uuid|util|memory|power|processes: the call returns
 *                                NVML_ERROR_NOT_SUPPORTED
 *   device N fail_after CALLS CODE   after CALLS per-device queries (any of the above kinds)
 *                                succeed, every later one returns CODE (15: the GPU is lost)
 *
 * Build variants (compile definitions) drop symbols to test a library that lacks them:
 *   FAKE_NVML_OMIT_PROCESSES     neither nvmlDeviceGetComputeRunningProcesses nor its _v3
 *   FAKE_NVML_OMIT_PROCESSES_V3  only the unversioned (v1 struct) process call
 *   FAKE_NVML_OMIT_COUNT         no nvmlDeviceGetCount_v2 (a required symbol)
 *
 * For tests: int fake_nvml_calls(const char* what, int device) returns how many times the kind
 * WHAT (as for "unsupported", plus "processes_v1"/"processes_v3") was called on a device since
 * the last nvmlInit_v2; device -1 sums all devices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 16
#define MAX_PROCESSES 512

typedef int nvmlReturn_t;
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_UNKNOWN = 999
};

/* Same layouts as src/probe/nvml.h declares (and the NVML reference documents). */
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;

enum Kind { K_NAME, K_UUID, K_UTIL, K_MEMORY, K_POWER, K_PROCESSES, K_COUNT };
static const char* const kKindNames[K_COUNT] = {"name",   "uuid",  "util",
                                                "memory", "power", "processes"};

typedef struct FakeDevice {
  char name[96];
  char uuid[96];
  unsigned int util_sm, util_mem;
  unsigned long long mem_total, mem_used;
  unsigned int power_mw;
  unsigned int pids[MAX_PROCESSES];
  unsigned long long used[MAX_PROCESSES];
  unsigned int nprocs;
  int unsupported[K_COUNT];
  long fail_after; /* -1: never */
  nvmlReturn_t fail_code;
  long queries;
  long calls[K_COUNT + 2]; /* + processes_v1, processes_v3 */
} FakeDevice;
typedef FakeDevice* nvmlDevice_t; /* opaque to the caller: a pointer, as in nvml.h */

static int g_initialized;
static nvmlReturn_t g_init_error;
static unsigned int g_count;
static FakeDevice g_devices[MAX_DEVICES];

static int kind_of(const char* what) {
  for (int k = 0; k < K_COUNT; ++k) {
    if (strcmp(what, kKindNames[k]) == 0) return k;
  }
  return -1;
}

static int fail(const char* path, int line, const char* why) {
  fprintf(stderr, "fake_nvml: %s:%d: %s\n", path, line, why);
  return -1;
}

/* Parses one "device N ..." directive. */
static int parse_device(char* rest, const char* path, int line) {
  char* end = NULL;
  long index = strtol(rest, &end, 10);
  if (end == rest || index < 0 || index >= MAX_DEVICES) return fail(path, line, "bad device index");
  FakeDevice* d = &g_devices[index];
  char key[32];
  int used = 0;
  if (sscanf(end, " %31s %n", key, &used) != 1) return fail(path, line, "missing key");
  char* value = end + used;
  value[strcspn(value, "\r\n")] = '\0';
  if (strcmp(key, "name") == 0) {
    snprintf(d->name, sizeof d->name, "%s", value);
  } else if (strcmp(key, "uuid") == 0) {
    snprintf(d->uuid, sizeof d->uuid, "%s", value);
  } else if (strcmp(key, "util") == 0) {
    if (sscanf(value, "%u %u", &d->util_sm, &d->util_mem) != 2)
      return fail(path, line, "util SM MEM");
  } else if (strcmp(key, "memory") == 0) {
    if (sscanf(value, "%llu %llu", &d->mem_total, &d->mem_used) != 2)
      return fail(path, line, "memory TOTAL USED");
  } else if (strcmp(key, "power_mw") == 0) {
    if (sscanf(value, "%u", &d->power_mw) != 1) return fail(path, line, "power_mw MW");
  } else if (strcmp(key, "process") == 0 || strcmp(key, "process_range") == 0) {
    unsigned int pid = 0, n = 1;
    char bytes[32];
    int ok = strcmp(key, "process") == 0 ? sscanf(value, "%u %31s", &pid, bytes) == 2
                                         : sscanf(value, "%u %u %31s", &pid, &n, bytes) == 3;
    if (!ok || d->nprocs + n > MAX_PROCESSES) return fail(path, line, "bad process line");
    for (unsigned int i = 0; i < n; ++i) {
      d->pids[d->nprocs] = pid + i;
      d->used[d->nprocs] = strcmp(bytes, "na") == 0 ? ~0ULL : strtoull(bytes, NULL, 10);
      d->nprocs++;
    }
  } else if (strcmp(key, "unsupported") == 0) {
    int k = kind_of(value);
    if (k < 0) return fail(path, line, "unsupported: unknown kind");
    d->unsupported[k] = 1;
  } else if (strcmp(key, "fail_after") == 0) {
    if (sscanf(value, "%ld %d", &d->fail_after, &d->fail_code) != 2)
      return fail(path, line, "fail_after CALLS CODE");
  } else {
    return fail(path, line, "unknown device key");
  }
  return 0;
}

static int load_scenario(void) {
  memset(g_devices, 0, sizeof g_devices);
  for (int i = 0; i < MAX_DEVICES; ++i) g_devices[i].fail_after = -1;
  g_count = 0;
  g_init_error = NVML_SUCCESS;
  const char* path = getenv("STEPWATCH_FAKE_NVML");
  if (!path || !*path) return fail("(env)", 0, "STEPWATCH_FAKE_NVML is not set");
  FILE* f = fopen(path, "r");
  if (!f) return fail(path, 0, "cannot open");
  char buf[512];
  int line = 0, rc = 0;
  while (rc == 0 && fgets(buf, sizeof buf, f)) {
    ++line;
    char word[32];
    int used = 0;
    if (sscanf(buf, " %31s %n", word, &used) != 1 || word[0] == '#') continue; /* blank, comment */
    if (strcmp(word, "init_error") == 0) {
      if (sscanf(buf + used, "%d", &g_init_error) != 1) rc = fail(path, line, "init_error CODE");
    } else if (strcmp(word, "devices") == 0) {
      if (sscanf(buf + used, "%u", &g_count) != 1 || g_count > MAX_DEVICES)
        rc = fail(path, line, "devices COUNT (at most 16)");
    } else if (strcmp(word, "device") == 0) {
      rc = parse_device(buf + used, path, line);
    } else {
      rc = fail(path, line, "unknown directive");
    }
  }
  fclose(f);
  return rc;
}

/* Counts a per-device query and says what it should return before any value is written. */
static nvmlReturn_t enter(nvmlDevice_t d, int kind, int counter) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (d < g_devices || d >= g_devices + g_count) return NVML_ERROR_INVALID_ARGUMENT;
  d->calls[counter]++;
  if (d->fail_after >= 0 && d->queries >= d->fail_after) return d->fail_code;
  d->queries++;
  return d->unsupported[kind] ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  if (load_scenario() != 0) return NVML_ERROR_UNKNOWN;
  if (g_init_error != NVML_SUCCESS) return g_init_error;
  g_initialized = 1;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlShutdown(void) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  g_initialized = 0;
  return NVML_SUCCESS;
}

FAKE_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) { /* the driver's own wording */
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

#ifndef FAKE_NVML_OMIT_COUNT
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = g_count;
  return NVML_SUCCESS;
}
#endif

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (index >= g_count || !device) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_devices[index];
  return NVML_SUCCESS;
}

static nvmlReturn_t copy_text(const char* text, char* out, unsigned int length) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(out, text, strlen(text) + 1);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  nvmlReturn_t rc = enter(device, K_NAME, K_NAME);
  return rc != NVML_SUCCESS ? rc : copy_text(device->name, name, length);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  nvmlReturn_t rc = enter(device, K_UUID, K_UUID);
  return rc != NVML_SUCCESS ? rc : copy_text(device->uuid, uuid, length);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* u) {
  nvmlReturn_t rc = enter(device, K_UTIL, K_UTIL);
  if (rc != NVML_SUCCESS) return rc;
  u->gpu = device->util_sm;
  u->memory = device->util_mem;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* m) {
  nvmlReturn_t rc = enter(device, K_MEMORY, K_MEMORY);
  if (rc != NVML_SUCCESS) return rc;
  m->total = device->mem_total;
  m->used = device->mem_used;
  m->free = device->mem_total - device->mem_used;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  nvmlReturn_t rc = enter(device, K_POWER, K_POWER);
  if (rc != NVML_SUCCESS) return rc;
  *milliwatts = device->power_mw;
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_OMIT_PROCESSES
/* The documented protocol: *count carries the capacity in and the number of processes out;
 * too small a capacity answers NVML_ERROR_INSUFFICIENT_SIZE with the needed count. */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned int* count, void* infos, int v3) {
  nvmlReturn_t rc = enter(device, K_PROCESSES, K_COUNT + v3);
  if (rc != NVML_SUCCESS) return rc;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  if (*count < device->nprocs) {
    *count = device->nprocs;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (device->nprocs > 0 && !infos) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned int i = 0; i < device->nprocs; ++i) {
    if (v3) {
      nvmlProcessInfo_v2_t* p = (nvmlProcessInfo_v2_t*)infos + i;
      p->pid = device->pids[i];
      p->usedGpuMemory = device->used[i];
      p->gpuInstanceId = p->computeInstanceId = 0xFFFFFFFFu;
    } else {
      nvmlProcessInfo_v1_t* p = (nvmlProcessInfo_v1_t*)infos + i;
      p->pid = device->pids[i];
      p->usedGpuMemory = device->used[i];
    }
  }
  *count = device->nprocs;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                              unsigned int* count,
                                                              nvmlProcessInfo_v1_t* infos) {
  return processes(device, count, infos, 0);
}

#ifndef FAKE_NVML_OMIT_PROCESSES_V3
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                 unsigned int* count,
                                                                 nvmlProcessInfo_v2_t* infos) {
  return processes(device, count, infos, 1);
}
#endif
#endif

FAKE_EXPORT int fake_nvml_calls(const char* what, int device) {
  int counter = kind_of(what);
  if (strcmp(what, "processes_v1") == 0) counter = K_COUNT;
  if (strcmp(what, "processes_v3") == 0) counter = K_COUNT + 1;
  if (counter < 0 || device >= MAX_DEVICES) return -1;
  long total = 0;
  for (int i = 0; i < MAX_DEVICES; ++i) {
    if (device == i || device < 0) {
      total += g_devices[i].calls[counter];
      if (counter == K_PROCESSES)
        total += g_devices[i].calls[K_COUNT] + g_devices[i].calls[K_COUNT + 1];
    }
  }
  return (int)total;
}
