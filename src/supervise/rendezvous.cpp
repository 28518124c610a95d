// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/supervise/rendezvous.h"

#include <fmt/format.h>

#include <cstdint>
#include <vector>

#include "src/common/duration.h"
#include "src/probe/ports.h"
#include "src/supervise/signals.h"

namespace stepwatch::supervise {

std::optional<std::string> wait_rendezvous_port(
    const std::string& proc_root, int port, const std::function<void(const std::string&)>& say) {
  int64_t from = mono_now_ns();
  auto sleep = [](int64_t ns) { wait_signal(ns); };
  auto held = probe::wait_port_free(proc_root, port, kPortWaitNs, SystemClock::instance(), sleep);
  if (!held) {
    say(fmt::format("cannot check the rendezvous port {}: {}", port, held.error().message));
    return std::nullopt;
  }
  int64_t waited = mono_now_ns() - from;
  if (held->empty()) {
    if (waited >= 100 * kNsPerMs)
      say(fmt::format("rendezvous port {} free after {}", port, format_duration(waited)));
    return std::nullopt;
  }
  std::vector<uint64_t> inodes;
  for (const auto& l : *held) inodes.push_back(l.inode);
  std::string owners;
  for (const auto& o : probe::socket_owners(proc_root, inodes).owners) {
    owners += fmt::format("{}pid {} ({})", owners.empty() ? "" : ", ", o.pid, o.comm);
  }
  std::string line = fmt::format(
      "rendezvous port {} still bound after {} by {}: launching anyway; the new "
      "incarnation may hang at init",
      port, format_duration(waited), owners.empty() ? "a process not visible here" : owners);
  say(line);
  return line;
}

}  // namespace stepwatch::supervise
