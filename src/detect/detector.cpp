// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/detect/detector.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "src/common/duration.h"
#include "src/detect/stamps.h"

namespace stepwatch::detect {

namespace {

using contract::RankSnapshot;

int64_t scaled(int64_t ns, double f) {
  return static_cast<int64_t>(std::llround(static_cast<double>(ns) * f));
}

// Phases that do not take part in collectives: a rank sitting in one while others train is the
// likely reason the others wait.
// The note of a rank that said it failed, as opposed to one that vanished.
constexpr const char* kReportedFailure = "rank reported failure";

bool non_collective_phase(const std::string& p) {
  return p == "data" || p == "checkpoint" || p == "init";
}

// A rank stalled because its node's summary lapsed: the only rank-level rank-silent.
bool lapsed(const RankVerdict& rv) {
  return rv.state == State::kStalled && rv.cause == Cause::kRankSilent;
}

// Fills each culprit's host when the job spans hosts.
void name_culprit_hosts(const Observation& obs, Verdict& v) {
  // Only a job on more than one host names hosts: a single-node verdict reads as it always has.
  std::set<std::string> hosts;
  for (const auto& r : obs.ranks)
    if (!r.host.empty()) hosts.insert(r.host);
  if (hosts.size() < 2 && !obs.one_clock) return;
  std::map<int, const std::string*> host_of;
  for (const auto& r : obs.ranks) host_of[r.rank] = &r.host;
  for (auto& c : v.culprits) {
    if (auto it = host_of.find(c.rank); it != host_of.end()) c.host = *it->second;
  }
}

}  // namespace

const PhaseRule* Detector::rule_for(const RankSnapshot& r) const {
  if (r.phase == "compile" && r.incarnation > 0 && config_.compile_warm)
    return &*config_.compile_warm;
  auto it = config_.phases.find(r.phase);
  return it == config_.phases.end() ? nullptr : &it->second;
}

Detector::Detector(Config config)
    : config_(std::move(config)), learner_(config_.learn_window, config_.learn_min_samples) {}

void Detector::learn(const RankSnapshot& r, RankMemory& m) {
  bool phase_changed = m.seen && r.phase_count != m.phase_count;
  bool training = r.phase == "train";
  if (r.source == contract::Source::kBeacon) {
    // New ring entries since the last poll; commit k (1-based) ends the interval k-1 -> k.
    uint64_t n = r.recent.size();
    uint64_t first_commit = r.step_count - n + 1;
    for (uint64_t i = 1; i < n; ++i) {
      uint64_t k = first_commit + i;
      if (k <= m.step_count) continue;
      if (k < static_cast<uint64_t>(config_.warmup_steps) + 2) continue;
      if (phase_changed || !training) continue;
      learner_.add(r.recent[i].mono_ns - r.recent[i - 1].mono_ns);
    }
  } else if (r.step && m.jsonl_step && r.step_count > m.step_count && !phase_changed && training &&
             r.step_count >= static_cast<uint64_t>(config_.warmup_steps) + 2) {
    uint64_t commits = r.step_count - m.step_count;
    learner_.add((r.step_at.wall_ns - m.jsonl_step_wall_ns) / static_cast<int64_t>(commits));
  }
  m.step_count = r.step_count;
  m.phase_count = r.phase_count;
  m.jsonl_step = r.step;
  m.jsonl_step_wall_ns = r.step_at.wall_ns;
  m.seen = true;
}

RankVerdict Detector::judge_rank(const RankSnapshot& r, const Observation& obs,
                                 int64_t effective_ns, const Stamp& job_phase_mark) {
  RankVerdict rv;
  rv.rank = r.rank;
  rv.step = r.step;
  rv.phase = r.phase;
  bool same_host = on_this_clock(r, obs);
  rv.step_age_ns = age_of(r.step ? r.step_at : r.created, obs.now, same_host);
  rv.phase_age_ns = age_of(r.phase_since, obs.now, same_host);

  if (r.status == contract::RankStatus::kFinished) {
    rv.state = State::kFinished;
    rv.note = "finished";
    return rv;
  }
  const ProcessFacts* p = proc_of(r.rank);
  if (r.status == contract::RankStatus::kFailed) {
    rv.state = State::kDead;
    rv.note = kReportedFailure;
    return rv;
  }
  // Its node stopped publishing: whatever its last summary said is no longer known.
  if (auto gone = obs.lapsed_hosts.find(r.host); gone != obs.lapsed_hosts.end()) {
    rv.state = State::kStalled;
    rv.cause = Cause::kRankSilent;
    rv.note = fmt::format(
        "node {} stopped reporting at least {} ago (its lease expired: its agent or node is "
        "down, or cut off from etcd)",
        r.host, format_duration(gone->second));
    return rv;
  }
  if (p != nullptr && (!p->alive || !p->same_process)) {
    if (p->exit_code && *p->exit_code != 0) {
      rv.state = State::kDead;
      rv.note = fmt::format("process {} exited with status {}", r.pid, *p->exit_code);
      return rv;
    }
    // Ended or died: settle_endings decides from the other ranks.
    rv.state = State::kFinished;
    rv.exited = true;
    rv.note = p->alive ? fmt::format("pid {} now belongs to another process", r.pid)
                       : fmt::format("process {} is gone", r.pid);
    return rv;
  }

  // A labeled phase with its own budget.
  if (const PhaseRule* rule = rule_for(r)) {
    int64_t elapsed = rv.phase_age_ns;
    if (rule->beats_renew && r.beat_at && later(*r.beat_at, r.phase_since)) {
      elapsed = age_of(*r.beat_at, obs.now, same_host);
    }
    rv.budget_ns = rule->budget_ns;
    std::string warm = (r.phase == "compile" && r.incarnation > 0) ? " (warm restart)" : "";
    if (elapsed > rule->budget_ns) {
      rv.state = State::kStalled;
      rv.cause = Cause::kPhaseOverrun;
      rv.note = fmt::format("phase {}{} for {}, budget {}", r.phase, warm, format_duration(elapsed),
                            format_duration(rule->budget_ns));
    } else if (elapsed > scaled(rule->budget_ns, 0.8)) {
      rv.state = State::kSuspect;
      rv.note = fmt::format("phase {}{} for {}, near its budget {}", r.phase, warm,
                            format_duration(elapsed), format_duration(rule->budget_ns));
    } else {
      rv.state = r.step ? State::kHealthy : State::kStarting;
      rv.note = fmt::format("in phase {}{} ({} of {})", r.phase, warm, format_duration(elapsed),
                            format_duration(rule->budget_ns));
    }
    return rv;
  }

  // No step yet: the init budget.
  if (!r.step) {
    Stamp since = later(r.phase_since, r.created) ? r.phase_since : r.created;
    int64_t elapsed = age_of(since, obs.now, same_host);
    rv.budget_ns = config_.init_budget_ns;
    if (elapsed > config_.init_budget_ns) {
      rv.state = State::kStalled;
      rv.cause = Cause::kInit;
      rv.note = fmt::format("no first step after {}, init budget {}", format_duration(elapsed),
                            format_duration(config_.init_budget_ns));
    } else if (elapsed > scaled(config_.init_budget_ns, 0.8)) {
      rv.state = State::kSuspect;
      rv.note =
          fmt::format("no first step after {}, near the init budget", format_duration(elapsed));
    } else {
      rv.state = State::kStarting;
      rv.note = fmt::format("starting for {}", format_duration(elapsed));
    }
    return rv;
  }

  // Step time. The clock restarts when a phase changes after the last step, on this rank or on
  // any other: ranks that waited in a collective while rank 0 saved a checkpoint resume the
  // moment it leaves the phase, not before.
  int64_t silent = rv.step_age_ns;
  for (const Stamp* mark : {&r.phase_since, &job_phase_mark}) {
    if (later(*mark, r.step_at)) silent = std::min(silent, age_of(*mark, obs.now, same_host));
  }
  bool warmup = r.step_count <= static_cast<uint64_t>(config_.warmup_steps) + 1;
  int64_t stall_after, suspect_after;
  if (effective_ns <= 0) {
    // Learning and nothing learned yet: be conservative rather than page on a guess.
    int64_t guess =
        learner_.max_seen() > 0 ? scaled(learner_.max_seen(), 3.0 * config_.grace_intervals) : 0;
    stall_after = std::max(guess, config_.init_budget_ns);
    suspect_after = scaled(stall_after, 0.5);
  } else {
    stall_after = scaled(effective_ns, config_.grace_intervals);
    suspect_after = effective_ns;
    if (warmup) {
      stall_after = std::max(stall_after, config_.init_budget_ns);
      suspect_after = std::max(suspect_after, scaled(config_.init_budget_ns, 0.8));
    }
  }
  rv.budget_ns = stall_after;
  if (silent > stall_after) {
    rv.state = State::kStalled;
    rv.cause = Cause::kUnknown;
    rv.note = fmt::format(
        "no step for {}, {:.1f}x the expected interval", format_duration(silent),
        effective_ns > 0 ? static_cast<double>(silent) / static_cast<double>(effective_ns) : 0.0);
  } else if (silent > suspect_after) {
    rv.state = State::kSuspect;
    rv.note = fmt::format("no step for {} (one interval missed)", format_duration(silent));
  } else {
    rv.state = State::kHealthy;
  }
  return rv;
}

const ProcessFacts* Detector::proc_of(int rank) const {
  auto it = std::lower_bound(proc_index_.begin(), proc_index_.end(), rank,
                             [](const auto& entry, int r) { return entry.first < r; });
  return it != proc_index_.end() && it->first == rank ? it->second : nullptr;
}

Verdict Detector::observe(const Observation& obs) {
  Verdict v;
  // Process facts by rank (thousands of ranks: no linear search per rank).
  proc_index_.clear();
  for (const auto& p : obs.procs) proc_index_.emplace_back(p.rank, &p);
  std::stable_sort(proc_index_.begin(), proc_index_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // 1. Learn from what is new, then fix the effective interval for this poll.
  std::vector<const RankSnapshot*> ranks;
  for (const auto& r : obs.ranks) ranks.push_back(&r);
  std::sort(ranks.begin(), ranks.end(), [](auto* a, auto* b) { return a->rank < b->rank; });
  for (const auto* r : ranks) {
    RankMemory& m = memory_[r->rank];
    if (m.seen && m.incarnation != r->incarnation) m = RankMemory{};
    m.incarnation = r->incarnation;
    // One rank teaches the learner (in data-parallel training all ranks share the cadence).
    if (r == ranks.front()) {
      learn(*r, m);
    } else {
      m.step_count = r->step_count;
      m.phase_count = r->phase_count;
      m.seen = true;
    }
  }
  std::optional<Learned> base = learner_.baseline();
  int64_t expected = 0;
  if (config_.expected_interval_ns) {
    expected = *config_.expected_interval_ns;
    v.interval_source = IntervalSource::kSpec;
  } else if (base) {
    expected = base->p90_ns;
    v.interval_source = learner_.frozen() ? IntervalSource::kLearned : IntervalSource::kLearning;
  }
  // The longest interval of the recent history, not a quantile: a heavy tail must not page,
  // and a job whose steps slow down but complete carries its threshold along.
  int64_t effective = expected > 0 ? std::max(expected, learner_.recent_max(256)) : 0;
  v.expected_interval_ns = effective;

  // Progress evidence inside the step (the early rule), before any rank is judged.
  std::vector<const ProcessFacts*> rank_procs;
  std::vector<bool> labeled;
  for (const auto* r : ranks) {
    rank_procs.push_back(proc_of(r->rank));
    labeled.push_back(rule_for(*r) != nullptr);
  }
  QuietWatch::Poll poll{obs, ranks, rank_procs, labeled};
  quiet_.note(poll, last_state_ != State::kStalled && last_state_ != State::kDead);

  // 2. Judge each rank.
  Stamp job_phase_mark;
  for (const auto* r : ranks) {
    if (later(r->phase_since, job_phase_mark)) job_phase_mark = r->phase_since;
  }
  for (const auto* r : ranks) v.ranks.push_back(judge_rank(*r, obs, effective, job_phase_mark));
  // Ranks known only as processes (an uninstrumented trainer): a dead one is still a dead rank.
  std::set<int> judged;
  for (const auto& rv : v.ranks) judged.insert(rv.rank);
  for (const auto& p : obs.procs) {
    if (p.alive || judged.count(p.rank)) continue;
    RankVerdict rv;
    rv.rank = p.rank;
    if (p.exit_code && *p.exit_code != 0) {
      rv.state = State::kDead;
      rv.note = fmt::format("process exited with status {}", *p.exit_code);
    } else {
      rv.state = State::kFinished;
      rv.exited = true;
      rv.note = "process is gone";
    }
    v.ranks.push_back(rv);
  }

  // Slow: steps complete, but the recent median is well above what is expected.
  std::optional<Learned> recent8 = learner_.recent(8);
  int64_t slow_ref =
      config_.expected_interval_ns ? *config_.expected_interval_ns : (base ? base->median_ns : 0);
  bool slow =
      slow_ref > 0 && recent8 && recent8->samples >= 3 &&
      static_cast<double>(recent8->median_ns) > config_.slow_factor * static_cast<double>(slow_ref);
  for (auto& rv : v.ranks) {
    if (slow && rv.state == State::kHealthy) {
      rv.state = State::kSlow;
      rv.note = fmt::format("steps complete every {} (median), {:.1f}x the expected {}",
                            format_duration(recent8->median_ns),
                            static_cast<double>(recent8->median_ns) / static_cast<double>(slow_ref),
                            format_duration(slow_ref));
    }
  }

  // Ranks stopped in step time while another rank is inside a labeled phase within its budget
  // are waiting for it (rank 0 saves a checkpoint, the others sit in the next collective):
  // suspect, not stalled, until that phase overruns.
  const RankVerdict* holder = nullptr;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankVerdict& rv = v.ranks[i];
    if (rule_for(*ranks[i]) != nullptr && rv.state != State::kStalled && rv.state != State::kDead)
      holder = &rv;
  }
  if (holder != nullptr) {
    for (size_t i = 0; i < ranks.size(); ++i) {
      RankVerdict& rv = v.ranks[i];
      bool step_time = rule_for(*ranks[i]) == nullptr && ranks[i]->step.has_value();
      bool waiting = (rv.state == State::kStalled && rv.cause == Cause::kUnknown) ||
                     rv.state == State::kSuspect;
      if (step_time && waiting) {
        rv.state = State::kSuspect;
        rv.note = fmt::format("waiting on rank {} ({} for {} of {})", holder->rank, holder->phase,
                              format_duration(holder->phase_age_ns),
                              format_duration(holder->budget_ns.value_or(0)));
      }
    }
  }

  quiet_.judge(poll, v);
  settle_endings(obs, v, ranks);

  // 3. The job: the worst rank, plus the whole job's exit.
  int world = obs.world_size;
  for (const auto* r : ranks) world = std::max(world, r->world_size);
  State worst = v.ranks.empty() ? State::kStarting : State::kFinished;
  for (const auto& rv : v.ranks) {
    if (severity(rv.state) > severity(worst)) worst = rv.state;
  }
  bool all_finished =
      !v.ranks.empty() && worst == State::kFinished && static_cast<int>(v.ranks.size()) >= world;
  if (obs.job_exit_code && *obs.job_exit_code == 0 && worst != State::kDead) all_finished = true;
  if (all_finished) {
    worst = State::kFinished;
  } else if (worst == State::kFinished) {
    worst = State::kHealthy;  // some ranks finished, the rest have not reported yet
  }
  if (obs.job_exit_code && *obs.job_exit_code != 0 && worst != State::kFinished)
    worst = State::kDead;
  v.state = worst;

  for (const auto& rv : v.ranks) {
    if (rv.step && (!v.last_step || *rv.step > *v.last_step)) v.last_step = rv.step;
    if (rv.step && (v.last_step_age_ns < 0 || rv.step_age_ns < v.last_step_age_ns))
      v.last_step_age_ns = rv.step_age_ns;
  }
  std::map<std::string, int> phases;
  for (const auto& rv : v.ranks) ++phases[rv.phase];
  int most = 0;
  for (const auto& [p, n] : phases) {
    if (n > most) {
      most = n;
      v.phase = p;
    }
  }
  for (const auto& rv : v.ranks) {
    if (rv.phase == v.phase && rv.budget_ns && config_.phases.count(rv.phase))
      v.phase_budget_ns = rv.budget_ns;
  }

  if (v.state == State::kStalled || v.state == State::kDead) choose_cause(obs, v, effective);
  name_culprit_hosts(obs, v);

  if (v.state != last_state_ || v.cause != last_cause_) {
    if (v.state != last_state_ || since_wall_ns_ == 0) since_wall_ns_ = obs.now.wall_ns;
    last_state_ = v.state;
    last_cause_ = v.cause;
  }
  v.since_wall_ns = since_wall_ns_;
  v.summary = fmt::format(
      "{}{}{}: last step {} {} ago, expected interval {} ({})", state_name(v.state),
      v.cause == Cause::kNone ? "" : "/", v.cause == Cause::kNone ? "" : cause_name(v.cause),
      v.last_step ? fmt::format("{}", *v.last_step) : "none",
      v.last_step_age_ns >= 0 ? format_duration(v.last_step_age_ns) : "n/a",
      effective > 0 ? format_duration(effective) : "n/a", interval_source_name(v.interval_source));
  if (!v.culprits.empty()) {
    v.summary += "; culprit";
    for (const auto& c : v.culprits) {
      v.summary += c.host.empty() ? fmt::format(" rank {} ({})", c.rank, c.reason)
                                  : fmt::format(" rank {} on {} ({})", c.rank, c.host, c.reason);
    }
  }
  return v;
}

void Detector::settle_endings(const Observation& obs, Verdict& v,
                              const std::vector<const RankSnapshot*>& ranks) {
  bool launcher_failed = obs.job_exit_code && *obs.job_exit_code != 0;
  bool died = launcher_failed;
  std::vector<RankVerdict*> exited;
  std::optional<Stamp> first_gone,
      first_end;  // the first silent exit; the first ending of any kind
  std::optional<int64_t> last_ended_step;
  for (auto& rv : v.ranks) {
    RankMemory& m = memory_[rv.rank];
    bool ended = rv.exited || rv.state == State::kDead || rv.state == State::kFinished;
    if (!ended) {
      m.ended_at.reset();
      continue;
    }
    if (!m.ended_at) m.ended_at = obs.now;
    died = died || rv.state == State::kDead || m.dead;
    if (!first_end || later(*first_end, *m.ended_at)) first_end = m.ended_at;
    if (rv.step && (!last_ended_step || *rv.step > *last_ended_step)) last_ended_step = rv.step;
    if (!rv.exited) continue;
    exited.push_back(&rv);
    if (!first_gone || later(*first_gone, *m.ended_at)) first_gone = m.ended_at;
  }
  if (!first_end) return;
  if (exited.empty()) {
    if (!died) judge_finishing(obs, v, ranks, *first_end, last_ended_step);
    return;
  }

  // A rank still running past the grace, and not visibly finishing: neither inside a labeled
  // phase within its budget (a final checkpoint or eval) nor writing its record since.
  int64_t gone_for = age_of(*first_gone, obs.now, true);
  bool past_grace = gone_for > config_.exit_grace_ns;
  std::optional<int> holdout;
  int running = 0;
  std::set<int> judged;
  for (size_t i = 0; i < v.ranks.size(); ++i) {
    const RankVerdict& rv = v.ranks[i];
    judged.insert(rv.rank);
    if (rv.exited || rv.state == State::kFinished || rv.state == State::kDead) continue;
    ++running;
    const RankSnapshot* r = i < ranks.size() ? ranks[i] : nullptr;
    bool finishing = r != nullptr && ((rule_for(*r) != nullptr && rv.state != State::kStalled) ||
                                      later(r->updated, *first_gone));
    if (past_grace && !finishing && !holdout) holdout = rv.rank;
  }
  // Living ranks known only as processes run on too, with no record to say they are finishing.
  for (const auto& p : obs.procs) {
    if (!p.alive || !p.same_process || judged.count(p.rank)) continue;
    ++running;
    if (past_grace && !holdout) holdout = p.rank;
  }
  for (RankVerdict* rv : exited) {
    if (died || holdout) {
      memory_[rv->rank].dead = true;
      rv->state = State::kDead;
      if (holdout) {
        rv->note += fmt::format(" while rank {} still runs {} later (exit grace {})", *holdout,
                                format_duration(gone_for), format_duration(config_.exit_grace_ns));
      } else if (launcher_failed) {
        rv->note += fmt::format("; the launcher exited with status {}", *obs.job_exit_code);
      }
    } else if (running > 0) {
      rv->note +=
          fmt::format(" ({} ago, without a finish record; {} rank(s) still running, exit grace {})",
                      format_duration(gone_for), running, format_duration(config_.exit_grace_ns));
    } else {
      rv->note += ": ended with the others (no finish record)";
    }
  }
  if (!died && holdout == std::nullopt) judge_finishing(obs, v, ranks, *first_end, last_ended_step);
}

void Detector::judge_finishing(const Observation& obs, Verdict& v,
                               const std::vector<const RankSnapshot*>& ranks,
                               const Stamp& first_end,
                               std::optional<int64_t> last_ended_step) const {
  // Once a rank has ended well, no more steps will come: a rank that is as far along and still
  // runs is finishing (a final save, eval, teardown), judged by the finish budget, not step time.
  auto rule = config_.phases.find("finish");
  if (rule == config_.phases.end()) return;
  int64_t budget = rule->second.budget_ns;
  int64_t elapsed = age_of(first_end, obs.now, true);
  for (size_t i = 0; i < v.ranks.size() && i < ranks.size(); ++i) {
    RankVerdict& rv = v.ranks[i];
    bool step_time = rule_for(*ranks[i]) == nullptr && rv.step.has_value();
    bool waiting =
        rv.state == State::kSuspect || (rv.state == State::kStalled && rv.cause == Cause::kUnknown);
    bool as_far = !last_ended_step || *rv.step >= *last_ended_step;
    if (!step_time || !waiting || !as_far) continue;
    rv.budget_ns = budget;
    if (elapsed > budget) {
      rv.state = State::kStalled;
      rv.cause = Cause::kPhaseOverrun;
      rv.note = fmt::format("still finishing {} after other ranks ended, finish budget {}",
                            format_duration(elapsed), format_duration(budget));
    } else {
      rv.state = State::kHealthy;
      rv.note = fmt::format("finishing: other ranks ended {} ago ({} of the finish budget)",
                            format_duration(elapsed), format_duration(budget));
    }
  }
}

void Detector::choose_cause(const Observation& obs, Verdict& v, int64_t effective_ns) const {
  auto add = [&](int rank, std::string reason) {
    for (const auto& c : v.culprits)
      if (c.rank == rank) return;
    v.culprits.push_back({rank, std::move(reason)});
  };
  std::vector<const RankVerdict*> stalled, advancing, dead;
  for (const auto& rv : v.ranks) {
    if (rv.state == State::kStalled) stalled.push_back(&rv);
    if (rv.state == State::kDead) dead.push_back(&rv);
    // Advancing: still committing steps (a rank waiting inside a labeled phase is not).
    bool recent_step = rv.step && (effective_ns <= 0 || rv.step_age_ns <= effective_ns);
    if ((rv.state == State::kHealthy || rv.state == State::kSlow) && recent_step)
      advancing.push_back(&rv);
  }
  for (const auto& rv : v.ranks) {
    v.evidence.push_back(
        {"step", rv.step ? fmt::format("{}", *rv.step) : "none", rv.rank, rv.step_age_ns});
    v.evidence.push_back({"phase", rv.phase, rv.rank, rv.phase_age_ns});
  }
  for (const auto& r : obs.ranks) {
    if (!r.sample) continue;
    bool here = on_this_clock(r, obs);
    v.evidence.push_back(
        {"sampler",
         fmt::format("main thread in {} ({} wait){}",
                     r.sample->where.empty() ? "?" : r.sample->where,
                     contract::wait_kind_name(r.sample->wait),
                     age_of(r.sample->at, obs.now, here) > kSamplerStaleNs
                         ? fmt::format("; sampler silent {}",
                                       format_duration(age_of(r.sample->at, obs.now, here)))
                         : ""),
         r.rank, age_of(r.sample->moved_at, obs.now, here)});
  }
  for (const auto& p : obs.procs) {
    std::string io = p.io_delta_bytes ? fmt::format("{} B", *p.io_delta_bytes) : "n/a";
    std::string cpu = p.cpu_delta_ns ? format_duration(*p.cpu_delta_ns) : "n/a";
    std::string main = p.main_cpu_delta_ns ? format_duration(*p.main_cpu_delta_ns) : "n/a";
    std::string ctx = p.ctx_switches_delta ? fmt::format("{}", *p.ctx_switches_delta) : "n/a";
    v.evidence.push_back(
        {"process",
         fmt::format(
             "state {} D-threads {} cpu +{} (main thread +{}, switches +{}) io +{} wchan {}",
             p.state, p.threads_in_d, cpu, main, ctx, io, p.wchan.empty() ? "n/a" : p.wchan),
         p.rank, -1});
  }
  for (const auto& [host, age] : obs.lapsed_hosts)
    v.evidence.push_back({"node", fmt::format("{} stopped reporting", host), -1, age});
  for (const auto& g : obs.gpus) {
    v.evidence.push_back(
        {"gpu",
         fmt::format("sm {} power {}",
                     g.sm_util_pct ? fmt::format("{:.0f}%", *g.sm_util_pct) : "n/a",
                     g.power_w ? fmt::format("{:.0f} W", *g.power_w) : "n/a"),
         g.rank, -1});
  }
  if (obs.log) {
    int64_t age =
        obs.log->last_line_wall_ns > 0 ? obs.now.wall_ns - obs.log->last_line_wall_ns : -1;
    v.evidence.push_back(
        {"log", fmt::format("{} lines; output is not progress", obs.log->lines_total), -1, age});
  }

  if (v.state == State::kDead) {
    v.cause = Cause::kNone;
    // The ranks that ended first are the culprits, the later ones their collateral (a peer's
    // socket closed under them, or the launcher killed them). Among ranks first seen ended in
    // the same poll, one that vanished without a word (killed, crashed) goes before one that
    // reported failure, which is how a peer's loss usually surfaces.
    auto ended_at = [&](const RankVerdict* rv) {
      auto it = memory_.find(rv->rank);
      return it != memory_.end() && it->second.ended_at ? *it->second.ended_at : obs.now;
    };
    std::optional<Stamp> first;
    for (const auto* rv : dead) {
      if (!first || later(*first, ended_at(rv))) first = ended_at(rv);
    }
    std::vector<const RankVerdict*> earliest;
    for (const auto* rv : dead) {
      if (!later(ended_at(rv), *first)) earliest.push_back(rv);
    }
    bool any_silent = false;
    for (const auto* rv : earliest) any_silent = any_silent || rv->note != kReportedFailure;
    for (const auto* rv : earliest) {
      if (!any_silent || rv->note != kReportedFailure) add(rv->rank, rv->note);
    }
    if (dead.empty() && obs.job_exit_code) {
      v.evidence.push_back(
          {"exit", fmt::format("job exited with status {}", *obs.job_exit_code), -1, -1});
    }
    return;
  }

  // A lost node explains everything else: its ranks' silence is what the others wait on, and
  // nothing it last said (phases, processes) is current.
  bool any_lapsed = false;
  for (const auto* rv : stalled) {
    if (!lapsed(*rv)) continue;
    any_lapsed = true;
    add(rv->rank, rv->note);
  }
  if (any_lapsed) {
    v.cause = Cause::kRankSilent;
    return;
  }

  // The early rule's verdicts (quiet.h): a hang seen inside a step. Its stalled ranks are the
  // culprits, unless every rank stalled alike (one collective, no rank standing out).
  std::vector<const RankVerdict*> early;
  for (const auto* rv : stalled)
    if (rv->cause == Cause::kCollective) early.push_back(rv);
  if (!early.empty()) {
    v.cause = Cause::kCollective;
    if (early.size() < v.ranks.size()) {
      for (const auto* rv : early) {
        add(rv->rank, rv->note);
        const ProcessFacts* p = proc_of(rv->rank);
        if (p != nullptr && (p->threads_in_d > 0 || p->state == 'D') &&
            p->io_delta_bytes.value_or(0) == 0)
          v.cause = Cause::kIo;
      }
    } else {
      v.evidence.push_back({"collective",
                            "every rank waits unchanged in the same collective: no rank stands out",
                            -1, -1});
    }
    return;
  }

  bool others_train = false;
  for (const auto& rv : v.ranks)
    others_train = others_train || (rv.phase == "train" && rv.state != State::kHealthy);
  for (const auto* rv : stalled) {
    if (rv->cause == Cause::kPhaseOverrun) {
      // One rank stuck in a data fetch or a checkpoint while the others wait in a collective
      // is a collective hang with a named culprit; everyone overrunning eval is the phase.
      bool blocks_others = non_collective_phase(rv->phase) && others_train;
      v.cause = blocks_others && v.cause != Cause::kPhaseOverrun ? Cause::kCollective
                                                                 : Cause::kPhaseOverrun;
      add(rv->rank,
          blocks_others ? fmt::format("{} while the others wait in train", rv->note) : rv->note);
    }
  }
  if (v.cause == Cause::kPhaseOverrun || v.cause == Cause::kCollective) {
    for (const auto& p : obs.procs) {
      if ((p.threads_in_d > 0 || p.state == 'D') && p.io_delta_bytes.value_or(0) == 0)
        v.cause = Cause::kIo;
    }
    return;
  }
  bool all_init = !stalled.empty();
  for (const auto* rv : stalled) all_init = all_init && rv->cause == Cause::kInit;
  if (all_init) {
    v.cause = Cause::kInit;
    for (const auto* rv : stalled) add(rv->rank, rv->note);
    return;
  }
  if (!advancing.empty()) {
    v.cause = Cause::kRankSilent;
    for (const auto* rv : stalled) {
      const ProcessFacts* p = proc_of(rv->rank);
      add(rv->rank, fmt::format("beacon silent for {} while {} other rank(s) advance{}",
                                format_duration(rv->step_age_ns), advancing.size(),
                                p ? ", process alive" : ""));
    }
    return;
  }

  // Everyone stopped. Rank the likely culprits: behind on step, in a non-collective phase while
  // the others train, silent first, sleeping somewhere the others are not.
  int64_t max_step = v.last_step.value_or(-1);
  std::map<std::string, int> phase_votes, wchan_votes;
  for (const auto& rv : v.ranks) ++phase_votes[rv.phase];
  for (const auto& p : obs.procs)
    if (!p.wchan.empty()) ++wchan_votes[p.wchan];
  auto majority = [](const std::map<std::string, int>& votes) {
    std::string best;
    int n = 0;
    for (const auto& [k, c] : votes)
      if (c > n) {
        n = c;
        best = k;
      }
    return best;
  };
  std::string main_phase = majority(phase_votes), main_wchan = majority(wchan_votes);
  int64_t newest_silence = -1;
  for (const auto& rv : v.ranks)
    newest_silence = newest_silence < 0 ? rv.step_age_ns : std::min(newest_silence, rv.step_age_ns);
  for (const auto& rv : v.ranks) {
    if (rv.step && *rv.step < max_step) {
      add(rv.rank, fmt::format("behind: step {} while others reached {}", *rv.step, max_step));
    }
  }
  for (const auto& rv : v.ranks) {
    if (non_collective_phase(rv.phase) && rv.phase != main_phase && v.ranks.size() > 1) {
      add(rv.rank, fmt::format("in phase {} for {} while the others are in {}", rv.phase,
                               format_duration(rv.phase_age_ns), main_phase));
    }
  }
  for (const auto& rv : v.ranks) {
    if (v.ranks.size() > 1 && effective_ns > 0 &&
        rv.step_age_ns - newest_silence > effective_ns / 2) {
      add(rv.rank, fmt::format("silent first: last step {} before the others",
                               format_duration(rv.step_age_ns - newest_silence)));
    }
  }
  // Where the ranks sleep in the kernel: ranks waiting in a collective sleep on a futex (or
  // spin); the one that does not — asleep in a pipe read, a nanosleep, a socket — is holding them.
  auto collective_wait = [](const std::string& w) { return w.rfind("futex", 0) == 0; };
  int waiting = 0;
  for (const auto& p : obs.procs) waiting += p.alive && collective_wait(p.wchan);
  for (const auto& p : obs.procs) {
    if (!p.alive || p.wchan.empty() || collective_wait(p.wchan)) continue;
    if (waiting > 0) {
      add(p.rank,
          fmt::format("asleep in {} while {} rank(s) wait in a collective", p.wchan, waiting));
    } else if (wchan_votes.size() > 1 && obs.procs.size() > 2 && p.wchan != main_wchan &&
               wchan_votes[p.wchan] == 1) {
      add(p.rank, fmt::format("blocked in {} while the others wait in {}", p.wchan, main_wchan));
    }
  }

  // The cause, from the evidence.
  bool io = false, gpu_busy = false, any_cpu = false, cpu_known = false;
  for (const auto& p : obs.procs) {
    if ((p.threads_in_d > 0 || p.state == 'D') && p.io_delta_bytes.value_or(0) == 0) {
      io = true;
      add(p.rank, fmt::format("{} thread(s) in uninterruptible I/O wait, I/O not advancing",
                              std::max(1, p.threads_in_d)));
    }
    if (p.cpu_delta_ns) {
      cpu_known = true;
      // More than 5% of a core over the poll counts as "doing something".
      if (*p.cpu_delta_ns > 50 * kNsPerMs) any_cpu = true;
    }
  }
  for (const auto& g : obs.gpus) gpu_busy = gpu_busy || g.sm_util_pct.value_or(0) >= 50;
  if (io) {
    v.cause = Cause::kIo;
  } else if (!v.culprits.empty() || gpu_busy) {
    v.cause = std::max(v.ranks.size(), obs.procs.size()) > 1 ? Cause::kCollective : Cause::kUnknown;
  } else if (cpu_known && !any_cpu && !gpu_busy) {
    v.cause = Cause::kHost;
  } else {
    v.cause = Cause::kUnknown;
  }
}

}  // namespace stepwatch::detect
