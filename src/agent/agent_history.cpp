// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The agent's side of the node-fault history (runbook/node_fault.h, docs/node-fault.md): each
// job's incarnations, recorded once per transition, the hosts their ends implicate, and what
// the rules make of them for the API, /metrics and the dashboard. A single node's jobs are kept
// in its store; a multi-node job's in etcd (coord/etcd_history.h), recorded by its leader from
// the merged view of every node's ranks, and read by every node.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "src/agent/agent.h"
#include "src/agent/job_leader.h"
#include "src/agent/node_coord.h"
#include "src/agent/watched_job.h"
#include "src/common/log.h"
#include "src/runbook/node_fault_history.h"

namespace stepwatch::agent {

namespace {

// The history's view is recomputed at least this often: the rules' windows slide with time. A
// multi-node job's history is written by its leader, perhaps another node: read more often.
constexpr int64_t kNodeFaultsEveryNs = 60 * kNsPerSec;
constexpr int64_t kCoordNodeFaultsEveryNs = 5 * kNsPerSec;

// How an incarnation ended, from the last verdict seen of it; `otherwise` when that verdict
// says neither finished nor failed (the job restarted or vanished while it looked fine).
std::string_view end_reason(const detect::Verdict& last, std::string_view otherwise) {
  switch (last.state) {
    case detect::State::kFinished:
      return "finished";
    case detect::State::kPreempted:
      return "preempted";
    case detect::State::kStalled:
    case detect::State::kDead:
      return "failed";
    default:
      return otherwise;
  }
}

// The part of a verdict an incarnation's end keeps (its ranks are not copied every poll).
void keep_verdict(detect::Verdict& into, const detect::Verdict& v) {
  into.state = v.state;
  into.cause = v.cause;
  into.culprits = v.culprits;
}

// The nodes the job's ranks run on, each once, in the order seen: the leader's merged ranks name
// each node; a rank without a host runs `here`.
std::vector<std::string> hosts_of(const detect::Observation& obs, const std::string& here) {
  std::vector<std::string> out;
  for (const auto& rank : obs.ranks) {
    const std::string& host = rank.host.empty() ? here : rank.host;
    if (std::find(out.begin(), out.end(), host) == out.end()) out.push_back(host);
  }
  return out;
}

bool in_window(int64_t t, int64_t now, int64_t window) {
  return t > now - window && t <= now;
}

}  // namespace

runbook::HistoryLedger& Agent::history_reader() {
  if (coord_) return coord_->history;
  return store_history_;
}

runbook::HistoryLedger* Agent::history_writer(WatchedJob& t) {
  if (!coord_) return &store_history_;
  return t.leader ? t.leader->history_writer() : nullptr;
}

void Agent::note_history(WatchedJob& t, const detect::Observation& obs, const detect::Verdict& v,
                         Stamp now) {
  runbook::HistoryLedger* history = history_writer(t);
  if (!history || obs.ranks.empty()) return;
  if (t.incarnation != t.history.seen) {
    // The job's incarnation moved on: the previous one ended as its last verdict said.
    end_history_as_seen(t, "restarted", now);
    t.history.seen = t.incarnation;
    t.history.checkpoint_step.reset();
    // A restarted agent finds the incarnations it already ended: they stay ended, once.
    bool ended = false;
    auto known = history->incarnations(t.job, 8);
    if (!known) note_history_error(known.error());
    for (const auto& r : known ? *known : std::vector<store::IncarnationRecord>{})
      ended = ended || (r.incarnation == t.incarnation && r.ended());
    if (!ended) {
      store::IncarnationRecord r;
      r.job = t.job;
      r.incarnation = t.incarnation;
      // When its first beacon was created; now when no beacon says (a record keeps the first).
      r.started_ns = now.wall_ns;
      for (const auto& rank : obs.ranks) {
        if (static_cast<int64_t>(rank.incarnation) == t.incarnation && rank.created.wall_ns > 0)
          r.started_ns = std::min(r.started_ns, rank.created.wall_ns);
      }
      r.hosts = hosts_of(obs, node_name());
      if (auto st = history->record_incarnation(r); !st) note_history_error(st.error());
      t.history.open = t.incarnation;
      t.history.hosts = std::set<std::string>(r.hosts.begin(), r.hosts.end());
      node_faults_dirty_ = true;
    }
  }
  if (t.history.open) {
    // Nodes whose ranks appear after the start was recorded (the leader merges each node's
    // summary as it arrives) join the incarnation's hosts (record_incarnation takes the union).
    store::IncarnationRecord more;
    for (auto& host : hosts_of(obs, node_name())) {
      if (!t.history.hosts.count(host)) more.hosts.push_back(std::move(host));
    }
    if (!more.hosts.empty()) {
      more.job = t.job;
      more.incarnation = *t.history.open;
      if (auto st = history->record_incarnation(more); !st) {
        note_history_error(st.error());
      } else {
        t.history.hosts.insert(more.hosts.begin(), more.hosts.end());
        node_faults_dirty_ = true;
      }
    }
  }
  keep_verdict(t.history.last_verdict, v);
  for (const auto& r : obs.ranks) {
    if (r.checkpoint)
      t.history.checkpoint_step =
          std::max(t.history.checkpoint_step.value_or(0), r.checkpoint->step);
  }
}

void Agent::end_history(WatchedJob& t, std::string_view reason, const detect::Verdict* v,
                        Stamp now) {
  if (!t.history.open) return;
  runbook::HistoryLedger* history = history_writer(t);
  if (!history) return;  // no longer the leader: the next one ends it
  store::IncarnationRecord r =
      runbook::ended_incarnation(t.job, *t.history.open, reason, v, node_name(), now.wall_ns);
  r.checkpoint_step = t.history.checkpoint_step;
  if (auto st = runbook::record_ended(*history, r); !st) note_history_error(st.error());
  t.history.open.reset();
  node_faults_dirty_ = true;
}

void Agent::end_history_as_seen(WatchedJob& t, std::string_view otherwise, Stamp now) {
  end_history(t, end_reason(t.history.last_verdict, otherwise), &t.history.last_verdict, now);
}

void Agent::note_history_error(const Error& e) {
  if (coord_) {
    note_problem("the node-fault history in etcd: " + e.message);
  } else {
    note_store_error(e);
  }
}

void Agent::refresh_node_faults(Stamp now) {
  if (!node_faults_dirty_ && next_node_faults_mono_ns_ && now.mono_ns < *next_node_faults_mono_ns_)
    return;
  node_faults_dirty_ = false;
  next_node_faults_mono_ns_ = now.mono_ns + (coord_ ? kCoordNodeFaultsEveryNs : kNodeFaultsEveryNs);

  // The fleet view takes the [node_fault] defaults; each job's view its own spec's.
  const runbook::NodeFaultPolicy fleet;
  int64_t longest = fleet.cross_job_window_ns;
  for (const auto& [job, t] : tracked_)
    longest = std::max(longest, t->spec.node_fault.cross_job_window_ns);
  runbook::HistoryLedger& reader = history_reader();
  auto implications = reader.implications(now.wall_ns - longest);
  if (!implications) {
    note_history_error(implications.error());
    node_faults_dirty_ = true;  // tried again next poll
    return;
  }

  auto snap = std::make_shared<serve::NodeFaultSnapshot>();
  snap->window_ns = fleet.cross_job_window_ns;
  std::map<std::string, serve::HostFault> hosts;
  for (const auto& [job, t] : tracked_) {
    if (t->hidden) continue;
    auto history = reader.incarnations(job, runbook::kHistoryRead);
    if (!history) {
      note_history_error(history.error());
      continue;
    }
    const runbook::NodeFaultPolicy& policy = t->spec.node_fault;
    const char* scheduler = spec::resume_owner_name(t->spec.runbook.resume_owner);
    serve::JobNodeFault& view = snap->jobs[job];
    if (auto storm = runbook::restart_storm(*history, policy, now.wall_ns))
      view.storm = serve::RestartStormView{storm->incarnations, storm->window_ns, storm->evidence};
    for (auto& s : runbook::suspect_hosts(*history, *implications, policy, now.wall_ns)) {
      if (!t->retired_at_wall_ns) {  // a job that is over names no suspect of the fleet's
        serve::HostFault& h = hosts[s.host];
        h.suspect = true;
        for (const auto& line : s.evidence)
          h.evidence.push_back(fmt::format("job {}: {}", job, line));
      }
      std::string hint = runbook::exclude_hint(scheduler, {s.host});
      view.suspects.push_back({s.host, std::move(s.evidence), std::move(hint)});
    }
    if (history->size() > serve::kIncarnationsShown) history->resize(serve::kIncarnationsShown);
    view.incarnations = std::move(*history);
  }

  // The fleet: every host implicated within the window, and the cross-job rule over them.
  std::map<std::string, std::set<std::string>> jobs_of;
  for (const auto& i : *implications) {
    if (!in_window(i.at_ns, now.wall_ns, fleet.cross_job_window_ns)) continue;
    hosts[i.host].implications++;
    jobs_of[i.host].insert(i.job);
  }
  for (const auto& s : runbook::cross_job_suspects(*implications, fleet, now.wall_ns)) {
    serve::HostFault& h = hosts[s.host];
    h.suspect = true;
    h.evidence.insert(h.evidence.begin(), s.evidence.begin(), s.evidence.end());
  }
  for (auto& [name, h] : hosts) {
    h.host = name;
    h.jobs_implicated = static_cast<int>(jobs_of[name].size());
    snap->hosts.push_back(std::move(h));
  }
  std::lock_guard lock(mu_);
  node_faults_ = std::move(snap);
}

std::shared_ptr<const serve::NodeFaultSnapshot> Agent::node_faults() const {
  std::lock_guard lock(mu_);
  return node_faults_;
}

}  // namespace stepwatch::agent
