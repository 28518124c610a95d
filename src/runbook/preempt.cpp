// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/preempt.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "src/probe/procfs.h"

namespace stepwatch::runbook {

namespace {

std::string who(const ProcessRef& p) {
  return p.label.empty() ? fmt::format("pid {}", p.pid)
                         : fmt::format("pid {} ({})", p.pid, p.label);
}

void sleep_ns(int64_t ns) {
  if (ns > 0) ::usleep(static_cast<useconds_t>(std::max<int64_t>(ns / kNsPerUs, 1)));
}

class Run {
 public:
  Run(const std::vector<ProcessRef>& procs, const PreemptOptions& options)
      : options_(options), start_(mono_now_ns()) {
    for (const auto& p : procs) {
      ProcessOutcome o;
      o.process = p;
      probe::ProcessState s = probe::inspect(options_.proc_root, p);
      o.before = o.after = s.liveness;
      o.state_before = s.state;
      if (probe::ended(s.liveness)) o.gone_after_ns = 0;
      if (s.liveness == probe::Liveness::kReused)
        o.note = "pid reused by another process: never signalled";
      if (s.liveness == probe::Liveness::kZombie)
        o.note = fmt::format("zombie: parent pid {} must reap it", s.ppid);
      if (options_.process_groups && s.liveness == probe::Liveness::kAlive && s.pgrp == p.pid) {
        leaders_.insert(out_.processes.size());
      }
      out_.processes.push_back(std::move(o));
    }
  }

  int64_t since_start() const { return mono_now_ns() - start_; }

  // Sends sig to every listed process that is still running (to its whole group when it leads
  // one and options.process_groups is set); records failures in the notes.
  void signal_running(int sig) {
    for (size_t i = 0; i < out_.processes.size(); ++i) {
      ProcessOutcome& o = out_.processes[i];
      bool sent = leaders_.count(i) > 0 && signal_group(o, sig);
      if (!sent && !probe::ended(o.after) && o.after != probe::Liveness::kUnknown) {
        Status st = signal_proven(o.process, sig, options_.proc_root);
        if (!st) note(o, st.error().message);
        sent = st.ok();
      }
      if (!sent) continue;
      if (sig == SIGTERM) o.term_sent = true;
      if (sig == SIGKILL) out_.killed = true;
      if (sig == SIGKILL && !probe::ended(o.after))
        o.kill_sent = true;  // not a zombie leader of a killed group
      // A stopped process keeps SIGTERM pending until it is continued; SIGKILL needs no help.
      if (sig == SIGTERM) {
        probe::ProcessState s = probe::inspect(options_.proc_root, o.process);
        if (s.state == 'T' || s.state == 't') {
          o.cont_sent = signal_proven(o.process, SIGCONT, options_.proc_root).ok();
        }
      }
    }
  }

  // Polls until every listed process (and every member of a signalled group) has ended or the
  // deadline passes. Returns true when all went.
  bool wait_until(int64_t deadline_mono) {
    for (;;) {
      bool all = refresh();
      if (all || mono_now_ns() >= deadline_mono) return all;
      sleep_ns(std::min(options_.poll_ns, deadline_mono - mono_now_ns()));
    }
  }

  bool refresh() {
    bool all = true;
    for (auto& o : out_.processes) {
      if (o.after == probe::Liveness::kGone || o.after == probe::Liveness::kReused)
        continue;  // final
      probe::ProcessState s = probe::inspect(options_.proc_root, o.process);
      o.after = s.liveness;
      if (probe::ended(s.liveness) && o.gone_after_ns < 0) o.gone_after_ns = since_start();
      if (s.liveness == probe::Liveness::kZombie && o.note.empty()) {
        o.note = fmt::format("zombie: parent pid {} must reap it", s.ppid);
      }
      if (!probe::ended(s.liveness)) all = false;
    }
    for (size_t i : leaders_) all = all && !group_running(out_.processes[i].process.pid);
    if (all && out_.all_gone_ns < 0) out_.all_gone_ns = since_start();
    return all;
  }

  void check_gpu() {
    if (!options_.gpu_holders) return;
    std::set<int> ours;
    for (const auto& o : out_.processes) {
      if (o.before != probe::Liveness::kReused && o.before != probe::Liveness::kGone)
        ours.insert(o.process.pid);
    }
    GpuRelease g;
    const int64_t begin = mono_now_ns();
    for (;;) {
      g.still_holding.clear();
      for (int pid : options_.gpu_holders()) {
        if (ours.count(pid)) g.still_holding.push_back(pid);
      }
      g.waited_ns = mono_now_ns() - begin;
      if (g.still_holding.empty() || g.waited_ns >= options_.gpu_release_timeout_ns) break;
      sleep_ns(std::min<int64_t>(std::max<int64_t>(options_.poll_ns, 50 * kNsPerMs),
                                 options_.gpu_release_timeout_ns - g.waited_ns));
    }
    g.released = g.still_holding.empty();
    if (!g.released) {
      out_.notes.push_back(
          fmt::format("GPU memory still held by {} pid(s) of the incarnation after {}",
                      g.still_holding.size(), format_ns(g.waited_ns)));
    }
    out_.gpu = std::move(g);
  }

  PreemptReport finish() {
    refresh();
    check_gpu();
    for (const auto& o : out_.processes) {
      if (!o.gone()) out_.survivors.push_back(o.process);
      if (o.after == probe::Liveness::kZombie) out_.zombies.push_back(o.process);
    }
    bool groups_gone = true;
    for (size_t i : leaders_) {
      if (!group_running(out_.processes[i].process.pid)) continue;
      groups_gone = false;
      out_.notes.push_back(
          fmt::format("process group {} still has running members", out_.processes[i].process.pid));
    }
    out_.ok = out_.survivors.empty() && groups_gone && (!out_.gpu || out_.gpu->released);
    out_.total_ns = since_start();
    return std::move(out_);
  }

  PreemptReport& report() { return out_; }

 private:
  void note(ProcessOutcome& o, const std::string& text) {
    if (!o.note.empty()) o.note += "; ";
    o.note += text;
  }

  // The group of a listed process that led its own group when preemption began: the leader is
  // proven (listed, same start time, alive or an unreaped zombie), so the group is the
  // incarnation's. Returns whether the group was signalled.
  bool signal_group(ProcessOutcome& o, int sig) {
    if (!group_running(o.process.pid)) return false;
    Status st = signal_proven_group(o.process, sig, options_.proc_root);
    if (!st) {
      note(o, "group: " + st.error().message);
      return false;
    }
    if (sig == SIGTERM) {
      (void)signal_proven_group(o.process, SIGCONT,
                                options_.proc_root);  // best effort
    }
    return true;
  }

  // Whether any member of process group `pgid` is still running (zombies do not count).
  bool group_running(int pgid) const {
    probe::ProcessProbe probe(options_.proc_root);
    probe::Selector members;
    members.pgid = pgid;
    probe::ScanOptions cheap;
    cheap.io = false;
    cheap.wchan = false;
    auto tree = probe.scan(members, cheap);
    if (!tree) return false;
    return std::any_of(tree->procs.begin(), tree->procs.end(), [](const auto& e) {
      return e.second.state != 'Z' && e.second.state != 'X';
    });
  }

  const PreemptOptions& options_;
  const int64_t start_;
  std::set<size_t> leaders_;  // indices of listed processes whose group is signalled as a whole
  PreemptReport out_;
};

void kill_survivors(Run& run, const PreemptOptions& options) {
  if (run.refresh()) return;
  run.signal_running(SIGKILL);
  run.wait_until(mono_now_ns() + options.kill_wait_ns);
}

}  // namespace

std::string ProcessOutcome::describe() const {
  std::string text = who(process) + ": ";
  if (before == probe::Liveness::kGone)
    text += "was already gone";
  else if (before == probe::Liveness::kReused)
    text += "pid now belongs to another process, never signalled";
  else if (before == probe::Liveness::kZombie)
    text += "was already a zombie";
  else if (!gone())
    text += fmt::format("still running ({})", probe::liveness_name(after));
  else if (kill_sent)
    text += fmt::format("killed by SIGKILL, gone after {}", format_ns(gone_after_ns));
  else if (term_sent)
    text += fmt::format("exited after SIGTERM in {}", format_ns(gone_after_ns));
  else
    text += fmt::format("gone after {}", format_ns(gone_after_ns));
  if (cont_sent) text += " (was stopped: SIGCONT sent)";
  if (!note.empty()) text += "; " + note;
  return text;
}

std::string PreemptReport::summary() const {
  std::string text =
      fmt::format("{} of {} processes gone", processes.size() - survivors.size(), processes.size());
  if (killed) text += ", SIGKILL needed";
  if (!zombies.empty()) text += fmt::format(", {} zombie(s) awaiting reaping", zombies.size());
  if (!survivors.empty()) {
    text += fmt::format(", {} SURVIVOR(S)", survivors.size());
    // Why they survived: each distinct reason once (the first failure of each survivor, without
    // its "pid N: " prefix), with the survivors it holds for.
    std::vector<std::pair<std::string, std::vector<std::string>>> reasons;
    for (const auto& o : processes) {
      if (o.gone()) continue;
      std::string why = o.note.substr(0, o.note.find("; "));
      if (const std::string prefix = fmt::format("pid {}: ", o.process.pid);
          why.starts_with(prefix))
        why.erase(0, prefix.size());
      if (why.empty()) why = fmt::format("still {}", probe::liveness_name(o.after));
      auto it = std::find_if(reasons.begin(), reasons.end(),
                             [&](const auto& r) { return r.first == why; });
      if (it == reasons.end()) it = reasons.insert(reasons.end(), {why, {}});
      it->second.push_back(who(o.process));
    }
    std::vector<std::string> parts;
    for (const auto& [why, whom] : reasons)
      parts.push_back(fmt::format("{}: {}", fmt::join(whom, ", "), why));
    text += fmt::format(" [{}]", fmt::join(parts, "; "));
  }
  if (gpu) text += gpu->released ? ", GPU memory released" : ", GPU memory STILL HELD";
  if (command)
    text += command->timed_out ? ", command timed out"
                               : fmt::format(", command exit {}", command->exit_code);
  return text + fmt::format(" ({})", format_ns(total_ns));
}

PreemptReport preempt_processes(const std::vector<ProcessRef>& procs, int64_t grace_ns,
                                const PreemptOptions& options) {
  Run run(procs, options);
  const int64_t start = mono_now_ns();
  run.signal_running(SIGTERM);
  if (!run.wait_until(start + grace_ns)) kill_survivors(run, options);
  return run.finish();
}

PreemptReport preempt_with_command(const std::vector<std::string>& argv,
                                   const std::vector<ProcessRef>& procs, int64_t grace_ns,
                                   const PreemptOptions& options) {
  Run run(procs, options);
  const int64_t start = mono_now_ns();
  CommandOptions command;
  command.timeout_ns = options.command_timeout_ns;
  CommandResult cmd = run_command(argv, command);
  if (!cmd.succeeded()) {
    std::string why = !cmd.error.empty() ? cmd.error
                      : cmd.timed_out    ? "timed out"
                      : cmd.term_signal  ? fmt::format("killed by signal {}", cmd.term_signal)
                                         : fmt::format("exit code {}", cmd.exit_code);
    run.report().notes.push_back(
        fmt::format("preempt command {}: {}", argv.empty() ? "" : argv[0], why));
  }
  run.report().command = std::move(cmd);
  if (!run.wait_until(start + grace_ns)) kill_survivors(run, options);
  return run.finish();
}

}  // namespace stepwatch::runbook
