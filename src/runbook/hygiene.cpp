// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/hygiene.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "src/common/clock.h"
#include "src/common/duration.h"
#include "src/contract/beacon_reader.h"
#include "src/contract/names.h"
#include "src/probe/liveness.h"
#include "src/probe/ports.h"

namespace stepwatch::runbook {

namespace {

std::string bytes_text(std::optional<uint64_t> b) {
  if (!b) return "an unknown amount of memory";
  double v = static_cast<double>(*b);
  if (v >= double(1 << 30)) return fmt::format("{:.1f} GiB", v / double(1 << 30));
  return fmt::format("{:.0f} MiB", v / double(1 << 20));
}

class Finder {
 public:
  explicit Finder(const HygieneInput& in) : in_(in) {}

  // The record of an earlier incarnation with this exact pid and start time.
  const RecordedProcess* earlier(int pid, uint64_t start) const {
    for (const auto& r : in_.recorded) {
      if (r.pid == pid && r.start_ticks == start && start != 0 && r.incarnation < in_.incarnation)
        return &r;
    }
    return nullptr;
  }
  bool current(int pid, uint64_t start) const {
    return std::any_of(in_.recorded.begin(), in_.recorded.end(), [&](const RecordedProcess& r) {
      return r.pid == pid && r.start_ticks == start && r.incarnation == in_.incarnation;
    });
  }

  // A finding about a live process: provable (and to be killed) only when it matches a record.
  Leftover about(LeftoverKind kind, int pid, std::string what, const std::string& facts) const {
    Leftover l;
    l.kind = kind;
    l.pid = pid;
    l.what = std::move(what);
    probe::ProcessState s;
    if (auto st = probe::ProcFs(in_.proc_root).stat(pid)) {
      l.start_ticks = st->start_ticks;
      l.comm = st->comm;
      s = probe::inspect(in_.proc_root, {pid, st->start_ticks});
    }
    const RecordedProcess* rec = l.start_ticks ? earlier(pid, l.start_ticks) : nullptr;
    if (rec != nullptr) {
      l.provable = true;
      l.record = *rec;
      l.action =
          s.liveness == probe::Liveness::kAlive ? LeftoverAction::kKill : LeftoverAction::kNone;
      l.evidence = fmt::format("pid {} ({}, comm {}) {}", pid, describe_record(*rec, in_.proc_root),
                               l.comm, facts);
      if (s.liveness == probe::Liveness::kZombie)
        l.evidence += "; it is a zombie: nothing to kill, its parent must reap it";
    } else if (l.start_ticks == 0) {
      l.evidence = fmt::format(
          "pid {} {}; not visible in {} (exited, or another pid namespace): not ours to "
          "prove, will not touch",
          pid, facts, in_.proc_root);
    } else {
      bool reused = std::any_of(in_.recorded.begin(), in_.recorded.end(),
                                [&](const RecordedProcess& r) { return r.pid == pid; });
      l.evidence = fmt::format("pid {} ({}) {}; {}: not ours, will not touch", pid, l.comm, facts,
                               reused ? "its start time matches no record (pid reused)"
                                      : "no record of this job names it");
    }
    return l;
  }

  // A zombie is gone for restart purposes (it holds no memory, socket or GPU context; only its
  // parent can reap it), as it is for preemption; only running processes are leftovers.
  void processes(std::vector<Leftover>& out) const {
    for (const auto& r : in_.recorded) {
      if (r.incarnation >= in_.incarnation) continue;
      probe::ProcessState s = probe::inspect(in_.proc_root, {r.pid, r.start_ticks});
      if (s.liveness != probe::Liveness::kAlive) continue;
      out.push_back(
          about(LeftoverKind::kProcess, r.pid, "still alive",
                fmt::format("is still running (state {}, parent pid {})", s.state, s.ppid)));
    }
  }

  void port(std::vector<Leftover>& out) const {
    if (!in_.port) return;
    int port = *in_.port;
    auto listeners = probe::listeners_on_port(in_.proc_root, port);
    if (!listeners) {
      Leftover l;
      l.kind = LeftoverKind::kPort;
      l.port = port;
      l.what = fmt::format("port {} not checked", port);
      l.evidence = fmt::format("cannot check port {}: {}", port, listeners.error().message);
      out.push_back(std::move(l));
      return;
    }
    std::vector<uint64_t> inodes;
    for (const auto& s : *listeners) {
      if (s.inode != 0) inodes.push_back(s.inode);
    }
    probe::OwnerScan scan = probe::socket_owners(in_.proc_root, inodes);
    for (const auto& s : *listeners) {
      std::string sock = fmt::format("listens on {}:{} ({}, socket inode {}, uid {})", s.address,
                                     port, s.v6 ? "tcp6" : "tcp", s.inode, s.uid);
      bool owned = false;
      for (const auto& o : scan.owners) {
        if (o.inode != s.inode || s.inode == 0) continue;
        owned = true;
        if (current(o.pid, o.start_ticks)) continue;  // the new incarnation itself holds it
        Leftover l = about(LeftoverKind::kPort, o.pid, fmt::format("holds port {}", port), sock);
        l.port = port;
        out.push_back(std::move(l));
      }
      if (!owned) {
        Leftover l;
        l.kind = LeftoverKind::kPort;
        l.port = port;
        l.what = fmt::format("port {} held by an unknown process", port);
        l.evidence = fmt::format(
            "a socket {}; owner unknown ({} processes' fd tables were not readable): "
            "will not touch",
            sock, scan.unreadable);
        out.push_back(std::move(l));
      }
    }
  }

  void gpu(std::vector<Leftover>& out) const {
    if (!in_.gpus) return;
    std::set<int> job_pids, now_pids;
    for (const auto& r : in_.recorded)
      (r.incarnation < in_.incarnation ? job_pids : now_pids).insert(r.pid);
    probe::ProcessMap map = probe::map_processes(*in_.gpus, job_pids, now_pids);
    for (const auto& h : map.leftovers) {
      std::string facts = fmt::format("holds {} on GPU {}", bytes_text(h.used_bytes), h.gpu);
      Leftover l = about(LeftoverKind::kGpuMemory, h.pid, facts, facts);
      l.gpu = h.gpu;
      out.push_back(std::move(l));
    }
  }

  // Why a decoded beacon is stale, or "" when it is not.
  std::string stale_reason(const contract::RankSnapshot& b) const {
    if (b.incarnation < in_.incarnation) {
      return fmt::format("written by incarnation {}, the current one is {}", b.incarnation,
                         in_.incarnation);
    }
    if (b.pid <= 0) return "";
    probe::ProcessState s = probe::inspect(in_.proc_root, {b.pid, b.pid_start_ticks});
    if (s.liveness == probe::Liveness::kGone)
      return fmt::format("its writer pid {} is gone", b.pid);
    if (s.liveness == probe::Liveness::kReused)
      return fmt::format("its writer pid {} now belongs to another process", b.pid);
    if (s.liveness == probe::Liveness::kZombie)
      return fmt::format("its writer pid {} has exited (zombie)", b.pid);
    return "";
  }

  std::optional<Leftover> judge_beacon(const std::string& path) const {
    Leftover l;
    l.kind = LeftoverKind::kBeacon;
    l.path = path;
    struct stat sb;
    if (::lstat(path.c_str(), &sb) != 0) return std::nullopt;  // gone meanwhile
    if (!S_ISREG(sb.st_mode)) {
      l.what = "not a regular file";
      l.evidence = fmt::format("{} is not a regular file: will not touch", path);
      return l;
    }
    l.inode = sb.st_ino;
    contract::ReadOptions ro;
    if (!in_.job.empty()) ro.expected_job = in_.job;
    auto b = contract::read_beacon_file(path, ro);
    if (!b) {
      l.what = "unreadable beacon";
      l.evidence =
          fmt::format("{} ({}): will not touch", b.error().message, errc_name(b.error().code));
      return l;
    }
    l.pid = b->pid;
    l.start_ticks = b->pid_start_ticks;
    if (b->incarnation > in_.incarnation) {
      l.what = "beacon of a newer incarnation";
      l.evidence = fmt::format("{}: incarnation {} is newer than the current {}: will not touch",
                               path, b->incarnation, in_.incarnation);
      return l;
    }
    std::string why = stale_reason(*b);
    if (why.empty()) return std::nullopt;
    l.kind = LeftoverKind::kStaleBeacon;
    l.provable = true;
    l.action = LeftoverAction::kRemoveFile;
    l.what = "stale beacon";
    l.evidence =
        fmt::format("{} (rank {}, pid {}, incarnation {}, last step {}): {}", path, b->rank, b->pid,
                    b->incarnation, b->step ? fmt::format("{}", *b->step) : "none", why);
    return l;
  }

  void beacons(std::vector<Leftover>& out) const {
    if (in_.beacon_dir.empty()) return;
    DIR* d = ::opendir(in_.beacon_dir.c_str());
    if (d == nullptr) return;  // no beacon directory: nothing left over
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (contract::rank_from_beacon_name(e->d_name) >= 0) names.push_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      if (auto l = judge_beacon(in_.beacon_dir + "/" + n)) out.push_back(std::move(*l));
    }
  }

 private:
  const HygieneInput& in_;
};

}  // namespace

const char* leftover_kind_name(LeftoverKind kind) {
  switch (kind) {
    case LeftoverKind::kProcess:
      return "process";
    case LeftoverKind::kGpuMemory:
      return "gpu-memory";
    case LeftoverKind::kPort:
      return "port";
    case LeftoverKind::kStaleBeacon:
      return "stale-beacon";
    case LeftoverKind::kBeacon:
      return "beacon";
  }
  return "?";
}

std::string describe_record(const RecordedProcess& r, const std::string& proc_root) {
  std::string text = r.role.empty() ? fmt::format("incarnation {}", r.incarnation)
                                    : fmt::format("{} of incarnation {}", r.role, r.incarnation);
  auto btime = probe::ProcFs(proc_root).btime();
  long hz = ::sysconf(_SC_CLK_TCK);
  if (btime && hz > 0) {
    int64_t secs = *btime + static_cast<int64_t>(r.start_ticks / static_cast<uint64_t>(hz));
    text += fmt::format(", started {}", format_utc(secs * kNsPerSec));
  }
  return text;
}

std::vector<Leftover> find_leftovers(const HygieneInput& input) {
  Finder f(input);
  std::vector<Leftover> out;
  f.processes(out);
  f.port(out);
  f.gpu(out);
  f.beacons(out);
  return out;
}

size_t CleanupReport::provable_remaining() const {
  return static_cast<size_t>(std::count_if(
      remaining.begin(), remaining.end(),
      [](const Leftover& l) { return l.provable && l.action != LeftoverAction::kNone; }));
}

CleanupReport cleanup(const std::vector<Leftover>& leftovers, const HygieneInput& input,
                      const CleanupOptions& options) {
  CleanupReport rep;
  Finder f(input);
  std::map<int, ProcessRef>
      targets;  // by pid: a process found as alive, port owner and GPU holder dies once
  for (const auto& l : leftovers) {
    if (!l.provable || l.action == LeftoverAction::kNone) {
      if (!l.provable) rep.refused.push_back(fmt::format("left alone: {}", l.evidence));
      continue;
    }
    if (l.action == LeftoverAction::kKill) {
      const RecordedProcess* rec = f.earlier(l.pid, l.start_ticks);
      if (rec == nullptr) {  // a finding not backed by the records handed in: never act on it
        rep.refused.push_back(
            fmt::format("refused: pid {} matches no record of an earlier incarnation", l.pid));
        continue;
      }
      targets.emplace(l.pid,
                      ProcessRef{l.pid, l.start_ticks, describe_record(*rec, input.proc_root)});
      continue;
    }
    // kRemoveFile: only rank-N.beacon directly inside the job's own beacon dir, re-judged now.
    std::string dir = input.beacon_dir;
    size_t slash = l.path.rfind('/');
    bool inside = !dir.empty() && slash != std::string::npos && l.path.substr(0, slash) == dir &&
                  contract::rank_from_beacon_name(l.path.substr(slash + 1)) >= 0;
    auto again = inside ? f.judge_beacon(l.path) : std::nullopt;
    if (!inside) {
      rep.refused.push_back(fmt::format("refused: {} is not a beacon of {}", l.path, dir));
    } else if (!again || again->kind != LeftoverKind::kStaleBeacon || again->inode != l.inode) {
      rep.failed.push_back(fmt::format("kept {}: it changed since it was found stale", l.path));
    } else if (::unlink(l.path.c_str()) != 0 && errno != ENOENT) {
      rep.failed.push_back(fmt::format("cannot remove {}: {}", l.path, std::strerror(errno)));
    } else {
      rep.done.push_back(fmt::format("removed {}", again->evidence));
    }
  }

  std::set<int> proven_gone;
  if (!targets.empty()) {
    std::vector<ProcessRef> procs;
    for (auto& [pid, ref] : targets) procs.push_back(ref);
    PreemptOptions po;
    po.proc_root = input.proc_root;
    po.kill_wait_ns = options.kill_wait_ns;
    PreemptReport pr = preempt_processes(procs, options.grace_ns, po);
    for (const auto& o : pr.processes) {
      (o.gone() ? rep.done : rep.failed).push_back(o.describe());
      if (o.gone()) proven_gone.insert(o.process.pid);
    }
    rep.preempt = std::move(pr);
  }

  HygieneInput after = input;
  if (options.refresh_gpus) {
    after.gpus = options.refresh_gpus();
  } else if (after.gpus) {
    for (auto& dev : after.gpus->devices) {
      if (!dev.processes) continue;
      auto& ps = *dev.processes;
      ps.erase(std::remove_if(ps.begin(), ps.end(),
                              [&](const auto& p) { return proven_gone.count(p.pid) > 0; }),
               ps.end());
    }
  }
  rep.remaining = find_leftovers(after);
  return rep;
}

}  // namespace stepwatch::runbook
