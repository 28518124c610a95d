// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Actions, transitions, supervisor state, process records and pruning. These are frequent
// writes: single statements at synchronous=NORMAL (durable against a killed process).
#include <fmt/format.h>

#include <algorithm>

#include "src/common/clock.h"
#include "src/store/sqlite_db.h"
#include "src/store/store.h"
#include "src/store/store_rows.h"

namespace stepwatch::store {

namespace {

// A negative LIMIT is no limit.
int64_t sql_limit(int limit) {
  return limit > 0 ? limit : -1;
}

Status need(const Db& db, bool ok, std::string_view what) {
  if (ok) return {};
  return Error{Errc::kInvalidArgument, fmt::format("{}: {}", db.path(), what)};
}

}  // namespace

// ---- actions ----

Result<int64_t> Store::record_action(const Action& a) {
  // No transaction of its own: ack() calls this inside its transaction.
  if (auto st =
          need(*db_, !a.job.empty() && !a.kind.empty(), "record_action: job and kind are required");
      !st) {
    return st.error();
  }
  auto s = db_->prepare(
      "INSERT INTO actions (incident_id, job, at_ns, kind, ok, detail) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  if (!s) return s.error();
  auto st = s->bind(1, a.incident_id)
                .bind(2, a.job)
                .bind(3, a.at_ns)
                .bind(4, a.kind)
                .bind(5, int64_t{a.ok ? 1 : 0})
                .bind(6, a.detail)
                .run();
  if (!st && a.incident_id && st.error().code == Errc::kInvalidArgument) {
    return Error{st.error().code,
                 fmt::format("{} (is there an incident #{}?)", st.error().message, *a.incident_id)};
  }
  if (!st) return st.error();
  return db_->last_insert_id();
}

Result<std::vector<Action>> Store::actions(int64_t incident_id) {
  auto s = db_->prepare("SELECT " SW_ACTION_COLUMNS
                        " FROM actions WHERE incident_id = ?1 ORDER BY at_ns, id");
  if (!s) return s.error();
  s->bind(1, incident_id);
  return read_all<Action>(*s, read_action);
}

Result<std::vector<Action>> Store::job_actions(const std::string& job, int limit) {
  auto s = db_->prepare("SELECT " SW_ACTION_COLUMNS
                        " FROM actions WHERE job = ?1 "
                        "ORDER BY at_ns DESC, id DESC LIMIT ?2");
  if (!s) return s.error();
  s->bind(1, job).bind(2, sql_limit(limit));
  return read_all<Action>(*s, read_action);
}

// ---- transitions ----

Result<int64_t> Store::record_transition(const Transition& t) {
  if (auto st = need(*db_, !t.job.empty() && !t.to_state.empty(),
                     "record_transition: job and to_state are required");
      !st) {
    return st.error();
  }
  auto s = db_->prepare(
      "INSERT INTO transitions (job, incarnation, at_ns, from_state, to_state, cause, summary) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!s) return s.error();
  auto st = s->bind(1, t.job)
                .bind(2, t.incarnation)
                .bind(3, t.at_ns)
                .bind(4, t.from_state)
                .bind(5, t.to_state)
                .bind(6, t.cause)
                .bind(7, t.summary)
                .run();
  if (!st) return st.error();
  return db_->last_insert_id();
}

Result<std::vector<Transition>> Store::transitions(const std::string& job, int limit) {
  auto s = db_->prepare("SELECT " SW_TRANSITION_COLUMNS
                        " FROM transitions WHERE job = ?1 "
                        "ORDER BY at_ns DESC, id DESC LIMIT ?2");
  if (!s) return s.error();
  s->bind(1, job).bind(2, sql_limit(limit));
  return read_all<Transition>(*s, read_transition);
}

// ---- supervisor state ----

Status Store::save_state(const SupervisorState& v) {
  if (auto st = need(*db_, !v.job.empty(), "save_state: empty job id"); !st) return st;
  auto s = db_->prepare("INSERT OR REPLACE INTO supervisor_state (" SW_STATE_COLUMNS
                        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  if (!s) return s.error();
  return s->bind(1, v.job)
      .bind(2, v.incarnation)
      .bind(3, v.restarts)
      .bind(4, v.restarts_without_progress)
      .bind(5, v.checkpoint_id)
      .bind(6, v.checkpoint_step)
      .bind(7, v.interval_median_ns)
      .bind(8, v.interval_p90_ns)
      .bind(9, v.interval_samples)
      .bind(10, v.updated_at_ns)
      .run();
}

Result<std::optional<SupervisorState>> Store::load_state(const std::string& job) {
  auto s = db_->prepare("SELECT " SW_STATE_COLUMNS " FROM supervisor_state WHERE job = ?1");
  if (!s) return s.error();
  s->bind(1, job);
  return read_optional<SupervisorState>(*s, read_state);
}

// ---- processes ----

Status Store::record_process(const ProcessRecord& p) {
  if (auto st = need(*db_, !p.job.empty() && p.pid > 0,
                     "record_process: job and a positive pid are required");
      !st) {
    return st;
  }
  auto s = db_->prepare("INSERT INTO processes (" SW_PROCESS_COLUMNS
                        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
                        "ON CONFLICT (job, incarnation, pid, start_ticks) DO UPDATE SET "
                        "role = CASE WHEN excluded.role <> '' THEN excluded.role ELSE role END");
  if (!s) return s.error();
  return s->bind(1, p.job)
      .bind(2, p.incarnation)
      .bind(3, p.pid)
      .bind(4, static_cast<int64_t>(p.start_ticks))
      .bind(5, p.role)
      .bind(6, p.first_seen_ns)
      .run();
}

Result<std::vector<ProcessRecord>> Store::process_query(const char* sql, const std::string& job,
                                                        std::optional<int64_t> incarnation) {
  auto s = db_->prepare(sql);
  if (!s) return s.error();
  s->bind(1, job);
  if (incarnation) s->bind(2, *incarnation);
  return read_all<ProcessRecord>(*s, read_process);
}

Result<std::vector<ProcessRecord>> Store::processes(const std::string& job) {
  return process_query("SELECT " SW_PROCESS_COLUMNS
                       " FROM processes WHERE job = ?1 "
                       "ORDER BY incarnation, first_seen_ns, pid",
                       job, std::nullopt);
}

Result<std::vector<ProcessRecord>> Store::processes(const std::string& job, int64_t incarnation) {
  return process_query("SELECT " SW_PROCESS_COLUMNS
                       " FROM processes WHERE job = ?1 AND incarnation = ?2 "
                       "ORDER BY first_seen_ns, pid",
                       job, incarnation);
}

Result<std::vector<ProcessRecord>> Store::processes_before(const std::string& job,
                                                           int64_t incarnation) {
  return process_query("SELECT " SW_PROCESS_COLUMNS
                       " FROM processes WHERE job = ?1 AND incarnation < ?2 "
                       "ORDER BY incarnation, first_seen_ns, pid",
                       job, incarnation);
}

Result<int64_t> Store::forget_processes_before(const std::string& job, int64_t incarnation) {
  auto s = db_->prepare("DELETE FROM processes WHERE job = ?1 AND incarnation < ?2");
  if (!s) return s.error();
  if (auto st = s->bind(1, job).bind(2, incarnation).run(); !st) return st.error();
  return db_->changes();
}

// ---- upkeep ----

namespace {

// Closed incidents past the newest `keep` of their job. Open incidents are never candidates.
// ?1: how many to keep per job; ?2: anything before this wall time goes regardless.
#define SW_PRUNED_INCIDENTS                                                                \
  "SELECT id FROM (SELECT id, closed_at_ns, ROW_NUMBER() OVER (PARTITION BY job ORDER BY " \
  "opened_at_ns DESC, id DESC) AS rn FROM incidents WHERE closed_at_ns IS NOT NULL) "      \
  "WHERE rn > ?1 OR closed_at_ns < ?2"

Result<int64_t> delete_with_limit(Db& db, const char* sql, int64_t keep,
                                  std::optional<int64_t> older_than_ns = std::nullopt) {
  auto s = db.prepare(sql);
  if (!s) return s.error();
  s->bind(1, keep);
  if (older_than_ns) s->bind(2, *older_than_ns);
  if (auto st = s->run(); !st) return st.error();
  return db.changes();
}

}  // namespace

Result<PruneCounts> Store::prune(const PruneLimits& limits) {
  auto tx = Tx::begin(*db_);
  if (!tx) return tx.error();
  PruneCounts counts;
  // Actions first and explicitly: rows removed by ON DELETE CASCADE are not counted by changes().
  auto n =
      delete_with_limit(*db_, "DELETE FROM actions WHERE incident_id IN (" SW_PRUNED_INCIDENTS ")",
                        limits.keep_closed_incidents, limits.older_than_ns);
  if (!n) return n.error();
  counts.actions = *n;
  n = delete_with_limit(*db_, "DELETE FROM incidents WHERE id IN (" SW_PRUNED_INCIDENTS ")",
                        limits.keep_closed_incidents, limits.older_than_ns);
  if (!n) return n.error();
  counts.incidents = *n;
  n = delete_with_limit(
      *db_,
      "DELETE FROM actions WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER "
      "(PARTITION BY job ORDER BY at_ns DESC, id DESC) AS rn, at_ns FROM actions "
      "WHERE incident_id IS NULL) WHERE rn > ?1 OR at_ns < ?2)",
      limits.keep_loose_actions, limits.older_than_ns);
  if (!n) return n.error();
  counts.actions += *n;
  n = delete_with_limit(
      *db_,
      "DELETE FROM transitions WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER "
      "(PARTITION BY job ORDER BY at_ns DESC, id DESC) AS rn, at_ns FROM transitions) "
      "WHERE rn > ?1 OR at_ns < ?2)",
      limits.keep_transitions, limits.older_than_ns);
  if (!n) return n.error();
  counts.transitions = *n;
  n = delete_with_limit(
      *db_,
      "DELETE FROM processes WHERE incarnation <= (SELECT MAX(p.incarnation) FROM processes p "
      "WHERE p.job = processes.job) - ?1",
      limits.keep_process_incarnations);
  if (!n) return n.error();
  counts.processes = *n;
  // Incarnations beyond the newest N of their job, and ended ones that ended before the age
  // limit; a running one within the newest N stays however old.
  n = delete_with_limit(
      *db_,
      "DELETE FROM incarnations WHERE (job, incarnation) IN (SELECT job, incarnation FROM "
      "(SELECT job, incarnation, ended_ns, ROW_NUMBER() OVER (PARTITION BY job ORDER BY "
      "incarnation DESC) AS rn FROM incarnations) WHERE rn > ?1 OR ended_ns < ?2)",
      limits.keep_incarnations, limits.older_than_ns);
  if (!n) return n.error();
  counts.incarnations = *n;
  int64_t cutoff = limits.older_than_ns;
  if (limits.implication_max_age_ns > 0) {
    const int64_t now = limits.now_ns != 0 ? limits.now_ns : wall_now_ns();
    cutoff = std::max(cutoff, now - limits.implication_max_age_ns);
  }
  auto s = db_->prepare("DELETE FROM host_implications WHERE at_ns < ?1");
  if (!s) return s.error();
  if (auto st = s->bind(1, cutoff).run(); !st) return st.error();
  counts.implications = db_->changes();
  if (auto c = tx->commit(); !c) return c.error();
  return counts;
}

#undef SW_PRUNED_INCIDENTS

Result<int64_t> Store::used_bytes() {
  int64_t v[3] = {0, 0, 0};
  const char* pragmas[] = {"PRAGMA page_count", "PRAGMA freelist_count", "PRAGMA page_size"};
  for (int i = 0; i < 3; ++i) {
    auto text = db_->query_text(pragmas[i]);
    if (!text) return text.error();
    v[i] = std::stoll(*text);
  }
  return (v[0] - v[1]) * v[2];
}

}  // namespace stepwatch::store
