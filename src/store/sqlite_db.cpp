// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/store/sqlite_db.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <cerrno>

namespace stepwatch::store {

namespace {

Errc errc_for(int rc, int sys_errno) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Errc::kBusy;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return Errc::kPermission;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return Errc::kBadMagic;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
      return Errc::kInvalidArgument;
    case SQLITE_NOTFOUND:
      return Errc::kNotFound;
    case SQLITE_CANTOPEN:
      if (sys_errno == EACCES || sys_errno == EPERM) return Errc::kPermission;
      if (sys_errno == ENOENT) return Errc::kNotFound;
      return Errc::kIo;
    default:
      return Errc::kIo;
  }
}

}  // namespace

// ---- Db ----

Result<std::unique_ptr<Db>> Db::open(const std::string& path, bool create) {
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  flags |= SQLITE_OPEN_PRIVATECACHE;  // one connection, one cache: no shared-cache locking
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    int sys = raw != nullptr ? sqlite3_system_errno(raw) : 0;
    std::string msg = raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close_v2(raw);  // a handle is returned even on failure; NULL is a no-op
    return Error{errc_for(rc, sys), fmt::format("{}: cannot open: {}", path, msg)};
  }
  sqlite3_extended_result_codes(raw, 1);
  return std::unique_ptr<Db>(new Db(raw, path));
}

Db::~Db() {
  for (auto& [sql, cached] : cache_) sqlite3_finalize(cached.stmt);
  cache_.clear();
  // close_v2: even if a statement were still alive the handle becomes a zombie, never a leak.
  sqlite3_close_v2(db_);
}

Error Db::error(int rc, std::string_view what) const {
  // errmsg describes the most recent failure on this connection; fall back to the code's text
  // when it has been overwritten since (it then says "not an error").
  const char* msg = sqlite3_errcode(db_) != SQLITE_OK ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  Errc code = errc_for(rc, sqlite3_system_errno(db_));
  std::string text = fmt::format("{}: {}: {}", path_, what, msg);
  if (code == Errc::kBusy) text += " (another process holds the lock)";
  return Error{code, std::move(text)};
}

Status Db::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return {};
  std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  return Error{errc_for(rc, sqlite3_system_errno(db_)), fmt::format("{}: {}: {}", path_, sql, msg)};
}

Result<std::string> Db::query_text(const char* sql) {
  auto stmt = prepare(sql);
  if (!stmt) return stmt.error();
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return Error{Errc::kIo, fmt::format("{}: {}: returned no row", path_, sql)};
  return stmt->text(0);
}

Result<Stmt> Db::prepare(const char* sql) {
  auto it = cache_.find(std::string_view(sql));
  if (it != cache_.end() && !it->second.in_use) {
    it->second.in_use = true;
    return Stmt(this, it->second.stmt, false);
  }
  bool cacheable = it == cache_.end();
  sqlite3_stmt* raw = nullptr;
  int rc =
      sqlite3_prepare_v3(db_, sql, -1, cacheable ? SQLITE_PREPARE_PERSISTENT : 0, &raw, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(raw);
    return error(rc, fmt::format("preparing \"{}\"", sql));
  }
  if (!cacheable) return Stmt(this, raw, true);  // re-entrant use of a busy cached statement
  cache_.emplace(sql, Cached{raw, true});
  return Stmt(this, raw, false);
}

int64_t Db::last_insert_id() const {
  return sqlite3_last_insert_rowid(db_);
}
int64_t Db::changes() const {
  return sqlite3_changes64(db_);
}

// ---- Stmt ----

Stmt::Stmt(Stmt&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_), owned_(other.owned_), bind_rc_(other.bind_rc_) {
  other.stmt_ = nullptr;
}

Stmt::~Stmt() {
  if (stmt_ == nullptr) return;
  if (owned_) {
    sqlite3_finalize(stmt_);
    return;
  }
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  auto it = db_->cache_.find(std::string_view(sqlite3_sql(stmt_)));
  if (it != db_->cache_.end() && it->second.stmt == stmt_) it->second.in_use = false;
}

// A failed bind (SQLITE_RANGE: a wrong index; SQLITE_NOMEM; SQLITE_TOOBIG) is kept and reported
// by step(), so call sites chain binds without checking each one.
Stmt& Stmt::bind(int index, int64_t value) {
  note_bind(sqlite3_bind_int64(stmt_, index, value));
  return *this;
}

Stmt& Stmt::bind(int index, std::string_view value) {
  note_bind(
      sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}

Stmt& Stmt::bind(int index, const std::optional<int64_t>& value) {
  return value ? bind(index, *value) : bind_null(index);
}

Stmt& Stmt::bind_null(int index) {
  note_bind(sqlite3_bind_null(stmt_, index));
  return *this;
}

void Stmt::note_bind(int rc) {
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
}

Result<bool> Stmt::step() {
  if (bind_rc_ != SQLITE_OK) {
    return Error{Errc::kInvalidArgument, fmt::format("{}: binding \"{}\": {}", db_->path(),
                                                     sqlite3_sql(stmt_), sqlite3_errstr(bind_rc_))};
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->error(rc, fmt::format("\"{}\"", sqlite3_sql(stmt_)));
}

Status Stmt::run() {
  auto r = step();
  if (!r) return r.error();
  return {};
}

int64_t Stmt::int64(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

std::optional<int64_t> Stmt::opt_int64(int column) const {
  if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(stmt_, column);
}

std::string Stmt::text(int column) const {
  const unsigned char* p = sqlite3_column_text(stmt_, column);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

// ---- Tx ----

Result<Tx> Tx::begin(Db& db, bool durable) {
  if (durable) {
    if (auto st = db.exec("PRAGMA synchronous=FULL"); !st) return st.error();
  }
  if (auto st = db.exec("BEGIN IMMEDIATE"); !st) {
    if (durable) (void)db.exec("PRAGMA synchronous=NORMAL");
    return st.error();
  }
  return Tx(&db, durable);
}

Tx::~Tx() {
  if (db_ != nullptr) end("ROLLBACK");
}

void Tx::end(const char* sql) {
  (void)db_->exec(sql);  // a failed ROLLBACK means SQLite already rolled back
  if (durable_) (void)db_->exec("PRAGMA synchronous=NORMAL");
  db_ = nullptr;
}

Status Tx::commit() {
  auto st = db_->exec("COMMIT");
  if (st) {
    if (durable_) (void)db_->exec("PRAGMA synchronous=NORMAL");
    db_ = nullptr;
  }
  return st;  // on failure the destructor rolls back
}

}  // namespace stepwatch::store
