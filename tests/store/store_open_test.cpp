// Store::open: the state directory, WAL, the schema version, and the errors a person will read
// when something is wrong with the state directory.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

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
  EXPECT_EQ(raw_query(tmp / "state/stepwatch.db", "SELECT count(*) FROM schema_version"), "1");
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

}  // namespace
}  // namespace stepwatch::store
