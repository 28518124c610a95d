// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch incidents` over a real store: empty, with incidents and actions, filtered, as JSON,
// and the messages for a state directory that is missing or from a newer stepwatch.
#include "src/cli/incidents.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "src/store/store.h"
#include "tests/support/temp_dir.h"

namespace stepwatch::cli {
namespace {

using store::Store;
using test::TempDir;

constexpr int64_t kT0 = 1'714'533'164'000'000'000;  // 2024-05-01T03:12:44Z
constexpr int64_t kSec = 1'000'000'000;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct Report {
  int rc = -1;
  std::string out;
  std::string err;
};

Report report(const std::string& dir, const std::string& job, bool json, int limit = 0) {
  Report r;
  r.rc = incidents_report(dir, job, json, limit, &r.out, &r.err);
  return r;
}

// Two jobs: llm with a closed incident (paged, acked, preempted, resumed) and a newer open one;
// vision with an open incident whose page was claimed but never reported.
void populate(const std::string& dir) {
  auto s = Store::open(dir);
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto first =
      s->open_incident({"llm", 2, kT0, "stalled", "collective", "ranks 3,7 stopped at step 1200",
                        R"({"state":"stalled","culprits":[3,7]})"});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(*s->claim_page(first->id, kT0 + kSec));
  ASSERT_TRUE(s->mark_paged(first->id, kT0 + kSec, "sent: webhook 200").ok());
  ASSERT_TRUE(
      s->record_action({0, first->id, "llm", kT0 + kSec, "page", true, "webhook 200"}).ok());
  ASSERT_TRUE(s->ack("llm", kT0 + 60 * kSec, "alice", "looking\nat it").ok());
  ASSERT_TRUE(s->record_action({0, first->id, "llm", kT0 + 120 * kSec, "preempt", false,
                                "SIGTERM pgid 42: EPERM"})
                  .ok());
  ASSERT_TRUE(
      s->record_action({0, first->id, "llm", kT0 + 125 * kSec, "resume", true, "step_200"}).ok());
  ASSERT_TRUE(s->close_incident(first->id, kT0 + 845 * kSec, "resumed from step_200").ok());

  auto second = s->open_incident(
      {"llm", 3, kT0 + 3600 * kSec, "stalled", "io", "no step for 9m", "not json"});
  ASSERT_TRUE(second.ok());
  auto third = s->open_incident(
      {"vision", 1, kT0 + 1800 * kSec, "dead", "", "rank 1 exited (signal 9)", ""});
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(*s->claim_page(third->id, kT0 + 1801 * kSec));
}

TEST(IncidentsCli, EmptyStore) {
  TempDir tmp;
  std::string dir = tmp / "state";
  { ASSERT_TRUE(Store::open(dir).ok()); }
  auto text = report(dir, "", false);
  EXPECT_EQ(text.rc, kIncidentsOk);
  EXPECT_EQ(text.out, "no incidents in " + dir + "\n");
  EXPECT_EQ(text.err, "");
  auto one = report(dir, "llm", false);
  EXPECT_EQ(one.out, "no incidents for job llm in " + dir + "\n");

  auto json = report(dir, "", true);
  EXPECT_EQ(json.rc, kIncidentsOk);
  auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["state_dir"], dir);
  EXPECT_TRUE(doc["incidents"].is_array());
  EXPECT_TRUE(doc["incidents"].empty());
}

TEST(IncidentsCli, TextListsIncidentsNewestFirstWithActions) {
  TempDir tmp;
  std::string dir = tmp / "state";
  populate(dir);
  auto r = report(dir, "", false);
  ASSERT_EQ(r.rc, kIncidentsOk) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string& out = r.out;

  size_t newest = out.find("#2  llm  open  stalled (io)  incarnation 3");
  size_t middle = out.find("#3  vision  open  dead  incarnation 1");
  size_t oldest = out.find("#1  llm  closed  stalled (collective)  incarnation 2");
  ASSERT_NE(newest, std::string::npos) << out;
  ASSERT_NE(middle, std::string::npos) << out;
  ASSERT_NE(oldest, std::string::npos) << out;
  EXPECT_LT(newest, middle);
  EXPECT_LT(middle, oldest);

  EXPECT_TRUE(contains(out, "  opened   2024-05-01T03:12:44Z\n")) << out;
  EXPECT_TRUE(contains(out, "  summary  ranks 3,7 stopped at step 1200\n")) << out;
  EXPECT_TRUE(contains(out, "  paged    2024-05-01T03:12:45Z  sent: webhook 200\n")) << out;
  EXPECT_TRUE(contains(out, "  acked    2024-05-01T03:13:44Z  by alice: looking at it\n")) << out;
  EXPECT_TRUE(
      contains(out, "  closed   2024-05-01T03:26:49Z  resumed from step_200 (after 14m05s)\n"))
      << out;
  EXPECT_TRUE(contains(out, "    2024-05-01T03:12:45Z  page         ok     webhook 200\n")) << out;
  EXPECT_TRUE(contains(out, "preempt      FAILED SIGTERM pgid 42: EPERM\n")) << out;
  EXPECT_TRUE(contains(out, "ack          ok     alice: looking at it\n")) << out;
  EXPECT_TRUE(contains(out, "resume       ok     step_200\n")) << out;
  // The open ones: not acked yet; vision's claim without an outcome is called out.
  EXPECT_TRUE(contains(out, "  acked    not yet\n")) << out;
  EXPECT_TRUE(contains(out, "claimed, no outcome recorded")) << out;
  EXPECT_TRUE(contains(out, "  paged    not paged\n")) << out;
  EXPECT_TRUE(contains(out, "  actions  none\n")) << out;
}

TEST(IncidentsCli, JobFilterAndLimit) {
  TempDir tmp;
  std::string dir = tmp / "state";
  populate(dir);
  auto llm = report(dir, "llm", false);
  EXPECT_TRUE(contains(llm.out, "#1  llm")) << llm.out;
  EXPECT_TRUE(contains(llm.out, "#2  llm")) << llm.out;
  EXPECT_FALSE(contains(llm.out, "vision")) << llm.out;
  auto newest = report(dir, "llm", false, 1);
  EXPECT_TRUE(contains(newest.out, "#2  llm")) << newest.out;
  EXPECT_FALSE(contains(newest.out, "#1  llm")) << newest.out;
}

TEST(IncidentsCli, Json) {
  TempDir tmp;
  std::string dir = tmp / "state";
  populate(dir);
  auto r = report(dir, "llm", true);
  ASSERT_EQ(r.rc, kIncidentsOk) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["job"], "llm");
  auto& list = doc["incidents"];
  ASSERT_EQ(list.size(), 2u);

  auto& open = list[0];
  EXPECT_EQ(open["id"], 2);
  EXPECT_EQ(open["status"], "open");
  EXPECT_EQ(open["verdict"], "not json");  // stored text that is not JSON stays text
  EXPECT_TRUE(open["paged_at"].is_null());
  EXPECT_TRUE(open["closed_at_ns"].is_null());
  EXPECT_TRUE(open["actions"].empty());

  auto& closed = list[1];
  EXPECT_EQ(closed["job_id"], "llm");  // the agent API's schema (src/serve/json_views.h)
  EXPECT_EQ(closed["closed_at"], "2024-05-01T03:26:49Z");
  EXPECT_EQ(closed["closed_at_ns"], kT0 + 845 * kSec);
  EXPECT_EQ(closed["actions"][0]["at"], "2024-05-01T03:12:45Z");
  EXPECT_EQ(closed["actions"][0]["at_ns"], kT0 + kSec);
  EXPECT_EQ(closed["status"], "closed");
  EXPECT_EQ(closed["state"], "stalled");
  EXPECT_EQ(closed["cause"], "collective");
  EXPECT_EQ(closed["incarnation"], 2);
  EXPECT_EQ(closed["verdict"]["culprits"], nlohmann::json::array({3, 7}));
  EXPECT_EQ(closed["opened_at"], "2024-05-01T03:12:44Z");
  EXPECT_EQ(closed["opened_at_ns"], kT0);
  EXPECT_EQ(closed["paged_at_ns"], kT0 + kSec);
  EXPECT_EQ(closed["page_result"], "sent: webhook 200");
  EXPECT_EQ(closed["acked_by"], "alice");
  EXPECT_EQ(closed["ack_note"], "looking\nat it");  // JSON keeps the text exactly
  EXPECT_EQ(closed["resolution"], "resumed from step_200");
  ASSERT_EQ(closed["actions"].size(), 4u);
  EXPECT_EQ(closed["actions"][0]["kind"], "page");
  EXPECT_EQ(closed["actions"][1]["kind"], "ack");
  EXPECT_EQ(closed["actions"][2]["kind"], "preempt");
  EXPECT_EQ(closed["actions"][2]["ok"], false);
  EXPECT_EQ(closed["actions"][3]["detail"], "step_200");
}

TEST(IncidentsCli, MissingStateDirectory) {
  TempDir tmp;
  std::string dir = tmp / "nowhere";
  for (bool json : {false, true}) {
    auto r = report(dir, "", json);
    EXPECT_EQ(r.rc, kIncidentsUnreadable);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "stepwatch incidents: " + dir + ": no such state directory\n");
  }
  struct stat st {};
  EXPECT_NE(::stat(dir.c_str(), &st), 0);  // reading never creates the state directory

  std::string empty = tmp / "empty";
  ASSERT_EQ(::mkdir(empty.c_str(), 0700), 0);
  auto r = report(empty, "", false);
  EXPECT_EQ(r.rc, kIncidentsUnreadable);
  EXPECT_TRUE(contains(r.err, empty + "/stepwatch.db: no stepwatch database here yet")) << r.err;
}

TEST(IncidentsCli, DatabaseFromANewerStepwatch) {
  TempDir tmp;
  std::string dir = tmp / "state";
  { ASSERT_TRUE(Store::open(dir).ok()); }
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2((dir + "/stepwatch.db").c_str(), &h, SQLITE_OPEN_READWRITE, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "INSERT INTO schema_version VALUES (99, 0, 'stepwatch 9.0')", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close_v2(h);
  auto r = report(dir, "", false);
  EXPECT_EQ(r.rc, kIncidentsUnreadable);
  EXPECT_TRUE(contains(r.err, "written by a newer stepwatch")) << r.err;
}

}  // namespace
}  // namespace stepwatch::cli
