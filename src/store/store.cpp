// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Store::open and the incident lifecycle. History, state and processes: store_history.cpp.
#include "src/store/store.h"

#include <errno.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "src/common/clock.h"
#include "src/store/schema.h"
#include "src/store/sqlite_db.h"
#include "src/store/store_rows.h"

namespace stepwatch::store {

namespace {

// The WAL is truncated back to this size after a checkpoint, so an agent that once wrote a
// burst does not keep a large -wal file forever.
constexpr int64_t kWalSizeLimitBytes = 4 * 1024 * 1024;

Errc errc_for_errno(int err) {
  if (err == EACCES || err == EPERM || err == EROFS) return Errc::kPermission;
  if (err == ENOENT) return Errc::kNotFound;
  if (err == ENOTDIR) return Errc::kInvalidArgument;
  return Errc::kIo;
}

// mkdir -p: missing parents get the default mode, the state directory itself 0700 (incident
// notes and verdicts are nobody else's business).
Status ensure_dir(const std::string& dir, bool create) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return Error{Errc::kInvalidArgument,
                   fmt::format("{}: state directory is not a directory", dir)};
    return {};
  }
  int err = errno;
  // ENOTDIR: a parent is a file; the mkdir loop below names it.
  if (err != ENOENT && err != ENOTDIR)
    return Error{errc_for_errno(err),
                 fmt::format("{}: state directory: {}", dir, std::strerror(err))};
  if (!create) return Error{Errc::kNotFound, fmt::format("{}: no such state directory", dir)};

  std::string parent;
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    bool leaf = pos == dir.size() || dir.find_first_not_of('/', pos) == std::string::npos;
    if (::mkdir(prefix.c_str(), leaf ? 0700 : 0777) == 0 || errno == EEXIST) {
      parent = prefix;
      continue;
    }
    err = errno;
    std::string why =
        err == ENOTDIR && !parent.empty() ? parent + " is not a directory" : std::strerror(err);
    if (err != ENOTDIR && prefix != dir) why += " (at " + prefix + ")";
    return Error{errc_for_errno(err),
                 fmt::format("{}: cannot create state directory: {}", dir, why)};
  }
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("{}: state directory is not a directory", dir)};
  }
  return {};
}

// Switching a fresh file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at
// once, without its busy handler, when another connection opened the file in the meantime (two
// processes creating the same state directory). So this one statement retries by itself.
Result<std::string> switch_to_wal(Db& db, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto mode = db.query_text("PRAGMA journal_mode=WAL");
    if (mode || mode.error().code != Errc::kBusy || std::chrono::steady_clock::now() >= deadline)
      return mode;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// D21: an existing 0-byte database is a store that lost its contents (truncated after a crash
// on a full disk, or by hand), not a new one: taken as new, it would forget every incident and
// page the open ones again. A process creating the store right now writes the header within
// milliseconds, so only a zero length that lasts is refused.
Status refuse_empty_database(const std::string& path, int busy_timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(std::clamp(busy_timeout_ms, 50, 1000));
  for (;;) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 0) return {};
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Error{Errc::kTruncated,
               fmt::format("{}: the database file is empty (0 bytes, truncated?): its incident "
                           "history is gone, and a new store would page every open incident "
                           "again. Move it away to keep it, or start a new store on purpose "
                           "with `stepwatch run --new-store` or `stepwatch agent --new-store`",
                           path)};
}

Error prefixed(const Error& e, std::string_view what) {
  return Error{e.code, fmt::format("{} ({})", e.message, what)};
}

Error no_incident(const Db& db, int64_t id) {
  return Error{Errc::kNotFound, fmt::format("{}: no incident #{}", db.path(), id)};
}

// nullopt: no such incident; otherwise whether it is closed.
Result<std::optional<bool>> closed_flag(Db& db, int64_t id) {
  auto s = db.prepare("SELECT closed_at_ns IS NOT NULL FROM incidents WHERE id = ?1");
  if (!s) return s.error();
  s->bind(1, id);
  auto row = s->step();
  if (!row) return row.error();
  if (!*row) return std::optional<bool>();
  return std::optional<bool>(s->int64(0) != 0);
}

}  // namespace

Store::Store(std::unique_ptr<Db> db) : db_(std::move(db)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

const std::string& Store::path() const {
  return db_->path();
}

Result<Store> Store::open(const std::string& state_dir, const OpenOptions& options) {
  if (state_dir.empty()) return Error{Errc::kInvalidArgument, "state directory is empty"};
  if (auto st = ensure_dir(state_dir, options.create); !st) return st.error();
  std::string path = state_dir + (state_dir.back() == '/' ? "" : "/") + kDbFileName;
  if (!options.create) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      int err = errno;
      if (err == ENOENT)
        return Error{Errc::kNotFound, fmt::format("{}: no stepwatch database here yet", path)};
      return Error{errc_for_errno(err), fmt::format("{}: {}", path, std::strerror(err))};
    }
  }
  if (!options.fresh_if_empty) {
    if (auto st = refuse_empty_database(path, options.busy_timeout_ms); !st) return st.error();
  }
  // A build with SQLITE_USE_URI reads "file:..." as a URI; "./file:..." stays a file name.
  auto db = Db::open(path.rfind("file:", 0) == 0 ? "./" + path : path, options.create);
  if (!db) return db.error();
  Db& d = **db;

  // The busy timeout first: switching to WAL and migrating both take locks.
  if (auto st = d.exec(fmt::format("PRAGMA busy_timeout={}", options.busy_timeout_ms).c_str());
      !st) {
    return st.error();
  }
  auto mode = switch_to_wal(d, options.busy_timeout_ms);
  if (!mode) {
    if (mode.error().code == Errc::kBadMagic) {
      return Error{Errc::kBadMagic,
                   fmt::format("{}: file is not a database (not stepwatch's; move it away or use "
                               "another state directory)",
                               path)};
    }
    return prefixed(mode.error(), "while switching to WAL");
  }
  if (*mode != "wal") {
    return Error{Errc::kIo,
                 fmt::format("{}: journal mode stays '{}', WAL is required (a state directory on a "
                             "network filesystem cannot hold a WAL database)",
                             path, *mode)};
  }
  std::string pragmas = fmt::format(
      "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA journal_size_limit={};",
      kWalSizeLimitBytes);
  if (auto st = d.exec(pragmas.c_str()); !st) return st.error();
  if (auto st = migrate(d, options.now_ns != 0 ? options.now_ns : wall_now_ns()); !st)
    return st.error();
  return Store(std::move(*db));
}

// ---- incidents ----

Result<IncidentRef> Store::open_incident(const NewIncident& n) {
  if (n.job.empty())
    return Error{Errc::kInvalidArgument, fmt::format("{}: open_incident: empty job id", path())};
  if (n.state.empty())
    return Error{Errc::kInvalidArgument,
                 fmt::format("{}: open_incident for {}: empty state", path(), n.job)};
  auto tx = Tx::begin(*db_, /*durable=*/true);
  if (!tx) return tx.error();
  {
    auto open = db_->prepare("SELECT id FROM incidents WHERE job = ?1 AND closed_at_ns IS NULL");
    if (!open) return open.error();
    open->bind(1, n.job);
    auto row = open->step();
    if (!row) return row.error();
    if (*row) return IncidentRef{open->int64(0), false};  // nothing written; the Tx rolls back
  }
  auto ins = db_->prepare(
      "INSERT INTO incidents (job, incarnation, opened_at_ns, state, cause, summary, verdict_json) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!ins) return ins.error();
  auto st = ins->bind(1, n.job)
                .bind(2, n.incarnation)
                .bind(3, n.at_ns)
                .bind(4, n.state)
                .bind(5, n.cause)
                .bind(6, n.summary)
                .bind(7, n.verdict_json)
                .run();
  if (!st) return st.error();
  int64_t id = db_->last_insert_id();
  if (auto c = tx->commit(); !c) return c.error();
  return IncidentRef{id, true};
}

Result<std::optional<Incident>> Store::open_incident_for(const std::string& job) {
  auto s = db_->prepare("SELECT " SW_INCIDENT_COLUMNS
                        " FROM incidents WHERE job = ?1 AND closed_at_ns IS NULL");
  if (!s) return s.error();
  s->bind(1, job);
  return read_optional<Incident>(*s, read_incident);
}

Result<std::optional<Incident>> Store::incident(int64_t id) {
  auto s = db_->prepare("SELECT " SW_INCIDENT_COLUMNS " FROM incidents WHERE id = ?1");
  if (!s) return s.error();
  s->bind(1, id);
  return read_optional<Incident>(*s, read_incident);
}

Status Store::update_incident(int64_t id, std::string_view state, std::string_view cause,
                              std::string_view summary, std::string_view verdict_json) {
  auto s = db_->prepare(
      "UPDATE incidents SET state = ?2, cause = ?3, summary = ?4, verdict_json = ?5 "
      "WHERE id = ?1 AND closed_at_ns IS NULL");
  if (!s) return s.error();
  if (auto st =
          s->bind(1, id).bind(2, state).bind(3, cause).bind(4, summary).bind(5, verdict_json).run();
      !st) {
    return st;
  }
  if (db_->changes() == 1) return {};
  auto closed = closed_flag(*db_, id);
  if (!closed) return closed.error();
  if (!*closed) return no_incident(*db_, id);
  return Error{Errc::kInvalidArgument, fmt::format("{}: incident #{} is closed", path(), id)};
}

Result<bool> Store::claim_page(int64_t id, int64_t at_ns) {
  auto tx = Tx::begin(*db_, /*durable=*/true);
  if (!tx) return tx.error();
  {
    // The whole claim is this one conditional UPDATE: SQLite serialises writers, so exactly
    // one connection sees changes() == 1.
    auto s = db_->prepare(
        "UPDATE incidents SET paged_at_ns = ?2, page_result = 'claimed' "
        "WHERE id = ?1 AND paged_at_ns IS NULL AND closed_at_ns IS NULL");
    if (!s) return s.error();
    if (auto st = s->bind(1, id).bind(2, at_ns).run(); !st) return st.error();
  }
  if (db_->changes() == 1) {
    if (auto c = tx->commit(); !c) return c.error();
    return true;
  }
  auto closed = closed_flag(*db_, id);
  if (!closed) return closed.error();
  if (!*closed) return no_incident(*db_, id);
  return false;
}

Status Store::mark_paged(int64_t id, int64_t at_ns, std::string_view result, bool delivered) {
  auto tx = Tx::begin(*db_, /*durable=*/true);
  if (!tx) return tx.error();
  {
    auto s = db_->prepare(
        "UPDATE incidents SET paged_at_ns = COALESCE(paged_at_ns, ?2), page_result = ?3, "
        "delivered_at_ns = CASE WHEN ?4 THEN COALESCE(delivered_at_ns, ?2) ELSE delivered_at_ns "
        "END WHERE id = ?1");
    if (!s) return s.error();
    if (auto st = s->bind(1, id).bind(2, at_ns).bind(3, result).bind(4, int64_t{delivered}).run();
        !st)
      return st;
  }
  if (db_->changes() != 1) return no_incident(*db_, id);
  return tx->commit();
}

Status Store::release_page(int64_t id, std::string_view result) {
  auto tx = Tx::begin(*db_, /*durable=*/true);
  if (!tx) return tx.error();
  {
    auto s =
        db_->prepare("UPDATE incidents SET paged_at_ns = NULL, page_result = ?2 WHERE id = ?1");
    if (!s) return s.error();
    if (auto st = s->bind(1, id).bind(2, result).run(); !st) return st;
  }
  if (db_->changes() != 1) return no_incident(*db_, id);
  return tx->commit();
}

Result<std::optional<Incident>> Store::ack(const std::string& job, int64_t at_ns,
                                           std::string_view by, std::string_view note) {
  auto tx = Tx::begin(*db_, /*durable=*/true);
  if (!tx) return tx.error();
  auto open = open_incident_for(job);
  if (!open) return open.error();
  if (!*open) return std::optional<Incident>();
  int64_t id = (*open)->id;
  {
    // SET expressions see the row as it was, so the CASEs keep the first ack's name and note.
    auto s = db_->prepare(
        "UPDATE incidents SET acked_at_ns = COALESCE(acked_at_ns, ?2), "
        "acked_by = CASE WHEN acked_at_ns IS NULL THEN ?3 ELSE acked_by END, "
        "ack_note = CASE WHEN acked_at_ns IS NULL THEN ?4 ELSE ack_note END WHERE id = ?1");
    if (!s) return s.error();
    if (auto st = s->bind(1, id).bind(2, at_ns).bind(3, by).bind(4, note).run(); !st)
      return st.error();
  }
  std::string detail = note.empty() ? std::string(by) : fmt::format("{}: {}", by, note);
  auto act = record_action(Action{0, id, job, at_ns, std::string(action_kind::kAck), true, detail});
  if (!act) return act.error();
  auto updated = incident(id);
  if (!updated) return updated.error();
  if (auto c = tx->commit(); !c) return c.error();
  return updated;
}

Status Store::close_incident(int64_t id, int64_t at_ns, std::string_view resolution) {
  auto tx = Tx::begin(*db_, /*durable=*/true);
  if (!tx) return tx.error();
  {
    auto s = db_->prepare(
        "UPDATE incidents SET closed_at_ns = ?2, resolution = ?3 WHERE id = ?1 AND closed_at_ns IS "
        "NULL");
    if (!s) return s.error();
    if (auto st = s->bind(1, id).bind(2, at_ns).bind(3, resolution).run(); !st) return st;
  }
  if (db_->changes() == 0) {
    auto closed = closed_flag(*db_, id);
    if (!closed) return closed.error();
    if (!*closed) return no_incident(*db_, id);
  }
  return tx->commit();
}

Result<std::vector<Incident>> Store::incidents(const std::string& job, int limit) {
  // Two statements rather than "(?1 = '' OR job = ?1)", which would keep SQLite off the index.
  auto s = job.empty() ? db_->prepare("SELECT " SW_INCIDENT_COLUMNS
                                      " FROM incidents "
                                      "ORDER BY opened_at_ns DESC, id DESC LIMIT ?2")
                       : db_->prepare("SELECT " SW_INCIDENT_COLUMNS
                                      " FROM incidents WHERE job = ?1 "
                                      "ORDER BY opened_at_ns DESC, id DESC LIMIT ?2");
  if (!s) return s.error();
  if (!job.empty()) s->bind(1, job);
  s->bind(2, int64_t{limit > 0 ? limit : -1});  // a negative LIMIT is no limit
  return read_all<Incident>(*s, read_incident);
}

}  // namespace stepwatch::store
