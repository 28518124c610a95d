// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The only translation unit of the orders that includes nlohmann/json (STYLE rule 11).
#include "src/coord/orders.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "src/common/json_fields.h"
#include "src/coord/records.h"
#include "src/trace/codec.h"

namespace stepwatch::coord {

namespace {

using json = nlohmann::json;

std::string id_key(int64_t id) {
  return fmt::format("{:020d}", id);
}

}  // namespace

JobOrders::JobOrders(Kv& etcd, BadRecords& bad, std::string base, std::string node,
                     std::string fence_key)
    : etcd_(etcd),
      bad_(bad),
      base_(std::move(base)),
      node_(std::move(node)),
      fence_key_(std::move(fence_key)) {}

Result<bool> JobOrders::order(const Order& o, int64_t fence) {
  if (fence == 0) {
    return Error{Errc::kBusy, fmt::format("this node ({}) does not lead the job: no order", node_)};
  }
  std::string key = base_ + "orders/" + id_key(o.incident);
  json j = {{"incident", o.incident}, {"incarnation", o.incarnation},
            {"collect", o.collect},   {"by", node_},
            {"fence", fence},         {"at_ns", o.at_ns}};
  // Created once; a previous leader's order of the incident is signed again by this one, since
  // the nodes carry out only an order of the leader of now (the nodes that carried it out
  // already have reported, and do not act twice).
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto t = etcd_.txn({Compare::create_rev(key, 0), Compare::create_rev(fence_key_, fence)},
                       {TxnOp::put(key, j.dump())}, {TxnOp::get(key)});
    if (!t) return t.error();
    if (t->succeeded) return true;
    if (t->ranges.empty() || t->ranges[0].kvs.empty()) break;  // the fence failed
    const KeyValue& held = t->ranges[0].kvs[0];
    auto was = order_of(held);
    if (was && was->by == node_ && was->fence == fence) return false;  // ordered before
    auto re = etcd_.txn(
        {Compare::mod_rev(key, held.mod_revision), Compare::create_rev(fence_key_, fence)},
        {TxnOp::put(key, j.dump())}, {TxnOp::get(fence_key_)});
    if (!re) return re.error();
    if (re->succeeded) return false;
    if (!fence_held(*re, fence)) break;
  }
  return Error{Errc::kBusy, fmt::format("ordering incident {}'s preempt was refused by the fence: "
                                        "this node ({}) no longer leads the job",
                                        o.incident, node_)};
}

Result<Order> JobOrders::order_of(const KeyValue& kv) {
  using namespace json_fields;
  Order o;
  auto st = read_record(kv, "an order", [&](const json& j) {
    o.incident = as_int(need(j, "incident"), "incident");
    o.incarnation = as_int(need(j, "incarnation"), "incarnation");
    opt(j, "collect", o.collect, as_bool);
    opt(j, "by", o.by, as_str);
    opt(j, "fence", o.fence, as_int);
    opt(j, "at_ns", o.at_ns, as_int);
  });
  if (!st) return st.error();
  o.revision = kv.create_revision;
  return o;
}

std::vector<Read> JobOrders::poll_reads() const {
  return {Read{base_ + "view", RangeOptions{.keys_only = true}},
          Read{base_ + "orders/", RangeOptions{.prefix = true}}};
}

Result<std::vector<Order>> JobOrders::orders() {
  auto r = etcd_.range(base_ + "orders/", RangeOptions{.prefix = true});
  if (!r) return r.error();
  std::vector<Order> out;
  for (const auto& kv : r->kvs) {
    auto o = order_of(kv);
    if (!o) {
      bad_.skip(kv, o.error());
      continue;
    }
    out.push_back(std::move(*o));
  }
  return out;
}

Result<bool> JobOrders::report(int64_t incident, const Done& d) {
  std::string key = base_ + "done/" + id_key(incident) + "/" + node_;
  json procs = json::array();
  for (const auto& p : d.processes) {
    procs.push_back(
        {{"pid", p.pid}, {"label", p.label}, {"gone", p.gone}, {"describe", p.describe}});
  }
  json j = {{"node", node_},          {"ok", d.ok},           {"refused", d.refused},
            {"artifact", d.artifact}, {"summary", d.summary}, {"processes", procs},
            {"at_ns", d.at_ns}};
  auto t = etcd_.txn({Compare::create_rev(key, 0)}, {TxnOp::put(key, j.dump())});
  if (!t) return t.error();
  return t->succeeded;
}

Result<bool> JobOrders::reported(int64_t incident) {
  RangeOptions o;
  o.keys_only = true;
  auto r = etcd_.range(base_ + "done/" + id_key(incident) + "/" + node_, o);
  if (!r) return r.error();
  return !r->kvs.empty();
}

Result<std::vector<Done>> JobOrders::reports(int64_t incident) {
  RangeOptions all;
  all.prefix = true;
  auto r = etcd_.range(base_ + "done/" + id_key(incident) + "/", all);
  if (!r) return r.error();
  std::vector<Done> out;
  for (const auto& kv : r->kvs) {
    using namespace json_fields;
    Done d;
    auto st = read_record(kv, "a report", [&](const json& j) {
      d.node = as_str(need(j, "node"), "node");
      d.ok = as_bool(need(j, "ok"), "ok");
      opt(j, "refused", d.refused, as_str);
      opt(j, "artifact", d.artifact, as_str);
      opt(j, "summary", d.summary, as_str);
      opt(j, "at_ns", d.at_ns, as_int);
      if (const json* ps = present(j, "processes")) {
        if (!ps->is_array()) throw FieldError{Errc::kParse, "field \"processes\" must be a list"};
        for (const auto& p : *ps) {
          DoneProcess dp;
          dp.pid = static_cast<int>(as_int(need(p, "pid"), "processes.pid"));
          opt(p, "label", dp.label, as_str);
          opt(p, "gone", dp.gone, as_bool);
          opt(p, "describe", dp.describe, as_str);
          d.processes.push_back(std::move(dp));
        }
      }
    });
    // A report is its node's own: one under another node's name is not that node's.
    if (st && kv.key != base_ + "done/" + id_key(incident) + "/" + d.node)
      st = Error{Errc::kInvalidField,
                 fmt::format("etcd key {}: a report of node \"{:.80}\" under another node's name",
                             kv.key, d.node)};
    if (!st) {
      bad_.skip(kv, st.error());
      continue;
    }
    out.push_back(std::move(d));
  }
  return out;
}

Result<JobIncarnation> JobOrders::incarnation() {
  return read_incarnation(etcd_, base_ + "incarnation");
}

Result<bool> JobOrders::advance(const JobIncarnation& from, const IncarnationRecord& to,
                                int64_t fence) {
  if (fence == 0) {
    return Error{Errc::kBusy,
                 fmt::format("this node ({}) does not lead the job: the incarnation stays", node_)};
  }
  return move_incarnation(etcd_, base_ + "incarnation", from, to,
                          {Compare::create_rev(fence_key_, fence)});
}

Result<std::vector<LauncherRecord>> JobOrders::launchers() {
  RangeOptions o;
  o.prefix = true;
  const std::string dir = base_ + "launchers/";  // launchers_prefix(): the same keys
  auto r = etcd_.range(dir, o);
  if (!r) return r.error();
  std::vector<LauncherRecord> out;
  for (const auto& kv : r->kvs) {
    // One that does not read (a forged Slurm job id, say) still counts as a launcher, outside
    // any scheduler, and is said once.
    auto l = launcher_from_json(kv.value, "etcd key " + kv.key);
    if (!l) bad_.skip(kv, l.error());
    LauncherRecord rec = l ? std::move(*l) : LauncherRecord{};
    if (rec.node.empty() && kv.key.size() > dir.size()) rec.node = kv.key.substr(dir.size());
    rec.leased = kv.lease != 0;
    out.push_back(std::move(rec));
  }
  return out;
}

Result<std::optional<StartRecord>> JobOrders::start() {
  auto r = etcd_.range(base_ + "start");
  if (!r) return r.error();
  if (r->kvs.empty()) return std::optional<StartRecord>();
  auto s = start_from_json(r->kvs[0].value, "etcd key " + r->kvs[0].key);
  if (!s) {
    bad_.skip(r->kvs[0], s.error());
    return std::optional<StartRecord>();
  }
  return std::optional<StartRecord>(std::move(*s));
}

Result<bool> JobOrders::release(const StartRecord& s, int64_t fence) {
  if (fence == 0) return false;
  auto t = etcd_.txn({Compare::create_rev(fence_key_, fence)},
                     {TxnOp::put(base_ + "start", start_to_json(s))});
  if (!t) return t.error();
  return t->succeeded;
}

Result<std::optional<CheckpointRecord>> JobOrders::checkpoint() {
  auto r = etcd_.range(base_ + "checkpoint");
  if (!r) return r.error();
  if (r->kvs.empty()) return std::optional<CheckpointRecord>();
  auto c = checkpoint_from_json(r->kvs[0].value, "etcd key " + r->kvs[0].key);
  if (!c) {
    bad_.skip(r->kvs[0], c.error());
    return std::optional<CheckpointRecord>();
  }
  return std::optional<CheckpointRecord>(std::move(*c));
}

Result<bool> JobOrders::advance_checkpoint(const CheckpointRecord& c, int64_t fence) {
  if (fence == 0) return false;
  const std::string key = base_ + "checkpoint";
  auto r = etcd_.range(key);
  if (!r) return r.error();
  Compare as_read = Compare::create_rev(key, 0);
  if (!r->kvs.empty()) {
    as_read = Compare::mod_rev(key, r->kvs[0].mod_revision);
    auto was = checkpoint_from_json(r->kvs[0].value, "etcd key " + key);
    if (was && was->step >= c.step) return false;  // never back
    if (!was) bad_.skip(r->kvs[0], was.error());   // replaced below
  }
  auto t = etcd_.txn({Compare::create_rev(fence_key_, fence), as_read},
                     {TxnOp::put(key, checkpoint_to_json(c))});
  if (!t) return t.error();
  return t->succeeded;
}

Status JobOrders::write_roster(int64_t incarnation,
                               const std::map<std::string, std::vector<int>>& nodes,
                               int64_t fence) {
  if (fence == 0) return Error{Errc::kBusy, "not the leader: no roster"};
  json n = json::object();
  for (const auto& [node, ranks] : nodes) n[node] = ranks;
  json j = {{"incarnation", incarnation}, {"nodes", n}};
  auto t =
      etcd_.txn({Compare::create_rev(fence_key_, fence)}, {TxnOp::put(base_ + "roster", j.dump())});
  if (!t) return t.error();
  if (!t->succeeded) return Error{Errc::kBusy, "the roster was refused by the fence"};
  return {};
}

Result<std::optional<std::pair<int64_t, std::map<std::string, std::vector<int>>>>>
JobOrders::roster() {
  using Out = std::optional<std::pair<int64_t, std::map<std::string, std::vector<int>>>>;
  auto r = etcd_.range(base_ + "roster");
  if (!r) return r.error();
  if (r->kvs.empty()) return Out{};
  std::map<std::string, std::vector<int>> nodes;
  int64_t incarnation = 0;
  auto st = read_record(r->kvs[0], "a roster", [&](const json& j) {
    using namespace json_fields;
    incarnation = as_int(need(j, "incarnation"), "incarnation");
    const json& n = need(j, "nodes");
    if (!n.is_object()) throw FieldError{Errc::kParse, "field \"nodes\" must be an object"};
    for (const auto& [node, ranks] : n.items()) {
      for (int64_t rank : as_ints(ranks, "nodes")) nodes[node].push_back(static_cast<int>(rank));
    }
  });
  if (!st) {
    bad_.skip(r->kvs[0], st.error());
    return Out{};
  }
  return Out{{incarnation, std::move(nodes)}};
}

namespace {

// The view as written: whole, or compact (JobView::compact).
std::string view_json(const JobView& v, bool compact) {
  json obs;
  detect::Verdict verdict;
  const detect::Verdict* judged = &v.verdict;
  if (compact) {
    detect::Observation none;
    none.now = v.observation.now;
    none.world_size = v.observation.world_size;
    obs = json::parse(trace::observation_to_json(none));
    verdict = v.verdict;
    verdict.ranks.clear();
    std::set<int> culprits;
    for (const auto& c : v.verdict.culprits) culprits.insert(c.rank);
    for (int pass = 0; pass < 2; ++pass) {
      for (const auto& r : v.verdict.ranks) {
        if (verdict.ranks.size() >= kCompactViewRanks) break;
        bool culprit = culprits.count(r.rank) > 0;
        if (pass == 0 ? culprit : !culprit && r.state != detect::State::kHealthy)
          verdict.ranks.push_back(r);
      }
    }
    judged = &verdict;
  } else {
    obs = json::parse(trace::observation_to_json(v.observation));
  }
  obs.erase("type");
  json nodes = json::array();
  for (const auto& n : v.nodes) {
    nodes.push_back({{"node", n.node},
                     {"leader", n.leader},
                     {"lapsed", n.lapsed},
                     {"summary_age_ns", n.summary_age_ns},
                     {"ranks", n.ranks}});
  }
  json j = {{"leader", v.leader},
            {"at_wall_ns", v.at_wall_ns},
            {"verdict", json::parse(trace::verdict_to_json(*judged))},
            {"obs", obs},
            {"nodes", nodes}};
  if (compact) j["compact"] = true;
  if (!v.paged_key.empty()) {
    j["paged"] = {
        {"key", v.paged_key}, {"incident", v.paged_incident}, {"incarnation", v.paged_incarnation}};
  }
  return j.dump();
}

}  // namespace

Status JobOrders::write_view(const JobView& v, int64_t fence) {
  if (fence == 0) return Error{Errc::kBusy, "not the leader: no view"};
  std::string text = view_json(v, v.compact);
  if (!v.compact && text.size() > kMaxViewBytes) text = view_json(v, true);
  auto t = etcd_.txn({Compare::create_rev(fence_key_, fence)}, {TxnOp::put(base_ + "view", text)});
  if (!t) return t.error();
  if (!t->succeeded) return Error{Errc::kBusy, "the job's view was refused by the fence"};
  return {};
}

Result<const JobView*> JobOrders::view() {
  auto listed = etcd_.range(base_ + "view", RangeOptions{.keys_only = true});
  if (!listed) return listed.error();
  if (listed->kvs.empty()) {
    view_.reset();
    view_mod_ = 0;
    return nullptr;
  }
  if (listed->kvs[0].mod_revision == view_mod_) return view_ ? &*view_ : nullptr;
  auto r = etcd_.range(base_ + "view");
  if (!r) return r.error();
  if (r->kvs.empty()) return nullptr;
  const KeyValue& kv = r->kvs[0];
  JobView v;
  auto st = read_record(kv, "a view", [&](const json& j) {
    using namespace json_fields;
    v.leader = as_str(need(j, "leader"), "leader");
    v.at_wall_ns = as_int(need(j, "at_wall_ns"), "at_wall_ns");
    opt(j, "compact", v.compact, as_bool);
    if (const json* p = present(j, "paged")) {
      v.paged_key = as_str(need(*p, "key"), "paged.key");
      if (v.paged_key.empty() || v.paged_key.size() > 64)
        throw FieldError{Errc::kParse, "field \"paged.key\" must be 1-64 characters"};
      v.paged_incident = as_int(need(*p, "incident"), "paged.incident");
      v.paged_incarnation = as_int(need(*p, "incarnation"), "paged.incarnation");
    }
    if (const json* ns = present(j, "nodes")) {
      if (!ns->is_array()) throw FieldError{Errc::kParse, "field \"nodes\" must be a list"};
      for (const auto& n : *ns) {
        watch::NodeState node;
        node.node = as_str(need(n, "node"), "nodes.node");
        opt(n, "leader", node.leader, as_bool);
        opt(n, "lapsed", node.lapsed, as_bool);
        node.summary_age_ns = -1;
        opt(n, "summary_age_ns", node.summary_age_ns, as_int);
        if (const json* rs = present(n, "ranks")) {
          for (int64_t rank : as_ints(*rs, "nodes.ranks"))
            node.ranks.push_back(static_cast<int>(rank));
        }
        v.nodes.push_back(std::move(node));
      }
    }
    // Both read in place: never dumped and parsed again (E5).
    auto verdict = trace::verdict_from_value(need(j, "verdict"));
    if (!verdict) throw FieldError{Errc::kParse, "verdict: " + verdict.error().message};
    v.verdict = std::move(*verdict);
    auto o = trace::observation_from_value(need(j, "obs"));
    if (!o) throw FieldError{Errc::kParse, "obs: " + o.error().message};
    v.observation = std::move(*o);
  });
  view_mod_ = kv.mod_revision;
  if (!st) {
    bad_.skip(kv, st.error());
    view_.reset();
    return nullptr;
  }
  view_ = std::move(v);
  return &*view_;
}

runbook::ActReport merged_report(const std::vector<Done>& dones,
                                 const std::vector<std::string>& missing) {
  runbook::ActReport r;
  r.preempt.ok = missing.empty();
  std::string artifacts;
  // A node that did not act stands for its processes: a survivor whose reason is the node's.
  auto not_done = [&r](const std::string& node, const std::string& why) {
    runbook::ProcessOutcome o;
    o.process.label = "node " + node;
    o.after = probe::Liveness::kUnknown;
    o.note = why;
    r.preempt.ok = false;
    r.preempt.survivors.push_back(o.process);
    r.preempt.processes.push_back(std::move(o));
  };
  for (const auto& d : dones) {
    if (!d.refused.empty()) {
      not_done(d.node, "refused: " + d.refused);
      continue;
    }
    r.preempt.ok = r.preempt.ok && d.ok;
    if (!d.artifact.empty())
      artifacts += fmt::format("{}{}: {}", artifacts.empty() ? "" : "; ", d.node, d.artifact);
    for (const auto& p : d.processes) {
      runbook::ProcessOutcome o;
      o.process.pid = p.pid;
      o.process.label = fmt::format("{} on {}", p.label, d.node);
      o.after = p.gone ? probe::Liveness::kGone : probe::Liveness::kAlive;
      o.note = p.gone ? "" : p.describe;
      if (!p.gone) r.preempt.survivors.push_back(o.process);
      r.preempt.processes.push_back(std::move(o));
    }
  }
  for (const auto& n : missing) not_done(n, "did not report (its agent is down or cut off)");
  if (!artifacts.empty()) r.artifact = "artifacts: " + artifacts;
  return r;
}

}  // namespace stepwatch::coord
