// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/store/schema.h"

#include <fmt/format.h>

#ifndef STEPWATCH_STORE_WRITER
#define STEPWATCH_STORE_WRITER "stepwatch"
#endif

namespace stepwatch::store {

namespace {

// Migration N turns a version N-1 file into version N. Never edit a released entry: add one.
// Times are wall-clock nanoseconds (comparable across hosts); text columns default to '' so
// readers need no NULL checks, while "has not happened yet" times are NULL.
constexpr const char* kMigrations[] = {
    // 1: incidents with their page/ack/close lifecycle, actions, verdict transitions,
    //    supervisor state per job, and the processes seen per incarnation.
    R"sql(
CREATE TABLE incidents (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused, even after pruning
  job           TEXT    NOT NULL,
  incarnation   INTEGER NOT NULL,
  opened_at_ns  INTEGER NOT NULL,
  state         TEXT    NOT NULL,                   -- verdict state: stalled, dead, ...
  cause         TEXT    NOT NULL DEFAULT '',
  summary       TEXT    NOT NULL DEFAULT '',
  verdict_json  TEXT    NOT NULL DEFAULT '',
  paged_at_ns   INTEGER,                            -- set once, by the page claim
  page_result   TEXT    NOT NULL DEFAULT '',
  acked_at_ns   INTEGER,
  acked_by      TEXT    NOT NULL DEFAULT '',
  ack_note      TEXT    NOT NULL DEFAULT '',
  closed_at_ns  INTEGER,
  resolution    TEXT    NOT NULL DEFAULT ''
);
-- At most one open incident per job: a restarted supervisor joins it instead of opening another.
CREATE UNIQUE INDEX incidents_open_per_job ON incidents(job) WHERE closed_at_ns IS NULL;
CREATE INDEX incidents_by_job ON incidents(job, opened_at_ns);

CREATE TABLE actions (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  incident_id  INTEGER REFERENCES incidents(id) ON DELETE CASCADE,  -- NULL: not tied to one
  job          TEXT    NOT NULL,
  at_ns        INTEGER NOT NULL,
  kind         TEXT    NOT NULL,    -- page, page-failed, ack, collect, preempt, cleanup, ...
  ok           INTEGER NOT NULL,
  detail       TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX actions_by_incident ON actions(incident_id, at_ns);
CREATE INDEX actions_by_job ON actions(job, at_ns);

CREATE TABLE transitions (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  job          TEXT    NOT NULL,
  incarnation  INTEGER NOT NULL,
  at_ns        INTEGER NOT NULL,
  from_state   TEXT    NOT NULL,
  to_state     TEXT    NOT NULL,
  cause        TEXT    NOT NULL DEFAULT '',
  summary      TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX transitions_by_job ON transitions(job, at_ns);

CREATE TABLE supervisor_state (
  job                        TEXT    PRIMARY KEY,
  incarnation                INTEGER NOT NULL,
  restarts                   INTEGER NOT NULL,
  restarts_without_progress  INTEGER NOT NULL,
  checkpoint_id              TEXT    NOT NULL DEFAULT '',  -- last committed checkpoint
  checkpoint_step            INTEGER,
  interval_median_ns         INTEGER,                      -- learned step interval
  interval_p90_ns            INTEGER,
  interval_samples           INTEGER NOT NULL DEFAULT 0,
  updated_at_ns              INTEGER NOT NULL
) WITHOUT ROWID;

-- The key starts with the job, so "every process of job J" and "of J's incarnation N" are
-- index range scans. start_ticks guards against pid reuse.
CREATE TABLE processes (
  job            TEXT    NOT NULL,
  incarnation    INTEGER NOT NULL,
  pid            INTEGER NOT NULL,
  start_ticks    INTEGER NOT NULL,
  role           TEXT    NOT NULL DEFAULT '',   -- launcher, rank 3, child
  first_seen_ns  INTEGER NOT NULL,
  PRIMARY KEY (job, incarnation, pid, start_ticks)
) WITHOUT ROWID;
)sql",
    // 2: a page claim is not a delivery. delivered_at_ns is set when at least one target took
    //    the page (or there was none to send to); a claim without it is re-delivered after a
    //    restart. Rows of version 1 whose result says a target took the page count as delivered.
    R"sql(
ALTER TABLE incidents ADD COLUMN delivered_at_ns INTEGER;
UPDATE incidents SET delivered_at_ns = paged_at_ns
  WHERE paged_at_ns IS NOT NULL
    AND (page_result LIKE '%: sent after %' OR page_result LIKE 'no pager configured%');
)sql",
    // 3: the node-fault history. One row per incarnation of a job (how it ended, who was
    //    blamed, where it ran) and one per host blamed for a job's incarnation (the cross-job
    //    signal). Lists are JSON arrays, readable with json_each() from the sqlite3 shell.
    R"sql(
CREATE TABLE incarnations (
  job              TEXT    NOT NULL,
  incarnation      INTEGER NOT NULL,
  started_ns       INTEGER NOT NULL,
  ended_ns         INTEGER,                       -- NULL while it runs
  end_reason       TEXT    NOT NULL DEFAULT '',   -- finished, failed, preempted, gave-up, ...
  cause            TEXT    NOT NULL DEFAULT '',   -- the verdict's cause
  culprit_ranks    TEXT    NOT NULL DEFAULT '[]', -- JSON array of ints
  culprit_hosts    TEXT    NOT NULL DEFAULT '[]', -- JSON array of strings
  hosts            TEXT    NOT NULL DEFAULT '[]', -- JSON array of strings: every host it ran on
  checkpoint_step  INTEGER,
  scheduler_id     TEXT    NOT NULL DEFAULT '',   -- slurm:1234
  PRIMARY KEY (job, incarnation)
) WITHOUT ROWID;

CREATE TABLE host_implications (
  host         TEXT    NOT NULL,
  job          TEXT    NOT NULL,
  incarnation  INTEGER NOT NULL,
  at_ns        INTEGER NOT NULL,
  cause        TEXT    NOT NULL DEFAULT '',
  reason       TEXT    NOT NULL DEFAULT '',
  PRIMARY KEY (host, job, incarnation)
) WITHOUT ROWID;
CREATE INDEX host_implications_by_time ON host_implications(at_ns);
)sql",
    // 4: a page delivered from this node whose outcome the job's ledger (etcd, for a multi-node
    //    job) could not take then: kept here until it does, so that an agent restarted meanwhile
    //    records it rather than the page being sent again (review E14).
    R"sql(
CREATE TABLE kept_deliveries (
  job          TEXT    NOT NULL,
  incident_id  INTEGER NOT NULL,   -- the id in that ledger
  incarnation  INTEGER NOT NULL,   -- of the job, when it was paged
  at_ns        INTEGER NOT NULL,
  summary      TEXT    NOT NULL DEFAULT '',
  delivered    INTEGER NOT NULL,
  PRIMARY KEY (job, incident_id)
) WITHOUT ROWID;
)sql",
};

static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion,
              "one migration per schema version");

constexpr const char* kVersionTable = R"sql(
CREATE TABLE IF NOT EXISTS schema_version (
  version        INTEGER PRIMARY KEY,
  applied_at_ns  INTEGER NOT NULL,
  applied_by     TEXT    NOT NULL
);
)sql";

Result<int> read_version(Db& db) {
  auto stmt = db.prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version");
  if (!stmt) return stmt.error();
  auto row = stmt->step();
  if (!row) return row.error();
  return *row ? static_cast<int>(stmt->int64(0)) : 0;
}

Error too_new(const Db& db, int found) {
  return Error{Errc::kUnknownVersion,
               fmt::format("{}: written by a newer stepwatch (schema version {}, this build knows "
                           "up to {}); use that stepwatch or another state directory",
                           db.path(), found, kSchemaVersion)};
}

// Someone else's SQLite file must not grow stepwatch tables.
Status refuse_foreign(Db& db) {
  auto s = db.prepare(
      "SELECT count(*) FROM sqlite_master WHERE name NOT GLOB 'sqlite_*' AND name <> "
      "'schema_version'");
  if (!s) return s.error();
  auto row = s->step();
  if (!row) return row.error();
  if (!*row || s->int64(0) == 0) return {};
  return Error{Errc::kBadMagic,
               fmt::format("{}: a SQLite database that stepwatch did not write (no schema_version "
                           "table); move it away or use another state directory",
                           db.path())};
}

}  // namespace

Result<int> schema_version(Db& db) {
  auto exists = db.prepare(
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
  if (!exists) return exists.error();
  auto row = exists->step();
  if (!row) return row.error();
  if (!*row || exists->int64(0) == 0) return 0;
  return read_version(db);
}

Status migrate(Db& db, int64_t now_ns) {
  // Fast path without the write lock: a supervisor holding the database must not make a
  // concurrent `stepwatch incidents` wait just to learn that nothing needs migrating.
  auto current = schema_version(db);
  if (!current) return current.error();
  if (*current > kSchemaVersion) return too_new(db, *current);
  if (*current == kSchemaVersion) return {};

  auto tx = Tx::begin(db);
  if (!tx) return tx.error();
  auto version = schema_version(db);  // again, under the lock: another process may have migrated
  if (!version) return version.error();
  if (*version > kSchemaVersion) return too_new(db, *version);
  if (*version == 0) {
    if (auto st = refuse_foreign(db); !st) return st;
  }
  if (auto st = db.exec(kVersionTable); !st) return st;
  for (int v = *version + 1; v <= kSchemaVersion; ++v) {
    if (auto st = db.exec(kMigrations[v - 1]); !st) {
      return Error{st.error().code,
                   fmt::format("migrating to schema version {}: {}", v, st.error().message)};
    }
    auto ins = db.prepare(
        "INSERT INTO schema_version (version, applied_at_ns, applied_by) VALUES (?1, ?2, ?3)");
    if (!ins) return ins.error();
    if (auto st = ins->bind(1, int64_t{v}).bind(2, now_ns).bind(3, STEPWATCH_STORE_WRITER).run();
        !st)
      return st;
  }
  return tx->commit();
}

}  // namespace stepwatch::store
