// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Store::open: the state directory, WAL, the schema version, and the errors a person will read
// when something is wrong with the state directory.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "src/store/schema.h"
#include "src/store/store.h"
#include "tests/support/temp_dir.h"

namespace stepwatch::store {
namespace {

using test::TempDir;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Runs SQL on the file through a plain sqlite3 handle, outside the Store.
std::string raw_query(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  std::string out;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_exec(
        h, sql.c_str(),
        [](void* o, int n, char** vals, char**) {
          if (n > 0 && vals[0] != nullptr) *static_cast<std::string*>(o) = vals[0];
          return 0;
        },
        &out, nullptr);
  }
  sqlite3_close_v2(h);
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(StoreOpen, CreatesThePrivateStateDirectoryAndAWalDatabase) {
  TempDir tmp;
  std::string dir = tmp / "a/b/state";
  auto s = Store::open(dir);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->path(), dir + "/stepwatch.db");

  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(exists(dir + "/stepwatch.db"));

  ASSERT_TRUE(s->open_incident({"llm", 1, 1, "stalled", "", "", ""}).ok());
  EXPECT_TRUE(exists(dir + "/stepwatch.db-wal"));  // while this connection is open
  EXPECT_EQ(raw_query(dir + "/stepwatch.db", "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw_query(dir + "/stepwatch.db", "SELECT MAX(version) FROM schema_version"),
            std::to_string(kSchemaVersion));
  EXPECT_TRUE(contains(raw_query(dir + "/stepwatch.db", "SELECT applied_by FROM schema_version"),
                       "stepwatch"));
}

TEST(StoreOpen, AnExistingDirectoryKeepsItsMode) {
  TempDir tmp;
  std::string dir = tmp / "state";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  auto s = Store::open(dir + "/");  // a trailing slash is fine
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->path(), dir + "/stepwatch.db");
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
}

TEST(StoreOpen, ReopeningDoesNotMigrateAgain) {
  TempDir tmp;
  { ASSERT_TRUE(Store::open(tmp / "state").ok()); }
  { ASSERT_TRUE(Store::open(tmp / "state").ok()); }
  EXPECT_EQ(raw_query(tmp / "state/stepwatch.db", "SELECT count(*) FROM schema_version"),
            std::to_string(kSchemaVersion));
}

TEST(StoreOpen, NotADatabaseNamesTheFile) {
  TempDir tmp;
  std::string dir = tmp / "state";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  {
    std::ofstream f(dir + "/stepwatch.db");
    f << "this is not a database, it is a text file that someone copied here by mistake\n";
    for (int k = 0; k < 200; ++k) f << "padding padding padding padding\n";
  }
  auto s = Store::open(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::kBadMagic);
  EXPECT_TRUE(contains(s.error().message, dir + "/stepwatch.db")) << s.error().message;
  EXPECT_TRUE(contains(s.error().message, "file is not a database")) << s.error().message;
}

TEST(StoreOpen, SomeoneElsesSqliteFileIsLeftAlone) {
  TempDir tmp;
  std::string dir = tmp / "state";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/stepwatch.db").c_str(), &h), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(h, "CREATE TABLE photos (id INTEGER PRIMARY KEY)", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close_v2(h);

  auto s = Store::open(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::kBadMagic);
  EXPECT_TRUE(contains(s.error().message,
                       dir + "/stepwatch.db: a SQLite database that stepwatch did not write"))
      << s.error().message;
  EXPECT_EQ(raw_query(dir + "/stepwatch.db",
                      "SELECT count(*) FROM sqlite_master WHERE name = 'incidents'"),
            "0");
}

TEST(StoreOpen, UncreatableStateDirectoryIsNamed) {
  TempDir tmp;
  std::string file = tmp / "plain-file";
  { std::ofstream(file) << "x"; }
  std::string dir = file + "/state";
  auto s = Store::open(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(contains(s.error().message, dir)) << s.error().message;
  EXPECT_TRUE(contains(s.error().message, "cannot create state directory")) << s.error().message;
  EXPECT_TRUE(contains(s.error().message, file + " is not a directory")) << s.error().message;
}

TEST(StoreOpen, StateDirectoryThatIsAFile) {
  TempDir tmp;
  std::string file = tmp / "plain-file";
  { std::ofstream(file) << "x"; }
  auto s = Store::open(file);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(contains(s.error().message, file + ": state directory is not a directory"))
      << s.error().message;
}

TEST(StoreOpen, PermissionDeniedIsNamed) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  TempDir tmp;
  std::string locked = tmp / "locked";
  ASSERT_EQ(::mkdir(locked.c_str(), 0500), 0);
  auto s = Store::open(locked + "/state");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::kPermission);
  EXPECT_TRUE(contains(s.error().message, locked + "/state")) << s.error().message;
}

TEST(StoreOpen, WithoutCreateNothingIsCreated) {
  TempDir tmp;
  OpenOptions no_create;
  no_create.create = false;
  auto missing = Store::open(tmp / "state", no_create);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kNotFound);
  EXPECT_TRUE(contains(missing.error().message, tmp / "state: no such state directory"))
      << missing.error().message;
  EXPECT_FALSE(exists(tmp / "state"));

  std::string dir = tmp / "empty";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  auto no_db = Store::open(dir, no_create);
  ASSERT_FALSE(no_db.ok());
  EXPECT_EQ(no_db.error().code, Errc::kNotFound);
  EXPECT_TRUE(contains(no_db.error().message, dir + "/stepwatch.db")) << no_db.error().message;
  EXPECT_FALSE(exists(dir + "/stepwatch.db"));

  ASSERT_TRUE(Store::open(dir).ok());
  EXPECT_TRUE(Store::open(dir, no_create).ok());
}

TEST(StoreOpen, AVersion1StoreCountsPagesItsResultSaysWereSentAsDelivered) {
  TempDir tmp;
  std::string dir = tmp / "state";
  int64_t sent = 0, claimed = 0, failed = 0;
  {
    auto s = Store::open(dir);
    ASSERT_TRUE(s.ok());
    auto open = [&](const char* job, const char* result) {
      NewIncident ni;
      ni.job = job;
      ni.at_ns = 1;
      ni.state = "stalled";
      auto ref = s->open_incident(ni);
      EXPECT_TRUE(*s->claim_page(ref->id, 5));
      if (result) {
        EXPECT_TRUE(s->mark_paged(ref->id, 6, result).ok());
      }
      return ref->id;
    };
    sent = open("a", "webhook http://h/x: sent after 1 attempt(s): HTTP 200");
    claimed = open("b", nullptr);
    failed = open("c", "webhook http://h/x: FAILED after 3 attempt(s): refused");
  }
  // Back to what version 1 wrote: no delivered_at_ns column.
  raw_query(dir + "/stepwatch.db", "ALTER TABLE incidents DROP COLUMN delivered_at_ns");
  raw_query(dir + "/stepwatch.db",
            "DROP TABLE incarnations; DROP TABLE host_implications; DROP TABLE kept_deliveries");
  raw_query(dir + "/stepwatch.db", "DELETE FROM schema_version WHERE version >= 2");
  auto s = Store::open(dir);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_FALSE((*s->incident(sent))->page_undelivered());
  EXPECT_EQ((*s->incident(sent))->delivered_at_ns, 5);
  EXPECT_TRUE((*s->incident(claimed))->page_undelivered());
  EXPECT_TRUE((*s->incident(failed))->page_undelivered());
}

TEST(StoreOpen, NewerSchemaIsRefused) {
  TempDir tmp;
  std::string dir = tmp / "state";
  { ASSERT_TRUE(Store::open(dir).ok()); }
  raw_query(dir + "/stepwatch.db",
            "INSERT INTO schema_version (version, applied_at_ns, applied_by) VALUES (7, 0, "
            "'stepwatch 9.0')");
  auto s = Store::open(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::kUnknownVersion);
  EXPECT_TRUE(contains(s.error().message, dir + "/stepwatch.db")) << s.error().message;
  EXPECT_TRUE(contains(s.error().message, "written by a newer stepwatch")) << s.error().message;
  EXPECT_TRUE(contains(s.error().message, "schema version 7")) << s.error().message;
}

TEST(StoreOpen, EmptyStateDirArgument) {
  auto s = Store::open("");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::kInvalidArgument);
}

off_t size_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

// D21: a store truncated to 0 bytes lost its incidents; taking it for a new one would page every
// open incident again. It is refused, untouched, with the way to start afresh.
TEST(StoreOpen, AnEmptyDatabaseFileIsRefusedUntouched) {
  TempDir tmp;
  std::string dir = tmp / "state";
  { ASSERT_TRUE(Store::open(dir).ok()); }
  std::string db = dir + "/stepwatch.db";
  ASSERT_EQ(::truncate(db.c_str(), 0), 0);
  for (bool create : {true, false}) {
    OpenOptions o;
    o.create = create;
    o.busy_timeout_ms = 50;
    auto s = Store::open(dir, o);
    ASSERT_FALSE(s.ok()) << "create=" << create;
    EXPECT_EQ(s.error().code, Errc::kTruncated);
    EXPECT_TRUE(contains(s.error().message, db + ": the database file is empty (0 bytes"))
        << s.error().message;
    EXPECT_TRUE(contains(s.error().message, "--new-store")) << s.error().message;
    EXPECT_EQ(size_of(db), 0) << "nothing written to it";
  }
}

TEST(StoreOpen, FreshIfEmptyStartsANewStoreOnAnEmptyFileOnly) {
  TempDir tmp;
  std::string dir = tmp / "state";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  std::string db = dir + "/stepwatch.db";
  { std::ofstream(db.c_str()); }
  ASSERT_EQ(size_of(db), 0);
  OpenOptions fresh;
  fresh.fresh_if_empty = true;
  {
    auto s = Store::open(dir, fresh);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_TRUE(s->open_incident({"llm", 1, 1, "stalled", "", "", ""}).ok());
  }
  EXPECT_GT(size_of(db), 0);
  // Now it is a store like any other: opened without the option, and never emptied by it.
  for (const OpenOptions& o : {OpenOptions{}, fresh}) {
    auto s = Store::open(dir, o);
    ASSERT_TRUE(s.ok()) << s.error().message;
    auto inc = s->open_incident_for("llm");
    ASSERT_TRUE(inc.ok()) << inc.error().message;
    EXPECT_TRUE(inc->has_value()) << "the incident is kept";
  }
}

// An empty file that another process is turning into a store right now (its header follows
// within milliseconds) is waited for, not refused.
TEST(StoreOpen, AnEmptyFileBeingCreatedIsWaitedFor) {
  TempDir tmp;
  std::string dir = tmp / "state";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  { std::ofstream((dir + "/stepwatch.db").c_str()); }
  std::thread creator([&dir] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    OpenOptions fresh;
    fresh.fresh_if_empty = true;
    EXPECT_TRUE(Store::open(dir, fresh).ok());
  });
  auto s = Store::open(dir);
  creator.join();
  EXPECT_TRUE(s.ok()) << s.error().message;
}

}  // namespace
}  // namespace stepwatch::store
