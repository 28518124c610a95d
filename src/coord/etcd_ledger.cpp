// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The only translation unit of the ledger that includes nlohmann/json (STYLE rule 11).
#include "src/coord/etcd_ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "src/common/clock.h"
#include "src/common/json_fields.h"
#include "src/common/log.h"
#include "src/contract/names.h"
#include "src/coord/records.h"

namespace stepwatch::coord {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxActions = 200;  // per incident: a bound on the record's size

json to_json(const store::Incident& i, const json& actions, const std::string& opened_by,
             int64_t epoch_ms) {
  json j = {{"job", i.job},
            {"incarnation", i.incarnation},
            {"opened_at_ns", i.opened_at_ns},
            {"state", i.state},
            {"cause", i.cause},
            {"summary", i.summary},
            {"verdict", i.verdict_json},
            {"page_result", i.page_result},
            {"acked_by", i.acked_by},
            {"ack_note", i.ack_note},
            {"resolution", i.resolution},
            {"opened_by", opened_by},
            {"actions", actions}};
  if (epoch_ms > 0) j["epoch"] = epoch_ms;
  // Its own id, once known: a record restored after it was overwritten (EtcdLedger::read) has a
  // create revision of its own, and keeps the id every page and ack of it used.
  if (i.id > 0) j["id"] = i.id;
  auto opt = [&](const char* k, const std::optional<int64_t>& v) {
    if (v) j[k] = *v;
  };
  opt("paged_at_ns", i.paged_at_ns);
  opt("delivered_at_ns", i.delivered_at_ns);
  opt("acked_at_ns", i.acked_at_ns);
  opt("closed_at_ns", i.closed_at_ns);
  return j;
}

// The record, or an error naming the key.
Result<store::Incident> from_json(const json& j, const std::string& key, int64_t id) {
  try {
    store::Incident i;
    i.id = id;
    i.job = j.at("job").get<std::string>();
    i.incarnation = j.at("incarnation").get<int64_t>();
    i.opened_at_ns = j.at("opened_at_ns").get<int64_t>();
    i.state = j.at("state").get<std::string>();
    i.cause = j.at("cause").get<std::string>();
    i.summary = j.value("summary", "");
    i.verdict_json = j.value("verdict", "");
    i.page_result = j.value("page_result", "");
    i.acked_by = j.value("acked_by", "");
    i.ack_note = j.value("ack_note", "");
    i.resolution = j.value("resolution", "");
    auto opt = [&](const char* k, std::optional<int64_t>& out) {
      if (auto it = j.find(k); it != j.end() && it->is_number_integer()) out = it->get<int64_t>();
    };
    opt("paged_at_ns", i.paged_at_ns);
    opt("delivered_at_ns", i.delivered_at_ns);
    opt("acked_at_ns", i.acked_at_ns);
    opt("closed_at_ns", i.closed_at_ns);
    return i;
  } catch (const std::exception& e) {
    return Error{Errc::kParse,
                 fmt::format("etcd key {}: not an incident record: {}", key, e.what())};
  }
}

std::string closed_key(const LedgerKeys& keys, int64_t id) {
  return fmt::format("{}{:020d}", keys.closed_dir, id);  // closed_incident_key's
}

// The epoch an incident record opened in: 0 when it has none (written before epochs). Throws
// FieldError.
int64_t epoch_in(const json& doc) {
  int64_t ms = 0;
  json_fields::opt(doc, "epoch", ms, json_fields::as_int);
  if (ms < 0 || ms > kMaxEpochMs)
    throw json_fields::FieldError{Errc::kParse,
                                  fmt::format("field \"epoch\" is out of range: {}", ms)};
  return ms;
}

// The id of the open record `doc` at `kv`, of epoch `epoch_ms`: the one it carries (a restored
// record), else epoch * kEpochScale + its create revision. One it carries must be of its epoch
// and no later than its own revision (it was restored after it opened). Throws FieldError.
int64_t id_in(const json& doc, const KeyValue& kv, int64_t epoch_ms) {
  const int64_t by_revision = incident_id(kv.create_revision, epoch_ms);
  int64_t id = 0;
  json_fields::opt(doc, "id", id, json_fields::as_int);
  if (id == 0) return by_revision;
  if (id <= incident_id(0, epoch_ms) || id > by_revision)
    throw json_fields::FieldError{
        Errc::kParse, fmt::format("field \"id\" ({}) is not of this record's epoch ({}) and "
                                  "revision ({})",
                                  id, epoch_ms, kv.create_revision)};
  return id;
}

// The epoch an epoch record (<prefix>/epoch) holds, or an error naming the key.
Result<int64_t> epoch_ms_of(const KeyValue& kv) {
  int64_t ms = 0;
  auto st = read_record(kv, "an epoch record", [&](const json& j) {
    (void)json_fields::need(j, "epoch");
    ms = epoch_in(j);  // the same bounds as an incident record's epoch, and not 0
    if (ms == 0) throw json_fields::FieldError{Errc::kParse, "field \"epoch\" is 0"};
  });
  if (!st) return st.error();
  return ms;
}

// The open record's epoch and id, or an error naming the key.
Result<std::pair<int64_t, int64_t>> epoch_and_id(const json& doc, const KeyValue& kv) {
  try {
    const int64_t epoch = epoch_in(doc);
    return std::pair<int64_t, int64_t>{epoch, id_in(doc, kv, epoch)};
  } catch (const json_fields::FieldError& e) {
    return json_fields::to_error(e, fmt::format("etcd key {}: not an incident record", kv.key));
  }
}

}  // namespace

struct EtcdLedger::Read {
  store::Incident incident;
  json doc;
  int64_t mod_revision = 0;
  int64_t epoch_ms = 0;
};

std::string epoch_key(std::string_view prefix) {
  return fmt::format("{}/epoch", prefix);
}

int64_t incident_id(int64_t create_revision, int64_t epoch_ms) {
  return epoch_ms * kEpochScale + create_revision;
}

Result<int64_t> incident_id_of(const KeyValue& kv) {
  auto doc = record_of(kv);
  if (!doc) return doc.error();
  auto found = epoch_and_id(*doc, kv);
  if (!found) return found.error();
  return found->second;
}

std::string incident_key(std::string_view prefix, std::string_view job) {
  return fmt::format("{}/jobs/{}/incident", prefix, job);
}

std::string closed_incident_key(std::string_view prefix, std::string_view job, int64_t id) {
  return fmt::format("{}/jobs/{}/incidents/{:020d}", prefix, job, id);
}

LedgerKeys ledger_keys(const NodeSession& session, const std::string& job) {
  LedgerKeys k;
  k.incident = incident_key(session.options().prefix, job);
  k.closed_dir = session.job_key(job, "incidents/");
  k.fence_key = session.job_key(job, "nodes/" + session.options().node);
  k.node = session.options().node;
  k.nodes_dir = session.job_key(job, "nodes/");
  k.roster = session.job_key(job, "roster");
  k.set_aside = session.job_key(job, "set_aside/");
  k.epoch = epoch_key(session.options().prefix);
  return k;
}

EtcdLedger::EtcdLedger(Kv& etcd, std::string job, LedgerKeys keys, std::function<int64_t()> fence)
    : etcd_(etcd), job_(std::move(job)), keys_(std::move(keys)), fence_(std::move(fence)) {}

Result<std::optional<EtcdLedger::Read>> EtcdLedger::read(std::optional<int64_t> id,
                                                         bool may_restore) {
  auto r = etcd_.range(keys_.incident);
  if (!r) return r.error();
  unvouched_.reset();  // as the key is now
  if (r->kvs.empty()) {
    // Deleted while this leader's incident `id` was open there, and not closed: written back.
    if (may_restore && id && last_read_ && last_read_->incident.id == *id) {
      auto back = restore_deleted();
      if (!back) return back.error();
      if (*back) return read(id, false);
    }
    last_read_.reset();  // closed, or not this leader's to restore
    return std::optional<Read>{};
  }
  const KeyValue& kv = r->kvs[0];
  // Written over while this leader's incident `id` was open there: set aside, and the incident
  // restored as last read, so that it stays listed and ackable on every node (review E15).
  auto restored = [&]() -> Result<std::optional<Read>> {
    auto back = restore(kv);
    if (!back) return back.error();
    if (!*back) return std::optional<Read>{};
    vouched_.reset();  // what is there now is asked again
    return read(id, false);
  };
  const bool restores =
      may_restore && id && last_read_ && last_read_->incident.id == *id && fence_() != 0;
  // A record that does not read is no incident of the job's (E15): passed over, said once, and
  // set aside when the job's own incident opens, which is then listed and acked as any other.
  auto not_ours = [&](const Error& why) -> Result<std::optional<Read>> {
    if (told_unreadable_ != kv.mod_revision)
      log_warn("coord: job {}: {}: not joined; {}", job_, why.message,
               restores ? "it is set aside, and the incident open there restored"
                        : "it is set aside when the job's own incident opens");
    told_unreadable_ = kv.mod_revision;
    unvouched_ = kv;
    if (restores) return restored();
    return std::optional<Read>{};
  };
  auto parsed = record_of(kv);
  if (!parsed) return not_ours(parsed.error());
  json doc = std::move(*parsed);
  auto ids = epoch_and_id(doc, kv);
  if (!ids) return not_ours(ids.error());
  const auto [epoch, found] = *ids;
  auto inc = from_json(doc, kv.key, found);
  if (!inc) return not_ours(inc.error());
  if (id && found != *id) return std::optional<Read>{};
  const std::string opened_by = doc.value("opened_by", "");
  if (!vouched_ || vouched_->id != found || vouched_->opened_by != opened_by) {
    auto ok = vouched(opened_by);
    if (!ok) return ok.error();
    vouched_ = Vouched{found, opened_by, *ok};
    if (!*ok)
      log_warn(
          "coord: job {}: etcd key {} (incident {}) was opened by \"{:.40}\", no node of the "
          "job: not joined; it is set aside when the job's own incident opens",
          job_, kv.key, found, doc.value("opened_by", ""));
  }
  if (!vouched_->ok) {
    unvouched_ = kv;
    // Written over under the incident's own id by no node of the job: restored. (One this leader
    // read as it is and whose opener is no node of the job any more stays as it is.)
    if (restores && doc != last_read_->doc) return restored();
    return std::optional<Read>{};
  }
  Read out{std::move(*inc), std::move(doc), kv.mod_revision, epoch};
  last_read_ = std::make_shared<const Read>(out);
  return std::optional<Read>{std::move(out)};
}

Result<bool> EtcdLedger::restore(const KeyValue& kv) {
  const int64_t fence = fence_();
  if (fence == 0 || !last_read_) return false;
  const Read& was = *last_read_;
  const std::string aside =
      fmt::format("{}{:020d}", keys_.set_aside, incident_id(kv.mod_revision, was.epoch_ms));
  std::string value = to_json(was.incident, was.doc.value("actions", json::array()),
                              was.doc.value("opened_by", ""), was.epoch_ms)
                          .dump();
  // Over the record as read (the key keeps its create revision; the record its own id).
  auto t = etcd_.txn({Compare::mod_rev(keys_.incident, kv.mod_revision),
                      Compare::create_rev(keys_.fence_key, fence)},
                     {TxnOp::put(aside, kv.value), TxnOp::put(keys_.incident, value)});
  if (!t) return t.error();
  if (!t->succeeded) return false;  // it moved, or this node leads no more: read again later
  log_warn(
      "coord: job {}: the record at {} (revision {}) is no incident of the job's, but incident {} "
      "was open there: that record is set aside under {}, and incident {} restored as this "
      "leader last read it",
      job_, keys_.incident, kv.mod_revision, was.incident.id, aside, was.incident.id);
  return true;
}

Result<bool> EtcdLedger::restore_deleted() {
  const int64_t fence = fence_();
  if (fence == 0 || !last_read_) return false;
  const Read& was = *last_read_;
  // Closed meanwhile (by a leader before this one): its closed record stands.
  auto closed = etcd_.range(closed_key(keys_, was.incident.id));
  if (!closed) return closed.error();
  if (!closed->kvs.empty()) return false;
  // Only in the etcd history it opened in: one that lost its data has no epoch (or another), and
  // there the stall opens again under a new id, which joins the page already sent (E16).
  auto e = etcd_.range(keys_.epoch);
  if (!e) return e.error();
  if (e->kvs.empty()) return false;
  auto stored = epoch_ms_of(e->kvs[0]);
  if (!stored || *stored != was.epoch_ms) return false;
  std::string value = to_json(was.incident, was.doc.value("actions", json::array()),
                              was.doc.value("opened_by", ""), was.epoch_ms)
                          .dump();
  auto t = etcd_.txn(
      {Compare::create_rev(keys_.incident, 0), Compare::create_rev(keys_.fence_key, fence),
       Compare::mod_rev(keys_.epoch, e->kvs[0].mod_revision)},
      {TxnOp::put(keys_.incident, value)});
  if (!t) return t.error();
  if (!t->succeeded) return false;
  log_warn(
      "coord: job {}: incident {} was deleted from {} while open (it is not closed): written "
      "back as this leader last read it",
      job_, was.incident.id, keys_.incident);
  return true;
}

Result<bool> EtcdLedger::vouched(const std::string& opened_by) {
  if (opened_by.empty() || !contract::validate_node_name(opened_by)) return false;
  auto node = etcd_.range(keys_.nodes_dir + opened_by);
  if (!node) return node.error();
  if (!node->kvs.empty() && node->kvs[0].lease != 0) return true;
  auto roster = etcd_.range(keys_.roster);
  if (!roster) return roster.error();
  if (roster->kvs.empty()) return false;
  bool listed = false;
  auto st = read_record(roster->kvs[0], "a roster", [&](const json& j) {
    const json& nodes = json_fields::need(j, "nodes");
    listed = nodes.is_object() && nodes.contains(opened_by);
  });
  return st && listed;
}

Status EtcdLedger::set_aside(const KeyValue& kv, int64_t fence, int64_t epoch_ms) {
  // Named by this history's epoch, not the record's own (it is no record of ours).
  const int64_t id = incident_id(kv.create_revision, epoch_ms);
  auto t = etcd_.txn({Compare::mod_rev(keys_.incident, kv.mod_revision),
                      Compare::create_rev(keys_.fence_key, fence)},
                     {TxnOp::del(keys_.incident),
                      TxnOp::put(fmt::format("{}{:020d}", keys_.set_aside, id), kv.value)});
  if (!t) return t.error();
  log_warn(
      "coord: job {}: the record at {} that is no incident of the job's (revision {}) is set "
      "aside under {}{:020d}",
      job_, keys_.incident, kv.create_revision, keys_.set_aside, id);
  return {};
}

void EtcdLedger::saw(int64_t revision, int64_t epoch_ms) {
  last_id_ = std::max(last_id_, incident_id(revision, epoch_ms));
}

Result<EtcdLedger::Epoch> EtcdLedger::epoch(int64_t at_ns) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto r = etcd_.range(keys_.epoch);
    if (!r) return r.error();
    Compare absent = Compare::create_rev(keys_.epoch, 0);
    if (!r->kvs.empty()) {
      const KeyValue& kv = r->kvs[0];
      auto ms = epoch_ms_of(kv);
      if (ms) {
        saw(r->revision, *ms);
        return Epoch{*ms, kv.create_revision};
      }
      log_warn("coord: job {}: {}: a new epoch replaces it", job_, ms.error().message);
      absent = Compare::mod_rev(keys_.epoch, kv.mod_revision);
    }
    // None (etcd is new, or lost its data), or none that reads: a new one, past every id seen.
    const int64_t ms = std::max({at_ns / kNsPerMs, last_id_ / kEpochScale + 1, int64_t{1}});
    if (ms > kMaxEpochMs) {
      return Error{Errc::kBusy, fmt::format("job {}: no incident epoch can follow id {}: every "
                                            "one left would repeat or pass 2^53",
                                            job_, last_id_)};
    }
    auto t = etcd_.txn({absent},
                       {TxnOp::put(keys_.epoch, json{{"epoch", ms}, {"by", keys_.node}}.dump())});
    if (!t) return t.error();
    if (t->succeeded) {
      log_info(
          "coord: job {}: incident ids start a new epoch {} (no epoch in etcd: it is new, or "
          "lost its data)",
          job_, ms);
      saw(t->revision, ms);
      return Epoch{ms, t->revision};
    }
    // Another node wrote one meanwhile: read it.
  }
  return Error{Errc::kBusy, fmt::format("job {}: the incident epoch kept changing", job_)};
}

Result<std::optional<store::Incident>> EtcdLedger::open_for(const std::string& /*job*/) {
  auto r = read(std::nullopt);
  if (!r) return r.error();
  if (!*r) return std::optional<store::Incident>{};
  return std::optional<store::Incident>{(*r)->incident};
}

Result<store::IncidentRef> EtcdLedger::open(const store::NewIncident& n) {
  int64_t fence = fence_();
  if (fence == 0) {
    return Error{Errc::kBusy,
                 fmt::format("job {}: this node ({}) does not lead it: the incident is the "
                             "leader's to open",
                             job_, keys_.node)};
  }
  store::Incident i;
  i.job = n.job;
  i.incarnation = n.incarnation;
  i.opened_at_ns = n.at_ns;
  i.state = n.state;
  i.cause = n.cause;
  i.summary = n.summary;
  i.verdict_json = n.verdict_json;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto epoch = this->epoch(n.at_ns);
    if (!epoch) return epoch.error();
    if (auto open = read(std::nullopt); !open) {
      return open.error();
    } else if (!*open && unvouched_) {
      if (auto st = set_aside(*unvouched_, fence, epoch->ms); !st) return st.error();
      unvouched_.reset();
    }
    // Fenced on the epoch read too: an etcd that lost its data meanwhile has none, and an id of
    // the old epoch with a new revision could repeat one.
    auto t = etcd_.txn(
        {Compare::create_rev(keys_.incident, 0), Compare::create_rev(keys_.fence_key, fence),
         Compare::create_rev(keys_.epoch, epoch->create_revision)},
        {TxnOp::put(keys_.incident, to_json(i, json::array(), keys_.node, epoch->ms).dump())},
        {TxnOp::get(keys_.incident), TxnOp::get(keys_.epoch)});
    if (!t) return t.error();
    if (t->succeeded) {
      saw(t->revision, epoch->ms);
      return store::IncidentRef{incident_id(t->revision, epoch->ms), true};
    }
    if (t->ranges.size() == 2 && !t->ranges[0].kvs.empty()) {
      auto id = incident_id_of(t->ranges[0].kvs[0]);
      if (!id) return id.error();
      return store::IncidentRef{*id, false};
    }
    const bool same_epoch = t->ranges.size() == 2 && !t->ranges[1].kvs.empty() &&
                            t->ranges[1].kvs[0].create_revision == epoch->create_revision;
    if (same_epoch) break;  // the fence failed
  }
  return Error{Errc::kBusy, fmt::format("job {}: opening its incident was refused: this node ({}) "
                                        "no longer leads it (its lease lapsed)",
                                        job_, keys_.node)};
}

Result<std::optional<store::Incident>> EtcdLedger::get(int64_t id) {
  auto r = read(id);
  if (!r) return r.error();
  if (*r) return std::optional<store::Incident>{(*r)->incident};
  auto c = etcd_.range(closed_key(keys_, id));
  if (!c) return c.error();
  if (c->kvs.empty()) return std::optional<store::Incident>{};
  auto doc = record_of(c->kvs[0]);
  if (!doc) return doc.error();
  auto inc = from_json(*doc, c->kvs[0].key, id);
  if (!inc) return inc.error();
  return std::optional<store::Incident>{std::move(*inc)};
}

Status EtcdLedger::modify(int64_t id,
                          const std::function<bool(store::Incident&, std::string&)>& change,
                          bool* applied, bool leader_only) {
  if (applied) *applied = false;
  for (int attempt = 0; attempt < 3; ++attempt) {
    int64_t fence = leader_only ? fence_() : 0;
    if (leader_only && fence == 0) {
      return Error{Errc::kBusy, fmt::format("job {}: this node ({}) does not lead it: not writing "
                                            "incident {}",
                                            job_, keys_.node, id)};
    }
    auto r = read(id);
    if (!r) return r.error();
    if (!*r) {
      return Error{Errc::kNotFound,
                   fmt::format("job {}: incident {} is not open in etcd", job_, id)};
    }
    Read& rd = **r;
    std::string action;  // an action record to append, as JSON text
    if (!change(rd.incident, action)) return {};
    json actions = rd.doc.value("actions", json::array());
    if (!action.empty()) {
      actions.push_back(json::parse(action));
      if (actions.size() > kMaxActions) actions.erase(actions.begin());
    }
    json written = to_json(rd.incident, actions, rd.doc.value("opened_by", ""), rd.epoch_ms);
    std::vector<Compare> fenced = {Compare::mod_rev(keys_.incident, rd.mod_revision)};
    if (leader_only) fenced.push_back(Compare::create_rev(keys_.fence_key, fence));
    auto t = etcd_.txn(std::move(fenced), {TxnOp::put(keys_.incident, written.dump())},
                       {TxnOp::get(keys_.fence_key)});
    if (!t) return t.error();
    if (t->succeeded) {
      if (applied) *applied = true;
      last_read_ = std::make_shared<const Read>(
          Read{rd.incident, std::move(written), t->revision, rd.epoch_ms});
      return {};
    }
    if (leader_only && !fence_held(*t, fence)) {
      return Error{Errc::kBusy,
                   fmt::format("job {}: incident {}: write refused by the fence: this node ({}) "
                               "no longer leads the job (its lease lapsed)",
                               job_, id, keys_.node)};
    }
    // The record moved (an ack from another node): read it again.
  }
  return Error{Errc::kBusy,
               fmt::format("job {}: incident {} kept changing under the write", job_, id)};
}

Status EtcdLedger::update(int64_t id, const store::NewIncident& says) {
  return modify(id, [&](store::Incident& i, std::string&) {
    i.state = says.state;
    i.cause = says.cause;
    i.summary = says.summary;
    i.verdict_json = says.verdict_json;
    return true;
  });
}

Result<bool> EtcdLedger::claim_page(int64_t id, int64_t at_ns) {
  bool applied = false;
  auto st = modify(
      id,
      [&](store::Incident& i, std::string&) {
        if (i.paged_at_ns) return false;
        i.paged_at_ns = at_ns;
        i.page_result = "claimed";
        return true;
      },
      &applied);
  if (!st) return st.error();
  return applied;
}

Status EtcdLedger::record_delivery(int64_t id, int64_t at_ns, std::string_view result,
                                   bool delivered) {
  // What this node sent: recorded whether or not it still leads (E14), never the leader's alone.
  auto st = modify(
      id,
      [&](store::Incident& i, std::string&) {
        i.page_result = std::string(result);
        if (delivered && !i.delivered_at_ns) i.delivered_at_ns = at_ns;
        return true;
      },
      nullptr, false);
  if (!st && st.error().code == Errc::kNotFound) return {};  // closed meanwhile: nothing to add
  return st;
}

Status EtcdLedger::close(int64_t id, int64_t at_ns, std::string_view resolution) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    int64_t fence = fence_();
    if (fence == 0) {
      return Error{Errc::kBusy, fmt::format("job {}: this node ({}) does not lead it: not closing "
                                            "incident {}",
                                            job_, keys_.node, id)};
    }
    auto r = read(id);
    if (!r) return r.error();
    if (!*r) return {};  // closed already (its first resolution stays)
    Read& rd = **r;
    rd.incident.closed_at_ns = at_ns;
    rd.incident.resolution = std::string(resolution);
    std::string value = to_json(rd.incident, rd.doc.value("actions", json::array()),
                                rd.doc.value("opened_by", ""), rd.epoch_ms)
                            .dump();
    auto t = etcd_.txn({Compare::mod_rev(keys_.incident, rd.mod_revision),
                        Compare::create_rev(keys_.fence_key, fence)},
                       {TxnOp::del(keys_.incident), TxnOp::put(closed_key(keys_, id), value)},
                       {TxnOp::get(keys_.fence_key)});
    if (!t) return t.error();
    if (t->succeeded) {
      last_read_.reset();
      return {};
    }
    if (!fence_held(*t, fence)) {
      return Error{Errc::kBusy,
                   fmt::format("job {}: closing incident {} refused by the fence: this node ({}) "
                               "no longer leads the job",
                               job_, id, keys_.node)};
    }
  }
  return Error{Errc::kBusy,
               fmt::format("job {}: incident {} kept changing under the close", job_, id)};
}

Status EtcdLedger::record_action(const store::Action& a) {
  if (!a.incident_id) return {};  // only an incident's actions travel with it
  json j = {{"at_ns", a.at_ns},
            {"kind", a.kind},
            {"ok", a.ok},
            {"detail", a.detail},
            {"node", keys_.node}};
  std::string text = j.dump();
  // A page's outcome is what this node sent, recorded as its delivery is (record_delivery).
  const bool page =
      a.kind == store::action_kind::kPage || a.kind == store::action_kind::kPageFailed;
  auto st = modify(
      *a.incident_id,
      [&](store::Incident&, std::string& action) {
        action = text;
        return true;
      },
      nullptr, !page);
  if (!st && st.error().code == Errc::kNotFound) return {};  // closed meanwhile
  return st;
}

Result<std::optional<bool>> EtcdLedger::acked_since(int64_t id, int64_t since_ns) {
  auto r = read(id);
  if (!r) return r.error();
  if (!*r) return std::optional<bool>{};
  for (const auto& a : (*r)->doc.value("actions", json::array())) {
    if (a.is_object() && a.value("kind", "") == store::action_kind::kAck &&
        a.value("at_ns", int64_t{0}) >= since_ns)
      return std::optional<bool>{true};
  }
  return std::optional<bool>{false};
}

Result<std::optional<store::Incident>> ack_in_etcd(Kv& etcd, const LedgerKeys& keys,
                                                   const std::string& job, int64_t at_ns,
                                                   const std::string& by, const std::string& note) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto r = etcd.range(keys.incident);
    if (!r) return r.error();
    if (r->kvs.empty()) return std::optional<store::Incident>{};
    const KeyValue& kv = r->kvs[0];
    auto parsed = record_of(kv);
    if (!parsed) return parsed.error();
    json doc = std::move(*parsed);
    auto ids = epoch_and_id(doc, kv);
    if (!ids) return ids.error();
    auto inc = from_json(doc, kv.key, ids->second);
    if (!inc) return inc.error();
    // The first ack's time, name and note stay; every ack is an action (as in the store), so
    // that an ack after a restart storm's hold began releases it.
    const bool first = !inc->acked_at_ns;
    if (first) {
      inc->acked_at_ns = at_ns;
      inc->acked_by = by;
      inc->ack_note = note;
    }
    json actions = doc.value("actions", json::array());
    actions.push_back(
        {{"at_ns", at_ns},
         {"kind", "ack"},
         {"ok", true},
         {"detail", fmt::format("acked by {}{}", by, note.empty() ? "" : ": " + note)},
         {"node", keys.node}});
    if (actions.size() > kMaxActions) actions.erase(actions.begin());
    std::string value = to_json(*inc, actions, doc.value("opened_by", ""), ids->first).dump();
    auto t = etcd.txn({Compare::mod_rev(keys.incident, kv.mod_revision)},
                      {TxnOp::put(keys.incident, value)});
    if (!t) return t.error();
    if (t->succeeded) return std::optional<store::Incident>{std::move(*inc)};
  }
  return Error{Errc::kBusy, fmt::format("job {}: its incident kept changing under the ack", job)};
}

Result<std::optional<OpenIncident>> open_incident(Kv& etcd, const LedgerKeys& keys, BadRecords& bad,
                                                  int64_t* unreadable) {
  if (unreadable) *unreadable = 0;
  auto r = etcd.range(keys.incident);
  if (!r) return r.error();
  if (r->kvs.empty()) return std::optional<OpenIncident>{};
  const KeyValue& kv = r->kvs[0];
  OpenIncident out;
  auto st = read_record(kv, "an incident record", [&](const json& j) {
    (void)json_fields::need(j, "job");
    json_fields::opt(j, "opened_by", out.opened_by, json_fields::as_str);
    out.delivered = j.contains("delivered_at_ns") && !j["delivered_at_ns"].is_null();
    const int64_t epoch = epoch_in(j);
    out.id = id_in(j, kv, epoch);
    // The revision it opened at, kept in its id (a restored record has a later one of its own).
    out.create_revision = out.id - incident_id(0, epoch);
  });
  if (!st) {
    bad.skip(kv, st.error());
    if (unreadable) *unreadable = kv.mod_revision;
    return std::optional<OpenIncident>{};
  }
  return std::optional<OpenIncident>{std::move(out)};
}

Result<std::vector<store::Incident>> incidents_in_etcd(Kv& etcd, const LedgerKeys& keys,
                                                       const std::string& job, int limit) {
  std::vector<store::Incident> out;
  auto r = etcd.range(keys.incident);
  if (!r) return r.error();
  for (const auto& kv : r->kvs) {
    auto doc = record_of(kv);
    if (!doc) continue;
    auto ids = epoch_and_id(*doc, kv);
    if (!ids) continue;
    auto inc = from_json(*doc, kv.key, ids->second);
    if (inc) out.push_back(std::move(*inc));
  }
  RangeOptions all;
  all.prefix = true;
  auto c = etcd.range(keys.closed_dir, all);
  if (!c) return c.error();
  for (auto it = c->kvs.rbegin(); it != c->kvs.rend(); ++it) {
    if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    auto doc = record_of(*it);
    if (!doc) continue;
    int64_t id = 0;
    try {
      id = std::stoll(it->key.substr(keys.closed_dir.size()));
    } catch (const std::exception&) {
      continue;
    }
    if (auto inc = from_json(*doc, it->key, id)) out.push_back(std::move(*inc));
  }
  (void)job;
  return out;
}

}  // namespace stepwatch::coord
