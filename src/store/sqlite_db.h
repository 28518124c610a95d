// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Thin RAII over the SQLite C API: one Db per connection, statements prepared once and cached,
// a transaction guard that rolls back unless committed. Every failure becomes an Error that
// names the database file and carries SQLite's own message. Nothing here throws; nothing is
// global. A Db is used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "src/common/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace stepwatch::store {

class Db;

// A prepared statement borrowed from the Db's cache. Binding indexes start at 1, columns at 0.
// The statement is reset and its bindings cleared when the Stmt goes out of scope, so a
// half-stepped SELECT never keeps a read snapshot open.
class Stmt {
 public:
  Stmt(Stmt&& other) noexcept;
  Stmt& operator=(Stmt&&) = delete;
  Stmt(const Stmt&) = delete;
  ~Stmt();

  Stmt& bind(int index, int64_t value);
  Stmt& bind(int index, std::string_view value);
  Stmt& bind(int index, const std::optional<int64_t>& value);
  Stmt& bind_null(int index);

  // One step: true when a row is available, false when done. Errors name the file and SQL.
  Result<bool> step();
  // Steps a statement that returns no rows (INSERT/UPDATE/DELETE).
  Status run();

  int64_t int64(int column) const;
  std::optional<int64_t> opt_int64(int column) const;
  std::string text(int column) const;

 private:
  friend class Db;
  Stmt(Db* db, sqlite3_stmt* stmt, bool owned) : db_(db), stmt_(stmt), owned_(owned) {}
  void note_bind(int rc);

  Db* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  bool owned_ = false;  // true: not from the cache (the cached one was busy); finalized here
  int bind_rc_ = 0;     // the first failed bind, reported by step()
};

class Db {
 public:
  // Opens (creating when `create`) the file at `path`. Sets nothing else: see Store::open.
  static Result<std::unique_ptr<Db>> open(const std::string& path, bool create);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  const std::string& path() const { return path_; }

  // Executes one or more statements without results (PRAGMA, DDL, BEGIN, COMMIT).
  Status exec(const char* sql);
  // Executes a statement that returns one text value (PRAGMA journal_mode=WAL).
  Result<std::string> query_text(const char* sql);
  Result<Stmt> prepare(const char* sql);

  int64_t last_insert_id() const;
  int64_t changes() const;

  // "<path>: <what>: <sqlite message>" with an Errc chosen from SQLite's result code.
  Error error(int rc, std::string_view what) const;

 private:
  friend class Stmt;
  Db(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  struct Cached {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  sqlite3* db_ = nullptr;
  std::string path_;
  std::map<std::string, Cached, std::less<>> cache_;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back on scope exit unless commit() succeeded. IMMEDIATE
// takes the write lock up front, where the busy timeout applies; a deferred transaction that
// upgrades from read to write can fail with SQLITE_BUSY without waiting.
// durable: the commit fsyncs the WAL (synchronous=FULL for this transaction only; the setting
// cannot change inside a transaction, so it is switched around it).
class Tx {
 public:
  static Result<Tx> begin(Db& db, bool durable = false);
  Tx(Tx&& other) noexcept : db_(other.db_), durable_(other.durable_) { other.db_ = nullptr; }
  Tx& operator=(Tx&&) = delete;
  ~Tx();
  Status commit();

 private:
  Tx(Db* db, bool durable) : db_(db), durable_(durable) {}
  void end(const char* sql);

  Db* db_ = nullptr;
  bool durable_ = false;
};

}  // namespace stepwatch::store
