// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/detect/quiet.h"

#include <fmt/format.h>

#include <algorithm>

#include "src/common/duration.h"
#include "src/detect/stamps.h"

namespace stepwatch::detect {

namespace {

bool collective_wait(contract::WaitKind w) {
  return w == contract::WaitKind::kCollective || w == contract::WaitKind::kDevice;
}

// "`all_reduce (distributed_c10d.py:1536)`", or the wait kind when the sampler gave no label.
std::string where_text(const std::string& where, contract::WaitKind w) {
  if (!where.empty()) return fmt::format("`{}`", where);
  return w == contract::WaitKind::kNone ? std::string("its own code")
                                        : fmt::format("a {} wait", contract::wait_kind_name(w));
}

}  // namespace

QuietWatch::RankQuiet QuietWatch::look(const contract::RankSnapshot& r,
                                       const Observation& obs) const {
  RankQuiet q;
  bool here = on_this_clock(r, obs);
  if (r.sample) {
    q.stale = age_of(r.sample->at, obs.now, here) > kSamplerStaleNs;
    q.waiting = !q.stale && r.sample->wait != contract::WaitKind::kNone;
    q.wait = r.sample->wait;
    q.where = r.sample->where;
  }
  auto it = memory_.find(r.rank);
  if (it != memory_.end() && it->second.seen)
    q.quiet_ns = age_of(it->second.progress_at, obs.now, here);
  return q;
}

void QuietWatch::note(const Poll& poll, bool job_healthy) {
  const Observation& obs = poll.obs;
  bool any_labeled =
      std::find(poll.labeled.begin(), poll.labeled.end(), true) != poll.labeled.end();
  for (size_t i = 0; i < poll.ranks.size(); ++i) {
    const contract::RankSnapshot& r = *poll.ranks[i];
    const ProcessFacts* p = poll.procs[i];
    Memory& m = memory_[r.rank];
    if (m.seen && m.incarnation != r.incarnation) m = Memory{};
    RankQuiet q = look(r, obs);

    // The newest progress evidence of this poll.
    std::optional<Stamp> at;
    auto take = [&](const Stamp& s) {
      if (!at || later(s, *at)) at = s;
    };
    // A changed record: when it changed, as precisely as the record says.
    if (r.step_count != m.step_count) take(r.step_at);
    if (r.beat_count != m.beat_count && r.beat_at) take(*r.beat_at);
    if (r.phase_count != m.phase_count) take(r.phase_since);
    if (r.updated_mono_ns != m.updated_mono_ns || r.updated.wall_ns != m.updated_wall_ns)
      take(r.updated.wall_ns > 0 || r.updated.mono_ns > 0 ? r.updated : obs.now);
    if (r.sample && later(r.sample->moved_at, m.moved_at)) take(r.sample->moved_at);
    if (p != nullptr && p->io_delta_bytes.value_or(0) >= kIoMovingBytes) take(obs.now);
    // A main thread spinning inside a known wait (cudaStreamSynchronize, NCCL) is not working.
    if (p != nullptr && !q.waiting && p->main_cpu_delta_ns.value_or(0) > kMainCpuMovingNs)
      take(obs.now);

    if (!m.seen) {
      m.progress_at = at ? *at : obs.now;
    } else if (at && later(*at, m.progress_at)) {
      // A quiet stretch ended: learn it if it was training's own, in a healthy job.
      int64_t stretch = age_of(m.progress_at, *at, on_this_clock(r, obs));
      // Evidence at every poll is no quiet at all: the gap between polls is the poll's, not
      // the rank's. A stretch counts once a poll passed without evidence.
      bool learnable = job_healthy && !m.held && !any_labeled && m.step_count > 0 &&
                       r.phase == "train" && r.sample.has_value() && m.silent_polls > 0;
      if (learnable) {
        int64_t& longest = m.waiting ? wait_max_ : own_max_;
        longest = std::max(longest, stretch);
      }
      m.progress_at = *at;
      m.held = false;
      m.silent_polls = 0;
    } else {
      ++m.silent_polls;
    }
    if (any_labeled) m.held = true;
    if (i == 0 && m.seen && r.step_count > m.step_count && r.sample) ++sampled_steps_;

    m.seen = true;
    m.incarnation = r.incarnation;
    m.waiting = q.waiting;
    m.step_count = r.step_count;
    m.beat_count = r.beat_count;
    m.phase_count = r.phase_count;
    m.updated_mono_ns = r.updated_mono_ns;
    m.updated_wall_ns = r.updated.wall_ns;
    if (r.sample) m.moved_at = r.sample->moved_at;
  }
}

bool QuietWatch::armed() const {
  return early_ && (spec_budget_ || sampled_steps_ >= kQuietLearnSteps);
}

std::optional<int64_t> QuietWatch::budget_for(int64_t longest) const {
  if (!armed()) return std::nullopt;
  if (spec_budget_) return *spec_budget_;
  return std::max(floor_, static_cast<int64_t>(kQuietMargin * static_cast<double>(longest)));
}

int64_t QuietWatch::init_budget() const {
  return spec_budget_.value_or(floor_);
}

std::string QuietWatch::budget_text(std::optional<int64_t> budget, int64_t longest) const {
  if (spec_budget_) return fmt::format("quiet budget {} (spec)", format_duration(*budget));
  if (budget && *budget > floor_) {
    return fmt::format("quiet budget {} ({}x the longest healthy quiet, {})",
                       format_duration(*budget), kQuietMargin, format_duration(longest));
  }
  return fmt::format("quiet budget {} (the floor)", format_duration(budget.value_or(0)));
}

void QuietWatch::stall_culprits(const Poll& poll, const std::vector<RankQuiet>& qs,
                                const std::vector<size_t>& culprits, int64_t budget,
                                Verdict& v) const {
  std::vector<int> waiting_ranks, culprit_ranks;
  int64_t waited = -1;
  std::string waited_in;
  for (size_t i = 0; i < qs.size(); ++i) {
    if (std::find(culprits.begin(), culprits.end(), i) != culprits.end()) {
      culprit_ranks.push_back(poll.ranks[i]->rank);
      continue;
    }
    waiting_ranks.push_back(poll.ranks[i]->rank);
    if (waited < 0 || qs[i].quiet_ns < waited) waited = qs[i].quiet_ns;
    if (waited_in.empty()) waited_in = where_text(qs[i].where, qs[i].wait);
  }
  std::string others = fmt::format("rank{} {} in {} for {}", waiting_ranks.size() > 1 ? "s" : "",
                                   rank_ranges(waiting_ranks), waited_in, format_duration(waited));
  for (size_t i : culprits) {
    const RankQuiet& q = qs[i];
    const ProcessFacts* p = poll.procs[i];
    std::string what;
    if (q.stale) {
      const auto& s = *poll.ranks[i]->sample;
      what = fmt::format(
          "its sampler stopped {} ago (a C extension holding the GIL?), last in {}",
          format_duration(age_of(s.at, poll.obs.now, on_this_clock(*poll.ranks[i], poll.obs))),
          where_text(q.where, q.wait));
    } else {
      what = fmt::format("main thread in {} unchanged", where_text(q.where, q.wait));
    }
    std::string io = p && p->io_delta_bytes ? ", no I/O" : "";
    std::string cpu = p && p->main_cpu_delta_ns ? ", no CPU" : "";
    RankVerdict& rv = v.ranks[i];
    rv.state = State::kStalled;
    rv.cause = Cause::kCollective;
    rv.budget_ns = budget;
    rv.note = fmt::format("{} for {}{}{}; {} ({})", what, format_duration(q.quiet_ns), io, cpu,
                          others, budget_text(budget, own_max_));
  }
  for (size_t i = 0; i < qs.size(); ++i) {
    if (std::find(culprits.begin(), culprits.end(), i) != culprits.end()) continue;
    RankVerdict& rv = v.ranks[i];
    if (rv.state == State::kHealthy || rv.state == State::kSlow) rv.state = State::kSuspect;
    rv.note = fmt::format("in {} for {}, waiting on rank{} {}", where_text(qs[i].where, qs[i].wait),
                          format_duration(qs[i].quiet_ns), culprit_ranks.size() > 1 ? "s" : "",
                          rank_ranges(culprit_ranks));
  }
}

void QuietWatch::judge(const Poll& poll, Verdict& v) const {
  const auto& ranks = poll.ranks;
  if (!early_ || ranks.empty() || v.ranks.size() < ranks.size()) return;
  int world = poll.obs.world_size;
  for (const auto* r : ranks) world = std::max(world, r->world_size);
  if (static_cast<int>(ranks.size()) < world) return;  // a rank not there yet, or not reporting
  std::vector<RankQuiet> qs;
  int with_step = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankVerdict& rv = v.ranks[i];
    bool open = rv.state == State::kHealthy || rv.state == State::kSlow ||
                rv.state == State::kSuspect || rv.state == State::kStarting;
    if (poll.labeled[i] || !open || rv.exited || !ranks[i]->sample ||
        ranks[i]->status != contract::RankStatus::kRunning)
      return;
    qs.push_back(look(*ranks[i], poll.obs));
    with_step += ranks[i]->step.has_value();
  }
  size_t n = qs.size();

  if (with_step == 0) {
    // Hung at init: every rank here, each waiting in rendezvous, none moving. torch's TCPStore
    // keeps the GIL while it waits, so a rank blocked there has a stopped sampler rather than a
    // store wait; with nothing else moving that counts too (an import or a model build moves:
    // CPU or I/O).
    int64_t budget = init_budget();
    bool any_store = false;
    for (const auto& q : qs) {
      bool rendezvous = (q.waiting && q.wait == contract::WaitKind::kStore) || q.stale;
      if (!rendezvous || q.quiet_ns <= budget) return;
      any_store = any_store || q.wait == contract::WaitKind::kStore;
    }
    if (!any_store) return;  // no rank said rendezvous: stopped samplers alone are not enough
    for (size_t i = 0; i < n; ++i) {
      RankVerdict& rv = v.ranks[i];
      rv.state = State::kStalled;
      rv.cause = Cause::kInit;
      rv.budget_ns = budget;
      rv.note = fmt::format(
          "{} unchanged for {} with all {} ranks present, early init budget {}",
          qs[i].stale
              ? fmt::format("in {} with its sampler stopped (a store call holds the GIL)",
                            where_text(qs[i].where, qs[i].wait))
              : fmt::format("waits in {} (rendezvous)", where_text(qs[i].where, qs[i].wait)),
          format_duration(qs[i].quiet_ns), n, format_duration(budget));
    }
    return;
  }
  if (with_step != static_cast<int>(n) || !armed()) return;

  int64_t own = *own_budget(), wait = *wait_budget();
  std::vector<size_t> culprits;
  size_t waiting = 0;
  int64_t least_wait = -1;
  for (size_t i = 0; i < n; ++i) {
    const RankQuiet& q = qs[i];
    if (q.waiting) {
      ++waiting;
      if (least_wait < 0 || q.quiet_ns < least_wait) least_wait = q.quiet_ns;
    } else if (q.quiet_ns > own) {
      culprits.push_back(i);
    }
  }
  if (!culprits.empty() && waiting > 0 && culprits.size() + waiting == n) {
    stall_culprits(poll, qs, culprits, own, v);
    return;
  }
  // Every rank in a collective, unchanged past the waiting budget: no rank stands out.
  bool all_collective = waiting == n && least_wait > wait;
  for (const auto& q : qs) all_collective = all_collective && collective_wait(q.wait);
  if (!all_collective) return;
  for (size_t i = 0; i < n; ++i) {
    RankVerdict& rv = v.ranks[i];
    rv.state = State::kStalled;
    rv.cause = Cause::kCollective;
    rv.budget_ns = wait;
    rv.note = fmt::format("in {} unchanged for {}, like every rank; {}",
                          where_text(qs[i].where, qs[i].wait), format_duration(qs[i].quiet_ns),
                          budget_text(wait, wait_max_));
  }
}

}  // namespace stepwatch::detect
