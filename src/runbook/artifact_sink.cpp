// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/artifact_sink.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "src/common/text_file.h"
#include "src/probe/proc_fs.h"

namespace stepwatch::runbook {

ArtifactSink::ArtifactSink(std::string dir, int64_t max_bytes, ArtifactReport& report)
    : dir_(std::move(dir)),
      max_bytes_(max_bytes > 0 ? static_cast<uint64_t>(max_bytes) : 0),
      report_(report) {}

void ArtifactSink::put(const std::string& name, std::string_view content) {
  uint64_t room = report_.bytes < max_bytes_ ? max_bytes_ - report_.bytes : 0;
  if (room == 0 && !content.empty()) {
    report_.truncated = true;
    report_.notes.push_back(fmt::format("{} ({} bytes): skipped, max_bytes ({}) reached", name,
                                        content.size(), max_bytes_));
    return;
  }
  bool cut = content.size() > room;
  std::string_view kept = cut ? content.substr(0, room) : content;
  size_t slash = name.rfind('/');
  if (slash != std::string::npos) {
    std::error_code ec;
    std::filesystem::create_directories(dir_ + "/" + name.substr(0, slash), ec);
  }
  Status st = write_all(dir_ + "/" + name, kept);
  if (!st) {
    report_.notes.push_back(fmt::format("{}: not written: {}", name, st.error().message));
    return;
  }
  report_.bytes += kept.size();
  report_.files.push_back(ArtifactFile{name, kept.size(), cut});
  if (cut) {
    report_.truncated = true;
    report_.notes.push_back(fmt::format("{}: truncated to {} of {} bytes, max_bytes ({}) reached",
                                        name, kept.size(), content.size(), max_bytes_));
  }
}

void write_manifest(const ArtifactRequest& request, ArtifactReport& report) {
  std::string text = "# stepwatch incident artifact\n";
  text += fmt::format("job: {}\n", request.job);
  text += fmt::format("elapsed_ms: {}\n", report.elapsed_ns / kNsPerMs);
  text += fmt::format("time_limit_ms: {}\n", request.settings.time_limit_ns / kNsPerMs);
  text += fmt::format("bytes: {}\n", report.bytes);
  text += fmt::format("max_bytes: {}\n", request.settings.max_bytes);
  text += fmt::format("truncated: {}\n", report.truncated ? "yes" : "no");
  text += fmt::format("timed_out: {}\n", report.timed_out ? "yes" : "no");
  text += "\nfiles:\n";
  for (const auto& f : report.files) {
    text += fmt::format("{:>10}  {}{}\n", f.bytes, f.name, f.truncated ? "  (truncated)" : "");
  }
  text += "\nnotes:\n";
  if (report.notes.empty()) text += "(none: everything requested was collected)\n";
  for (const auto& n : report.notes) text += fmt::format("- {}\n", n);
  Status st = write_all(request.dir + "/manifest.txt", text);
  if (!st) {
    report.error = st.error();
    return;
  }
  report.files.push_back(ArtifactFile{"manifest.txt", text.size(), false});
}

std::optional<std::string> find_executable(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    return ::access(name.c_str(), X_OK) == 0 ? std::optional<std::string>(name) : std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    size_t colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat sb;
    if (::stat(candidate.c_str(), &sb) == 0 && S_ISREG(sb.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) return std::nullopt;
    rest = rest.substr(colon + 1);
  }
}

std::optional<std::string> ptrace_blocked() {
  auto scope = read_small("/proc/sys/kernel/yama/ptrace_scope", 16);
  if (!scope) return std::nullopt;  // no Yama: classic permission rules, gdb will tell
  int v = std::atoi(scope->c_str());
  if (v >= 3) return std::string("kernel.yama.ptrace_scope = 3: no process may attach");
  if (v == 2 && ::geteuid() != 0) {
    auto status = probe::ProcFs().status(static_cast<int>(::getpid()));
    uint64_t caps = status ? status->effective_caps.value_or(0) : 0;
    constexpr int kCapSysPtrace = 19;
    if (((caps >> kCapSysPtrace) & 1u) == 0) {
      return std::string("kernel.yama.ptrace_scope = 2 and this process lacks CAP_SYS_PTRACE");
    }
  }
  return std::nullopt;
}

}  // namespace stepwatch::runbook
