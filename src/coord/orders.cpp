// The only translation unit of the orders that includes nlohmann/json (STYLE rule 11).
#include "src/coord/orders.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "src/trace/codec.h"

namespace stepwatch::coord {

namespace {

using json = nlohmann::json;

std::string id_key(int64_t id) {
  return fmt::format("{:020d}", id);
}

Result<json> parse(const KeyValue& kv) {
  json j = json::parse(kv.value, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Error{Errc::kParse, fmt::format("etcd key {}: not a JSON object", kv.key)};
  }
  return j;
}

}  // namespace

JobOrders::JobOrders(Kv& etcd, std::string base, std::string node, std::string fence_key)
    : etcd_(etcd),
      base_(std::move(base)),
      node_(std::move(node)),
      fence_key_(std::move(fence_key)) {}

Result<bool> JobOrders::order(const Order& o, int64_t fence) {
  if (fence == 0) {
    return Error{Errc::kBusy, fmt::format("this node ({}) does not lead the job: no order", node_)};
  }
  std::string key = base_ + "orders/" + id_key(o.incident);
  json j = {{"incident", o.incident},
            {"incarnation", o.incarnation},
            {"collect", o.collect},
            {"by", o.by},
            {"at_ns", o.at_ns}};
  auto t = etcd_.txn({Compare::create_rev(key, 0), Compare::create_rev(fence_key_, fence)},
                     {TxnOp::put(key, j.dump())}, {TxnOp::get(key)});
  if (!t) return t.error();
  if (t->succeeded) return true;
  if (!t->ranges.empty() && !t->ranges[0].kvs.empty()) return false;  // ordered before
  return Error{Errc::kBusy, fmt::format("ordering incident {}'s preempt was refused by the fence: "
                                        "this node ({}) no longer leads the job",
                                        o.incident, node_)};
}

Result<std::vector<Order>> JobOrders::orders() {
  RangeOptions all;
  all.prefix = true;
  auto r = etcd_.range(base_ + "orders/", all);
  if (!r) return r.error();
  std::vector<Order> out;
  for (const auto& kv : r->kvs) {
    auto j = parse(kv);
    if (!j) return j.error();
    try {
      Order o;
      o.incident = j->at("incident").get<int64_t>();
      o.incarnation = j->at("incarnation").get<int64_t>();
      o.collect = j->value("collect", true);
      o.by = j->value("by", "");
      o.at_ns = j->value("at_ns", int64_t{0});
      out.push_back(std::move(o));
    } catch (const std::exception& e) {
      return Error{Errc::kParse, fmt::format("etcd key {}: not an order: {}", kv.key, e.what())};
    }
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
    auto j = parse(kv);
    if (!j) return j.error();
    try {
      Done d;
      d.node = j->at("node").get<std::string>();
      d.ok = j->at("ok").get<bool>();
      d.refused = j->value("refused", "");
      d.artifact = j->value("artifact", "");
      d.summary = j->value("summary", "");
      d.at_ns = j->value("at_ns", int64_t{0});
      for (const auto& p : j->value("processes", json::array())) {
        d.processes.push_back({p.at("pid").get<int>(), p.value("label", ""), p.value("gone", false),
                               p.value("describe", "")});
      }
      out.push_back(std::move(d));
    } catch (const std::exception& e) {
      return Error{Errc::kParse, fmt::format("etcd key {}: not a report: {}", kv.key, e.what())};
    }
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
    auto l = launcher_from_json(kv.value, kv.key);
    LauncherRecord rec = l ? std::move(*l) : LauncherRecord{};
    if (rec.node.empty() && kv.key.size() > dir.size()) rec.node = kv.key.substr(dir.size());
    out.push_back(std::move(rec));
  }
  return out;
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
  auto j = parse(r->kvs[0]);
  if (!j) return j.error();
  try {
    std::map<std::string, std::vector<int>> nodes;
    for (const auto& [node, ranks] : j->at("nodes").items())
      nodes[node] = ranks.get<std::vector<int>>();
    return Out{{j->at("incarnation").get<int64_t>(), std::move(nodes)}};
  } catch (const std::exception& e) {
    return Error{Errc::kParse,
                 fmt::format("etcd key {}: not a roster: {}", r->kvs[0].key, e.what())};
  }
}

Status JobOrders::write_view(const JobView& v, int64_t fence) {
  if (fence == 0) return Error{Errc::kBusy, "not the leader: no view"};
  json obs = json::parse(trace::observation_to_json(v.observation));
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
            {"verdict", json::parse(trace::verdict_to_json(v.verdict))},
            {"obs", obs},
            {"nodes", nodes}};
  auto t =
      etcd_.txn({Compare::create_rev(fence_key_, fence)}, {TxnOp::put(base_ + "view", j.dump())});
  if (!t) return t.error();
  if (!t->succeeded) return Error{Errc::kBusy, "the job's view was refused by the fence"};
  return {};
}

Result<std::optional<JobView>> JobOrders::view() {
  auto r = etcd_.range(base_ + "view");
  if (!r) return r.error();
  if (r->kvs.empty()) return std::optional<JobView>{};
  auto j = parse(r->kvs[0]);
  if (!j) return j.error();
  const std::string& key = r->kvs[0].key;
  JobView v;
  try {
    v.leader = j->at("leader").get<std::string>();
    v.at_wall_ns = j->at("at_wall_ns").get<int64_t>();
    for (const auto& n : j->value("nodes", json::array())) {
      watch::NodeState ns;
      ns.node = n.at("node").get<std::string>();
      ns.leader = n.value("leader", false);
      ns.lapsed = n.value("lapsed", false);
      ns.summary_age_ns = n.value("summary_age_ns", int64_t{-1});
      ns.ranks = n.value("ranks", std::vector<int>{});
      v.nodes.push_back(std::move(ns));
    }
  } catch (const std::exception& e) {
    return Error{Errc::kParse, fmt::format("etcd key {}: not a view: {}", key, e.what())};
  }
  auto verdict = trace::verdict_from_json(j->value("verdict", json::object()).dump());
  if (!verdict)
    return Error{Errc::kParse,
                 fmt::format("etcd key {}: verdict: {}", key, verdict.error().message)};
  json obs = j->value("obs", json::object());
  obs["type"] = "obs";
  auto line = trace::parse_trace_line(obs.dump());
  if (!line)
    return Error{Errc::kParse, fmt::format("etcd key {}: obs: {}", key, line.error().message)};
  v.verdict = std::move(*verdict);
  v.observation = std::move(line->obs);
  return std::optional<JobView>{std::move(v)};
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
