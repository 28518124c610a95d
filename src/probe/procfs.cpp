// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/probe/procfs.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace stepwatch::probe {

namespace {

std::optional<uint64_t> io_field(const std::string& text, std::string_view key) {
  size_t at = text.find(key);
  if (at == std::string::npos) return std::nullopt;
  at += key.size();
  while (at < text.size() && text[at] == ' ') ++at;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data() + at, text.data() + text.size(), v);
  if (ec != std::errc()) return std::nullopt;
  return v;
}

}  // namespace

int64_t ProcessProbe::ns_per_tick() {
  static const int64_t v = [] {
    long hz = ::sysconf(_SC_CLK_TCK);
    return hz > 0 ? 1'000'000'000LL / hz : 10'000'000LL;
  }();
  return v;
}

namespace {

ProcInfo from_stat(ProcStat&& st) {
  ProcInfo p;
  p.pid = st.pid;
  p.ppid = st.ppid;
  p.pgrp = st.pgrp;
  p.session = st.session;
  p.start_ticks = st.start_ticks;
  p.state = st.state;
  p.comm = std::move(st.comm);
  p.threads = st.num_threads;
  p.cpu_ticks = st.utime_ticks + st.stime_ticks;
  return p;
}

// io, wchan and thread states: each a separate read, each optional.
void add_details(const ProcFs& proc, ProcInfo& p, bool io, bool wchan, bool threads) {
  if (io) {
    if (auto text = proc.read(p.pid, "io", 4096)) {
      p.read_bytes = io_field(*text, "read_bytes:");
      p.write_bytes = io_field(*text, "write_bytes:");
    }
  }
  if (wchan) {
    if (auto text = proc.read(p.pid, "wchan", 256)) {
      p.wchan = *text == "0" ? "" : *text;
      while (!p.wchan.empty() && (p.wchan.back() == '\n' || p.wchan.back() == ' '))
        p.wchan.pop_back();
    }
  }
  if (threads) {
    p.threads_in_d = 0;
    if (auto tids = proc.tasks(p.pid)) {
      for (int tid : *tids) {
        auto t = proc.task_stat(p.pid, tid);
        if (t && t->state == 'D') ++p.threads_in_d;
        if (t && tid == p.pid) p.main_cpu_ticks = t->utime_ticks + t->stime_ticks;
      }
    }
    if (auto st = proc.status(p.pid)) p.main_ctx_switches = st->ctx_switches;
  }
}

}  // namespace

Result<ProcInfo> read_process(const std::string& root, int pid, bool io, bool wchan, bool threads) {
  ProcFs proc(root);
  auto st = proc.stat(pid);
  if (!st) return st.error();
  ProcInfo p = from_stat(std::move(*st));
  add_details(proc, p, io, wchan, threads);
  return p;
}

ProcessProbe::ProcessProbe(std::string proc_root) : proc_(std::move(proc_root)) {}

Result<ProcessTree> ProcessProbe::scan(const Selector& sel, const ScanOptions& options) {
  auto pids = proc_.pids();
  if (!pids) {
    return Error{pids.error().code == Errc::kPermission ? Errc::kPermission : Errc::kIo,
                 pids.error().message};
  }
  // Pass 1: stat of every process (one read each), to find the tree by parent links.
  std::map<int, ProcInfo> all;
  ProcessTree tree;
  auto must_read = [&](int pid) {
    return !options.reuse_known || !known_.count(pid) || options.thread_scan_pids.count(pid) ||
           (options.detail_pids && options.detail_pids->count(pid));
  };
  for (int pid : *pids) {
    if (!must_read(pid)) {
      all.emplace(pid, known_.at(pid));
      continue;
    }
    auto st = proc_.stat(pid);
    if (!st) {
      ++tree.unreadable;  // gone since readdir: normal
      continue;
    }
    ProcInfo p = from_stat(std::move(*st));
    all.emplace(p.pid, std::move(p));
  }
  if (options.reuse_known) known_ = all;

  std::set<int> chosen;
  if (sel.root_pid && all.count(*sel.root_pid)) {
    std::multimap<int, int> children;
    for (const auto& [pid, p] : all) children.emplace(p.ppid, pid);
    std::vector<int> todo{*sel.root_pid};
    while (!todo.empty()) {
      int pid = todo.back();
      todo.pop_back();
      if (!chosen.insert(pid).second) continue;
      auto [lo, hi] = children.equal_range(pid);
      for (auto it = lo; it != hi; ++it) todo.push_back(it->second);
    }
  }
  for (const auto& [pid, p] : all) {
    if ((sel.pgid && p.pgrp == *sel.pgid) || (sel.sid && p.session == *sel.sid)) chosen.insert(pid);
  }
  // Pass 2: the details of the chosen processes only.
  for (int pid : chosen) {
    ProcInfo& p = all[pid];
    bool detail = !options.detail_pids || options.detail_pids->count(pid) > 0;
    add_details(proc_, p, options.io && detail, options.wchan && detail,
                options.thread_scan_pids.count(pid) > 0);
    tree.procs.emplace(pid, std::move(p));
  }
  return tree;
}

std::optional<ProcDelta> ProcessProbe::delta(const ProcInfo& now) const {
  auto it = previous_.find(now.pid);
  if (it == previous_.end()) return std::nullopt;
  return delta_between(it->second, now);
}

std::optional<ProcDelta> delta_between(const ProcInfo& was, const ProcInfo& now) {
  if (was.pid != now.pid || was.start_ticks != now.start_ticks) return std::nullopt;
  ProcDelta d;
  d.cpu_ns = static_cast<int64_t>(now.cpu_ticks - std::min(now.cpu_ticks, was.cpu_ticks)) *
             ProcessProbe::ns_per_tick();
  if (now.read_bytes && was.read_bytes && now.write_bytes && was.write_bytes) {
    d.io_bytes =
        static_cast<int64_t>((*now.read_bytes - std::min(*now.read_bytes, *was.read_bytes)) +
                             (*now.write_bytes - std::min(*now.write_bytes, *was.write_bytes)));
  }
  if (now.main_cpu_ticks && was.main_cpu_ticks) {
    d.main_cpu_ns = static_cast<int64_t>(*now.main_cpu_ticks -
                                         std::min(*now.main_cpu_ticks, *was.main_cpu_ticks)) *
                    ProcessProbe::ns_per_tick();
  }
  if (now.main_ctx_switches && was.main_ctx_switches) {
    d.main_ctx_switches = static_cast<int64_t>(
        *now.main_ctx_switches - std::min(*now.main_ctx_switches, *was.main_ctx_switches));
  }
  return d;
}

void ProcessProbe::remember(const ProcessTree& tree) {
  previous_ = tree.procs;
}

}  // namespace stepwatch::probe
