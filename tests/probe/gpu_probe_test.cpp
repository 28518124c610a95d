// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The GPU probe over the fake libnvidia-ml.so: capabilities probed once, absent values stay
// absent, a lost GPU does not take the others with it; the process map; the tool binary.
#include "src/probe/gpu_probe.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>

#include "tests/fakes/fake_nvml_scenario.h"

namespace stepwatch::probe {
namespace {

using testing::fake_nvml_calls;
using testing::FakeNvmlScenario;

constexpr const char* kTwoDevices = R"(
devices 2
device 0 name NVIDIA Fake H200
device 0 uuid GPU-aaaa
device 0 util 87 41
device 0 memory 150000000000 42000000000
device 0 power_mw 350123
device 0 process 4242 1073741824
device 0 process 4243 na
device 1 name NVIDIA Fake H200 #2
device 1 uuid GPU-bbbb
device 1 util 3 0
device 1 memory 150000000000 1048576
device 1 power_mw 71000
device 1 process 5000 2097152
)";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Collects notices so tests can count them instead of scraping the log.
struct Notices {
  std::vector<std::string> lines;
  GpuProbe::NoticeSink sink() {
    return [this](const std::string& line) { lines.push_back(line); };
  }
  size_t count(const std::string& part) const {
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return contains(l, part); });
  }
};

std::shared_ptr<Nvml> open_fake(const char* lib) {
  auto nvml = Nvml::open(lib);
  if (!nvml.ok()) ADD_FAILURE() << nvml.error().message;
  return nvml.ok() ? std::shared_ptr<Nvml>(std::move(nvml).value()) : nullptr;
}

TEST(GpuProbe, ReadsTwoDevicesInTheirUnits) {
  FakeNvmlScenario scenario(kTwoDevices);
  Notices notices;
  GpuProbe probe(open_fake(FAKE_NVML_LIB), notices.sink());
  auto snap = probe.poll();
  ASSERT_TRUE(snap.ok()) << snap.error().message;
  ASSERT_EQ(snap->devices.size(), 2u);
  EXPECT_GT(snap->mono_ns, 0);

  const GpuDevice& d0 = snap->devices[0];
  EXPECT_EQ(d0.index, 0u);
  EXPECT_EQ(d0.name, "NVIDIA Fake H200");
  EXPECT_EQ(d0.uuid, "GPU-aaaa");
  EXPECT_EQ(d0.sm_util_pct, 87u);
  EXPECT_EQ(d0.mem_util_pct, 41u);
  EXPECT_EQ(d0.mem_used_bytes, 42000000000ULL);
  EXPECT_EQ(d0.mem_total_bytes, 150000000000ULL);
  ASSERT_TRUE(d0.power_w.has_value());
  EXPECT_DOUBLE_EQ(*d0.power_w, 350.123);  // milliwatts to watts
  ASSERT_TRUE(d0.processes.has_value());
  ASSERT_EQ(d0.processes->size(), 2u);
  EXPECT_EQ((*d0.processes)[0].pid, 4242);
  EXPECT_EQ((*d0.processes)[0].used_bytes, 1073741824ULL);
  EXPECT_FALSE((*d0.processes)[1].used_bytes.has_value());
  EXPECT_FALSE(d0.error.has_value());
  EXPECT_EQ(d0.caps.power, Support::kSupported);
  EXPECT_EQ(d0.caps.processes, Support::kSupported);

  const GpuDevice& d1 = snap->devices[1];
  EXPECT_EQ(d1.name, "NVIDIA Fake H200 #2");
  EXPECT_EQ(d1.sm_util_pct, 3u);
  EXPECT_EQ(d1.mem_util_pct, 0u);  // a real zero is present, not absent
  EXPECT_DOUBLE_EQ(d1.power_w.value_or(-1), 71.0);
  EXPECT_TRUE(notices.lines.empty()) << notices.lines.front();
}

TEST(GpuProbe, AMissingOptionalSymbolLeavesProcessesAbsentAndTheRestPresent) {
  FakeNvmlScenario scenario(kTwoDevices);
  Notices notices;
  GpuProbe probe(open_fake(FAKE_NVML_NOPROCS_LIB), notices.sink());
  for (int i = 0; i < 3; ++i) {
    auto snap = probe.poll();
    ASSERT_TRUE(snap.ok()) << snap.error().message;
    for (const auto& d : snap->devices) {
      EXPECT_FALSE(d.processes.has_value());
      EXPECT_EQ(d.caps.processes, Support::kNoSymbol);
      EXPECT_TRUE(d.sm_util_pct && d.mem_used_bytes && d.power_w && d.name);
      EXPECT_FALSE(d.error.has_value()) << *d.error;
    }
  }
  EXPECT_EQ(notices.count("processes no-symbol"), 2u) << "once per device, not per poll";
}

TEST(GpuProbe, PowerNotSupportedOnOneDeviceIsAbsentAskedOnceAndReportedOnce) {
  FakeNvmlScenario scenario(std::string(kTwoDevices) + "device 1 unsupported power\n");
  Notices notices;
  GpuProbe probe(open_fake(FAKE_NVML_LIB), notices.sink());
  ASSERT_EQ(probe.capabilities().size(), 2u);
  EXPECT_EQ(probe.capabilities()[1].power, Support::kNotSupported);
  for (int i = 0; i < 5; ++i) {
    auto snap = probe.poll();
    ASSERT_TRUE(snap.ok()) << snap.error().message;
    EXPECT_TRUE(snap->devices[0].power_w.has_value());
    EXPECT_FALSE(snap->devices[1].power_w.has_value()) << "absent, never 0";
    EXPECT_FALSE(snap->devices[1].error.has_value()) << "unsupported is not an error";
    EXPECT_TRUE(snap->devices[1].sm_util_pct.has_value());
  }
  EXPECT_EQ(notices.count("power not-supported"), 1u);
  EXPECT_TRUE(contains(notices.lines.at(0), "gpu 1 (NVIDIA Fake H200 #2)")) << notices.lines.at(0);
  EXPECT_EQ(fake_nvml_calls(FAKE_NVML_LIB, "power", 1), 1) << "probed at open, never polled";
  EXPECT_EQ(fake_nvml_calls(FAKE_NVML_LIB, "power", 0), 6) << "probed at open, then every poll";
  EXPECT_EQ(fake_nvml_calls(FAKE_NVML_LIB, "name", 1), 1) << "identity is read once";
}

// Per device: open makes 6 queries (name, uuid, util, memory, power, processes), each poll 4.
TEST(GpuProbe, AGpuLostMidRunIsAbsentWithItsErrorWhileTheOtherReports) {
  FakeNvmlScenario scenario(std::string(kTwoDevices) + "device 1 fail_after 10 15\n");
  Notices notices;
  GpuProbe probe(open_fake(FAKE_NVML_LIB), notices.sink());

  auto first = probe.poll();
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->devices[1].error.has_value());
  EXPECT_EQ(first->devices[1].sm_util_pct, 3u);

  for (int i = 0; i < 3; ++i) {
    auto snap = probe.poll();
    ASSERT_TRUE(snap.ok());
    const GpuDevice& lost = snap->devices[1];
    ASSERT_TRUE(lost.error.has_value());
    EXPECT_TRUE(contains(*lost.error, "GPU is lost (NVML error 15)")) << *lost.error;
    EXPECT_FALSE(lost.sm_util_pct || lost.mem_used_bytes || lost.power_w || lost.processes);
    EXPECT_EQ(lost.uuid, "GPU-bbbb") << "identity stays, so the page can name the card";
    const GpuDevice& fine = snap->devices[0];
    EXPECT_FALSE(fine.error.has_value());
    EXPECT_EQ(fine.sm_util_pct, 87u);
    EXPECT_TRUE(fine.processes.has_value());
  }
  EXPECT_EQ(notices.count("GPU is lost"), 1u) << "the transition is reported, not every poll";
}

TEST(GpuProbe, AGpuLostHalfwayThroughAPollGivesNoHalfReading) {
  // 6 at open + 4 in poll 1 + util and memory in poll 2; power fails.
  FakeNvmlScenario scenario(std::string(kTwoDevices) + "device 1 fail_after 12 15\n");
  GpuProbe probe(open_fake(FAKE_NVML_LIB), [](const std::string&) {});
  ASSERT_TRUE(probe.poll().ok());
  auto snap = probe.poll();
  ASSERT_TRUE(snap.ok());
  const GpuDevice& lost = snap->devices[1];
  ASSERT_TRUE(lost.error.has_value());
  EXPECT_TRUE(contains(*lost.error, "nvmlDeviceGetPowerUsage: GPU is lost")) << *lost.error;
  EXPECT_FALSE(lost.sm_util_pct.has_value());
  EXPECT_FALSE(lost.mem_used_bytes.has_value());
  EXPECT_FALSE(snap->devices[0].error.has_value());
}

TEST(GpuProbe, ANullLibraryIsAnErrorNotACrash) {
  GpuProbe probe(nullptr, [](const std::string&) {});
  EXPECT_FALSE(probe.poll().ok());
}

GpuDevice device_with(unsigned int index, std::optional<std::vector<GpuProcess>> procs) {
  GpuDevice d;
  d.index = index;
  d.processes = std::move(procs);
  return d;
}

TEST(MapProcesses, SeparatesTheCurrentIncarnationFromLeftovers) {
  GpuSnapshot snap;
  snap.devices.push_back(device_with(0, std::vector<GpuProcess>{{100, 1000}, {50, 2000}}));
  snap.devices.push_back(device_with(1, std::vector<GpuProcess>{{101, std::nullopt}}));
  snap.devices.push_back(device_with(2, std::vector<GpuProcess>{{777, 3000}}));
  snap.devices.push_back(device_with(3, std::nullopt));
  snap.devices.push_back(device_with(4, std::vector<GpuProcess>{}));

  const ProcessMap map = map_processes(snap, /*job_pids=*/{50, 51, 100, 101},
                                       /*incarnation_pids=*/{100, 101});
  EXPECT_EQ(map.job_gpus, (std::vector<unsigned int>{0, 1}));
  ASSERT_EQ(map.leftovers.size(), 2u);
  EXPECT_EQ(map.leftovers[0].gpu, 0u);
  EXPECT_EQ(map.leftovers[0].pid, 50);
  EXPECT_EQ(map.leftovers[0].used_bytes, 2000u);
  EXPECT_TRUE(map.leftovers[0].job_pid) << "a previous incarnation: the restart-stuck fingerprint";
  EXPECT_EQ(map.leftovers[1].gpu, 2u);
  EXPECT_EQ(map.leftovers[1].pid, 777);
  EXPECT_FALSE(map.leftovers[1].job_pid);
  EXPECT_EQ(map.unknown_gpus, (std::vector<unsigned int>{3}));
}

TEST(MapProcesses, WorksOnAPolledSnapshot) {
  FakeNvmlScenario scenario(kTwoDevices);
  GpuProbe probe(open_fake(FAKE_NVML_LIB), [](const std::string&) {});
  auto snap = probe.poll();
  ASSERT_TRUE(snap.ok());
  const ProcessMap map = map_processes(*snap, {4242, 5000}, {5000});
  EXPECT_EQ(map.job_gpus, (std::vector<unsigned int>{1}));
  ASSERT_EQ(map.leftovers.size(), 2u);
  EXPECT_EQ(map.leftovers[0].pid, 4242);
  EXPECT_TRUE(map.leftovers[0].job_pid);
  EXPECT_EQ(map.leftovers[1].pid, 4243);
  EXPECT_FALSE(map.leftovers[1].job_pid);
  EXPECT_TRUE(map.unknown_gpus.empty());
}

struct ToolRun {
  int status = -1;
  std::string output;
};

ToolRun run_tool(const std::string& command) {
  ToolRun r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

#ifdef GPU_PROBE_BIN
TEST(GpuProbeTool, PrintsWhatItReadsFromTheFake) {
  FakeNvmlScenario scenario(std::string(kTwoDevices) + "device 1 unsupported power\n");
  const ToolRun r = run_tool(std::string(GPU_PROBE_BIN) + " --nvml-lib " + FAKE_NVML_LIB +
                             " --count 2 --interval-ms 0");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "gpu 0: NVIDIA Fake H200 uuid GPU-aaaa")) << r.output;
  EXPECT_TRUE(contains(r.output, "sm 87%")) << r.output;
  EXPECT_TRUE(contains(r.output, "power 350.1 W")) << r.output;
  EXPECT_TRUE(contains(r.output, "pid 4242 (1.0 GiB)")) << r.output;
  EXPECT_TRUE(contains(r.output, "power=not-supported")) << r.output;
  EXPECT_TRUE(contains(r.output, "poll 2/2")) << r.output;
}

TEST(GpuProbeTool, PrintsJsonWithAbsentValuesAsNull) {
  FakeNvmlScenario scenario(std::string(kTwoDevices) + "device 1 unsupported power\n");
  const ToolRun r = run_tool(std::string(GPU_PROBE_BIN) + " --json --nvml-lib " + FAKE_NVML_LIB);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, R"("name":"NVIDIA Fake H200")")) << r.output;
  EXPECT_TRUE(contains(r.output, R"("power_w":null)")) << r.output;
  EXPECT_TRUE(contains(r.output, R"({"pid":4243,"used_bytes":null})")) << r.output;
  EXPECT_TRUE(contains(r.output, R"("processes_symbol":"nvmlDeviceGetComputeRunningProcesses_v3")"))
      << r.output;
}

TEST(GpuProbeTool, SaysNoGpuEvidenceForAMissingLibrary) {
  const ToolRun r =
      run_tool(std::string(GPU_PROBE_BIN) + " --nvml-lib /nonexistent/libnvidia-ml.so");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(
      contains(r.output, "no GPU evidence: cannot load NVML library /nonexistent/libnvidia-ml.so"))
      << r.output;
  const ToolRun j =
      run_tool(std::string(GPU_PROBE_BIN) + " --json --nvml-lib /nonexistent/libnvidia-ml.so");
  EXPECT_EQ(j.status, 2) << j.output;
  EXPECT_TRUE(contains(j.output, R"({"gpu_evidence":false,"reason":"cannot load NVML library)"))
      << j.output;
}

TEST(GpuProbeTool, RejectsBadUsage) {
  EXPECT_EQ(run_tool(std::string(GPU_PROBE_BIN) + " --count zero").status, 1);
  EXPECT_EQ(run_tool(std::string(GPU_PROBE_BIN) + " --bogus").status, 1);
}
#endif

}  // namespace
}  // namespace stepwatch::probe
