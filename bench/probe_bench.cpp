// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// What one poll of the evidence probes costs, printed as one table against the targets:
//   - the process probe on a real 200-process tree (target: well under 1 ms per poll),
//   - the same with thread states read for 8 rank processes,
//   - the GPU probe on 8 devices through the real dlopen path (fake libnvidia-ml, no GPU here),
//   - a whole observer poll of an 8-rank job: beacons, process tree, GPU.
// Usage: probe_bench [--fake-nvml PATH] [--polls N]
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <vector>

#include "src/contract/beacon_writer.h"
#include "src/probe/gpu_probe.h"
#include "src/probe/nvml.h"
#include "src/probe/procfs.h"
#include "src/watch/observer.h"

using namespace stepwatch;

namespace {

struct Row {
  std::string what;
  double median_us = 0, p90_us = 0;
  std::string target;
  std::string met;
};

// Median and p90 of `polls` calls of f, in microseconds.
std::pair<double, double> time_it(int polls, const std::function<void()>& f) {
  std::vector<double> us;
  f();  // warm up
  for (int i = 0; i < polls; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 9 / 10]};
}

std::vector<pid_t> spawn(int n) {
  std::vector<pid_t> kids;
  for (int i = 0; i < n; ++i) {
    pid_t p = ::fork();
    if (p == 0) {
      ::pause();
      ::_exit(0);
    }
    if (p > 0) kids.push_back(p);
  }
  return kids;
}

}  // namespace

int main(int argc, char** argv) {
  std::string fake_nvml;
  int polls = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fake-nvml") == 0 && i + 1 < argc)
      fake_nvml = argv[++i];
    else if (std::strcmp(argv[i], "--polls") == 0 && i + 1 < argc)
      polls = std::atoi(argv[++i]);
  }
  std::vector<Row> rows;
  std::vector<pid_t> kids = spawn(199);  // with this process: a 200-process tree
  auto tmp = std::filesystem::temp_directory_path() / fmt::format("sw-probe-bench-{}", ::getpid());
  std::filesystem::create_directories(tmp);

  probe::ProcessProbe procs;
  probe::Selector sel;
  sel.root_pid = ::getpid();
  size_t seen = 0;
  auto [m1, p1] = time_it(polls, [&] { seen = procs.scan(sel)->procs.size(); });
  rows.push_back({fmt::format("process probe: one poll of a {}-process tree", seen), m1, p1,
                  "< 1000 us", m1 < 1000 ? "yes" : "**no**"});
  rows.back().what += " (stat, io and wchan of each)";
  probe::ScanOptions ranks_only;
  for (int i = 0; i < 8; ++i) ranks_only.thread_scan_pids.insert(kids[static_cast<size_t>(i)]);
  ranks_only.detail_pids = ranks_only.thread_scan_pids;
  auto [m2, p2] = time_it(polls, [&] { (void)procs.scan(sel, ranks_only); });
  rows.push_back({"  ... stat of all, io, wchan and threads of 8 ranks only", m2, p2, "< 1000 us",
                  m2 < 1000 ? "yes" : "**no**"});
  ranks_only.reuse_known = true;
  auto [m5, p5] = time_it(polls, [&] { (void)procs.scan(sel, ranks_only); });
  rows.push_back({"  ... as the observer runs it: known processes not re-read, 8 ranks in full", m5,
                  p5, "< 1000 us", m5 < 1000 ? "yes" : "**no**"});

  std::shared_ptr<probe::GpuProbe> gpu;
  if (!fake_nvml.empty()) {
    std::string scenario = (tmp / "nvml.txt").string();
    std::ofstream s(scenario);
    s << "devices 8\n";
    for (int d = 0; d < 8; ++d) {
      s << fmt::format(
               "device {} name NVIDIA H200\ndevice {} uuid GPU-{:08x}\ndevice {} util 97 40\n", d,
               d, d, d)
        << fmt::format("device {} memory 150000000000 80000000000\ndevice {} power_mw 650000\n", d,
                       d)
        << fmt::format("device {} process {} 80000000000\n", d, kids[static_cast<size_t>(d)]);
    }
    s.close();
    ::setenv("STEPWATCH_FAKE_NVML", scenario.c_str(), 1);
    if (auto n = probe::Nvml::open(fake_nvml)) {
      gpu = std::make_shared<probe::GpuProbe>(std::shared_ptr<probe::Nvml>(std::move(*n)),
                                              [](const std::string&) {});
      auto [m3, p3] = time_it(polls, [&] { (void)gpu->poll(); });
      rows.push_back(
          {"GPU probe: one poll of 8 devices (fake libnvidia-ml via dlopen)", m3, p3, "-", "-"});
    } else {
      fmt::print(stderr, "probe_bench: {}\n", n.error().message);
    }
  }

  // An 8-rank job: 8 beacons (written here, as ranks would), the tree and the GPUs.
  for (int r = 0; r < 8; ++r) {
    contract::Identity id;
    id.dir = (tmp / "beacons").string();
    id.job = "bench";
    id.rank = r;
    id.world_size = 8;
    auto w = contract::BeaconWriter::create(id);
    if (w) (*w)->step(1);
  }
  watch::ObserverConfig oc;
  oc.beacon_root = (tmp / "beacons").string();
  oc.job = "bench";
  oc.selector = sel;
  oc.gpu = gpu;
  watch::Observer ob(oc);
  auto [m4, p4] = time_it(polls, [&] { (void)ob.poll(SystemClock::instance().now()); });
  rows.push_back(
      {fmt::format("observer: one poll of an 8-rank job (beacons, tree{})", gpu ? ", GPUs" : ""),
       m4, p4, "-", "-"});

  for (pid_t k : kids) ::kill(k, SIGKILL);
  for (pid_t k : kids) ::waitpid(k, nullptr, 0);
  std::filesystem::remove_all(tmp);

  fmt::print("\n## Probe cost per poll ({} polls each, this machine)\n\n", polls);
  fmt::print("| probe | median us | p90 us | target | met |\n|---|---:|---:|---|---|\n");
  for (const auto& r : rows)
    fmt::print("| {} | {:.1f} | {:.1f} | {} | {} |\n", r.what, r.median_us, r.p90_us, r.target,
               r.met);
  return 0;
}
