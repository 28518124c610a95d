// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Two connections, several processes, a held write lock, and a process SIGKILLed right after
// it claimed a page: the guarantees "a restarted supervisor loses nothing and pages no one
// twice" rest on these.
//
// No Store is open in the parent across a fork(): SQLite forbids carrying a connection into a
// child, and its per-process lock bookkeeping would be shared by mistake.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "src/store/store.h"
#include "tests/support/temp_dir.h"

namespace stepwatch::store {
namespace {

using test::TempDir;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

NewIncident stall(const std::string& job) {
  return {job, 1, kT0, "stalled", "host", "no step for 10m", "{}"};
}

// A plain sqlite3 connection that holds the write lock until release().
class RawWriter {
 public:
  explicit RawWriter(const std::string& db) {
    sqlite3_open_v2(db.c_str(), &h_, SQLITE_OPEN_READWRITE, nullptr);
    ok_ = sqlite3_exec(h_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  ~RawWriter() { sqlite3_close_v2(h_); }
  bool ok() const { return ok_; }
  void release() { sqlite3_exec(h_, "COMMIT", nullptr, nullptr, nullptr); }

 private:
  sqlite3* h_ = nullptr;
  bool ok_ = false;
};

TEST(StoreConcurrency, TwoConnectionsSeeEachOthersWrites) {
  TempDir tmp;
  auto a = Store::open(tmp / "state");
  auto b = Store::open(tmp / "state");
  ASSERT_TRUE(a.ok() && b.ok());

  auto ref = a->open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  auto seen = b->open_incident_for("llm");
  ASSERT_TRUE(seen.ok() && seen->has_value());
  EXPECT_EQ((*seen)->id, ref->id);

  // The claim is shared: whoever claims first pages, the other connection gets false.
  auto cb = b->claim_page(ref->id, kT0 + 1);
  ASSERT_TRUE(cb.ok());
  EXPECT_TRUE(*cb);
  auto ca = a->claim_page(ref->id, kT0 + 2);
  ASSERT_TRUE(ca.ok());
  EXPECT_FALSE(*ca);

  // `stepwatch ack` from another process while the supervisor holds its connection.
  auto acked = b->ack("llm", kT0 + 3, "alice", "on it");
  ASSERT_TRUE(acked.ok() && acked->has_value());
  auto after = a->incident(ref->id);
  ASSERT_TRUE(after.ok() && after->has_value());
  EXPECT_EQ((*after)->acked_by, "alice");
  EXPECT_EQ((*after)->page_result, "claimed");

  ASSERT_TRUE(a->save_state({"llm", 2, 1, 0, "step_100", 100, 5, 7, 3, kT0}).ok());
  auto st = b->load_state("llm");
  ASSERT_TRUE(st.ok() && st->has_value());
  EXPECT_EQ((*st)->checkpoint_step, 100);
}

TEST(StoreConcurrency, ProcessKilledRightAfterClaimingLosesNothing) {
  TempDir tmp;
  std::string dir = tmp / "state";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto s = Store::open(dir);
    if (!s) _exit(10);
    auto ref = s->open_incident(stall("llm"));
    if (!ref) _exit(11);
    auto claimed = s->claim_page(ref->id, kT0 + 5);
    if (!claimed || !*claimed) _exit(12);
    raise(SIGKILL);  // no destructor, no checkpoint, no close: as a SIGKILLed supervisor
    _exit(13);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_TRUE(
      exists(dir + "/stepwatch.db-wal"));  // the commits live in the WAL, not yet checkpointed

  auto s = Store::open(dir);
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto open = s->open_incident_for("llm");
  ASSERT_TRUE(open.ok());
  ASSERT_TRUE(open->has_value());
  EXPECT_TRUE((*open)->is_open());
  EXPECT_EQ((*open)->paged_at_ns, kT0 + 5);
  EXPECT_EQ((*open)->page_result, "claimed");

  // The restarted supervisor re-observes the stall: it joins the incident and must not page.
  auto ref = s->open_incident(stall("llm"));
  ASSERT_TRUE(ref.ok());
  EXPECT_FALSE(ref->created);
  EXPECT_EQ(ref->id, (*open)->id);
  auto again = s->claim_page(ref->id, kT0 + 60);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

TEST(StoreConcurrency, WriterKilledInsideATransactionBlocksNobody) {
  TempDir tmp;
  std::string dir = tmp / "state";
  { ASSERT_TRUE(Store::open(dir).ok()); }
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    sqlite3* h = nullptr;
    if (sqlite3_open_v2((dir + "/stepwatch.db").c_str(), &h, SQLITE_OPEN_READWRITE, nullptr) !=
        SQLITE_OK)
      _exit(10);
    if (sqlite3_exec(h,
                     "BEGIN IMMEDIATE; INSERT INTO actions (job, at_ns, kind, ok) VALUES ('llm', "
                     "1, 'note', 1);",
                     nullptr, nullptr, nullptr) != SQLITE_OK) {
      _exit(11);
    }
    raise(SIGKILL);
    _exit(12);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);

  OpenOptions quick;
  quick.busy_timeout_ms = 2000;
  auto s = Store::open(dir, quick);
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto id = s->record_action({0, std::nullopt, "llm", 2, "restart", true, ""});
  ASSERT_TRUE(id.ok()) << id.error().message;
  auto acts = s->job_actions("llm", 0);
  ASSERT_TRUE(acts.ok());
  ASSERT_EQ(acts->size(), 1u);  // the killed writer's uncommitted row is gone
  EXPECT_EQ((*acts)[0].kind, "restart");
}

TEST(StoreConcurrency, ExactlyOneProcessWinsTheClaim) {
  TempDir tmp;
  std::string dir = tmp / "state";
  int64_t id = 0;
  {
    auto s = Store::open(dir);
    ASSERT_TRUE(s.ok());
    auto ref = s->open_incident(stall("llm"));
    ASSERT_TRUE(ref.ok());
    id = ref->id;
  }
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  constexpr int kProcs = 6;
  std::vector<pid_t> kids;
  for (int k = 0; k < kProcs; ++k) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(gate[1]);
      char c;
      (void)!read(gate[0], &c, 1);  // returns 0 when the parent closes the pipe: all start together
      auto s = Store::open(dir);
      if (!s) _exit(10);
      auto claimed = s->claim_page(id, kT0 + k);
      if (!claimed) _exit(11);
      _exit(*claimed ? 0 : 1);
    }
    kids.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);
  int winners = 0;
  int losers = 0;
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    int rc = WEXITSTATUS(status);
    EXPECT_TRUE(rc == 0 || rc == 1) << "child failed with " << rc;
    winners += rc == 0;
    losers += rc == 1;
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(losers, kProcs - 1);
}

TEST(StoreConcurrency, ProcessesCreatingTheSameFreshStoreMigrateItOnce) {
  TempDir tmp;
  std::string dir = tmp / "a/fresh/state";
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  constexpr int kProcs = 5;
  std::vector<pid_t> kids;
  for (int k = 0; k < kProcs; ++k) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(gate[1]);
      char c;
      (void)!read(gate[0], &c, 1);
      auto s = Store::open(dir);
      if (!s) {
        fprintf(stderr, "child %d: %s\n", k, s.error().message.c_str());
        _exit(10);
      }
      if (!s->open_incident(stall("job-" + std::to_string(k)))) _exit(11);
      _exit(0);
    }
    kids.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  auto s = Store::open(dir);
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto all = s->incidents("", 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), static_cast<size_t>(kProcs));
}

TEST(StoreConcurrency, AHeldWriteLockIsBusyAfterTheTimeoutAndNamesTheFile) {
  TempDir tmp;
  std::string dir = tmp / "state";
  OpenOptions quick;
  quick.busy_timeout_ms = 200;
  auto s = Store::open(dir, quick);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->open_incident(stall("llm")).ok());

  RawWriter writer(dir + "/stepwatch.db");
  ASSERT_TRUE(writer.ok());
  auto t0 = std::chrono::steady_clock::now();
  auto r = s->record_action({0, std::nullopt, "llm", 1, "note", true, ""});
  auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kBusy);
  EXPECT_NE(r.error().message.find(dir + "/stepwatch.db"), std::string::npos) << r.error().message;
  EXPECT_GE(waited, std::chrono::milliseconds(150));

  // Readers never wait for the writer (WAL).
  auto list = s->incidents("", 0);
  ASSERT_TRUE(list.ok()) << list.error().message;
  EXPECT_EQ(list->size(), 1u);
  auto claim = s->claim_page(list->front().id, 1);
  ASSERT_FALSE(claim.ok());
  EXPECT_EQ(claim.error().code, Errc::kBusy);
  writer.release();
  claim = s->claim_page(list->front().id, 2);
  ASSERT_TRUE(claim.ok()) << claim.error().message;
  EXPECT_TRUE(*claim);
}

TEST(StoreConcurrency, AWriterWaitsForAShortLock) {
  TempDir tmp;
  std::string dir = tmp / "state";
  auto s = Store::open(dir);  // default busy timeout: 5 s
  ASSERT_TRUE(s.ok());
  RawWriter writer(dir + "/stepwatch.db");
  ASSERT_TRUE(writer.ok());
  std::thread releaser([&writer] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    writer.release();
  });
  auto ref = s->open_incident(stall("llm"));
  releaser.join();
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  EXPECT_TRUE(ref->created);
}

}  // namespace
}  // namespace stepwatch::store
