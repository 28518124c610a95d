// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/supervise/supervisor.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/common/proc_stat.h"
#include "src/common/text_file.h"
#include "src/contract/names.h"
#include "src/detect/spec_adapter.h"
#include "src/probe/nvml.h"
#include "src/runbook/hygiene.h"
#include "src/runbook/preempt.h"
#include "src/serve/ack_routes.h"
#include "src/spec/command_template.h"
#include "src/supervise/rendezvous.h"
#include "src/supervise/signals.h"

namespace stepwatch::supervise {

Supervisor::Supervisor(RunOptions options, spec::JobSpec spec)
    : opt_(std::move(options)), spec_(std::move(spec)) {}

Supervisor::~Supervisor() {
  if (ack_) ack_->stop();
  if (deliveries_) deliveries_->wait(SystemClock::instance().now());  // before the store goes
}

void Supervisor::say(const std::string& line) const {
  std::fprintf(stderr, "stepwatch: %s\n", line.c_str());
  std::fflush(stderr);
}

void Supervisor::record_action(std::string_view kind, bool ok, const std::string& detail) {
  store::Action a;
  if (runbook_ && runbook_->id().value_or(0) > 0) a.incident_id = runbook_->id();
  a.job = opt_.job;
  a.at_ns = wall_now_ns();
  a.kind = std::string(kind);
  a.ok = ok;
  a.detail = detail;
  if (auto r = store_->record_action(a); !r)
    say(fmt::format("cannot record action: {}", r.error().message));
}

Status Supervisor::setup() {
  auto store = store::Store::open(opt_.state_dir);
  if (!store) return store.error();
  store_.emplace(std::move(*store));
  ledger_.emplace(*store_);
  runbook::DeliverySink sink;
  sink.log = [this](LogLevel, const std::string&, const std::string& line) { say(line); };
  deliveries_.emplace(*ledger_, runbook::PagerOptions{}, std::move(sink));
  auto prev = store_->load_state(opt_.job);
  if (!prev) return prev.error();
  // A new `stepwatch run` of a known job is its next incarnation; under a scheduler, the
  // scheduler's counter (SLURM_RESTART_COUNT) when that is further on.
  std::optional<int64_t> stored;
  if (*prev) {
    state_ = **prev;
    stored = state_.incarnation;
  } else {
    state_.job = opt_.job;
  }
  state_.incarnation = runbook::first_incarnation(opt_.scheduler, stored);
  runbook_.emplace(runbook::IncidentScope{opt_.job, state_.incarnation, 0},
                   runbook::IncidentPolicy::from_spec(spec_), *ledger_,
                   static_cast<runbook::IncidentHost&>(*this), *deliveries_);
  history_.emplace(*store_);
  owner_ = opt_.resume_owner ? opt_.resume_owner(spec_) : runbook::make_resume_owner(spec_);
  resume_.emplace(runbook::ResumePolicy::from_spec(opt_.job, spec_), *owner_,
                  static_cast<runbook::ResumeHost&>(*this));
  if (state_.interval_median_ns && state_.interval_p90_ns) {
    saved_learned_ = detect::Learned{*state_.interval_median_ns, *state_.interval_p90_ns,
                                     static_cast<int>(state_.interval_samples)};
  }
  auto feed =
      LogFeed::create(spec_.log, static_cast<size_t>(std::max(spec_.runbook.collect.log_lines, 1)));
  if (!feed) return feed.error();
  log_ = std::move(*feed);

  if (auto nvml = probe::Nvml::open(opt_.nvml_lib)) {
    gpu_ = std::make_shared<probe::GpuProbe>(std::shared_ptr<probe::Nvml>(std::move(*nvml)));
  } else {
    say(fmt::format("no GPU evidence: {}", nvml.error().message));
  }

  std::string trace_path = opt_.trace_path;
  if (trace_path.empty()) {
    std::filesystem::create_directories(opt_.state_dir + "/traces");
    trace_path =
        fmt::format("{}/traces/{}-{}.jsonl", opt_.state_dir, opt_.job, wall_now_ns() / kNsPerSec);
  }
  trace::TraceHeader h;
  h.job = opt_.job;
  h.local_host = short_hostname();
  h.poll_ns = poll_interval();
  if (!opt_.spec_text.empty()) h.spec_toml = opt_.spec_text;
  auto w = trace::TraceWriter::open(trace_path, h);
  if (!w) return w.error();
  trace_.emplace(std::move(*w));
  say(fmt::format("job {} incarnation {}{}: trace {}", opt_.job, state_.incarnation,
                  !opt_.scheduler.present()
                      ? ""
                      : fmt::format(" ({}, restarts owned by {})", opt_.scheduler.describe(),
                                    spec::resume_owner_name(spec_.runbook.resume_owner)),
                  trace_path));

  serve::AckServerConfig ac;
  ac.host = opt_.ack_host;
  ac.port = opt_.ack_port;
  ac.job = opt_.job;
  ac.on_ack = [this](const serve::AckRequest& req) -> serve::AckResult {
    // The store is the one place acks live: `stepwatch ack` writes there too.
    auto st = store::Store::open(opt_.state_dir);
    if (!st) return st.error();
    return st->ack(opt_.job, wall_now_ns(), req.by, req.note);
  };
  ac.status = [this] {
    return last_verdict_json_.empty() ? std::string("{}") : last_verdict_json_;
  };
  // Acks need this run's token, in a file only the job's owner can read: any local user can
  // find the port, none but the owner (and root) can hold the runbook.
  const std::string token_path = fmt::format("{}/{}.ack-token", opt_.state_dir, opt_.job);
  auto token = random_token();
  Status kept = token ? write_private_file(token_path, *token + "\n") : Status(token.error());
  if (!kept) {
    say(fmt::format(
        "ack endpoint not started: no token: {} (stepwatch ack --state-dir still works)",
        kept.error().message));
    return {};
  }
  ac.bearer_token = *token;
  ack_ = std::make_unique<serve::AckServer>(ac);
  if (auto st = ack_->start(); !st) {
    say(fmt::format("ack endpoint not started: {}", st.error().message));
  } else {
    (void)write_private_file(fmt::format("{}/{}.ack-port", opt_.state_dir, opt_.job),
                             fmt::format("{}\n", ack_->port()));
  }
  return {};
}

int64_t Supervisor::poll_interval() const {
  if (opt_.poll_ns > 0) return opt_.poll_ns;
  if (spec_.poll_interval_ns) return *spec_.poll_interval_ns;
  if (spec_.expected_interval_ns) {
    // The early rule judges quiet in tens of seconds whatever the step time: look at least
    // every 10 s for it (a look costs microseconds), every 30 s without it.
    int64_t most = spec_.quiet_early ? 10 * kNsPerSec : 30 * kNsPerSec;
    return std::clamp<int64_t>(*spec_.expected_interval_ns / 4, 250 * kNsPerMs, most);
  }
  return kNsPerSec;
}

void Supervisor::hygiene() {
  runbook::HygieneInput in;
  in.job = opt_.job;
  in.incarnation = static_cast<uint32_t>(state_.incarnation);
  in.port = opt_.master_port;
  in.beacon_dir = contract::job_dir(opt_.beacon_root, opt_.job);
  in.proc_root = opt_.proc_root;
  if (auto before = store_->processes_before(opt_.job, state_.incarnation)) {
    for (const auto& p : *before) {
      in.recorded.push_back(
          {static_cast<int>(p.pid), p.start_ticks, static_cast<uint32_t>(p.incarnation), p.role});
    }
  }
  if (gpu_) {
    if (auto snap = gpu_->poll()) in.gpus = *snap;
  }
  auto found = runbook::find_leftovers(in);
  leftovers_.clear();
  if (found.empty()) return;
  for (const auto& l : found) {
    std::string line =
        fmt::format("{} {}: {}{}", runbook::leftover_kind_name(l.kind), l.what, l.evidence,
                    l.provable ? "" : " (not provably this job's: left alone)");
    leftovers_.push_back(line);
    say(fmt::format("leftover before incarnation {}: {}", state_.incarnation, line));
  }
  runbook::CleanupOptions co;
  co.grace_ns = spec_.runbook.preempt_grace_ns;
  auto report = runbook::cleanup(found, in, co);
  for (const auto& d : report.done) record_action(store::action_kind::kCleanup, true, d);
  for (const auto& f : report.failed) record_action(store::action_kind::kCleanup, false, f);
  for (const auto& d : report.done) say("cleanup: " + d);
  for (const auto& f : report.failed) say("cleanup failed: " + f);
  for (const auto& r : report.remaining) {
    say(fmt::format("still there: {} {}", r.what, r.evidence));
    leftovers_.push_back(fmt::format("still there after cleanup: {} {}", r.what, r.evidence));
  }
}

void Supervisor::wait_for_port() {
  if (!opt_.master_port) return;
  if (auto held = wait_rendezvous_port(opt_.proc_root, *opt_.master_port,
                                       [this](const std::string& l) { say(l); })) {
    leftovers_.push_back(*held);
  }
}

Status Supervisor::launch(const std::optional<std::pair<std::string, int64_t>>& checkpoint,
                          const std::string& checkpoint_path) {
  hygiene();
  wait_for_port();
  ++launches_;
  LaunchSpec ls;
  ls.argv = opt_.argv;
  ls.env = job_environment(opt_.beacon_root, opt_.job, state_.incarnation, opt_.master_port);
  if (checkpoint) {
    ls.env["STEPWATCH_RESUME_CHECKPOINT"] = checkpoint->first;
    ls.env["STEPWATCH_RESUME_STEP"] = std::to_string(checkpoint->second);
    if (!checkpoint_path.empty()) ls.env["STEPWATCH_RESUME_DIR"] = checkpoint_path;
    if (!spec_.runbook.resume_command.empty()) {
      if (auto st = spec::check_template_value("checkpoint id", checkpoint->first); !st) {
        return Error{Errc::kInvalidArgument,
                     "not resuming through resume_command: " + st.error().message};
      }
      spec::TemplateValues vars = {{"checkpoint_id", checkpoint->first},
                                   {"checkpoint_step", std::to_string(checkpoint->second)},
                                   {"incarnation", std::to_string(state_.incarnation)},
                                   {"job", opt_.job}};
      ls.argv = spec::expand_command(spec_.runbook.resume_command, vars);
    }
  }
  int64_t started = wall_now_ns();
  log_->reset(started);
  auto child =
      Child::start(ls, [this](Stream, std::string_view line) { log_->feed(line, wall_now_ns()); });
  if (!child) return child.error();
  child_ = std::move(*child);
  exit_status_.reset();
  watch::ObserverConfig oc;
  oc.beacon_root = opt_.beacon_root;
  oc.job = opt_.job;
  oc.proc_root = opt_.proc_root;
  oc.local_host = short_hostname();
  oc.world_size = spec_.world_size;
  oc.selector.sid = child_->pid();
  oc.selector.root_pid = child_->pid();
  oc.gpu = gpu_;
  watch_ = std::make_unique<watch::JobWatch>(oc, detect::config_from_spec(spec_), saved_learned_);
  state_.updated_at_ns = started;
  if (auto st = store_->save_state(state_); !st) say(st.error().message);
  store::ProcessRecord rec;
  rec.job = opt_.job;
  rec.incarnation = state_.incarnation;
  rec.pid = child_->pid();
  if (auto ps = read_proc_stat(opt_.proc_root, child_->pid())) rec.start_ticks = ps->start_ticks;
  rec.role = "launcher";
  rec.first_seen_ns = started;
  (void)store_->record_process(rec);
  history_started(started);
  say(fmt::format("launched incarnation {} (pid {}): {}", state_.incarnation, child_->pid(),
                  fmt::join(ls.argv, " ")));
  return {};
}

void Supervisor::record_processes(const watch::PollReport& report) {
  if (!report.tree) return;
  std::map<int, int> rank_of;
  for (const auto& [rank, pid] : report.rank_pids) rank_of[pid] = rank;
  for (const auto& [pid, p] : report.tree->procs) {
    if (!recorded_.insert({pid, p.start_ticks}).second) continue;
    store::ProcessRecord rec;
    rec.job = opt_.job;
    rec.incarnation = state_.incarnation;
    rec.pid = pid;
    rec.start_ticks = p.start_ticks;
    rec.role = rank_of.count(pid) ? fmt::format("rank {}", rank_of[pid])
                                  : (pid == child_->pid() ? "launcher" : "child");
    rec.first_seen_ns = wall_now_ns();
    (void)store_->record_process(rec);
  }
}

void Supervisor::on_verdict(const watch::Look& look) {
  const detect::Verdict& v = look.verdict;
  last_verdict_json_ = trace::verdict_to_json(v, opt_.job);
  (void)trace_->write_observation(look.observation);
  if (!look.changed_from) return;
  (void)trace_->write_verdict(v);
  store::Transition t;
  t.job = opt_.job;
  t.incarnation = state_.incarnation;
  t.at_ns = look.observation.now.wall_ns;
  t.from_state = detect::state_name(look.changed_from->first);
  t.to_state = detect::state_name(v.state);
  t.cause = detect::cause_name(v.cause);
  t.summary = v.summary;
  (void)store_->record_transition(t);
  say(fmt::format("{} -> {}", t.from_state, v.summary));
  // The learned interval is saved at transitions: what a restart needs, without a write a poll.
  if (auto l = watch_->detector().learned();
      l && (!saved_learned_ || saved_learned_->median_ns != l->median_ns)) {
    saved_learned_ = l;
    state_.interval_median_ns = l->median_ns;
    state_.interval_p90_ns = l->p90_ns;
    state_.interval_samples = l->samples;
    (void)store_->save_state(state_);
  }
}

int Supervisor::stand_down() {
  // What is left of this incarnation is ended here too (the process group is ours); whatever
  // survives, the next incarnation's hygiene finds by its recorded pid and start time.
  int status = child_->stop(
      SIGTERM, spec_.runbook.preempt_grace_ns, [](int64_t ns) { wait_signal(ns); },
      [this] { say("the leftover job did not stop within the preempt grace: SIGKILL"); });
  join_output();
  say(fmt::format("incarnation {} stood down (its job ended with status {})", state_.incarnation,
                  status));
  history_ended("superseded", nullptr);
  return spec::kExitStopped;
}

int Supervisor::shutdown(int sig) {
  say(fmt::format("received {}: passing it to the job and stopping", strsignal(sig)));
  history_ended("stopped", nullptr);
  deliveries_->wait(SystemClock::instance().now());
  if (child_) {
    int status = child_->stop(
        sig, spec_.runbook.preempt_grace_ns, [](int64_t ns) { wait_signal(ns); },
        [this] { say("the job did not stop within the preempt grace: SIGKILL"); });
    join_output();
    return status;
  }
  return 128 + sig;
}

void Supervisor::join_output() {
  child_->join_output();
  if (uint64_t n = child_->dropped_passthrough_bytes()) {
    say(
        fmt::format("{} bytes of the job's output were dropped because stepwatch's stdout or "
                    "stderr was not read "
                    "(the job was never made to wait)",
                    n));
  }
  if (uint64_t n = child_->dropped_log_bytes()) {
    say(fmt::format("{} bytes of the job's output went unread by the log contract (it fell behind)",
                    n));
  }
}

int Supervisor::ended(int status, const detect::Verdict& v) {
  // The job ended by itself and nothing says it died: its status is stepwatch run's own.
  join_output();
  if (runbook_->is_open()) {
    say(fmt::format("incident {}: the job ended by itself ({})", *runbook_->id(), v.summary));
    runbook_->close(SystemClock::instance().now(), "the job ended by itself");
  }
  say(status == 0 ? fmt::format("job {} finished", opt_.job)
                  : fmt::format("job {} ended with status {}", opt_.job, status));
  history_ended(status == 0 ? "finished" : "failed", status == 0 ? nullptr : &v);
  if (status == 0) state_.restarts_without_progress = 0;
  if (auto st = store_->save_state(state_); !st) say(st.error().message);
  return status;
}

int Supervisor::run() {
  block_watched_signals();  // before any thread starts: they inherit it
  if (auto st = setup(); !st) {
    say(st.error().message);
    return kExitUsage;
  }
  // Whoever restarted the job, it resumes from the newest committed checkpoint.
  std::string resume_path;
  const auto resume_from = launch_checkpoint(&resume_path);
  if (auto st = launch(resume_from, resume_path); !st) {
    say(st.error().message);
    return kExitLaunchFailed;
  }
  for (;;) {
    if (int sig = wait_signal(poll_interval()); sig == SIGINT || sig == SIGTERM)
      return shutdown(sig);
    Stamp now = SystemClock::instance().now();
    if (resume_->holding()) {  // a restart storm: nothing runs until the owner acks
      deliveries_->reap(now);
      next_ = Next::kContinue;
      resume_->poll(now);
      if (next_ == Next::kExit) return exit_code_;
      continue;
    }
    if (!exit_status_) exit_status_ = child_->poll_exit();
    watch::LookInputs in;
    in.log_rank = log_->progress(opt_.job, static_cast<uint32_t>(state_.incarnation));
    in.log = log_->facts();
    in.amend = [this](detect::Observation& obs, const watch::PollReport& report) {
      if (!exit_status_) return;
      obs.job_exit_code = *exit_status_;
      // A job launched without a launcher is its own rank: its exit status is that rank's.
      for (auto& f : obs.procs) {
        auto it = report.rank_pids.find(f.rank);
        if (it != report.rank_pids.end() && it->second == child_->pid())
          f.exit_code = *exit_status_;
      }
    };
    watch::Look look = watch_->look(now, in);
    const watch::PollReport& report = look.report;
    const detect::Observation& obs = look.observation;
    const detect::Verdict& v = look.verdict;
    for (const auto& p : report.fresh_problems) say(p.message);
    if (auto pick = log_->take_pick()) {
      say("log preset auto: reading the output as " + *pick);
    }
    record_processes(report);
    on_verdict(look);
    // A job ended by someone else: a later incarnation's hygiene, when Slurm requeued it.
    if (exit_status_ && *exit_status_ != 0 && !runbook_->is_open() && superseded())
      return stand_down();
    if (exit_status_ && !detect::fires_runbook(v.state)) return ended(*exit_status_, v);
    if (exit_status_ && launches_ == 1 && !v.last_step && !runbook_->is_open()) {
      // A crash before the first step of the first launch (an ImportError, a bad flag) is a
      // broken launch: a restart would fail the same way. docs/run.md.
      join_output();
      say(fmt::format(
          "job {} exited with status {} before its first step: not restarted (a crash at start is "
          "not a stall)",
          opt_.job, *exit_status_));
      history_ended("failed", &v);
      return *exit_status_;
    }
    if (runbook_turn(v, obs, report, now) == Next::kExit) return exit_code_;
    if (stood_down_) return stand_down();
  }
}

Supervisor::Next Supervisor::runbook_turn(const detect::Verdict& v, const detect::Observation& obs,
                                          const watch::PollReport& report, Stamp now) {
  next_ = Next::kContinue;
  own_exit_ = exit_status_;
  turn_obs_ = &obs;
  turn_report_ = &report;
  runbook_->step(v, now, !exit_status_);
  turn_obs_ = nullptr;
  turn_report_ = nullptr;
  deliveries_->reap(now);
  return next_;
}

}  // namespace stepwatch::supervise
