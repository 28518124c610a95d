// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// stepwatch-gpu-probe: prints what the NVML probe reads on this machine, per device (name, uuid,
// SM and memory utilisation, memory, power, compute processes) and what each device supports.
// A check for a real driver and a way to see "no GPU evidence" and its reason.
//
//   stepwatch-gpu-probe [--nvml-lib PATH] [--json] [--count N] [--interval-ms MS]
//
// Exit status: 0 read the devices (a device that errored is still printed, with its error);
// 1 bad usage; 2 no GPU evidence (no library, a required symbol missing, nvmlInit failed or the
// device list unreadable): the reason is printed as "no GPU evidence: <reason>".
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "src/probe/gpu_probe.h"
#include "src/probe/nvml.h"

namespace {

using stepwatch::probe::GpuCapabilities;
using stepwatch::probe::GpuDevice;
using stepwatch::probe::GpuSnapshot;
using stepwatch::probe::support_name;

constexpr int kExitUsage = 1;
constexpr int kExitNoEvidence = 2;

struct Options {
  std::string nvml_lib;  // empty: libnvidia-ml.so.1, then libnvidia-ml.so
  bool json = false;     // one JSON object per poll, one per line
  int count = 1;         // polls
  int interval_ms = 1000;
};

constexpr const char* kUsage =
    "usage: stepwatch-gpu-probe [--nvml-lib PATH] [--json] [--count N] [--interval-ms MS]\n"
    "exit: 0 devices read, 1 bad usage, 2 no GPU evidence (reason printed)\n";

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "stepwatch-gpu-probe: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "--json") {
      o->json = true;
    } else if (a == "--nvml-lib") {
      const char* v = value("--nvml-lib");
      if (!v) return false;
      o->nvml_lib = v;
    } else if (a == "--count" || a == "--interval-ms") {
      const char* v = value(a.c_str());
      if (!v) return false;
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*end != '\0' || n < (a == "--count" ? 1 : 0) || n > 86'400'000) {
        std::fprintf(stderr, "stepwatch-gpu-probe: %s wants a number, got '%s'\n", a.c_str(), v);
        return false;
      }
      (a == "--count" ? o->count : o->interval_ms) = static_cast<int>(n);
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      std::fprintf(stderr, "stepwatch-gpu-probe: unknown argument '%s'\n%s", a.c_str(), kUsage);
      return false;
    }
  }
  return true;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

template <class T>
std::string json_opt(const std::optional<T>& v) {
  if (!v) return "null";
  if constexpr (std::is_same_v<T, std::string>) {
    return json_string(*v);
  } else {
    return fmt::format("{}", *v);
  }
}

std::string caps_json(const GpuCapabilities& c) {
  return fmt::format(
      R"({{"name":"{}","uuid":"{}","utilization":"{}","memory":"{}","power":"{}","processes":"{}"}})",
      support_name(c.name), support_name(c.uuid), support_name(c.utilization),
      support_name(c.memory), support_name(c.power), support_name(c.processes));
}

std::string device_json(const GpuDevice& d) {
  std::string procs = "null";
  if (d.processes) {
    procs = "[";
    for (const auto& p : *d.processes) {
      if (procs.size() > 1) procs += ",";
      procs += fmt::format(R"({{"pid":{},"used_bytes":{}}})", p.pid, json_opt(p.used_bytes));
    }
    procs += "]";
  }
  return fmt::format(
      R"({{"index":{},"name":{},"uuid":{},"sm_util_pct":{},"mem_util_pct":{},"mem_used_bytes":{},)"
      R"("mem_total_bytes":{},"power_w":{},"processes":{},"error":{},"capabilities":{}}})",
      d.index, json_opt(d.name), json_opt(d.uuid), json_opt(d.sm_util_pct),
      json_opt(d.mem_util_pct), json_opt(d.mem_used_bytes), json_opt(d.mem_total_bytes),
      json_opt(d.power_w), procs, json_opt(d.error), caps_json(d.caps));
}

std::string bytes_text(std::optional<uint64_t> b) {
  if (!b) return "n/a";
  const double mib = static_cast<double>(*b) / (1024.0 * 1024.0);
  return mib >= 1024.0 ? fmt::format("{:.1f} GiB", mib / 1024.0) : fmt::format("{:.1f} MiB", mib);
}

template <class T>
std::string opt_text(const std::optional<T>& v, const char* unit) {
  return v ? fmt::format("{}{}", *v, unit) : std::string("n/a");
}

void print_text(const stepwatch::probe::Nvml& nvml, const GpuSnapshot& snap, int poll, int count) {
  const char* procs = nvml.processes_symbol();
  fmt::print("NVML from {}; processes via {}; poll {}/{}; {} device(s)\n", nvml.library(),
             *procs ? procs : "(none: library lacks both process calls)", poll, count,
             snap.devices.size());
  for (const auto& d : snap.devices) {
    fmt::print("gpu {}: {} uuid {}\n", d.index, d.name.value_or("n/a"), d.uuid.value_or("n/a"));
    fmt::print("  sm {}  mem-util {}  memory used {} of {} ({} / {} bytes)  power {}\n",
               opt_text(d.sm_util_pct, "%"), opt_text(d.mem_util_pct, "%"),
               bytes_text(d.mem_used_bytes), bytes_text(d.mem_total_bytes),
               opt_text(d.mem_used_bytes, ""), opt_text(d.mem_total_bytes, ""),
               d.power_w ? fmt::format("{:.1f} W", *d.power_w) : std::string("n/a"));
    if (!d.processes) {
      fmt::print("  compute processes: n/a\n");
    } else if (d.processes->empty()) {
      fmt::print("  compute processes: none\n");
    } else {
      fmt::print("  compute processes:");
      for (const auto& p : *d.processes)
        fmt::print(" pid {} ({})", p.pid, bytes_text(p.used_bytes));
      fmt::print("\n");
    }
    const auto& c = d.caps;
    fmt::print("  capabilities: name={} uuid={} utilization={} memory={} power={} processes={}\n",
               support_name(c.name), support_name(c.uuid), support_name(c.utilization),
               support_name(c.memory), support_name(c.power), support_name(c.processes));
    if (d.error) fmt::print("  error: {}\n", *d.error);
  }
}

int no_evidence(const Options& o, const std::string& reason) {
  if (o.json) {
    fmt::print("{{\"gpu_evidence\":false,\"reason\":{}}}\n", json_string(reason));
  } else {
    fmt::print("no GPU evidence: {}\n", reason);
  }
  return kExitNoEvidence;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) return kExitUsage;

  auto opened = stepwatch::probe::Nvml::open(o.nvml_lib);
  if (!opened) return no_evidence(o, opened.error().message);
  std::shared_ptr<stepwatch::probe::Nvml> nvml = std::move(opened).value();
  stepwatch::probe::GpuProbe probe(nvml);

  for (int i = 1; i <= o.count; ++i) {
    auto snap = probe.poll();
    if (!snap) return no_evidence(o, snap.error().message);
    if (o.json) {
      std::string devices;
      for (const auto& d : snap->devices) devices += (devices.empty() ? "" : ",") + device_json(d);
      const char* procs = nvml->processes_symbol();
      fmt::print(R"({{"gpu_evidence":true,"library":{},"processes_symbol":{},"poll":{},)"
                 R"("mono_ns":{},"devices":[{}]}})"
                 "\n",
                 json_string(nvml->library()), *procs ? json_string(procs) : "null", i,
                 snap->mono_ns, devices);
    } else {
      print_text(*nvml, *snap, i, o.count);
    }
    std::fflush(stdout);
    if (i < o.count) std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));
  }
  return 0;
}
