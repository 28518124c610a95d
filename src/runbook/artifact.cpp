// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/artifact.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "src/common/text_file.h"
#include "src/contract/beacon_reader.h"
#include "src/contract/names.h"
#include "src/probe/liveness.h"
#include "src/probe/proc_fs.h"
#include "src/runbook/artifact_sink.h"
#include "src/runbook/command.h"

namespace stepwatch::runbook {

namespace {

struct PendingStacks {
  const JobProcess* proc = nullptr;
  std::string path;
  uint64_t before = 0;  // the file's size when the signal was sent
  uint64_t last = 0;
  int stable_polls = 0;
  bool done = false;
};

std::optional<uint64_t> file_size(const std::string& path) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) return std::nullopt;
  return static_cast<uint64_t>(sb.st_size);
}

std::string who(const JobProcess& p) {
  return p.rank >= 0 ? fmt::format("rank {} (pid {})", p.rank, p.process.pid)
                     : fmt::format("pid {}", p.process.pid);
}

class Collector {
 public:
  Collector(const ArtifactRequest& req, ArtifactReport& rep)
      : req_(req),
        rep_(rep),
        sink_(req.dir, req.settings.max_bytes, rep),
        start_(mono_now_ns()),
        deadline_(start_ + req.settings.time_limit_ns) {}

  void run() {
    sink_.put("verdict.json", req_.verdict_json);
    gpu_and_log();
    std::vector<PendingStacks> pending = signal_ranks();
    for (const auto& p : req_.processes) {
      if (!expired(fmt::format("procfs of pid {}", p.process.pid))) procfs(p);
    }
    wait_stacks(pending);
    if (!expired("beacons")) beacons();
    native_stacks();
  }

 private:
  int64_t left() const { return deadline_ - mono_now_ns(); }

  bool expired(const std::string& step) {
    if (left() > 0) return false;
    rep_.timed_out = true;
    rep_.notes.push_back(fmt::format("time limit ({}) reached: {} skipped",
                                     format_ns(req_.settings.time_limit_ns), step));
    return true;
  }

  void gpu_and_log() {
    if (!req_.settings.gpu)
      rep_.notes.push_back("gpu: disabled by the spec (collect.gpu = false)");
    else if (!req_.gpu_text)
      rep_.notes.push_back("gpu: no snapshot available (no NVML on this host, or it failed)");
    else
      sink_.put("gpu.txt", *req_.gpu_text);
    int n = req_.settings.log_lines;
    if (n <= 0) {
      rep_.notes.push_back("log tail: disabled by the spec (collect.log_lines = 0)");
      return;
    }
    if (req_.log_lines.empty()) rep_.notes.push_back("log tail: no output lines were given");
    size_t from = req_.log_lines.size() > static_cast<size_t>(n)
                      ? req_.log_lines.size() - static_cast<size_t>(n)
                      : 0;
    std::string text;
    for (size_t i = from; i < req_.log_lines.size(); ++i) text += req_.log_lines[i] + "\n";
    sink_.put("log-tail.txt", text);
  }

  // Sends the stack signal to every rank that is proven, catches it and has a stacks file.
  std::vector<PendingStacks> signal_ranks() {
    std::vector<PendingStacks> out;
    if (!req_.settings.python_stacks) {
      rep_.notes.push_back("python stacks: disabled by the spec (collect.python_stacks = false)");
      return out;
    }
    for (const auto& p : req_.processes) {
      if (p.rank < 0) continue;
      probe::ProcessState s = probe::inspect(req_.proc_root, p.process);
      std::string path =
          fmt::format("{}/rank-{}.stacks", contract::job_dir(req_.beacon_root, req_.job), p.rank);
      auto size = file_size(path);
      auto caught = probe::catches_signal(req_.proc_root, p.process.pid, req_.stack_signal);
      std::string why;
      if (s.liveness != probe::Liveness::kAlive)
        why = fmt::format("{}, not signalled", probe::liveness_name(s.liveness));
      else if (!size)
        why = fmt::format(
            "no stacks file {} (stepwatch.install_stack_dump() not called?), not signalled", path);
      else if (!caught)
        why = "its signal handlers are unreadable, not signalled";
      else if (!*caught)
        why = fmt::format("does not catch signal {}, not signalled (it would terminate)",
                          req_.stack_signal);
      if (!why.empty()) {
        rep_.notes.push_back(fmt::format("python stacks of {}: {}", who(p), why));
        continue;
      }
      if (s.state == 'T' || s.state == 't') {
        rep_.notes.push_back(fmt::format(
            "python stacks of {}: process is stopped; the dump waits until it runs", who(p)));
      }
      Status sent = signal_proven(p.process, req_.stack_signal, req_.proc_root);
      if (!sent) {
        rep_.notes.push_back(fmt::format("python stacks of {}: {}", who(p), sent.error().message));
        continue;
      }
      out.push_back(PendingStacks{&p, path, *size, *size, 0, false});
    }
    return out;
  }

  // Waits (bounded) until each signalled rank's stacks file has grown and then stayed the same
  // size for a few polls (faulthandler writes the whole dump inside its signal handler).
  void wait_stacks(std::vector<PendingStacks>& pending) {
    if (pending.empty()) return;
    const int64_t until = std::min(deadline_, mono_now_ns() + req_.stacks_wait_ns);
    constexpr int kStablePolls = 3;
    for (;;) {
      bool all = true;
      for (auto& w : pending) {
        if (w.done) continue;
        uint64_t now = file_size(w.path).value_or(0);
        w.stable_polls = (now == w.last && now != w.before) ? w.stable_polls + 1 : 0;
        w.last = now;
        w.done = w.stable_polls >= kStablePolls;
        all = all && w.done;
      }
      if (all || mono_now_ns() >= until) break;
      ::usleep(20'000);
    }
    for (auto& w : pending) {
      const JobProcess& p = *w.proc;
      uint64_t now = file_size(w.path).value_or(0);
      if (now == w.before) {
        if (until >= deadline_) rep_.timed_out = true;
        rep_.notes.push_back(fmt::format("python stacks of {}: nothing written to {} within {}",
                                         who(p), w.path, format_ns(mono_now_ns() - start_)));
        continue;
      }
      uint64_t from = now < w.before ? 0 : w.before;  // truncated meanwhile: take the whole file
      auto text = read_range(w.path, from, now - from);
      if (!text) {
        rep_.notes.push_back(fmt::format("python stacks of {}: {} unreadable", who(p), w.path));
        continue;
      }
      if (!w.done)
        rep_.notes.push_back(fmt::format(
            "python stacks of {}: still being written at the limit, may be incomplete", who(p)));
      sink_.put(fmt::format("rank-{}.python-stacks.txt", p.rank), *text);
    }
  }

  void procfs(const JobProcess& p) {
    const int pid = p.process.pid;
    probe::ProcessState s = probe::inspect(req_.proc_root, {pid, p.process.start_ticks});
    if (s.liveness != probe::Liveness::kAlive && s.liveness != probe::Liveness::kZombie) {
      rep_.notes.push_back(
          fmt::format("procfs of {}: {}, not collected", who(p), probe::liveness_name(s.liveness)));
      return;
    }
    const probe::ProcFs proc(req_.proc_root);
    const std::string dst = fmt::format("pid-{}", pid);
    for (const char* name : {"status", "wchan", "stack"}) {
      auto text = proc.read(pid, name, 256 << 10);
      if (!text) {
        const Errc code = text.error().code;
        std::string why = code == Errc::kPermission ? "not permitted (needs root)"
                          : code == Errc::kNotFound ? "absent on this kernel"
                                                    : text.error().message;
        rep_.notes.push_back(fmt::format("{}: {}", proc.path(pid, name), why));
        continue;
      }
      if (std::string_view(name) == "wchan" && (*text == "0" || text->empty()))
        *text = "0 (running, or not in the kernel)";
      sink_.put(dst + "/" + name, *text);
    }
    sink_.put(dst + "/threads.txt", threads(proc, pid));
  }

  static std::string threads(const probe::ProcFs& proc, int pid) {
    std::string out = "tid\tstate\twchan\tcomm\n";
    auto tids = proc.tasks(pid);
    if (!tids) return out + fmt::format("(task list unreadable: {})\n", tids.error().message);
    for (int tid : *tids) {
      auto st = proc.task_stat(pid, tid);
      if (!st) continue;  // the thread ended meanwhile
      auto read = proc.read(pid, fmt::format("task/{}/wchan", tid), 256);
      std::string wchan = read ? *read : "?";
      out += fmt::format("{}\t{}\t{}\t{}\n", tid, st->state, wchan.empty() ? "0" : wchan, st->comm);
    }
    return out;
  }

  void beacons() {
    std::string dir = contract::job_dir(req_.beacon_root, req_.job);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      rep_.notes.push_back(fmt::format("beacons: {}: {}", dir, std::strerror(errno)));
      return;
    }
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (contract::rank_from_beacon_name(e->d_name) >= 0) names.push_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    std::string summary;
    for (const auto& n : names) {
      std::string path = dir + "/" + n;
      if (auto raw = read_small(path, 64 << 10)) sink_.put("beacons/" + n, *raw);
      contract::ReadOptions ro;
      ro.expected_job = req_.job;
      auto b = contract::read_beacon_file(path, ro);
      if (!b) {
        summary += fmt::format("{}: {}\n", n, b.error().message);
        continue;
      }
      summary += fmt::format(
          "{}: rank {}/{} pid {} start {} incarnation {} status {} step {} phase {} host {}\n", n,
          b->rank, b->world_size, b->pid, b->pid_start_ticks, b->incarnation,
          contract::rank_status_name(b->status), b->step ? fmt::format("{}", *b->step) : "none",
          b->phase, b->host);
    }
    if (names.empty())
      rep_.notes.push_back(fmt::format("beacons: none in {}", dir));
    else
      sink_.put("beacons/summary.txt", summary);
  }

  void native_stacks() {
    if (!req_.settings.native_stacks) {
      rep_.notes.push_back("native stacks: disabled by the spec (collect.native_stacks = false)");
      return;
    }
    auto gdb = find_executable(req_.gdb);
    if (!gdb) {
      rep_.notes.push_back(fmt::format("native stacks: {} not found in PATH", req_.gdb));
      return;
    }
    if (auto why = ptrace_blocked()) {
      rep_.notes.push_back(fmt::format("native stacks: ptrace not permitted ({})", *why));
      return;
    }
    for (const auto& p : req_.processes) {
      if (expired(fmt::format("native stacks of {}", who(p)))) return;
      native_one(*gdb, p);
    }
  }

  void native_one(const std::string& gdb, const JobProcess& p) {
    const int pid = p.process.pid;
    probe::ProcessState before = probe::inspect(req_.proc_root, {pid, p.process.start_ticks});
    if (before.liveness != probe::Liveness::kAlive) {
      rep_.notes.push_back(
          fmt::format("native stacks of {}: {}", who(p), probe::liveness_name(before.liveness)));
      return;
    }
    int64_t timeout = std::min(req_.native_timeout_ns, left());
    // gdb attaches by pid: the pid was proven just above; gdb only reads and detaches.
    CommandOptions gdb_options;
    gdb_options.timeout_ns = timeout;
    gdb_options.max_output = size_t{4} << 20;
    CommandResult r = run_command(
        {gdb, "-p", std::to_string(pid), "-batch", "-nx", "-ex", "set debuginfod enabled off",
         "-ex", "set pagination off", "-ex", "thread apply all bt"},
        gdb_options);
    bool denied = r.output.find("ptrace: Operation not permitted") != std::string::npos ||
                  r.output.find("Could not attach to process") != std::string::npos;
    bool stacks = r.output.find("\n#0 ") != std::string::npos || r.output.rfind("#0 ", 0) == 0;
    if (denied) {
      rep_.notes.push_back(
          fmt::format("native stacks of {}: ptrace not permitted (gdb could not attach)", who(p)));
    } else if (r.timed_out) {
      rep_.timed_out = timeout < req_.native_timeout_ns || rep_.timed_out;
      rep_.notes.push_back(fmt::format("native stacks of {}: gdb timed out after {} and was killed",
                                       who(p), format_ns(timeout)));
    } else if (!stacks) {
      rep_.notes.push_back(
          fmt::format("native stacks of {}: gdb printed no stack (exit {})", who(p), r.exit_code));
    }
    if (stacks || (!denied && !r.output.empty()))
      sink_.put(fmt::format("pid-{}/native-stacks.txt", pid), r.output);
    if (!r.error.empty())
      rep_.notes.push_back(fmt::format("native stacks of {}: {}", who(p), r.error));
    ensure_running(p, before.state);
  }

  // gdb stops its target while attached; a gdb killed mid-way may leave it stopped.
  void ensure_running(const JobProcess& p, char state_before) {
    auto stopped = [](char c) { return c == 'T' || c == 't'; };
    if (stopped(state_before)) return;  // it was stopped before we came: leave it as it was
    probe::ProcessState s = probe::inspect(req_.proc_root, p.process);
    bool continued = false;
    for (int i = 0; i < 50 && s.liveness == probe::Liveness::kAlive && stopped(s.state); ++i) {
      if (s.state == 'T' || i % 10 == 9) {
        continued = signal_proven(p.process, SIGCONT, req_.proc_root).ok() || continued;
      }
      ::usleep(10'000);
      s = probe::inspect(req_.proc_root, p.process);
    }
    if (s.liveness == probe::Liveness::kAlive && stopped(s.state)) {
      rep_.notes.push_back(fmt::format(
          "{} is STILL STOPPED (state {}) after gdb; SIGCONT did not resume it", who(p), s.state));
    } else if (continued) {
      rep_.notes.push_back(
          fmt::format("{} was left stopped after gdb: SIGCONT sent, running again", who(p)));
    }
  }

  const ArtifactRequest& req_;
  ArtifactReport& rep_;
  ArtifactSink sink_;
  const int64_t start_;
  const int64_t deadline_;
};

}  // namespace

const ArtifactFile* ArtifactReport::file(const std::string& name) const {
  for (const auto& f : files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

ArtifactReport collect_artifact(const ArtifactRequest& request) {
  ArtifactReport rep;
  rep.dir = request.dir;
  const int64_t start = mono_now_ns();
  std::error_code ec;
  std::filesystem::create_directories(request.dir, ec);
  if (ec) {
    rep.error = Error{Errc::kIo, fmt::format("{}: cannot create the incident directory: {}",
                                             request.dir, ec.message())};
    return rep;
  }
  Collector(request, rep).run();
  rep.elapsed_ns = mono_now_ns() - start;
  write_manifest(request, rep);
  return rep;
}

std::string gpu_text(const probe::GpuSnapshot& snapshot) {
  std::string out;
  for (const auto& d : snapshot.devices) {
    out += fmt::format("gpu {} {}: sm {} mem {} power {}{}\n", d.index, d.name.value_or("?"),
                       d.sm_util_pct ? fmt::format("{}%", *d.sm_util_pct) : "n/a",
                       d.mem_used_bytes ? fmt::format("{} MiB", *d.mem_used_bytes >> 20) : "n/a",
                       d.power_w ? fmt::format("{:.0f} W", *d.power_w) : "n/a",
                       d.error ? " error: " + *d.error : "");
    if (d.processes) {
      for (const auto& p : *d.processes) {
        out += fmt::format("  pid {} {}\n", p.pid,
                           p.used_bytes ? fmt::format("{} MiB", *p.used_bytes >> 20) : "");
      }
    }
  }
  return out;
}

}  // namespace stepwatch::runbook
