// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Each page sink through the generic retry path (page_one): the HTTP sinks against a real
// loopback receiver (tests/support/page_receiver.h) and a port nothing listens on, the command
// sink through real shell commands. Backoffs are recorded, not slept.
#include "src/runbook/page_sink.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/common/host.h"
#include "src/spec/rules.h"
#include "tests/fakes/fake_sleep.h"
#include "tests/support/page_receiver.h"
#include "tests/support/temp_dir.h"

namespace stepwatch::runbook {
namespace {

using json = nlohmann::json;
using test::TempDir;

PageMessage message() {
  PageMessage m;
  m.job = "llm-7b";
  m.owner = "alice";
  m.state = "stalled";
  m.cause = "collective";
  m.summary = "stalled: no step for 95s";
  m.last_step = 41;
  m.incident_id = "inc-42";
  return m;  // started_wall_ns 0: "now"
}

spec::Pager http_target(spec::PagerKind kind, std::string url, int retries = 0) {
  spec::Pager p;
  p.kind = kind;
  p.url = std::move(url);
  p.retries = retries;
  p.timeout_ns = 2 * kNsPerSec;
  return p;
}

spec::Pager command_target(std::vector<std::string> argv, int retries = 0) {
  spec::Pager p;
  p.kind = spec::PagerKind::kCommand;
  p.command = std::move(argv);
  p.retries = retries;
  p.timeout_ns = 5 * kNsPerSec;
  return p;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(PageSinks, EveryKindTheSpecNamesHasASinkAndOnlyAlertmanagerKeepsItsAlertAlive) {
  for (auto name : spec::kPagerKindNames) {
    spec::Pager p;
    p.kind = *spec::parse_pager_kind(name);
    p.url = "http://127.0.0.1:9/secret";
    p.command = {"/bin/true"};
    auto sink = make_page_sink(p);
    ASSERT_NE(sink, nullptr) << name;
    EXPECT_EQ(sink->keeps_alert_alive(), p.kind == spec::PagerKind::kAlertmanager) << name;
  }
}

TEST(PageSinks, TheDestinationNeverShowsAUrlsPath) {
  PageMessage m = message();
  EXPECT_EQ(make_page_sink(http_target(spec::PagerKind::kWebhook, "http://h:1/hook/s3cret"))
                ->destination(m)
                .find("s3cret"),
            std::string::npos);
  EXPECT_EQ(make_page_sink(http_target(spec::PagerKind::kWebhook, "http://h:1/hook/s3cret"))
                ->destination(m),
            redact_url("http://h:1/hook/s3cret"));
  EXPECT_EQ(
      make_page_sink(http_target(spec::PagerKind::kAlertmanager, "http://am:9093"))->destination(m),
      redact_url("http://am:9093/api/v2/alerts"));
  EXPECT_EQ(make_page_sink(command_target({"/usr/bin/notify-{job}", "x"}))->destination(m),
            "/usr/bin/notify-llm-7b");
  EXPECT_EQ(make_page_sink(command_target({}))->destination(m), "(empty)");
}

// ---- webhook and Alertmanager ------------------------------------------------------------

TEST(WebhookSink, DeliversThePageJsonToARealReceiver) {
  test::Receiver rx;
  test::FakeSleep sleep;
  auto r =
      page_one(http_target(spec::PagerKind::kWebhook, rx.url(), 2), message(), sleep.options());
  EXPECT_TRUE(r.ok) << r.detail;
  EXPECT_EQ(r.kind, spec::PagerKind::kWebhook);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.target, "webhook " + redact_url(rx.url()));
  EXPECT_TRUE(sleep.waits.empty());
  ASSERT_EQ(rx.count(), 1u);
  json j = json::parse(rx.body(0));
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["job"], "llm-7b");
  EXPECT_EQ(j["incident_id"], "inc-42");
}

TEST(AlertmanagerSink, PostsOneAlertToApiV2) {
  test::Receiver rx;
  auto r = page_one(http_target(spec::PagerKind::kAlertmanager, rx.base()), message());
  EXPECT_TRUE(r.ok) << r.detail;
  EXPECT_EQ(r.kind, spec::PagerKind::kAlertmanager);
  EXPECT_EQ(r.target, "alertmanager " + redact_url(rx.base() + "/api/v2/alerts"));
  ASSERT_EQ(rx.count(), 1u);  // the receiver's /api/v2/alerts route took it
  json j = json::parse(rx.body(0));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["labels"]["alertname"], "StepwatchJobStalled");
  EXPECT_EQ(j[0]["labels"]["job_id"], "llm-7b");
}

TEST(HttpSinks, AnUnreachableUrlIsRetriedWithBackoffAndReportedWithItsReason) {
  const std::string base = fmt::format("http://127.0.0.1:{}", test::closed_port());
  for (auto kind : {spec::PagerKind::kWebhook, spec::PagerKind::kAlertmanager}) {
    SCOPED_TRACE(spec::pager_kind_name(kind));
    test::FakeSleep sleep;
    auto r = page_one(http_target(kind, base + "/hook", /*retries=*/2), message(), sleep.options());
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.attempts, 3);
    EXPECT_EQ(r.http_status, 0);
    EXPECT_NE(r.detail.find(": cannot connect (refused or unreachable)"), std::string::npos)
        << r.detail;
    EXPECT_EQ(r.detail.find("/hook"), std::string::npos) << "never the path: " << r.detail;
    EXPECT_EQ(sleep.waits, (std::vector<int64_t>{500 * kNsPerMs, 1 * kNsPerSec}));
  }
}

// ---- command -----------------------------------------------------------------------------

TEST(CommandSink, RunsARealShellCommandWithThePageOnStdinAndInItsEnvironment) {
  TempDir dir;
  const std::string out = dir / "page";
  auto r = page_one(command_target({"/bin/sh", "-c",
                                    "cat > \"$0.json\"; printf '%s %s' \"$STEPWATCH_PAGE_JOB\" "
                                    "\"$STEPWATCH_PAGE_INCIDENT\" > \"$0.env\"",
                                    out}),
                    message());
  EXPECT_TRUE(r.ok) << r.detail;
  EXPECT_EQ(r.kind, spec::PagerKind::kCommand);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.target, "command /bin/sh");
  EXPECT_EQ(json::parse(read_file(out + ".json"))["job"], "llm-7b");
  EXPECT_EQ(read_file(out + ".env"), "llm-7b inc-42");
}

TEST(CommandSink, ANonZeroExitIsRetriedWithBackoffAndReportedWithItsReason) {
  test::FakeSleep sleep;
  auto r = page_one(
      command_target({"/bin/sh", "-c", "echo 'pager gateway down' >&2; exit 3"}, /*retries=*/2),
      message(), sleep.options());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.detail, "/bin/sh exited with status 3: pager gateway down");
  EXPECT_EQ(sleep.waits, (std::vector<int64_t>{500 * kNsPerMs, 1 * kNsPerSec}));
}

TEST(CommandSink, AProgramThatCannotRunIsNotRetried) {
  test::FakeSleep sleep;
  auto r =
      page_one(command_target({"/nonexistent/notify"}, /*retries=*/3), message(), sleep.options());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_NE(r.detail.find("cannot run /nonexistent/notify"), std::string::npos) << r.detail;
  EXPECT_TRUE(sleep.waits.empty());
}

// A retry sends the page the first attempt sent: its start ("now" when unset) is fixed once.
TEST(CommandSink, ARetrySendsTheSamePageAndSucceeds) {
  TempDir dir;
  const std::string base = dir / "attempt";
  test::FakeSleep sleep;
  auto r = page_one(command_target({"/bin/sh", "-c",
                                    "n=$(cat \"$0.n\" 2>/dev/null || echo 0); n=$((n+1)); "
                                    "echo $n > \"$0.n\"; cat > \"$0.$n\"; [ $n -ge 2 ]",
                                    base},
                                   /*retries=*/3),
                    message(), sleep.options());
  EXPECT_TRUE(r.ok) << r.detail;
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(sleep.waits.size(), 1u);
  std::string first = read_file(base + ".1"), second = read_file(base + ".2");
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first, second);
}

// One deliver() is one attempt, and says whether another could help.
TEST(CommandSink, DeliverIsOneAttempt) {
  TempDir dir;
  const std::string count = dir / "count";
  auto sink = make_page_sink(command_target({"/bin/sh", "-c", "echo x >> \"$0\"; exit 1", count}));
  Attempt a = sink->deliver(message(), 5 * kNsPerSec);
  EXPECT_FALSE(a.ok);
  EXPECT_FALSE(a.permanent);
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_EQ(read_file(count), "x\n");
  Attempt missing =
      make_page_sink(command_target({"/nonexistent/notify"}))->deliver(message(), 5 * kNsPerSec);
  EXPECT_FALSE(missing.ok);
  EXPECT_TRUE(missing.permanent);
}

}  // namespace
}  // namespace stepwatch::runbook
