// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/agent/agent.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pwd.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <exception>
#include <thread>

#include "src/agent/job_leader.h"
#include "src/agent/node_coord.h"
#include "src/agent/watched_job.h"
#include "src/common/duration.h"
#include "src/common/host.h"
#include "src/common/log.h"
#include "src/contract/job_scan.h"
#include "src/contract/names.h"
#include "src/detect/spec_adapter.h"
#include "src/spec/size.h"
#include "src/watch/job_gpus.h"

namespace stepwatch::agent {

namespace {

// Process details cost a read of stat, io, wchan and every thread's stat per rank (~25 us for a
// small process, far more for a trainer with dozens of threads). One poll spends at most this
// much time on them across all jobs, shared by the jobs whose ranks want them; ranks longest
// unread go first.
constexpr int64_t kDetailBudgetPerPollNs = 20 * kNsPerMs;

constexpr int64_t kPruneEveryNs = 3600 * kNsPerSec;

// The owner of <root>/<job>, the job directory; nullopt when it cannot be seen.
std::optional<uint32_t> dir_owner(const std::string& root, const std::string& job) {
  struct stat st {};
  if (::lstat(contract::job_dir(root, job).c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return std::nullopt;
  return st.st_uid;
}

// A user name or a decimal uid, as a spec's `users` names them.
std::optional<uint32_t> uid_of_user(const std::string& name) {
  uint32_t uid = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), uid);
  if (ec == std::errc() && end == name.data() + name.size()) return uid;
  passwd pw{}, *found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr)
    return std::nullopt;
  return found->pw_uid;
}

// Per-step intervals from the ring of the lowest rank that has one (oldest first).
std::vector<int64_t> recent_intervals(const detect::Observation& obs) {
  std::vector<int64_t> out;
  for (const auto& r : obs.ranks) {
    if (r.recent.size() < 2) continue;
    for (size_t i = 1; i < r.recent.size(); ++i) {
      int64_t steps = r.recent[i].step - r.recent[i - 1].step;
      int64_t ns = r.recent[i].mono_ns - r.recent[i - 1].mono_ns;
      if (steps > 0 && ns > 0) out.push_back(ns / steps);
    }
    break;
  }
  return out;
}

// The devices holding memory of one of the job's ranks.
std::optional<probe::GpuSnapshot> job_gpus(const watch::PollReport& rep) {
  if (!rep.gpus) return std::nullopt;
  std::set<int> pids;
  for (const auto& [rank, pid] : rep.rank_pids) pids.insert(pid);
  return watch::job_gpus(*rep.gpus, pids);
}

}  // namespace

Result<std::unique_ptr<Agent>> Agent::open(AgentConfig config, AgentDeps deps) {
  auto a = store::Store::open(config.state_dir);
  if (!a) return a.error();
  auto b = store::Store::open(config.state_dir);
  if (!b) return b.error();
  if (deps.host.empty()) deps.host = short_hostname();
  return std::unique_ptr<Agent>(
      new Agent(std::move(config), std::move(deps), std::move(*a), std::move(*b)));
}

Agent::Agent(AgentConfig config, AgentDeps deps, store::Store poll_store, store::Store api_store)
    : config_(std::move(config)),
      deps_(std::move(deps)),
      store_(std::move(poll_store)),
      deliveries_(ledger_, deps_.pager, delivery_sink()),
      incident_rate_(config_.incidents_per_user_per_hour, 3600 * kNsPerSec),
      job_incident_rate_(config_.incidents_per_job_per_hour, 3600 * kNsPerSec),
      log_rate_(config_.log_lines_per_user_per_minute, 60 * kNsPerSec),
      api_store_(std::move(api_store)) {
  health_.started_wall_ns = wall_now_ns();
  if (config_.coord) {
    coord_ = std::make_unique<NodeCoord>(*config_.coord, deps_.kv);
    if (!config_.preempt_jobs.empty() && config_.coord->token_file.empty()) {
      // etcd write access is the power to preempt these jobs (docs/multinode.md).
      log_warn(
          "coord: preempt_jobs is set and etcd is used without auth (no token_file): "
          "whoever can write under {} can preempt those jobs; see docs/multinode.md, "
          "\"etcd content is input, not authority\"",
          config_.coord->prefix);
    }
  }
}

Agent::~Agent() {
  try {
    Stamp now = SystemClock::instance().now();
    deliveries_.wait(now);  // while the jobs are there to count them
    // A multi-node job's pages too, while what their sink uses (rates, the log) is still here.
    for (auto& [job, t] : tracked_) {
      if (t->leader) t->leader->wait_pages(now);
    }
  } catch (const std::exception& e) {
    log_error("agent: finishing the pages under way failed: {}", e.what());
  }
  tracked_.clear();  // before the members its jobs' runbooks point at
}

runbook::DeliverySink Agent::delivery_sink() {
  runbook::DeliverySink sink;
  sink.log = [this](LogLevel level, const std::string& job, const std::string& line) {
    auto it = tracked_.find(job);
    if (level == LogLevel::kInfo && it != tracked_.end() && !may_log(*it->second, it->second->now))
      return;
    log_line(level, fmt::format("agent: job {}: {}", job, line));
  };
  sink.counted = [this](const std::string& job, std::string_view kind) {
    if (auto it = tracked_.find(job); it != tracked_.end())
      it->second->state.actions_total[std::string(kind)]++;
  };
  return sink;
}

const std::string& Agent::node_name() const {
  return coord_ ? coord_->config.node_name : deps_.host;
}

void Agent::coord_health(watch::AgentHealth& h, Stamp now) const {
  if (!coord_) return;
  watch::CoordHealth c;
  const coord::NodeSession& s = coord_->session;
  c.node = coord_->config.node_name;
  c.connected = s.connected();
  c.error = s.connected() ? "" : s.last_error();
  c.lease_age_ns = s.lease_age_ns(now).value_or(-1);
  c.lease_ttl_ns = coord_->config.lease_ttl_ns;
  c.losses_total = s.losses();
  c.puts_total = coord_->puts_retired;
  for (const auto& [job, t] : tracked_) {
    if (!t->leader) continue;
    c.puts_total += t->leader->puts();
    if (t->leader->leads()) ++c.jobs_led;
  }
  h.coord = std::move(c);
}

void Agent::note_poll_outcome(bool ok) {
  std::lock_guard lock(mu_);
  if (ok) {
    health_.consecutive_poll_failures = 0;
  } else if (++health_.consecutive_poll_failures == watch::kPollFailuresUnhealthy) {
    log_error("agent: {} polls in a row failed: /healthz now fails and jobs are not being watched",
              health_.consecutive_poll_failures);
  }
}

void Agent::note_problem(const std::string& message) {
  // Each distinct problem is logged once; a junk file would otherwise be logged every poll.
  if (logged_problems_.size() > 4096) logged_problems_.clear();
  if (logged_problems_.insert(message).second) log_warn("agent: {}", message);
}

spec::JobSpec Agent::spec_for(const std::string& job, std::optional<uint32_t> dir_uid) {
  std::string spec_path = fmt::format("{}/{}.toml", config_.specs_dir, job);
  struct stat st {};
  if (::stat(spec_path.c_str(), &st) != 0) return spec::default_spec();
  auto s = spec::load_spec_file(spec_path);
  if (!s) {
    note_problem(fmt::format("job {}: spec {} has errors, judging with defaults:\n{}", job,
                             spec_path, s.error().message));
    return spec::default_spec();
  }
  // Whose job directories the spec is for: its `users`, or whoever wrote the spec file.
  std::set<uint32_t> uids;
  if (s->users.empty()) uids.insert(st.st_uid);
  for (const auto& n : s->users) {
    if (auto uid = uid_of_user(n)) {
      uids.insert(*uid);
    } else {
      note_problem(fmt::format("spec {}: users: \"{}\" is not a user on this host", spec_path, n));
    }
  }
  if (dir_uid && uids.count(*dir_uid)) return std::move(*s);
  note_problem(fmt::format(
      "job {}: its directory belongs to uid {}, not to a user spec {} is for (uid {}; key "
      "`users`): "
      "judged with the defaults, and the spec's pagers are not paged",
      job, dir_uid ? std::to_string(*dir_uid) : "unknown", spec_path, fmt::join(uids, ", ")));
  return spec::default_spec();
}

bool Agent::may_log(const WatchedJob& t, Stamp now) {
  if (!t.dir_uid || log_rate_.allow(*t.dir_uid, now.mono_ns)) return true;
  if (log_rate_.first_refusal(*t.dir_uid, now.mono_ns)) {
    log_warn(
        "agent: uid {}: more than {} lines about its jobs in a minute: the rest are dropped "
        "(log_lines_per_user_per_minute); the API and the store still have them",
        *t.dir_uid, log_rate_.limit());
  }
  return false;
}

void Agent::maybe_prune(Stamp now) {
  if (next_prune_mono_ns_ && now.mono_ns < *next_prune_mono_ns_) return;
  next_prune_mono_ns_ = now.mono_ns + kPruneEveryNs;
  store::PruneLimits limits;
  limits.older_than_ns = now.wall_ns - config_.keep_history_ns;
  store::PruneCounts total;
  // Over the size bound: keep fewer of each job's newest, a quarter each round.
  for (int round = 0; round < 6; ++round) {
    auto counts = store_.prune(limits);
    if (!counts) {
      note_problem(fmt::format("pruning the store failed: {}", counts.error().message));
      return;
    }
    total.incidents += counts->incidents;
    total.transitions += counts->transitions;
    total.actions += counts->actions;
    total.processes += counts->processes;
    auto used = store_.used_bytes();
    if (!used || *used <= config_.max_store_size) break;
    if (round == 5) {
      note_problem(
          fmt::format("the store holds {} after pruning, above max_store_size {}: open "
                      "incidents are never pruned",
                      spec::format_size(*used), spec::format_size(config_.max_store_size)));
    }
    limits.keep_closed_incidents = std::max<int64_t>(1, limits.keep_closed_incidents / 4);
    limits.keep_loose_actions = std::max<int64_t>(1, limits.keep_loose_actions / 4);
    limits.keep_transitions = std::max<int64_t>(1, limits.keep_transitions / 4);
  }
  if (total.incidents + total.transitions + total.actions + total.processes > 0) {
    log_info(
        "agent: store pruned: {} incident(s), {} transition(s), {} action(s), {} process record(s)",
        total.incidents, total.transitions, total.actions, total.processes);
  }
}

std::unique_ptr<WatchedJob> Agent::start_tracking(const std::string& root, const std::string& job,
                                                  std::optional<uint32_t> dir_uid, Stamp now) {
  auto t = std::make_unique<WatchedJob>();
  t->job = job;
  t->root = root;
  t->dir_uid = dir_uid;
  t->spec = spec_for(job, dir_uid);
  watch::ObserverConfig oc;
  oc.beacon_root = root;
  oc.job = job;
  oc.proc_root = config_.proc_root;
  oc.local_host = deps_.host;
  oc.world_size = t->spec.world_size;
  // No probe of its own: poll_once reads the GPUs once for every job. Selector left empty:
  // only the pids the beacons name.
  oc.detail_after_ns = config_.poll_interval_ns;
  oc.detail_budget_ns = kDetailBudgetPerPollNs;
  t->watch = std::make_unique<watch::JobWatch>(std::move(oc), detect::config_from_spec(t->spec));
  t->host = make_host(*t);
  runbook::IncidentPolicy policy = runbook::IncidentPolicy::from_spec(t->spec);
  t->runbook = std::make_unique<runbook::Incident>(runbook::IncidentScope{job, 0, 0}, policy,
                                                   ledger_, *t->host, deliveries_);
  if (coord_) t->leader = make_leader(*t);
  t->state.job = job;
  t->state.owner = t->spec.owner;
  t->state.owner_uid = dir_uid;
  t->state.job_class = t->spec.job_class;
  t->state.host = node_name();
  t->state.first_seen_wall_ns = now.wall_ns;
  if (may_log(*t, now)) {
    log_info("agent: watching job {} under {}{}", job, root,
             t->spec.source.empty() ? " (no spec: defaults, interval learned)"
                                    : " with spec " + t->spec.source);
  }
  return t;
}

Status Agent::poll_once(Stamp now) {
  int64_t started = mono_now_ns();
  {
    std::lock_guard lock(mu_);
    poll_started_mono_ns_ = started;
  }
  uint64_t beacons = 0, errors = 0, job_failures = 0;
  // One NVML read per poll, shared by every job (each device query costs real time).
  std::optional<Result<probe::GpuSnapshot>> gpus;
  if (deps_.gpu) gpus.emplace(deps_.gpu->poll());
  bool any_root = false;
  Error last_error;
  std::set<std::string> seen;
  maybe_prune(now);
  ++polls_;
  if (coord_) {
    coord_->budget.start_poll();
    coord_->session.tick(now);  // from the poll loop: a wedged loop loses its lease
  }
  std::map<uint32_t, int> jobs_of;  // tracked jobs per directory owner
  for (const auto& [job, t] : tracked_) {
    if (t->dir_uid && !t->vanished) ++jobs_of[*t->dir_uid];
  }
  for (const auto& root : config_.beacon_roots) {
    std::vector<Error> skipped;
    size_t skipped_total = 0;
    auto jobs = contract::list_jobs(root, &skipped, 32, &skipped_total);
    errors += skipped_total;
    for (const auto& e : skipped) note_problem(e.message);
    if (!jobs) {
      if (jobs.error().code == Errc::kNotFound) {
        any_root = true;  // no job has started here yet
      } else {
        ++errors;
        note_problem(jobs.error().message);
        last_error = jobs.error();
      }
      continue;
    }
    any_root = true;
    for (const auto& job : *jobs) {
      if (!seen.insert(job).second) {
        note_problem(fmt::format(
            "job {} exists under more than one beacon root; watching the first, skipping {}", job,
            root));
        continue;
      }
      auto it = tracked_.find(job);
      if (it != tracked_.end() && it->second->vanished) {
        tracked_.erase(it);  // it came back: a new run, judged afresh
        it = tracked_.end();
      }
      // One job's hostile or broken files must never stop the poll of the others.
      try {
        if (it == tracked_.end()) {
          std::optional<uint32_t> uid = dir_owner(root, job);
          if (uid && jobs_of[*uid] >= config_.max_jobs_per_user) {
            // One line per owner and root, not per job: the job names are the flood.
            note_problem(
                fmt::format("uid {} has more than {} job directories under {}: the rest are not "
                            "watched (max_jobs_per_user)",
                            *uid, config_.max_jobs_per_user, root));
            continue;
          }
          if (uid) ++jobs_of[*uid];
          it = tracked_.emplace(job, start_tracking(root, job, uid, now)).first;
        }
        observe(*it->second, now, gpus ? &*gpus : nullptr, &beacons, &errors);
      } catch (const std::exception& e) {
        ++errors;
        ++job_failures;
        note_problem(
            fmt::format("job {}: its poll failed, the other jobs go on: {}", job, e.what()));
      }
    }
  }
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    WatchedJob& t = *it->second;
    if (!seen.count(it->first) && !t.vanished) {
      t.vanished = true;
      retire(t, now, "beacons vanished");
    }
    if (t.vanished) t.runbook->reap(now);  // a preempt that outlived its job's directory
    bool expired =
        t.retired_at_wall_ns && now.wall_ns - *t.retired_at_wall_ns >= config_.retire_after_ns;
    if (expired && t.vanished && !t.runbook->acting()) {
      if (t.leader) {  // its summary goes only once the job is forgotten here
        coord_->puts_retired += t.leader->puts();
        t.leader->forget();
      }
      it = tracked_.erase(it);
      continue;
    }
    t.hidden = expired;
    ++it;
  }
  if (first_poll_ && any_root) close_unobserved(seen, now);
  refresh_node_faults(now);
  first_poll_ = false;
  deliveries_.reap(now);
  ranks_last_poll_ = due_last_poll_ = 0;
  for (const auto& [job, t] : tracked_) {
    ranks_last_poll_ += t->ranks;
    due_last_poll_ += t->due;
  }
  std::map<std::string, std::shared_ptr<const watch::JobState>> fresh;
  for (auto& [job, t] : tracked_) {
    if (t->hidden) continue;
    bool retired = t->retired_at_wall_ns.has_value();
    const auto& last = t->published;
    if (t->observed) {
      // The observation and verdict move into the published state; the next poll makes new ones.
      auto s = std::make_shared<watch::JobState>(std::move(t->state));
      s->retired = retired;
      t->state = watch::JobState{};
      t->state.job = s->job;
      t->state.owner = s->owner;
      t->state.owner_uid = s->owner_uid;
      t->state.job_class = s->job_class;
      t->state.host = s->host;
      t->state.first_seen_wall_ns = s->first_seen_wall_ns;
      t->state.incidents_total = s->incidents_total;
      t->state.actions_total = s->actions_total;
      t->published = std::move(s);
    } else if (last &&
               (last->retired != retired || last->incidents_total != t->state.incidents_total ||
                last->actions_total != t->state.actions_total)) {
      auto s = std::make_shared<watch::JobState>(*last);  // not observed (vanished): counters only
      s->retired = retired;
      s->incidents_total = t->state.incidents_total;
      s->actions_total = t->state.actions_total;
      t->published = std::move(s);
    }
    t->observed = false;
    if (t->published) fresh.emplace(job, t->published);
  }
  std::lock_guard lock(mu_);
  for (auto& [job, s] : fresh) {
    auto a = acks_total_.find(job);
    auto have = s->actions_total.find("ack");
    if (a != acks_total_.end() && (have == s->actions_total.end() || have->second != a->second)) {
      auto copy = std::make_shared<watch::JobState>(*s);
      copy->actions_total["ack"] = a->second;
      s = std::move(copy);
    }
  }
  published_ = std::move(fresh);
  health_.polls_total++;
  health_.beacons_read_total += beacons;
  health_.read_errors_total += errors;
  health_.job_poll_failures_total += job_failures;
  health_.last_poll_duration_ns = mono_now_ns() - started;
  health_.store_errors_total += store_errors_this_poll_;
  health_.store_error = store_errors_this_poll_ ? last_store_error_ : "";
  coord_health(health_, now);
  store_errors_this_poll_ = 0;
  last_poll_wall_ns_ = now.wall_ns;
  if (!any_root)
    return Error{last_error.code,
                 fmt::format("no beacon root could be read: {}", last_error.message)};
  return {};
}

void Agent::observe(WatchedJob& t, Stamp now, const Result<probe::GpuSnapshot>* gpus,
                    uint64_t* beacons, uint64_t* errors) {
  // This job's share of the poll's detail budget: by the ranks that wanted details at the
  // previous poll (a stalled job among healthy ones gets all of it), by rank count when none did.
  auto share_of = [](size_t mine, size_t all) {
    return static_cast<int64_t>(static_cast<double>(kDetailBudgetPerPollNs) *
                                static_cast<double>(mine) /
                                static_cast<double>(std::max<size_t>(1, all)));
  };
  t.watch->observer().set_detail_budget(
      due_last_poll_ > 0 ? share_of(t.due, due_last_poll_)
                         : share_of(std::max<size_t>(1, t.ranks), ranks_last_poll_));
  watch::LookInputs in;
  in.gpus = gpus;
  if (t.leader) {
    in.amend = [&](detect::Observation& obs, const watch::PollReport&) {
      t.state.cluster = t.leader->amend(obs, polls_, now);
    };
  }
  in.settle = [&](const detect::Observation& obs, detect::Verdict& v) {
    settle_preempt(t, obs, v);
  };
  watch::Look look = t.watch->look(now, in);
  const watch::PollReport& rep = look.report;
  detect::Observation& obs = look.observation;
  const detect::Verdict& v = look.verdict;  // copied once, into the published state
  t.ranks = obs.ranks.size();
  t.due = rep.details_due;
  *errors += rep.problems_total;
  for (const auto& p : rep.fresh_problems) log_warn("agent: job {}: {}", t.job, p.message);
  for (const auto& r : obs.ranks) {
    if (r.source == contract::Source::kBeacon) ++*beacons;
    t.incarnation = std::max<int64_t>(t.incarnation, r.incarnation);
    if (r.created.wall_ns > 0 &&
        (t.run_started_wall_ns == 0 || r.created.wall_ns < t.run_started_wall_ns))
      t.run_started_wall_ns = r.created.wall_ns;
  }
  note_history(t, obs, v, now);
  t.state.last_poll_wall_ns = now.wall_ns;
  t.state.recent_intervals_ns = recent_intervals(obs);
  t.state.gpus = job_gpus(rep);
  t.state.verdict = v;
  t.state.observation = std::move(obs);
  t.observed = true;
  if (t.leader) t.leader->share_view(t.state, now);
  // Process details only for ranks quiet for an expected interval (the poll interval while it
  // is still being learned): a rank that keeps committing steps costs one liveness check.
  t.watch->observer().set_detail_after(v.expected_interval_ns > 0 ? v.expected_interval_ns
                                                                  : config_.poll_interval_ns);
  if (look.changed_from) transition(t, look.changed_from->first, v, now);
  if (v.state == detect::State::kFinished || v.state == detect::State::kPreempted) {
    // Ranks that end under our own preempt are held until it is done: its report closes the
    // incident (settle_preempt).
    if (!t.retired_at_wall_ns && !t.runbook->acting() && !preempting(t))
      retire(t, now, v.state == detect::State::kPreempted ? "job preempted" : "job finished");
  } else if (t.retired_at_wall_ns && !t.vanished) {
    log_info("agent: job {} runs again ({})", t.job, v.summary);  // a restart after finishing
    t.retired_at_wall_ns.reset();
    t.hidden = false;
  }
  t.now = now;
  t.runbook->set_run(t.incarnation, t.run_started_wall_ns);
  step_runbook(t, v, now);
}

void Agent::run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    int64_t next = mono_now_ns() + config_.poll_interval_ns;
    bool ok = false;
    try {
      auto st = poll_once(SystemClock::instance().now());
      if (!st) note_problem(st.error().message);
      ok = st.ok();
    } catch (const std::exception& e) {  // the thread's boundary (STYLE rule 4)
      log_error("agent: poll failed: {}", e.what());
    } catch (...) {
      log_error("agent: poll failed with a non-standard exception");
    }
    note_poll_outcome(ok);
    for (int64_t left = next - mono_now_ns(); left > 0 && !stop.load();
         left = next - mono_now_ns()) {
      std::this_thread::sleep_for(
          std::chrono::nanoseconds(std::min<int64_t>(left, 100 * kNsPerMs)));
    }
  }
}

}  // namespace stepwatch::agent
