// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/agent/job_leader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

namespace stepwatch::agent {

namespace {

// The nodes with ranks of the job, each once, sorted.
std::vector<std::string> nodes_of(const detect::Observation* obs) {
  std::set<std::string> nodes;
  if (obs) {
    for (const auto& r : obs->ranks) nodes.insert(r.host);
  }
  return {nodes.begin(), nodes.end()};
}

}  // namespace

// The host of the job's incident while this node leads it: pages are acked on any node, the
// preempt is an order every node carries out on its own proven processes, and what follows is
// the after-preempt sequence over the job's incarnation in etcd.
class JobLeader::Host final : public runbook::IncidentHost {
 public:
  explicit Host(JobLeader& leader) : l_(leader) {}
  runbook::PageMessage page(const detect::Verdict& v) override { return l_.d_.node.job_page(v); }
  void log(LogLevel level, const std::string& line) override { l_.d_.node.log(level, line); }
  bool may_open(const detect::Verdict& v, Stamp now) override {
    return l_.d_.node.may_open(v, now);
  }
  std::optional<std::string> refuse_act() override {
    if (auto no = l_.d_.node.may_carry_out()) return no;
    if (!l_.session_.may_act(l_.now_))
      return std::string("this node's lease is not fresh enough to order a preempt: waiting");
    return std::nullopt;
  }
  runbook::PreemptTargets targets() override {
    // Every node proves and ends its own ranks (an order); these refs only say which ranks the
    // preempt is for.
    runbook::PreemptTargets out;
    if (!l_.seen_) return out;
    for (const auto& r : l_.seen_->ranks) {
      if (r.status != contract::RankStatus::kRunning || r.pid <= 0) continue;
      out.processes.push_back(
          {{r.pid, r.pid_start_ticks}, fmt::format("rank {} on {}", r.rank, r.host)});
    }
    return out;
  }
  std::future<runbook::ActReport> act(const detect::Verdict& v, int64_t incident_id,
                                      runbook::PreemptTargets) override {
    l_.note_acted_on(v);
    return l_.order_preempt(incident_id);
  }
  runbook::AfterPreempt after_preempt(const runbook::ActReport& report) override {
    return l_.after_preempt(report);
  }
  void recorded(int64_t id, bool created) override { l_.d_.node.recorded(id, created); }
  void ledger_failed(const Error& e) override {
    l_.d_.node.problem(fmt::format("job {}: its incident in etcd: {}", l_.d_.job, e.message));
  }
  void counted(std::string_view action_kind) override { l_.d_.node.counted(action_kind); }
  // The stall was paged before this incident (etcd lost its data since; or this node paged it
  // itself while etcd did not answer): joined, not paged again.
  std::optional<PagedElsewhere> paged_as(const detect::Verdict&) override {
    return l_.paged_as(l_.incarnation_);
  }
  // A previous leader's preempt order of the incident this one adopts: signed again here and
  // its reports gathered, rather than waited out afresh (its ranks already ended on some nodes).
  std::optional<std::future<runbook::ActReport>> act_under_way(
      int64_t incident_id, const detect::Verdict& acted_on) override {
    return l_.take_up_order(incident_id, acted_on);
  }

 private:
  JobLeader& l_;
};

JobLeader::JobLeader(JobLeaderDeps deps)
    : d_(std::move(deps)),
      session_(d_.session),
      keys_(coord::ledger_keys(session_, d_.job)),
      coord_(session_, d_.job, d_.publish_interval_ns, d_.steady_window_ns),
      orders_(d_.etcd, session_.bad(), session_.job_key(d_.job), keys_.node, keys_.fence_key),
      history_(d_.etcd, d_.prefix, keys_.fence_key, [this] { return coord_.fence(); }) {}

JobLeader::~JobLeader() = default;

watch::ClusterState JobLeader::amend(detect::Observation& obs, uint64_t poll_seq, Stamp now) {
  bool led = coord_.leads();
  coord::NodeSummary s;
  s.node = node_name();
  s.poll_seq = poll_seq;
  for (const auto& r : obs.ranks) s.incarnation = std::max<int64_t>(s.incarnation, r.incarnation);
  s.observation = obs;
  // Steady: this node's own verdict at its last look was healthy (a leader's is the job's).
  const int64_t incarnation = s.incarnation;
  if (d_.read_ahead && !coord_.leads() && session_.connected()) {
    std::vector<coord::Read> reads = coord_.next_reads(now);
    for (auto& r : orders_.poll_reads()) reads.push_back(std::move(r));
    // Failed: nothing held, and each read is made on its own (and fails or not) as before.
    if (reads.size() > 1) (void)d_.read_ahead->prefetch(reads);
  }
  coord_.poll(std::move(s), coord::publish_cue(obs, last_state_ == detect::State::kHealthy), now);
  if (coord_.leads()) {
    int world = 0;
    for (const auto& r : obs.ranks) world = std::max(world, r.world_size);
    if (!led) {
      // Taking the job over: the nodes a previous leader knew of this run, even silent ones.
      auto roster = orders_.roster();
      if (roster && *roster && (*roster)->first == incarnation)
        coord_.remember((*roster)->second, world, incarnation, now);
    }
    // A node silent since an earlier run is not a silent rank of this one.
    std::vector<const coord::Received*> remote;
    for (const auto* r : coord_.remote()) {
      if (!r->lapsed_mono_ns || r->summary.incarnation >= incarnation) remote.push_back(r);
    }
    coord::Merged m = coord::merge(obs, node_name(), remote, now);
    for (const auto& p : m.problems) d_.node.problem(fmt::format("job {}: {}", d_.job, p));
    obs = std::move(m.observation);
    keep_roster(obs, !led);
  }
  watch::ClusterState c;
  c.node = node_name();
  c.leader = coord_.leader();
  c.leads = coord_.leads();
  c.connected = session_.connected();
  c.nodes = coord_.nodes(now);
  return c;
}

std::vector<std::string> JobLeader::run_nodes() const {
  // The roster of the run (every node the leader knew ranks on), else the nodes of the last look.
  std::vector<std::string> out;
  for (const auto& [node, ranks] : roster_written_) out.push_back(node);
  return out.empty() ? nodes_of(seen_) : out;
}

void JobLeader::keep_roster(const detect::Observation& merged, bool took_over) {
  std::map<std::string, std::vector<int>> nodes;
  int64_t incarnation = 0;
  for (const auto& r : merged.ranks) {
    nodes[r.host].push_back(r.rank);
    incarnation = std::max<int64_t>(incarnation, r.incarnation);
  }
  if (!took_over && nodes == roster_written_) return;
  if (auto st = orders_.write_roster(incarnation, nodes, coord_.fence()); !st) {
    session_.note_failure(st.error());
    return;
  }
  roster_written_ = std::move(nodes);
}

std::optional<runbook::IncidentHost::PagedElsewhere> JobLeader::paged_as(int64_t incarnation) {
  // A delivery of the job's page that finished since the last reap counts: this node's own
  // incident may open in the very poll that lost etcd (E14); one kept across a restart too.
  take_up_kept();
  if (deliveries_) deliveries_->reap(now_);
  learn_delivered();
  if (!paged_ || paged_->incarnation != incarnation) return std::nullopt;
  return runbook::IncidentHost::PagedElsewhere{paged_->key, paged_->why};
}

void JobLeader::learn_delivered() {
  if (!paging_ || !paging_->delivered || paging_->id <= 0) return;
  paged_ = Paged{std::to_string(paging_->id), paging_incarnation_,
                 fmt::format("incident {} of the job, paged through etcd by node {}", paging_->id,
                             node_name()),
                 paging_->id};
  paging_.reset();
}

void JobLeader::paged_here(const std::string& key, int64_t incarnation) {
  if (paged_ && paged_->incarnation == incarnation) return;  // the job's page comes first
  paged_ =
      Paged{key, incarnation,
            fmt::format("this node's own incident {}, paged while etcd did not answer it", key), 0};
}

void JobLeader::keep_checkpoint(Stamp now) {
  if (!seen_) return;
  // Every poll of the leader: one pass over the ranks, and no more unless it moved forward.
  auto common = committed_by_every_rank(*seen_);
  if (!common || (checkpoint_written_ && common->step <= *checkpoint_written_)) return;
  // Every rank of the world in the look (not a leader alone before the others published).
  std::set<int> ranks;
  int world = seen_->world_size;
  for (const auto& r : seen_->ranks) {
    ranks.insert(r.rank);
    world = std::max(world, r.world_size);
  }
  if (world <= 0 || static_cast<int>(ranks.size()) < world) return;
  coord::CheckpointRecord c{common->id, common->step, incarnation_, node_name(), now.wall_ns};
  auto moved = orders_.advance_checkpoint(c, coord_.fence());
  if (!moved) {
    session_.note_failure(moved.error());
    return;
  }
  // Not moved: the key names it or a newer one already (or the fence failed: this node leads
  // no more, and forgets it in step()).
  checkpoint_written_ = common->step;
}

void JobLeader::step(const detect::Verdict& v, const detect::Observation& seen, int64_t incarnation,
                     Stamp now) {
  take_up_kept();
  now_ = now;
  incarnation_ = incarnation;
  seen_ = &seen;
  last_state_ = v.state;
  coord_.settle(v.state == detect::State::kHealthy, now);
  if (!coord_.leads()) checkpoint_written_.reset();  // a next term reads the key again
  // The job steps again: a next stall is a new one, whatever was paged before.
  if (v.state == detect::State::kHealthy || v.state == detect::State::kSlow) paged_.reset();
  if (session_.connected()) follow_orders(v, now);
  if (coord_.leads() && session_.connected() && session_.rejoining(now)) {
    // Every node's lease lapsed with this one's (etcd paused): the others re-publish within a
    // TTL, and their absence meanwhile is no stall of theirs (a false rank-silent page).
    if (!told_rejoining_)
      d_.node.log(LogLevel::kInfo,
                  "leading again after a lapsed lease: judging the other nodes' absence only "
                  "once they had a lease TTL to publish again");
    told_rejoining_ = true;
  } else if (coord_.leads() && session_.connected()) {
    told_rejoining_ = false;
    lead(v, now);
  } else if (incident_) {
    // Even mid-preempt: the next leader finds the order in etcd and gathers the reports itself.
    if (!session_.connected()) {
      d_.node.log(LogLevel::kInfo,
                  "etcd does not answer: this node leads it no more (its incident is in etcd, "
                  "for the leader to go on with)");
    } else {
      d_.node.log(LogLevel::kInfo,
                  fmt::format("this node no longer leads it ({} does): its incident is theirs",
                              coord_.leader().empty() ? "unknown" : coord_.leader()));
    }
    stop_leading();
  }
  if (deliveries_) deliveries_->reap(now);
  learn_delivered();
  if (d_.read_ahead) d_.read_ahead->forget();
  seen_ = nullptr;
}

void JobLeader::make_ledger(std::vector<store::KeptDelivery> kept) {
  if (ledger_) return;
  ledger_ = std::make_unique<coord::EtcdLedger>(d_.etcd, d_.job, keys_,
                                                [this] { return coord_.fence(); });
  runbook::DeliverySink sink;
  sink.log = [this](LogLevel level, const std::string&, const std::string& line) {
    d_.node.log(level, line);
  };
  sink.counted = [this](const std::string&, std::string_view kind) { d_.node.counted(kind); };
  sink.keep = [this](const std::string& job, int64_t id, int64_t at_ns,
                     const runbook::DeliveryOutcome& out) {
    const int64_t incarnation = paging_ && paging_->id == id ? paging_incarnation_ : incarnation_;
    d_.node.keep_delivery(
        store::KeptDelivery{job, id, incarnation, at_ns, out.summary, out.delivered});
  };
  sink.forget = [this](const std::string&, int64_t id) { d_.node.forget_delivery(id); };
  deliveries_ = std::make_unique<runbook::PageDeliveries>(*ledger_, d_.pager, std::move(sink));
  host_ = std::make_unique<Host>(*this);
  for (auto& k : kept) {
    d_.node.log(LogLevel::kInfo,
                fmt::format("incident {}: its page was delivered from this node before the agent "
                            "restarted, and etcd did not take that then: recording it, never "
                            "sending it again ({})",
                            k.incident_id, k.summary));
    // What this node paged, for its own incidents to join while etcd does not answer (E16).
    if (k.delivered)
      paged_ = Paged{std::to_string(k.incident_id), k.incarnation,
                     fmt::format("incident {} of the job, paged from this node before its agent "
                                 "restarted",
                                 k.incident_id),
                     k.incident_id};
    deliveries_->take_kept(k.job, k.incident_id, k.at_ns,
                           runbook::DeliveryOutcome{std::move(k.summary), k.delivered});
  }
}

void JobLeader::take_up_kept() {
  // Deliveries this node kept across a restart are recorded whether or not it leads (E14).
  if (ledger_ || looked_for_kept_) return;
  looked_for_kept_ = true;
  if (auto kept = d_.node.kept_deliveries(); !kept.empty()) make_ledger(std::move(kept));
}

void JobLeader::lead(const detect::Verdict& v, Stamp now) {
  gather_reports(now);
  keep_checkpoint(now);
  if (!incident_) {
    make_ledger();
    // A fresh runbook adopts the job's open incident from etcd, where the previous leader left
    // it: its page is not sent again unless it was claimed and never delivered.
    // A page another node claimed is delivered here only once that node had a lease TTL to
    // record its delivery (it records it unfenced, once etcd answers it: E14).
    auto policy = runbook::IncidentPolicy::from_spec(d_.spec);
    policy.adopted_claim_wait_ns = session_.options().ttl_ns;
    incident_ = std::make_unique<runbook::Incident>(runbook::IncidentScope{d_.job, 0, 0}, policy,
                                                    *ledger_, *host_, *deliveries_);
    LeaderResumeDeps rd{d_.job,
                        node_name(),
                        orders_,
                        *ledger_,
                        d_.history,
                        *deliveries_,
                        d_.spec.runbook.pagers,
                        [this] { return coord_.fence(); },
                        [this] { return incarnation_; },
                        [this] { return d_.node.job_page(acted_on_); },
                        [this] { return incident_.get(); },
                        [this](const std::string& line) { d_.node.problem(line); },
                        d_.owner_uid,
                        [this] { return run_nodes(); },
                        d_.restart_wait_ns,
                        d_.spec.runbook.resume_owner == spec::ResumeOwner::kKubernetes};
    owner_ = runbook::make_resume_owner(d_.spec);
    resume_host_ = std::make_unique<LeaderResume>(std::move(rd));
    resume_ = std::make_unique<runbook::Resume>(runbook::ResumePolicy::from_spec(d_.job, d_.spec),
                                                *owner_, *resume_host_);
    take_up_storm_hold();  // one a previous leader marked stands
    if (!resume_->holding()) take_up_barrier();
  }
  // The incarnation alone tells runs apart: wall clocks of other hosts are not compared.
  incident_->set_run(incarnation_, 0);
  const bool was_open = incident_->is_open();
  if (resume_->holding()) {
    // Held after a restart storm: the preempted ranks' verdict neither recovers nor ends the
    // incident; only the ack (or a next incarnation started by someone else) does.
    resume_->poll(now);
  } else {
    incident_->step(v, now);
  }
  // A record written over the open incident is set aside and the incident restored at once,
  // whatever the runbook reads at this turn: it stays listed and ackable on every node (E15).
  if (auto id = incident_->id(); id && *id > 0) {
    if (auto kept = ledger_->get(*id); !kept) session_.note_failure(kept.error());
  }
  // What every node joins once etcd is gone (E16): the job's incident once its page reached
  // someone, until it closes.
  if (auto key = incident_->delivered_key()) {
    paged_ = Paged{*key, incarnation_,
                   fmt::format("incident {} of the job, paged through etcd by node {}",
                               *incident_->id(), node_name()),
                   *incident_->id()};
    paging_.reset();
  } else if (incident_->is_open()) {
    paging_ = incident_->record();  // delivered later, maybe once this node leads no more
    paging_incarnation_ = incarnation_;
  } else if (was_open) {
    paged_.reset();
    paging_.reset();
  }
}

void JobLeader::stop_leading() {
  // A hold is marked in the incarnation key: the next leader takes it up.
  resume_.reset();
  resume_host_.reset();
  owner_.reset();
  incident_.reset();
  act_.reset();
}

void JobLeader::follow_orders(const detect::Verdict& v, Stamp now) {
  if (order_act_ && order_act_->wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    runbook::ActReport r = order_act_->get();
    order_act_.reset();
    coord::Order o = *order_running_;
    order_running_.reset();
    coord::Done d;
    d.ok = r.preempt.ok;
    d.artifact = r.artifact.value_or("");
    d.summary = r.preempt.summary();
    d.at_ns = now.wall_ns;
    for (const auto& p : r.preempt.processes) {
      d.processes.push_back({p.process.pid, p.process.label, p.gone(), p.describe()});
      if (p.gone()) {
        ended_by_orders_.insert(p.process.pid);
        orders_that_ended_ranks_here_.insert(o.incident);
      }
    }
    auto sent = orders_.report(o.incident, d);
    if (!sent) {
      session_.note_failure(sent.error());
      order_running_ = o;  // reported next poll: the processes are gone, the report is not
      order_act_.emplace(std::async(std::launch::deferred, [r] { return r; }));
      return;
    }
    orders_done_.insert(o.incident);
    preempted_incarnation_ = std::max(preempted_incarnation_, o.incarnation);
    d_.node.log(LogLevel::kInfo,
                fmt::format("incident {}: preempted on this node ({}) as ordered by {}: {}",
                            o.incident, node_name(), o.by, d.summary));
    store::Action a;
    a.job = d_.job;
    a.at_ns = now.wall_ns;
    a.kind = std::string(store::action_kind::kPreempt);
    a.ok = d.ok;
    a.detail =
        fmt::format("ordered by {} for the job's incident {}: {}", o.by, o.incident, d.summary);
    d_.node.carried_out(a);
  }
  if (order_act_) return;  // one at a time
  auto orders = orders_.orders();
  if (!orders) {
    session_.note_failure(orders.error());
    return;
  }
  // Said once per order (as it stands: a next leader's signature makes it another): a refusal,
  // never a report.
  auto refuse = [&](const coord::Order& o, const std::string& why) {
    if (orders_refused_.size() > 1024) orders_refused_.clear();  // said again, at worst
    if (orders_refused_.insert({o.incident, o.by, o.fence}).second)
      d_.node.problem(fmt::format("job {}: order {} not carried out: {}", d_.job, o.incident, why));
  };
  for (const auto& o : *orders) {
    // Each order is read from etcd once: carried out (done), or refused as it stands.
    if (orders_done_.count(o.incident) || orders_refused_.count({o.incident, o.by, o.fence}))
      continue;
    auto already = orders_.reported(o.incident);
    if (!already) {
      session_.note_failure(already.error());
      return;
    }
    if (*already) {  // reported before this agent (re)started: never carried out twice
      orders_done_.insert(o.incident);
      continue;
    }
    if (auto why = unsigned_by_leader(o)) {
      refuse(o, *why);
      continue;
    }
    auto proof = unproven(o);
    if (!proof) {
      session_.note_failure(proof.error());
      return;
    }
    if (*proof) {
      refuse(o, **proof);  // not the job's open incident: whoever wrote it, not carried out
      continue;
    }
    coord::Done d;
    d.at_ns = now.wall_ns;
    if (o.incarnation != incarnation_) {  // an order for another run never ends this one
      d.ok = true;
      d.summary = fmt::format("incarnation {} does not run here (this node runs {})", o.incarnation,
                              incarnation_);
      auto sent = orders_.report(o.incident, d);
      if (!sent) {
        session_.note_failure(sent.error());
        return;
      }
      orders_done_.insert(o.incident);
      continue;
    }
    // This node's own rules for its processes: the job must be one it may preempt.
    std::optional<std::string> refused = d_.node.may_carry_out();
    runbook::PreemptTargets targets;
    if (!refused) targets = d_.node.targets();
    if (refused || targets.processes.empty()) {
      d.ok = !refused && targets.refused.empty();
      d.refused = !refused           ? targets.refused
                  : refused->empty() ? std::string(
                                           "this node's agent does not list the job in "
                                           "preempt_jobs")
                                     : *refused;
      d.summary = refused ? "" : "no process of the job runs here";
      auto sent = orders_.report(o.incident, d);
      if (!sent) {
        session_.note_failure(sent.error());
        return;
      }
      orders_done_.insert(o.incident);
      d_.node.log(LogLevel::kInfo,
                  fmt::format("incident {}: ordered to preempt by {}: {}", o.incident, o.by,
                              refused ? "refused: " + *refused : d.summary));
      continue;
    }
    targets.collect = o.collect;
    d_.node.log(LogLevel::kWarn,
                fmt::format("incident {}: preempting {} proven process(es) here, as ordered by {}",
                            o.incident, targets.processes.size(), o.by));
    order_running_ = o;
    order_act_ = d_.node.act(v, o.incident, std::move(targets));
    return;
  }
}

std::optional<std::string> JobLeader::unsigned_by_leader(const coord::Order& o) const {
  if (!coord_.leader().empty() && o.by == coord_.leader() && o.fence == coord_.leader_fence())
    return std::nullopt;
  return fmt::format(
      "it is not signed by the job's leader of now ({}, fence {}) but by "
      "\"{:.80}\", fence {}",
      coord_.leader().empty() ? "unknown" : coord_.leader(), coord_.leader_fence(), o.by, o.fence);
}

Result<std::optional<std::string>> JobLeader::unproven(const coord::Order& o) {
  using Why = std::optional<std::string>;
  auto open = coord::open_incident(d_.etcd, keys_, session_.bad());
  if (!open) return open.error();
  if (!*open) return Why{"the job has no open incident in etcd"};
  if ((*open)->id != o.incident)
    return Why{fmt::format("the job's open incident in etcd is {}", (*open)->id)};
  if (o.revision <= (*open)->create_revision)
    return Why{"it was written before the incident it names"};
  return Why{};
}

void JobLeader::gather_reports(Stamp now) {
  if (!act_) return;
  auto reports = orders_.reports(act_->incident);
  if (!reports) {
    session_.note_failure(reports.error());
    return;
  }
  std::set<std::string> have;
  for (const auto& d : *reports) have.insert(d.node);
  std::vector<std::string> missing;
  for (const auto& n : act_->nodes) {
    if (!have.count(n)) missing.push_back(n);
  }
  // A node that cannot report (dead, cut off) holds the runbook up to the preempt grace and a
  // minute: then its processes are reported as not known to be gone.
  int64_t limit = d_.spec.runbook.preempt_grace_ns + 60 * kNsPerSec;
  if (!missing.empty() && now.mono_ns - act_->ordered_mono_ns < limit) return;
  act_->done.set_value(coord::merged_report(*reports, missing));
  act_.reset();
}

std::optional<std::future<runbook::ActReport>> JobLeader::take_up_order(
    int64_t incident, const detect::Verdict& acted_on) {
  auto orders = orders_.orders();
  if (!orders) {
    session_.note_failure(orders.error());
    return std::nullopt;  // the incident waits as a fresh one, and orders it again itself
  }
  auto o = std::find_if(orders->begin(), orders->end(),
                        [&](const coord::Order& x) { return x.incident == incident; });
  // Of this run only; under this node's rules (the adopted incident says it refuses); and only
  // for a job this node sees stalled, or whose ranks here that order ended: an order in etcd is
  // input, never by itself a reason to end a job that runs.
  if (o == orders->end() || o->incarnation != incarnation_ || d_.node.may_carry_out() ||
      !(detect::fires_runbook(last_state_) || orders_that_ended_ranks_here_.count(incident)))
    return std::nullopt;
  d_.node.log(
      LogLevel::kWarn,
      fmt::format("incident {}: the preempt that \"{:.80}\" ordered is taken up by this "
                  "node, the job's leader now: the nodes that have not carried it out do so",
                  incident, o->by));
  note_acted_on(acted_on);
  return order_preempt(incident);
}

void JobLeader::note_acted_on(const detect::Verdict& v) {
  acted_on_ = {};
  acted_on_.state = v.state;  // what the incarnation's end records (not its ranks)
  acted_on_.cause = v.cause;
  acted_on_.culprits = v.culprits;
}

std::future<runbook::ActReport> JobLeader::order_preempt(int64_t incident) {
  coord::Order o;
  o.incident = incident;
  o.incarnation = incarnation_;
  o.by = node_name();
  o.at_ns = wall_now_ns();
  auto ordered = orders_.order(o, coord_.fence());
  if (!ordered) {
    runbook::ActReport failed;
    runbook::ProcessOutcome why;
    why.process.label = "every node";
    why.note = "the preempt order was not written: " + ordered.error().message;
    failed.preempt.survivors.push_back(why.process);
    failed.preempt.processes.push_back(std::move(why));
    std::promise<runbook::ActReport> p;
    p.set_value(std::move(failed));
    return p.get_future();
  }
  JobAct ja;
  ja.incident = incident;
  ja.ordered_mono_ns = now_.mono_ns;
  ja.nodes = nodes_of(seen_);
  d_.node.log(
      LogLevel::kWarn,
      fmt::format("incident {}: {} every node ({}) to collect and preempt its proven "
                  "processes",
                  incident, *ordered ? "ordered" : "already ordered:", fmt::join(ja.nodes, ", ")));
  auto f = ja.done.get_future();
  act_ = std::move(ja);
  return f;
}

runbook::AfterPreempt JobLeader::after_preempt(const runbook::ActReport& report) {
  if (!report.preempt.ok) return {false, ""};  // survivors: paged again, kept open
  std::vector<std::string> nodes = nodes_of(seen_);
  runbook::Preempted p;
  p.done = fmt::format("preempted on {} node(s) ({})", nodes.size(), fmt::join(nodes, ", "));
  // The incarnation ended here, with the verdict it was preempted on (the job's history).
  d_.node.ended("preempted", acted_on_, now_);
  // Acks are stamped by the API threads' wall clock: a hold's start must compare with them.
  const Stamp now{wall_now_ns(), now_.mono_ns};
  p.next = resume_host_->next(incident_ && incident_->id() ? *incident_->id() : 0,
                              seen_ ? committed_by_every_rank(*seen_) : std::nullopt);
  if (!d_.spec.runbook.resume) return resume_->after_preempt(p, now);
  // First: the incarnation key also records a requeue, and a next leader that finds it moved
  // does not act (by then Slurm may have ended the launchers too).
  auto from = orders_.incarnation();
  if (!from) return {true, p.done + "; not relaunched: " + from.error().message};
  if (from->record.incarnation != incarnation_) {
    return {true, fmt::format("{}; incarnation {} was started already", p.done,
                              from->record.incarnation)};
  }
  auto launchers = orders_.launchers();
  if (!launchers) return {true, p.done + "; not relaunched: " + launchers.error().message};
  if (launchers->empty()) {
    return {true, p.done + "; no `stepwatch run --coord` runs for the job: nothing relaunches it"};
  }
  if (p.next.incident > 0 && from->record.hold_incident == p.next.incident) {
    // A previous leader held it: the hold stands (paged already), as of when it was marked.
    take_up_storm_hold(from->record, p.done);
    return {false, "", true};
  }
  return resume_->after_preempt(p, now);
}

void JobLeader::take_up_storm_hold() {
  if (auto held = resume_host_->marked_hold())
    take_up_storm_hold(*held, "preempted under a previous leader");
}

void JobLeader::take_up_barrier() {
  auto at = resume_host_->pending_barrier();
  if (!at) return;
  d_.node.log(
      LogLevel::kInfo,
      fmt::format("incident {}: taking up the start barrier of incarnation {} that {} set",
                  at->incident, at->incarnation, at->by.empty() ? "a previous leader" : at->by));
  runbook::NextIncarnation next;
  next.incarnation = at->incarnation;
  next.incident = at->incident;
  if (!at->resume_from.empty())
    next.from = runbook::ResumePoint{at->resume_from, at->resume_step.value_or(0), ""};
  resume_->take_up_hand_over(std::move(next), "preempted under a previous leader");
}

void JobLeader::take_up_storm_hold(const coord::IncarnationRecord& held, const std::string& done) {
  d_.node.log(
      LogLevel::kInfo,
      fmt::format("incident {}: taking up the restart-storm hold {} marked: {}", held.hold_incident,
                  held.by.empty() ? "a previous leader" : held.by, held.hold));
  // The checkpoint it decided on: this leader may no longer see every rank's.
  std::optional<runbook::ResumePoint> from;
  if (!held.hold_resume_from.empty())
    from = runbook::ResumePoint{held.hold_resume_from, held.hold_resume_step.value_or(0), ""};
  resume_->take_up(resume_host_->next(held.hold_incident, std::move(from)), held.at_ns, done);
}

void JobLeader::share_view(watch::JobState& state, Stamp now) {
  showing_view_ = false;
  if (!session_.connected()) return;
  if (coord_.leads()) {
    const std::string waiting = resume_host_ ? resume_host_->waiting() : std::string();
    if (!waiting.empty()) {
      // The next incarnation waits for a node: part of the job's verdict, on every node.
      state.verdict.evidence.push_back(
          {"restart", waiting, -1, now.mono_ns - resume_host_->waiting_since_mono_ns()});
    }
    const std::string paged = paged_ && paged_->incident > 0 ? paged_->key : "";
    const std::string said =
        fmt::format("{}/{} {} {} {}", detect::state_name(state.verdict.state),
                    detect::cause_name(state.verdict.cause), state.verdict.summary, waiting, paged);
    bool due =
        !view_written_mono_ns_ || now.mono_ns - *view_written_mono_ns_ >= d_.publish_interval_ns;
    if (said == view_written_ && !due) return;
    coord::JobView v;
    v.leader = node_name();
    v.at_wall_ns = now.wall_ns;
    v.verdict = state.verdict;
    v.observation = state.observation;
    if (state.cluster) v.nodes = state.cluster->nodes;
    v.paged_key = paged;
    v.paged_incident = paged.empty() ? 0 : paged_->incident;
    v.paged_incarnation = paged.empty() ? 0 : paged_->incarnation;
    if (auto st = orders_.write_view(v, coord_.fence()); !st) {
      session_.note_failure(st.error());
      return;
    }
    view_written_ = said;
    view_written_mono_ns_ = now.mono_ns;
    return;
  }
  auto v = orders_.view();
  if (!v) {
    d_.node.problem(fmt::format("job {}: the leader's view: {}", d_.job, v.error().message));
    return;
  }
  const coord::JobView* view = *v;
  if (!view || view->leader != coord_.leader()) return;  // none yet, or an earlier leader's
  learn_paged(*view);
  // The job's verdict is the leader's; ages are as the leader last judged them, and its ranks'
  // monotonic stamps are of the leader's clock: shown by wall time here. A large job's view is
  // compact (no ranks' records): this node shows its own ranks under the job's verdict.
  showing_view_ = true;
  state.verdict = view->verdict;
  if (view->compact) {
    own_ = state.observation;
  } else {
    own_ = std::move(state.observation);
    state.observation = view->observation;
    state.observation.one_clock = false;
    state.observation.local_host.clear();
  }
  // Every node as the leader knows it, its summary ages as of the leader's look.
  if (state.cluster && !view->nodes.empty()) state.cluster->nodes = view->nodes;
}

void JobLeader::learn_paged(const coord::JobView& view) {
  if (view.paged_key.empty()) {
    paged_.reset();  // the leader's incident closed, or has not paged yet
    return;
  }
  if (paged_ && paged_->key == view.paged_key) return;
  // A view is anyone's to write under the prefix: its page is believed only when the incident
  // it names is the job's open one in etcd, opened by the view's leader, its delivery recorded
  // (one read per new key).
  auto open = coord::open_incident(d_.etcd, keys_, session_.bad());
  if (!open) {
    session_.note_failure(open.error());
    return;
  }
  if (!*open || (*open)->id != view.paged_incident || (*open)->opened_by != view.leader ||
      !(*open)->delivered) {
    if (told_unproven_paged_ != view.paged_key)
      d_.node.log(LogLevel::kWarn,
                  fmt::format("the job's view says incident {} was paged ({}), but it is not "
                              "the job's open incident in etcd that its leader {} opened and "
                              "recorded as delivered: not believed",
                              view.paged_incident, view.paged_key, view.leader));
    told_unproven_paged_ = view.paged_key;
    return;
  }
  paged_ = Paged{view.paged_key, view.paged_incarnation,
                 fmt::format("incident {} of the job, paged through etcd by node {}",
                             view.paged_incident, view.leader),
                 view.paged_incident};
}

bool JobLeader::unattended(const detect::Verdict& v, Stamp now) {
  // A stall only: ranks that ended (dead, failed) may have ended under the job's own preempt or
  // requeue, whose incident closed; nor after an order of this run was carried out here. Nor
  // within a TTL of this node's lease replacing an expired one: whatever lapsed it (etcd paused,
  // restarted, lost) lapsed the leader's too, and a rejoining leader judges nothing for a TTL.
  if (coord_.leads() || !session_.connected() || session_.rejoining(now) ||
      v.state != detect::State::kStalled || preempting() ||
      preempted_incarnation_ >= incarnation_) {
    firing_since_mono_ns_.reset();
    return false;
  }
  if (!firing_since_mono_ns_) firing_since_mono_ns_ = now.mono_ns;
  if (now.mono_ns - *firing_since_mono_ns_ <= session_.options().ttl_ns) return false;
  int64_t unreadable = 0;
  auto open = coord::open_incident(d_.etcd, keys_, session_.bad(), &unreadable);
  if (!open) {
    session_.note_failure(open.error());
    return false;  // etcd does not answer: the degraded mode pages
  }
  if (unreadable != 0) {
    // A record that does not read where the job's incident is: the leader sets it aside at its
    // next poll (restoring the incident open there, E15). It is given a lease TTL to.
    if (unreadable_seen_.first != unreadable) unreadable_seen_ = {unreadable, now.mono_ns};
    return now.mono_ns - unreadable_seen_.second > session_.options().ttl_ns;
  }
  return !*open;
}

bool JobLeader::preempting() const {
  return order_act_.has_value() || (incident_ && incident_->acting()) ||
         (resume_ && resume_->holding());
}

runbook::HistoryLedger* JobLeader::history_writer() {
  // The job's leader, while etcd answers: nobody else records (nor does a node cut off).
  if (coord_.leads() && session_.connected()) return &history_;
  return nullptr;
}

void JobLeader::close(Stamp now, const std::string& why) {
  if (incident_) incident_->close(now, why);
  // Its summary stays published (its ranks finished, not silent) until the job is forgotten.
}

void JobLeader::wait_pages(Stamp now) {
  if (deliveries_) deliveries_->wait(now);
}

}  // namespace stepwatch::agent
