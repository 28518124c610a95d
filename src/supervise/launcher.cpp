// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/supervise/launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "src/common/duration.h"
#include "src/common/proc_stat.h"
#include "src/contract/names.h"
#include "src/coord/etcd_ledger.h"
#include "src/coord/orders.h"
#include "src/probe/procfs.h"
#include "src/runbook/hygiene.h"
#include "src/runbook/scheduler.h"
#include "src/supervise/rendezvous.h"
#include "src/supervise/signals.h"
#include "src/supervise/supervisor.h"

namespace stepwatch::supervise {

namespace {

coord::SessionOptions session_options(const LauncherOptions& o) {
  coord::SessionOptions s;
  s.prefix = o.prefix;
  s.node = o.node;
  s.ttl_ns = o.lease_ttl_ns;
  s.while_lost =
      "the job keeps running as it is; nothing is relaunched until etcd answers with a moved "
      "incarnation";
  s.after_new_lease = "its launcher key is registered again";
  return s;
}

// Renews the launcher's lease from a thread of its own while the launcher's thread waits in a
// cleanup (a grace of SIGTERM to SIGKILL, the rendezvous port): past the lease's TTL its key
// would lapse, and the job's leader would count the node's launcher as gone. The launcher's
// thread makes no etcd call meanwhile (the session is one thread's at a time).
class LeaseKeeper {
 public:
  LeaseKeeper(coord::NodeSession& session, int64_t ttl_ns)
      : session_(session), every_(std::chrono::nanoseconds(std::max<int64_t>(ttl_ns / 3, 1))) {
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, every_, [this] { return stop_; }))
        session_.tick(SystemClock::instance().now());
    });
  }
  ~LeaseKeeper() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

 private:
  coord::NodeSession& session_;
  std::chrono::nanoseconds every_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

Launcher::Launcher(LauncherOptions options)
    : opt_(std::move(options)),
      etcd_(coord::EtcdOptions{opt_.endpoints, "", opt_.request_timeout_ns}),
      session_(etcd_, session_options(opt_)),
      incarnation_key_(coord::incarnation_key(opt_.prefix, opt_.job)),
      launcher_key_(coord::launcher_key(opt_.prefix, opt_.job, opt_.node)),
      start_key_(coord::start_key(opt_.prefix, opt_.job)),
      checkpoint_key_(coord::checkpoint_key(opt_.prefix, opt_.job)) {}

Launcher::~Launcher() = default;

void Launcher::say(const std::string& line) const {
  std::fprintf(stderr, "stepwatch: %s\n", line.c_str());
  std::fflush(stderr);
}

std::optional<coord::JobIncarnation> Launcher::read() {
  auto r = coord::read_incarnation(etcd_, incarnation_key_);
  if (!r) {
    session_.note_failure(r.error());  // said once per loss
    return std::nullopt;
  }
  session_.note_ok();
  if (r->record.incarnation < incarnation_ && told_behind_ != r->record.incarnation) {
    told_behind_ = r->record.incarnation;
    say(fmt::format(
        "{}: incarnation {} in etcd is below this node's {}: ignored (only a higher incarnation "
        "relaunches)",
        incarnation_key_, r->record.incarnation, incarnation_));
  }
  return std::move(*r);
}

void Launcher::publish() {
  if (session_.lease() == 0) return;
  if (published_ && published_generation_ == session_.generation()) return;
  coord::LauncherRecord rec;
  rec.node = opt_.node;
  rec.pid = static_cast<int>(::getpid());
  rec.incarnation = incarnation_;
  rec.started_at_ns = started_at_ns_;
  rec.barrier = true;
  rec.ready = ready_;
  if (auto batch = opt_.scheduler.batch_job()) {
    rec.scheduler = batch->scheduler;
    rec.scheduler_job = batch->id;
    rec.scheduler_restarts = batch->restarts;
  }
  auto put = etcd_.put(launcher_key_, coord::launcher_to_json(rec), session_.lease());
  if (!put) return session_.note_failure(put.error());
  session_.note_ok();
  published_ = true;
  published_generation_ = session_.generation();
}

void Launcher::deregister() {
  if (session_.lease() == 0) return;
  // The key lives on the lease: revoking it removes the key at once.
  if (auto st = etcd_.revoke(session_.lease()); !st) {
    say(fmt::format("cannot remove {} ({}): it goes when its lease expires, within {}",
                    launcher_key_, st.error().message, format_duration(opt_.lease_ttl_ns)));
  }
}

void Launcher::remember_session() {
  // Every process of the job's session, while its leader's pid still names it: what hygiene
  // may clean up before the next launch (a process that left the session is not ours to judge).
  old_session_.clear();
  old_incarnation_ = incarnation_;
  probe::ProcessProbe procs(opt_.proc_root);
  probe::Selector sel;
  sel.sid = child_id_.pid;
  probe::ScanOptions so;
  so.io = false;
  so.wchan = false;
  auto tree = procs.scan(sel, so);
  if (!tree) return;
  for (const auto& [pid, p] : tree->procs) {
    // Started with or after the leader: a pid reused since cannot pass for one of the job's.
    if (p.start_ticks >= child_id_.start_ticks) old_session_.push_back({pid, p.start_ticks});
  }
}

void Launcher::join_output() {
  if (!child_) return;
  child_->join_output();
  if (uint64_t n = child_->dropped_passthrough_bytes()) {
    say(fmt::format(
        "{} bytes of the job's output were dropped because stepwatch's stdout or stderr was not "
        "read (the job was never made to wait)",
        n));
  }
}

void Launcher::end_local() {
  remember_session();
  exit_ = child_->stop(
      SIGTERM, opt_.grace_ns, [](int64_t ns) { wait_signal(ns); },
      [this] { say("incarnation did not stop within the grace: SIGKILL to its process group"); });
}

void Launcher::hygiene(int64_t next_incarnation) {
  LeaseKeeper keep(session_, opt_.lease_ttl_ns);
  runbook::HygieneInput in;
  in.job = opt_.job;
  in.incarnation = static_cast<uint32_t>(next_incarnation);
  in.port = opt_.master_port;
  in.beacon_dir = contract::job_dir(opt_.beacon_root, opt_.job);
  in.proc_root = opt_.proc_root;
  for (const auto& p : old_session_) {
    in.recorded.push_back({p.pid, p.start_ticks, static_cast<uint32_t>(old_incarnation_),
                           p.pid == child_id_.pid ? "launcher" : "child"});
  }
  auto found = runbook::find_leftovers(in);
  if (!found.empty()) {
    for (const auto& l : found) {
      say(fmt::format("leftover before incarnation {}: {} {}: {}{}", next_incarnation,
                      runbook::leftover_kind_name(l.kind), l.what, l.evidence,
                      l.provable ? "" : " (not provably this job's: left alone)"));
    }
    runbook::CleanupOptions co;
    co.grace_ns = opt_.grace_ns;
    auto report = runbook::cleanup(found, in, co);
    for (const auto& d : report.done) say("cleanup: " + d);
    for (const auto& f : report.failed) say("cleanup failed: " + f);
    for (const auto& r : report.remaining)
      say(fmt::format("still there: {} {}", r.what, r.evidence));
  }
  old_session_.clear();
  if (opt_.master_port) {
    wait_rendezvous_port(opt_.proc_root, *opt_.master_port,
                         [this](const std::string& l) { say(l); });
  }
}

Launcher::Poll Launcher::poll_once() {
  Poll p;
  if (int sig = wait_signal(opt_.poll_ns); sig == SIGINT || sig == SIGTERM) {
    p.signal = sig;
    return p;
  }
  p.now = SystemClock::instance().now();
  session_.tick(p.now);
  publish();
  p.seen = read();
  return p;
}

std::optional<bool> Launcher::started(int64_t incarnation) {
  auto r = etcd_.range(start_key_);
  if (!r) {
    session_.note_failure(r.error());
    return std::nullopt;
  }
  session_.note_ok();
  if (r->kvs.empty()) return false;
  auto s = coord::start_from_json(r->kvs[0].value, "etcd key " + start_key_);
  if (!s) {
    if (told_bad_start_ != r->kvs[0].mod_revision) {
      told_bad_start_ = r->kvs[0].mod_revision;
      say(s.error().message + ": read as no start yet");
    }
    return false;
  }
  return s->incarnation >= incarnation;
}

std::optional<int> Launcher::ready_for(coord::IncarnationRecord& record) {
  if (child_) {
    hygiene(record.incarnation);
    join_output();
    child_.reset();
  } else if (record.incarnation > 0) {
    // The first launch of a later incarnation (a Slurm rerun, a restarted launcher): the stale
    // beacons of the earlier one's dead ranks go first, or the agents would judge them with it.
    hygiene(record.incarnation);
  } else if (opt_.master_port) {
    wait_rendezvous_port(opt_.proc_root, *opt_.master_port,
                         [this](const std::string& l) { say(l); });
  }
  while (record.barrier) {
    const int64_t waiting_for = record.incarnation;
    if (auto up = started(waiting_for); up && *up) break;  // a late node: the others started
    ready_ = waiting_for;
    published_ = false;
    publish();
    say(fmt::format(
        "incarnation {}: cleanup done on {}; waiting at the start barrier (the job's leader starts "
        "it once every node is ready; up to {})",
        waiting_for, opt_.node, format_duration(opt_.resume_wait_ns)));
    const int64_t from = mono_now_ns();
    for (;;) {
      Poll p = poll_once();
      if (p.signal) return shutdown(p.signal);
      if (auto up = started(waiting_for); up && *up) {
        say(fmt::format("incarnation {}: every node is ready: starting after {} at the barrier",
                        waiting_for, format_duration(mono_now_ns() - from)));
        break;
      }
      const auto& seen = p.seen;
      if (seen && seen->record.incarnation > waiting_for && obeyed(*seen)) {
        if (!seen->record.scheduler.empty()) return leave_to_scheduler(seen->record);
        record = seen->record;  // moved on while waiting: its barrier (nothing ran meanwhile)
        break;
      }
      if (mono_now_ns() - from >= opt_.resume_wait_ns) {
        say(fmt::format(
            "job {}: the start barrier of incarnation {} was not released within {}{}: nothing "
            "was launched (the job's leader pages the node(s) it waits for)",
            opt_.job, waiting_for, format_duration(opt_.resume_wait_ns),
            session_.connected() ? "" : " (etcd is not answering: " + session_.last_error() + ")"));
        deregister();
        return kExitLaunchFailed;
      }
    }
    if (record.incarnation == waiting_for) break;
  }
  if (ready_) {
    ready_.reset();
    published_ = false;
  }
  return std::nullopt;
}

std::optional<int> Launcher::past_preempted(coord::IncarnationRecord& record) {
  // The job's open incident ordered this incarnation preempted: its leader moves the incarnation
  // (or holds it) next. Launching it would start a preempted incarnation's rank alone. etcd not
  // answering: launched as read, as before.
  auto open = etcd_.range(coord::incident_key(opt_.prefix, opt_.job));
  if (!open || open->kvs.empty()) return std::nullopt;
  auto incident = coord::incident_id_of(open->kvs[0]);
  if (!incident) return std::nullopt;
  coord::RangeOptions prefix;
  prefix.prefix = true;
  auto orders = etcd_.range(session_.job_key(opt_.job, "orders/"), prefix);
  if (!orders) return std::nullopt;
  bool preempted = false;
  for (const auto& kv : orders->kvs) {
    auto o = coord::JobOrders::order_of(kv);
    preempted |= o && o->incident == *incident && o->incarnation == record.incarnation;
  }
  if (!preempted) return std::nullopt;
  say(fmt::format(
      "incarnation {} was preempted (incident {}) before this launcher started: waiting up to {} "
      "for the job's next incarnation",
      record.incarnation, *incident, format_duration(opt_.resume_wait_ns)));
  int64_t from = mono_now_ns();
  for (;;) {
    Poll p = poll_once();
    if (p.signal) return shutdown(p.signal);
    const Stamp now = p.now;
    const auto& seen = p.seen;
    if (seen && seen->record.incarnation > record.incarnation && obeyed(*seen)) {
      if (!seen->record.scheduler.empty()) return leave_to_scheduler(seen->record);
      record = seen->record;
      return std::nullopt;
    }
    if (seen && seen->record.hold_incident != 0 && hold_stands(seen->record.hold_incident, now)) {
      from = now.mono_ns;  // a restart storm's hold: no limit while it stands
      continue;
    }
    if (now.mono_ns - from >= opt_.resume_wait_ns) {
      say(fmt::format("job {}: the incarnation never moved past {} within {}: nothing was launched",
                      opt_.job, record.incarnation, format_duration(opt_.resume_wait_ns)));
      deregister();
      return kExitLaunchFailed;
    }
  }
}

std::pair<std::string, std::optional<int64_t>> Launcher::resume_point(
    const coord::IncarnationRecord& record) {
  std::pair<std::string, std::optional<int64_t>> named{record.resume_from, record.resume_step};
  auto got = etcd_.range(checkpoint_key_);
  if (!got) {
    say(fmt::format("{}: not read ({}): incarnation {} resumes from {}", checkpoint_key_,
                    got.error().message, record.incarnation,
                    named.first.empty() ? "scratch, as its record names none" : named.first));
    return named;
  }
  if (got->kvs.empty()) return named;
  auto c = coord::checkpoint_from_json(got->kvs[0].value, "etcd key " + checkpoint_key_);
  if (!c) {
    say(fmt::format("{} (not used: incarnation {} resumes from {})", c.error().message,
                    record.incarnation, named.first.empty() ? "scratch" : named.first));
    return named;
  }
  // A record without a step names its checkpoint by id alone: the same id is the same one.
  if (c->id == named.first || (named.second && *named.second >= c->step)) return named;
  say(fmt::format(
      "incarnation {} resumes from {} (step {}), the newest checkpoint every rank "
      "committed (as {} recorded it in incarnation {}), not {}",
      record.incarnation, c->id, c->step, c->by.empty() ? "the job's leader" : c->by,
      c->incarnation,
      named.first.empty() ? "from scratch as the incarnation's record says"
                          : fmt::format("{} that the incarnation's record names", named.first)));
  return {c->id, c->step};
}

Status Launcher::launch(const coord::IncarnationRecord& record) {
  incarnation_ = record.incarnation;
  LaunchSpec ls;
  ls.argv = opt_.argv;
  ls.env = job_environment(opt_.beacon_root, opt_.job, incarnation_, opt_.master_port);
  // The resume point as a single-node run passes it (docs/spec.md).
  const auto [resume_from, resume_step] = resume_point(record);
  if (!resume_from.empty()) ls.env["STEPWATCH_RESUME_CHECKPOINT"] = resume_from;
  if (resume_step) ls.env["STEPWATCH_RESUME_STEP"] = std::to_string(*resume_step);
  auto child = Child::start(ls, {});
  if (!child) return child.error();
  child_ = std::move(*child);
  child_id_ = {child_->pid(), 0};
  if (auto ps = read_proc_stat(opt_.proc_root, child_->pid()))
    child_id_.start_ticks = ps->start_ticks;
  exit_.reset();
  failed_at_.reset();
  started_at_ns_ = wall_now_ns();
  published_ = false;
  say(fmt::format("job {} on {}: launched incarnation {}{} (pid {}): {}", opt_.job, opt_.node,
                  incarnation_, resume_from.empty() ? "" : " resuming from " + resume_from,
                  child_->pid(), fmt::join(ls.argv, " ")));
  return {};
}

coord::IncarnationRecord Launcher::catch_up(coord::JobIncarnation seen) {
  const auto& sched = opt_.scheduler;
  auto batch = sched.batch_job();
  // Slurm's restart count, or Kubernetes' (STEPWATCH_INCARNATION from a JobSet's restart-attempt
  // label): a restart the leader did not order (a crashed pod, a lost node) is a new incarnation.
  if (!batch && !(sched.kind == spec::ResumeOwner::kKubernetes && sched.restart_count))
    return seen.record;
  for (int tries = 0; tries < 3; ++tries) {
    // etcd holds the incarnation to launch; first_incarnation() takes the last one launched.
    int64_t at = seen.record.incarnation;
    int64_t want =
        runbook::first_incarnation(sched, at > 0 ? std::optional<int64_t>(at - 1) : std::nullopt);
    if (want <= at) return seen.record;
    coord::IncarnationRecord to;
    to.incarnation = want;
    to.by = opt_.node;
    to.at_ns = wall_now_ns();
    to.scheduler = batch ? batch->scheduler : "kubernetes";
    to.scheduler_job = batch ? batch->id : "";
    // The resume point named before carries over: at most a hint, that the checkpoint key
    // overrides when newer (resume_point()), but never dropped for scratch.
    to.resume_from = seen.record.resume_from;
    to.resume_step = seen.record.resume_step;
    auto moved = coord::move_incarnation(etcd_, incarnation_key_, seen, to);
    if (moved && *moved) {
      say(fmt::format(
          "{}: incarnation {} -> {}: {} without it being recorded", incarnation_key_, at, want,
          batch ? fmt::format("Slurm job {} restarted (SLURM_RESTART_COUNT={})", batch->id,
                              batch->restarts)
                : fmt::format("Kubernetes restarted the job (STEPWATCH_INCARNATION={})", want)));
      return to;
    }
    auto again = moved ? read() : std::nullopt;  // another launcher moved it first: read theirs
    if (!again) {
      say(fmt::format(
          "{}: cannot move incarnation {} up to {} ({}): launching {} anyway (the "
          "other nodes' launchers count the same restarts)",
          incarnation_key_, at, want, moved ? session_.last_error() : moved.error().message, want));
      return to;
    }
    seen = std::move(*again);
  }
  return seen.record;
}

int Launcher::leave_to_scheduler(const coord::IncarnationRecord& moved) {
  // Under Kubernetes 75 and 76 are a stop (docs/kubernetes.md); Slurm's RequeueExit may be 75.
  const bool stop = moved.scheduler == "kubernetes" &&
                    (moved.exit_code == spec::kExitStopped || moved.exit_code == spec::kExitGaveUp);
  std::string how;
  if (stop) {
    how = fmt::format("the job's leader stopped it ({}), and Kubernetes is not to restart it",
                      moved.exit_code == spec::kExitStopped ? "runbook.resume = false"
                                                            : "its restart budget is spent");
  } else if (moved.scheduler == "slurm") {
    how = fmt::format("Slurm job {} {} and starts it",
                      moved.scheduler_job.empty() ? opt_.scheduler.job_id : moved.scheduler_job,
                      moved.exit_code ? "is requeued by its exit status" : "was requeued");
  } else {
    how = fmt::format("{} restarts the job on its exit status and starts it", moved.scheduler);
  }
  say(fmt::format(
      "the job's incarnation moved to {} (by {}, incident {}): {}; incarnation {} ends here and "
      "this launcher exits",
      moved.incarnation, moved.by.empty() ? "?" : moved.by, moved.incident, how, incarnation_));
  if (child_ && !exit_) end_local();
  join_output();
  deregister();
  if (moved.exit_code) {
    // Slurm's RequeueExit, or Kubernetes' restart policy, acts on this status (through srun and
    // the batch script, or the container's exit); no scontrol call was made.
    say(fmt::format("exiting with {}, the status the scheduler {}", *moved.exit_code,
                    stop ? "stops the job on" : "restarts on"));
    return *moved.exit_code;
  }
  // Not 75: a common RequeueExit code, and the requeue is done.
  return !exit_ || *exit_ == 0 ? 128 + SIGTERM : *exit_;
}

Result<std::optional<std::string>> Launcher::unproven(const coord::JobIncarnation& seen) {
  using Why = std::optional<std::string>;
  const coord::IncarnationRecord& r = seen.record;
  if (proof_checked_ && proof_checked_->first == seen.mod_revision) return proof_checked_->second;
  Why why;
  if (r.incident == 0) {
    // Only a launcher moves it without an incident: after a restart of its Slurm batch job,
    // which is this launcher's own.
    auto batch = opt_.scheduler.batch_job();
    if (r.scheduler != "slurm" || !batch || r.scheduler_job != batch->id) {
      why = fmt::format("it names no incident, and no restart of {} (it says Slurm job \"{:.40}\")",
                        batch ? "this launcher's Slurm job " + batch->id : "a Slurm job here",
                        r.scheduler_job);
    }
  } else {
    // The leader moves it after preempting the job's incident (still open, or closed since),
    // and is a node of the job under its lease.
    auto open = etcd_.range(coord::incident_key(opt_.prefix, opt_.job));
    if (!open) return open.error();
    bool known = false;
    if (!open->kvs.empty()) {
      auto id = coord::incident_id_of(open->kvs[0]);
      known = id && *id == r.incident;
    }
    if (!known) {
      auto closed = etcd_.range(coord::closed_incident_key(opt_.prefix, opt_.job, r.incident));
      if (!closed) return closed.error();
      known = !closed->kvs.empty();
    }
    auto node = etcd_.range(session_.job_key(opt_.job, "nodes/" + r.by));
    if (!node) return node.error();
    if (!known) {
      why = fmt::format("incident {} is not one of the job's", r.incident);
    } else if (!contract::validate_node_name(r.by) || node->kvs.empty() ||
               node->kvs[0].lease == 0) {
      why = fmt::format("\"{:.40}\" is no node of the job under its lease", r.by);
    }
  }
  proof_checked_ = {seen.mod_revision, why};
  return why;
}

bool Launcher::obeyed(const coord::JobIncarnation& seen) {
  // Moved by whoever may write under the prefix: obeyed only with its proof (E12).
  auto why = unproven(seen);
  if (!why) {
    session_.note_failure(why.error());
    return false;
  }
  if (*why) {
    if (told_unproven_ != seen.mod_revision) {
      told_unproven_ = seen.mod_revision;
      say(fmt::format("{}: incarnation {} (by {:.40}) is not obeyed: {}", incarnation_key_,
                      seen.record.incarnation, seen.record.by, **why));
    }
    return false;
  }
  return true;
}

bool Launcher::hold_stands(int64_t incident, Stamp now) {
  if (hold_checked_ && hold_checked_->first == incident &&
      now.mono_ns - hold_checked_->second < kHoldCheckNs) {
    return true;
  }
  // The hold's incident is the job's open one. One that closed without the hold being lifted
  // (the job was abandoned, a leader went away for good) holds nothing: resume_wait applies
  // again. etcd not answering: the hold stands; a record that does not read holds nothing.
  auto r = etcd_.range(coord::incident_key(opt_.prefix, opt_.job));
  auto open_id = [&]() -> std::optional<int64_t> {
    if (!r || r->kvs.empty()) return std::nullopt;
    auto id = coord::incident_id_of(r->kvs[0]);
    return id ? std::optional<int64_t>{*id} : std::nullopt;
  };
  if (r && open_id() != incident) {
    if (told_stale_hold_ != incident) {
      told_stale_hold_ = incident;
      say(
          fmt::format("the hold's incident {} is no longer open: waiting no longer than {} for "
                      "the incarnation to move",
                      incident, format_duration(opt_.resume_wait_ns)));
    }
    return false;
  }
  hold_checked_ = {incident, now.mono_ns};
  return true;
}

int Launcher::shutdown(int sig) {
  say(fmt::format("received {}: passing it to the job and stopping", strsignal(sig)));
  int status = 128 + sig;
  if (child_ && !exit_) {
    status = child_->stop(
        sig, opt_.grace_ns, [](int64_t ns) { wait_signal(ns); },
        [this] { say("the job did not stop within the grace: SIGKILL"); });
  }
  join_output();
  deregister();
  return status;
}

int Launcher::run() {
  block_watched_signals();  // before any thread starts: they inherit it
  // The first launch needs the job's incarnation: a node that guessed 0 would start an old one.
  std::optional<coord::JobIncarnation> first;
  int64_t give_up = mono_now_ns() + opt_.resume_wait_ns;
  for (;;) {
    first = read();
    if (first) break;
    if (mono_now_ns() >= give_up) {
      say(fmt::format("cannot read {} from etcd ({}) within {}: nothing was launched",
                      incarnation_key_, session_.last_error(),
                      format_duration(opt_.resume_wait_ns)));
      return kExitLaunchFailed;
    }
    if (int sig = wait_signal(opt_.poll_ns); sig == SIGINT || sig == SIGTERM) return 128 + sig;
  }
  session_.tick(SystemClock::instance().now());
  coord::IncarnationRecord record = catch_up(std::move(*first));
  if (auto rc = past_preempted(record)) return *rc;
  if (auto rc = ready_for(record)) return *rc;
  if (auto st = launch(record); !st) {
    say(st.error().message);
    deregister();
    return kExitLaunchFailed;
  }
  publish();
  for (;;) {
    Poll p = poll_once();
    if (p.signal) return shutdown(p.signal);
    const Stamp now = p.now;
    auto& seen = p.seen;
    bool moved = seen && seen->record.incarnation > incarnation_ && obeyed(*seen);
    if (!exit_) exit_ = child_->poll_exit();
    if (moved && !seen->record.scheduler.empty() && (!exit_ || *exit_ != 0)) {
      return leave_to_scheduler(seen->record);
    }
    if (!exit_) {
      if (!moved) continue;
      say(fmt::format(
          "the job's incarnation moved to {} (by {}, incident {}) while incarnation {} runs "
          "here: ending it and relaunching",
          seen->record.incarnation, seen->record.by.empty() ? "?" : seen->record.by,
          seen->record.incident, incarnation_));
      end_local();
    } else if (*exit_ == 0) {
      join_output();
      say(fmt::format("job {} finished on {} (incarnation {})", opt_.job, opt_.node, incarnation_));
      deregister();
      return 0;
    } else if (!moved) {
      if (!failed_at_) {
        failed_at_ = now.mono_ns;
        remember_session();
        say(fmt::format(
            "incarnation {} ended with status {}: waiting up to {} for the job's incarnation to "
            "move past {} (its leader moves it once every node has preempted)",
            incarnation_, *exit_, format_duration(opt_.resume_wait_ns), incarnation_));
      }
      if (seen && seen->record.hold_incident != 0 && hold_stands(seen->record.hold_incident, now)) {
        // A restart storm: the leader holds the next incarnation until its incident is acked.
        // No limit meanwhile; resume_wait counts again once the hold is gone.
        if (told_hold_ != seen->record.hold_incident) {
          told_hold_ = seen->record.hold_incident;
          say(fmt::format("the job's leader holds the next incarnation: {}", seen->record.hold));
        }
        failed_at_ = now.mono_ns;
        continue;
      }
      if (now.mono_ns - *failed_at_ < opt_.resume_wait_ns) continue;
      join_output();
      say(fmt::format(
          "job {}: the incarnation never moved past {} within {}{}: exiting with the job's status "
          "{}",
          opt_.job, incarnation_, format_duration(opt_.resume_wait_ns),
          session_.connected() ? "" : " (etcd is not answering: " + session_.last_error() + ")",
          *exit_));
      deregister();
      return *exit_;
    } else if (!failed_at_) {
      remember_session();  // exited and moved in the same poll
    }
    coord::IncarnationRecord next = seen->record;
    if (auto rc = ready_for(next)) return *rc;
    if (auto st = launch(next); !st) {
      say(st.error().message);
      deregister();
      return kExitLaunchFailed;
    }
    publish();
  }
}

}  // namespace stepwatch::supervise
