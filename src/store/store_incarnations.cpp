// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Incarnations and host implications: the history the node-fault rules read
// (src/runbook/node_fault.h). A few writes per launch: NORMAL durability, like actions.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "src/store/sqlite_db.h"
#include "src/store/store.h"
#include "src/store/store_rows.h"

#define SW_INCARNATION_COLUMNS                                                                \
  "job, incarnation, started_ns, ended_ns, end_reason, cause, culprit_ranks, culprit_hosts, " \
  "hosts, checkpoint_step, scheduler_id"
#define SW_IMPLICATION_COLUMNS "host, job, incarnation, at_ns, cause, reason"

namespace stepwatch::store {

namespace {

// Lists are JSON arrays so that the sqlite3 shell can read them (json_each). Only this file
// writes them; the reader accepts what the writer writes and reports anything else.
std::string json_ints(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{}", i ? "," : "", v[i]);
  return out + "]";
}

std::string json_strings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    out += i ? ",\"" : "\"";
    for (unsigned char c : v[i]) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        out += fmt::format("\\u{:04x}", c);
      } else {
        out += static_cast<char>(c);
      }
    }
    out += '"';
  }
  return out + "]";
}

// Parses one array of the writer's form: [] or [e,e,...] where e is an int or a string with
// \" \\ and \u00XX escapes. nullopt on anything else.
template <class T>
std::optional<std::vector<T>> parse_array(std::string_view s) {
  std::vector<T> out;
  size_t i = 0;
  auto at = [&](char c) { return i < s.size() && s[i] == c; };
  if (!at('[')) return std::nullopt;
  ++i;
  if (at(']')) return i + 1 == s.size() ? std::optional(out) : std::nullopt;
  for (;;) {
    if constexpr (std::is_same_v<T, int>) {
      int v = 0;
      auto [end, ec] = std::from_chars(s.data() + i, s.data() + s.size(), v);
      if (ec != std::errc()) return std::nullopt;
      i = static_cast<size_t>(end - s.data());
      out.push_back(v);
    } else {
      if (!at('"')) return std::nullopt;
      std::string v;
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] != '\\') {
          v += s[i];
        } else if (i + 1 < s.size() && (s[i + 1] == '"' || s[i + 1] == '\\')) {
          v += s[++i];
        } else if (i + 5 < s.size() && s.substr(i + 1, 3) == "u00") {
          int c = 0;
          auto r = std::from_chars(s.data() + i + 4, s.data() + i + 6, c, 16);
          if (r.ec != std::errc() || r.ptr != s.data() + i + 6) return std::nullopt;
          v += static_cast<char>(c);
          i += 5;
        } else {
          return std::nullopt;
        }
      }
      if (!at('"')) return std::nullopt;
      ++i;
      out.push_back(std::move(v));
    }
    if (at(']')) return i + 1 == s.size() ? std::optional(out) : std::nullopt;
    if (!at(',')) return std::nullopt;
    ++i;
  }
}

Result<IncarnationRecord> read_incarnation(const Db& db, const Stmt& s) {
  IncarnationRecord r;
  r.job = s.text(0);
  r.incarnation = s.int64(1);
  r.started_ns = s.int64(2);
  r.ended_ns = s.opt_int64(3);
  r.end_reason = s.text(4);
  r.cause = s.text(5);
  auto bad = [&](const char* column) {
    return Error{Errc::kParse, fmt::format("{}: incarnation {} of job {}: {} is not a JSON array "
                                           "as stepwatch writes it",
                                           db.path(), r.incarnation, r.job, column)};
  };
  auto ranks = parse_array<int>(s.text(6));
  if (!ranks) return bad("culprit_ranks");
  r.culprit_ranks = std::move(*ranks);
  auto culprit_hosts = parse_array<std::string>(s.text(7));
  if (!culprit_hosts) return bad("culprit_hosts");
  r.culprit_hosts = std::move(*culprit_hosts);
  auto hosts = parse_array<std::string>(s.text(8));
  if (!hosts) return bad("hosts");
  r.hosts = std::move(*hosts);
  r.checkpoint_step = s.opt_int64(9);
  r.scheduler_id = s.text(10);
  return r;
}

Result<std::vector<IncarnationRecord>> read_incarnations(const Db& db, Stmt& s) {
  std::vector<IncarnationRecord> out;
  for (;;) {
    auto row = s.step();
    if (!row) return row.error();
    if (!*row) return out;
    auto r = read_incarnation(db, s);
    if (!r) return r.error();
    out.push_back(std::move(*r));
  }
}

Status invalid(const Db& db, const std::string& what) {
  return Error{Errc::kInvalidArgument, fmt::format("{}: {}", db.path(), what)};
}

bool any_empty(const std::vector<std::string>& v) {
  return std::any_of(v.begin(), v.end(), [](const std::string& h) { return h.empty(); });
}

}  // namespace

void merge_incarnation(IncarnationRecord& old, const IncarnationRecord& n) {
  if (old.started_ns == 0) old.started_ns = n.started_ns;
  if (n.ended_ns) old.ended_ns = n.ended_ns;
  if (!n.end_reason.empty()) old.end_reason = n.end_reason;
  if (!n.cause.empty()) old.cause = n.cause;
  if (!n.culprit_ranks.empty()) old.culprit_ranks = n.culprit_ranks;
  if (!n.culprit_hosts.empty()) old.culprit_hosts = n.culprit_hosts;
  for (const auto& h : n.hosts) {
    if (std::find(old.hosts.begin(), old.hosts.end(), h) == old.hosts.end()) old.hosts.push_back(h);
  }
  if (n.checkpoint_step) old.checkpoint_step = n.checkpoint_step;
  if (!n.scheduler_id.empty()) old.scheduler_id = n.scheduler_id;
}

std::optional<std::string> incarnation_problem(const IncarnationRecord& r) {
  const auto name = fmt::format("incarnation {} of job {}", r.incarnation, r.job);
  if (r.job.empty()) return std::string("an empty job id");
  if (any_empty(r.hosts) || any_empty(r.culprit_hosts)) return name + ": an empty host name";
  if (r.ended_ns.has_value() != !r.end_reason.empty()) {
    return name +
           ": ended_ns and end_reason go together (an ended incarnation says why, a running one "
           "has no end_reason)";
  }
  return std::nullopt;
}

Status Store::record_incarnation(const IncarnationRecord& record) {
  if (record.job.empty() || any_empty(record.hosts) || any_empty(record.culprit_hosts)) {
    return invalid(*db_, "record_incarnation: " + *incarnation_problem(record));
  }
  auto tx = Tx::begin(*db_);
  if (!tx) return tx.error();
  IncarnationRecord r = record;
  {  // read, merge in C++ and write back, under the write lock (another process may record)
    auto get = db_->prepare("SELECT " SW_INCARNATION_COLUMNS
                            " FROM incarnations WHERE job = ?1 AND incarnation = ?2");
    if (!get) return get.error();
    get->bind(1, record.job).bind(2, record.incarnation);
    auto row = get->step();
    if (!row) return row.error();
    if (*row) {
      auto old = read_incarnation(*db_, *get);
      if (!old) return old.error();
      r = std::move(*old);
      merge_incarnation(r, record);
    }
  }
  if (auto problem = incarnation_problem(r))
    return invalid(*db_, "record_incarnation: " + *problem);
  auto put = db_->prepare("INSERT OR REPLACE INTO incarnations (" SW_INCARNATION_COLUMNS
                          ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
  if (!put) return put.error();
  auto st = put->bind(1, r.job)
                .bind(2, r.incarnation)
                .bind(3, r.started_ns)
                .bind(4, r.ended_ns)
                .bind(5, r.end_reason)
                .bind(6, r.cause)
                .bind(7, json_ints(r.culprit_ranks))
                .bind(8, json_strings(r.culprit_hosts))
                .bind(9, json_strings(r.hosts))
                .bind(10, r.checkpoint_step)
                .bind(11, r.scheduler_id)
                .run();
  if (!st) return st;
  return tx->commit();
}

Result<std::vector<IncarnationRecord>> Store::incarnations(const std::string& job, int limit) {
  auto s = db_->prepare("SELECT " SW_INCARNATION_COLUMNS
                        " FROM incarnations WHERE job = ?1 ORDER BY incarnation DESC LIMIT ?2");
  if (!s) return s.error();
  s->bind(1, job).bind(2, int64_t{limit > 0 ? limit : -1});
  return read_incarnations(*db_, *s);
}

Status Store::record_implication(const HostImplication& i) {
  if (i.host.empty() || i.job.empty()) {
    return invalid(*db_, fmt::format("record_implication: host and job are required (host '{}', "
                                     "job '{}', incarnation {})",
                                     i.host, i.job, i.incarnation));
  }
  auto s = db_->prepare("INSERT INTO host_implications (" SW_IMPLICATION_COLUMNS
                        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
                        "ON CONFLICT (host, job, incarnation) DO NOTHING");
  if (!s) return s.error();
  return s->bind(1, i.host)
      .bind(2, i.job)
      .bind(3, i.incarnation)
      .bind(4, i.at_ns)
      .bind(5, i.cause)
      .bind(6, i.reason)
      .run();
}

Result<std::vector<HostImplication>> Store::implications(int64_t since_ns) {
  auto s = db_->prepare("SELECT " SW_IMPLICATION_COLUMNS
                        " FROM host_implications WHERE at_ns >= ?1 "
                        "ORDER BY at_ns DESC, host, job, incarnation DESC");
  if (!s) return s.error();
  s->bind(1, since_ns);
  return read_all<HostImplication>(*s, [](const Stmt& r) {
    return HostImplication{r.text(0), r.text(1), r.int64(2), r.int64(3), r.text(4), r.text(5)};
  });
}

Status Store::keep_delivery(const KeptDelivery& d) {
  if (d.job.empty() || d.incident_id <= 0) {
    return invalid(*db_, fmt::format("keep_delivery: a job and an incident id are required (job "
                                     "'{}', incident {})",
                                     d.job, d.incident_id));
  }
  auto tx = Tx::begin(*db_, /*durable=*/true);  // it decides whether the page is sent again
  if (!tx) return tx.error();
  {
    auto s = db_->prepare(
        "INSERT OR REPLACE INTO kept_deliveries (job, incident_id, incarnation, at_ns, summary, "
        "delivered) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    if (!s) return s.error();
    if (auto st = s->bind(1, d.job)
                      .bind(2, d.incident_id)
                      .bind(3, d.incarnation)
                      .bind(4, d.at_ns)
                      .bind(5, d.summary)
                      .bind(6, int64_t{d.delivered})
                      .run();
        !st)
      return st;
  }
  return tx->commit();
}

Status Store::forget_delivery(const std::string& job, int64_t incident_id) {
  auto s = db_->prepare("DELETE FROM kept_deliveries WHERE job = ?1 AND incident_id = ?2");
  if (!s) return s.error();
  return s->bind(1, job).bind(2, incident_id).run();
}

Result<std::vector<KeptDelivery>> Store::kept_deliveries(const std::string& job) {
  auto s = db_->prepare(
      "SELECT job, incident_id, incarnation, at_ns, summary, delivered FROM kept_deliveries "
      "WHERE job = ?1 ORDER BY at_ns, incident_id");
  if (!s) return s.error();
  s->bind(1, job);
  return read_all<KeptDelivery>(*s, [](const Stmt& r) {
    return KeptDelivery{r.text(0), r.int64(1), r.int64(2), r.int64(3), r.text(4), r.int64(5) != 0};
  });
}

}  // namespace stepwatch::store

#undef SW_INCARNATION_COLUMNS
#undef SW_IMPLICATION_COLUMNS
