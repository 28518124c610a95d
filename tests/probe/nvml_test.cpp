// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The NVML loader through its real dlopen path, against fake libnvidia-ml.so builds.
#include "src/probe/nvml.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "tests/fakes/fake_nvml_scenario.h"

namespace stepwatch::probe {
namespace {

using namespace nvml_abi;  // NOLINT
using testing::fake_nvml_calls;
using testing::FakeNvmlScenario;

constexpr const char* kTwoDevices = R"(
devices 2
device 0 name NVIDIA Fake H200
device 0 uuid GPU-00000000-1111-2222-3333-444444444444
device 0 util 87 41
device 0 memory 150000000000 42000000000
device 0 power_mw 350123
device 0 process 4242 1073741824
device 0 process 4243 na
device 1 name NVIDIA Fake H200 #2
device 1 uuid GPU-11111111-1111-2222-3333-444444444444
device 1 util 3 0
device 1 memory 150000000000 0
device 1 power_mw 71000
)";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Nvml, AnExplicitPathThatDoesNotExistIsAClearReason) {
  auto nvml = Nvml::open("/nonexistent/dir/libnvidia-ml.so");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.error().code, Errc::kNotFound);
  EXPECT_TRUE(
      contains(nvml.error().message, "cannot load NVML library /nonexistent/dir/libnvidia-ml.so"))
      << nvml.error().message;
}

TEST(Nvml, WithoutAnyLibraryTheDefaultSearchSaysWhatItTried) {
  if (void* real = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(real);
    GTEST_SKIP() << "this machine has a real libnvidia-ml.so.1";
  }
  if (void* real = dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(real);
    GTEST_SKIP() << "this machine has a libnvidia-ml.so on the search path";
  }
  auto nvml = Nvml::open();
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.error().code, Errc::kNotFound);
  EXPECT_TRUE(contains(nvml.error().message, "tried libnvidia-ml.so.1, libnvidia-ml.so"))
      << nvml.error().message;
}

TEST(Nvml, InitFailureIsAReasonNotACrash) {
  FakeNvmlScenario scenario("init_error 9\n");
  auto nvml = Nvml::open(FAKE_NVML_LIB);
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.error().code, Errc::kIo);
  EXPECT_TRUE(contains(nvml.error().message, "nvmlInit_v2 failed")) << nvml.error().message;
  EXPECT_TRUE(contains(nvml.error().message, "Driver Not Loaded (NVML error 9)"))
      << nvml.error().message;
}

TEST(Nvml, AMissingRequiredSymbolIsNamed) {
  FakeNvmlScenario scenario(kTwoDevices);
  auto nvml = Nvml::open(FAKE_NVML_NOCOUNT_LIB);
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.error().code, Errc::kNotFound);
  EXPECT_TRUE(contains(nvml.error().message, "lacks required symbol nvmlDeviceGetCount_v2"))
      << nvml.error().message;
}

TEST(Nvml, ReadsScriptedValuesThroughTheSymbolTable) {
  FakeNvmlScenario scenario(kTwoDevices);
  auto opened = Nvml::open(FAKE_NVML_LIB);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  const Nvml& nvml = **opened;
  EXPECT_EQ(nvml.library(), FAKE_NVML_LIB);
  EXPECT_STREQ(nvml.processes_symbol(), "nvmlDeviceGetComputeRunningProcesses_v3");

  unsigned int count = 0;
  ASSERT_EQ(nvml.device_count(&count), NVML_SUCCESS);
  ASSERT_EQ(count, 2u);
  Nvml::Device dev = nullptr;
  ASSERT_EQ(nvml.device_handle(0, &dev), NVML_SUCCESS);

  std::string text;
  ASSERT_EQ(nvml.name(dev, &text), NVML_SUCCESS);
  EXPECT_EQ(text, "NVIDIA Fake H200");
  ASSERT_EQ(nvml.uuid(dev, &text), NVML_SUCCESS);
  EXPECT_EQ(text, "GPU-00000000-1111-2222-3333-444444444444");
  nvmlUtilization_t util{};
  ASSERT_EQ(nvml.utilization(dev, &util), NVML_SUCCESS);
  EXPECT_EQ(util.gpu, 87u);
  EXPECT_EQ(util.memory, 41u);
  nvmlMemory_t mem{};
  ASSERT_EQ(nvml.memory(dev, &mem), NVML_SUCCESS);
  EXPECT_EQ(mem.total, 150000000000ULL);
  EXPECT_EQ(mem.used, 42000000000ULL);
  EXPECT_EQ(mem.free, 108000000000ULL);
  unsigned int mw = 0;
  ASSERT_EQ(nvml.power_mw(dev, &mw), NVML_SUCCESS);
  EXPECT_EQ(mw, 350123u);

  std::vector<GpuProcess> procs;
  ASSERT_EQ(nvml.compute_processes(dev, &procs), NVML_SUCCESS);
  ASSERT_EQ(procs.size(), 2u);
  EXPECT_EQ(procs[0].pid, 4242);
  EXPECT_EQ(procs[0].used_bytes, 1073741824ULL);
  EXPECT_EQ(procs[1].pid, 4243);
  EXPECT_FALSE(procs[1].used_bytes.has_value()) << "NVML_VALUE_NOT_AVAILABLE is absent, not a size";
  EXPECT_EQ(fake_nvml_calls(FAKE_NVML_LIB, "processes_v3", 0), 1);
  EXPECT_EQ(fake_nvml_calls(FAKE_NVML_LIB, "processes_v1", 0), 0);

  ASSERT_EQ(nvml.device_handle(1, &dev), NVML_SUCCESS);
  ASSERT_EQ(nvml.compute_processes(dev, &procs), NVML_SUCCESS);
  EXPECT_TRUE(procs.empty());
  EXPECT_EQ(nvml.device_handle(2, &dev), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml.describe(NVML_ERROR_GPU_IS_LOST), "GPU is lost (NVML error 15)");
}

TEST(Nvml, FallsBackToTheUnversionedProcessCallAndItsV1Layout) {
  FakeNvmlScenario scenario(kTwoDevices);
  auto opened = Nvml::open(FAKE_NVML_V1PROCS_LIB);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  const Nvml& nvml = **opened;
  EXPECT_STREQ(nvml.processes_symbol(), "nvmlDeviceGetComputeRunningProcesses");
  Nvml::Device dev = nullptr;
  ASSERT_EQ(nvml.device_handle(0, &dev), NVML_SUCCESS);
  std::vector<GpuProcess> procs;
  ASSERT_EQ(nvml.compute_processes(dev, &procs), NVML_SUCCESS);
  ASSERT_EQ(procs.size(), 2u);
  EXPECT_EQ(procs[0].pid, 4242);
  EXPECT_EQ(procs[0].used_bytes, 1073741824ULL);
  EXPECT_EQ(procs[1].pid, 4243);
  EXPECT_FALSE(procs[1].used_bytes.has_value());
  EXPECT_EQ(fake_nvml_calls(FAKE_NVML_V1PROCS_LIB, "processes_v1", 0), 1);
}

TEST(Nvml, GrowsTheProcessBufferWhenTheDriverSaysInsufficientSize) {
  FakeNvmlScenario scenario("devices 1\ndevice 0 process_range 10000 150 4096\n");
  auto opened = Nvml::open(FAKE_NVML_LIB);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  Nvml::Device dev = nullptr;
  ASSERT_EQ((*opened)->device_handle(0, &dev), NVML_SUCCESS);
  std::vector<GpuProcess> procs;
  ASSERT_EQ((*opened)->compute_processes(dev, &procs), NVML_SUCCESS);
  ASSERT_EQ(procs.size(), 150u);
  EXPECT_EQ(procs.front().pid, 10000);
  EXPECT_EQ(procs.back().pid, 10149);
  EXPECT_EQ(procs.back().used_bytes, 4096u);
  EXPECT_EQ(fake_nvml_calls(FAKE_NVML_LIB, "processes_v3", 0), 2);  // too small once, then sized
}

TEST(Nvml, AMissingOptionalSymbolAnswersFunctionNotFound) {
  FakeNvmlScenario scenario(kTwoDevices);
  auto opened = Nvml::open(FAKE_NVML_NOPROCS_LIB);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  const Nvml& nvml = **opened;
  EXPECT_STREQ(nvml.processes_symbol(), "");
  Nvml::Device dev = nullptr;
  ASSERT_EQ(nvml.device_handle(0, &dev), NVML_SUCCESS);
  std::vector<GpuProcess> procs;
  EXPECT_EQ(nvml.compute_processes(dev, &procs), NVML_ERROR_FUNCTION_NOT_FOUND);
  unsigned int mw = 0;
  EXPECT_EQ(nvml.power_mw(dev, &mw), NVML_SUCCESS);
  EXPECT_EQ(mw, 350123u);
}

TEST(Nvml, AnUnreadableScenarioFailsInitInsteadOfInventingDevices) {
  unsetenv("STEPWATCH_FAKE_NVML");
  auto nvml = Nvml::open(FAKE_NVML_LIB);
  ASSERT_FALSE(nvml.ok());
  EXPECT_TRUE(contains(nvml.error().message, "NVML error 999")) << nvml.error().message;
}

}  // namespace
}  // namespace stepwatch::probe
