// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The node-fault rules on recorded histories: the storm, the culprit, short-run and cross-job
// rules, their edges (thresholds, windows, running and finished incarnations, collective hangs
// without a lagging rank, disabled rules) and the exclusion hints.
#include "src/runbook/node_fault.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace stepwatch::runbook {
namespace {

using store::HostImplication;
using store::IncarnationRecord;

constexpr int64_t kMin = 60LL * 1'000'000'000;
constexpr int64_t kHour = 60 * kMin;
constexpr int64_t kNow = 1'700'000'000LL * 1'000'000'000;

const std::optional<std::vector<int>> kNoRanks = std::vector<int>{};

// An incarnation that started `start_ago` minutes before kNow and ran `ran` minutes (nullopt:
// still running). Culprit hosts come with a culprit rank unless `ranks` says otherwise.
IncarnationRecord inc(int64_t n, int64_t start_ago, std::optional<int64_t> ran,
                      std::vector<std::string> hosts, std::vector<std::string> culprit_hosts = {},
                      std::string reason = "failed", std::string cause = "host",
                      std::optional<std::vector<int>> ranks = std::nullopt) {
  IncarnationRecord r;
  r.job = "llm";
  r.incarnation = n;
  r.started_ns = kNow - start_ago * kMin;
  if (ran) {
    r.ended_ns = r.started_ns + *ran * kMin;
    r.end_reason = std::move(reason);
    r.cause = std::move(cause);
  }
  if (!ranks && !culprit_hosts.empty()) ranks = std::vector<int>{1};
  r.culprit_ranks = ranks.value_or(std::vector<int>{});
  r.culprit_hosts = std::move(culprit_hosts);
  r.hosts = std::move(hosts);
  return r;
}

HostImplication implicated(std::string host, std::string job, int64_t n, int64_t ago) {
  return HostImplication{std::move(host), std::move(job), n, kNow - ago, "io", "culprit"};
}

std::vector<std::string> names(const std::vector<SuspectHost>& v) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(s.host);
  return out;
}

// ---- restart storm ----

struct StormCase {
  const char* name;
  std::vector<int64_t> started_ago_min;  // one incarnation each, numbered from 1
  bool storm;
};

TEST(NodeFault, RestartStormTable) {
  const StormCase cases[] = {
      {"five in 30m: exactly the threshold", {29, 20, 10, 5, 0}, true},
      {"four in 30m: one below", {29, 20, 10, 5}, false},
      {"the fifth exactly 30m ago is outside (now - window, now]", {30, 20, 10, 5, 0}, false},
      {"one started after now does not count", {-1, 20, 10, 5, 0}, false},
      {"five of seven in the window", {120, 90, 25, 20, 10, 5, 1}, true},
      {"none", {}, false},
  };
  for (const auto& c : cases) {
    std::vector<IncarnationRecord> h;
    int64_t n = 0;
    for (auto ago : c.started_ago_min) h.insert(h.begin(), inc(++n, ago, 1, {"a"}));
    EXPECT_EQ(restart_storm(h, {}, kNow).has_value(), c.storm) << c.name;
  }
}

TEST(NodeFault, RestartStormCountsRunningIncarnationsAndSaysWhich) {
  std::vector<IncarnationRecord> h = {inc(7, 0, std::nullopt, {"a"}),
                                      inc(6, 3, 2, {"a"}),
                                      inc(5, 6, 2, {"a"}),
                                      inc(4, 9, 2, {"a"}),
                                      inc(3, 12, 2, {"a"}),
                                      inc(2, 200, 2, {"a"})};
  auto storm = restart_storm(h, {}, kNow);
  ASSERT_TRUE(storm);
  EXPECT_EQ(storm->incarnations, 5);
  EXPECT_EQ(storm->window_ns, 30 * kMin);
  EXPECT_EQ(storm->first_started_ns, kNow - 12 * kMin);
  EXPECT_EQ(storm->last_started_ns, kNow);
  EXPECT_EQ(storm->evidence, "5 incarnations started in 12m00s (limit 5 in 30m00s): 3, 4, 5, 6, 7");
}

// ---- suspect hosts ----

struct SuspectCase {
  const char* name;
  std::vector<IncarnationRecord> history;  // newest first
  std::vector<HostImplication> implications;
  std::vector<std::string> suspects;  // strongest first
};

TEST(NodeFault, SuspectHostsTable) {
  const int64_t long_run = 60;  // minutes: never a short run
  const SuspectCase cases[] = {
      {"culprit in 2 of the last 3",
       {inc(8, 5, std::nullopt, {"h1", "h2"}), inc(7, 100, long_run, {"h1", "h2"}, {"h1"}),
        inc(6, 200, long_run, {"h1", "h2"}, {"h2"}), inc(5, 300, long_run, {"h1", "h2"}, {"h1"})},
       {},
       {"h1"}},
      {"h2 in 2 of the last 3; h1 in 1 (its blame 4 incarnations back is too old)",
       {inc(7, 100, long_run, {"h1", "h2"}, {"h1"}), inc(6, 200, long_run, {"h1", "h2"}, {"h2"}),
        inc(5, 300, long_run, {"h1", "h2"}, {"h2"}), inc(4, 400, long_run, {"h1"}, {"h1"})},
       {},
       {"h2"}},
      {"only two ended incarnations, both blaming h1: 2 of 2 fires",
       {inc(2, 100, long_run, {"h1"}, {"h1"}), inc(1, 200, long_run, {"h1"}, {"h1"})},
       {},
       {"h1"}},
      {"a collective hang without a lagging rank blames nobody",
       {inc(3, 100, long_run, {"h1", "h2"}, {"h1", "h2"}, "failed", "collective", kNoRanks),
        inc(2, 200, long_run, {"h1", "h2"}, {}, "failed", "collective"),
        inc(1, 300, long_run, {"h1", "h2"}, {}, "failed", "collective")},
       {},
       {}},
      {"finished incarnations blame nobody",
       {inc(2, 100, long_run, {"h1"}, {"h1"}, "finished"),
        inc(1, 200, long_run, {"h1"}, {"h1"}, "finished")},
       {},
       {}},
      {"three short runs in a row on h1 (others vary)",
       {inc(4, 0, std::nullopt, {"h9"}), inc(3, 10, 2, {"h1", "h2"}), inc(2, 20, 9, {"h1", "h3"}),
        inc(1, 30, 3, {"h1", "h4"}), inc(0, 500, long_run, {"h1"})},
       {},
       {"h1"}},
      {"a finished short run breaks the chain",
       {inc(4, 10, 2, {"h1"}), inc(3, 20, 2, {"h1"}), inc(2, 30, 2, {"h1"}, {}, "finished"),
        inc(1, 40, 2, {"h1"})},
       {},
       {}},
      {"a run of exactly short_run ended too late to be short",
       {inc(3, 20, 2, {"h1"}), inc(2, 40, 10, {"h1"}), inc(1, 60, 2, {"h1"})},
       {},
       {}},
      {"a placement without h1 breaks h1's chain",
       {inc(4, 10, 2, {"h1"}), inc(3, 20, 2, {"h2"}), inc(2, 30, 2, {"h1"}), inc(1, 40, 2, {"h1"})},
       {},
       {}},
      {"a host implicated in 3 distinct jobs within 24h",
       {inc(2, 100, long_run, {"h1", "h2"})},
       {implicated("h1", "llm", 1, kHour), implicated("h1", "vit", 4, 2 * kHour),
        implicated("h1", "rl", 9, 23 * kHour), implicated("h2", "llm", 1, kHour),
        implicated("h2", "llm", 2, 2 * kHour), implicated("h2", "llm", 3, 3 * kHour)},
       {"h1"}},
      {"the third job exactly 24h ago is outside the window",
       {inc(2, 100, long_run, {"h1"})},
       {implicated("h1", "llm", 1, kHour), implicated("h1", "vit", 4, 2 * kHour),
        implicated("h1", "rl", 9, 24 * kHour)},
       {}},
      {"a lemon this job never ran on is not this job's suspect",
       {inc(2, 100, long_run, {"h1"})},
       {implicated("h7", "a", 1, kHour), implicated("h7", "b", 1, kHour),
        implicated("h7", "c", 1, kHour)},
       {}},
      {"two rules before one",
       {inc(3, 100, long_run, {"h1", "h2"}, {"h2"}), inc(2, 200, long_run, {"h1", "h2"}, {"h2"}),
        inc(1, 300, long_run, {"h1", "h2"})},
       {implicated("h1", "a", 1, kHour), implicated("h1", "b", 1, kHour),
        implicated("h1", "c", 1, kHour), implicated("h2", "llm", 3, kHour),
        implicated("h2", "x", 1, kHour), implicated("h2", "y", 1, kHour)},
       {"h2", "h1"}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(names(suspect_hosts(c.history, c.implications, {}, kNow)), c.suspects) << c.name;
  }
}

TEST(NodeFault, SuspectEvidenceNamesTheNumbersAndIncarnations) {
  std::vector<IncarnationRecord> h = {inc(7, 10, 2, {"h1"}, {"h1"}), inc(6, 20, 2, {"h1"}),
                                      inc(5, 30, 2, {"h1"}, {"h1"})};
  std::vector<HostImplication> imp = {
      implicated("h1", "llm", 5, kHour), implicated("h1", "llm", 7, kHour),
      implicated("h1", "vit", 2, kHour), implicated("h1", "rl", 9, kHour)};
  auto s = suspect_hosts(h, imp, {}, kNow);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].host, "h1");
  EXPECT_EQ(s[0].culprit_in, 2);
  EXPECT_EQ(s[0].of_last, 3);
  EXPECT_EQ(s[0].short_runs, 3);
  EXPECT_EQ(s[0].jobs_implicated, 3);
  EXPECT_EQ(s[0].evidence,
            (std::vector<std::string>{
                "culprit in 2 of the last 3 ended incarnations (limit 2 of 3): 5, 7",
                "in 3 consecutive incarnations that each ended, not finished, within 10m00s "
                "(limit 3): 5, 6, 7 (weak: correlation only)",
                "implicated in 3 jobs in the last 1d00h (limit 3): llm#7, rl#9, vit#2"}));
  EXPECT_TRUE(s[0].blamed);
}

TEST(NodeFault, OnlyTheCulpritAndCrossJobRulesBlameAHost) {
  // Short runs alone name h1 (weak, correlation only) but do not blame it: nothing drains it.
  auto weak = suspect_hosts({inc(3, 10, 2, {"h1"}), inc(2, 20, 2, {"h1"}), inc(1, 30, 2, {"h1"})},
                            {}, {}, kNow);
  ASSERT_EQ(weak.size(), 1u);
  EXPECT_FALSE(weak[0].blamed);
  auto culprit = suspect_hosts({inc(2, 100, 60, {"h1"}, {"h1"}), inc(1, 200, 60, {"h1"}, {"h1"})},
                               {}, {}, kNow);
  ASSERT_EQ(culprit.size(), 1u);
  EXPECT_TRUE(culprit[0].blamed);
  auto lemon = cross_job_suspects({implicated("h1", "a", 1, kHour), implicated("h1", "b", 1, kHour),
                                   implicated("h1", "c", 1, kHour)},
                                  {}, kNow);
  ASSERT_EQ(lemon.size(), 1u);
  EXPECT_TRUE(lemon[0].blamed);
}

TEST(NodeFault, CrossJobSuspectsCoverTheWholeFleet) {
  std::vector<HostImplication> imp = {
      implicated("h7", "a", 1, kHour), implicated("h7", "b", 1, kHour),
      implicated("h7", "c", 1, kHour), implicated("h8", "a", 1, kHour),
      implicated("h8", "a", 2, kHour), implicated("h8", "a", 3, kHour)};
  auto s = cross_job_suspects(imp, {}, kNow);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].host, "h7");
  EXPECT_EQ(s[0].jobs_implicated, 3);
}

TEST(NodeFault, APolicyValueOfZeroDisablesItsRule) {
  std::vector<IncarnationRecord> h;  // newest first: five short failures blaming h1, all recent
  for (int64_t n = 5; n >= 1; --n) h.push_back(inc(n, 5 * (6 - n), 2, {"h1"}, {"h1"}));
  std::vector<HostImplication> imp = {implicated("h1", "a", 1, kHour),
                                      implicated("h1", "b", 1, kHour),
                                      implicated("h1", "c", 1, kHour)};
  NodeFaultPolicy all;
  ASSERT_TRUE(restart_storm(h, all, kNow));
  ASSERT_EQ(suspect_hosts(h, imp, all, kNow).at(0).evidence.size(), 3u);

  NodeFaultPolicy p;
  p.storm_incarnations = 0;
  EXPECT_FALSE(restart_storm(h, p, kNow));
  p = {};
  p.storm_window_ns = 0;
  EXPECT_FALSE(restart_storm(h, p, kNow));

  p = {};
  p.suspect_of_last = 0;
  p.short_run_count = 0;
  p.cross_job_min = 0;
  EXPECT_TRUE(suspect_hosts(h, imp, p, kNow).empty());
  p = {};
  p.suspect_culprit_min = 0;
  p.short_run_ns = 0;
  p.cross_job_window_ns = 0;
  EXPECT_TRUE(suspect_hosts(h, imp, p, kNow).empty());
  EXPECT_TRUE(cross_job_suspects(imp, p, kNow).empty());
}

// ---- implicated hosts, hints ----

TEST(NodeFault, ImplicatedHosts) {
  EXPECT_EQ(implicated_hosts(
                inc(1, 10, 2, {"a", "b"}, {"b", "b"}, "failed", "io", std::vector<int>{3, 4})),
            std::vector<std::string>{"b"});
  // A collective hang with a lagging rank blames that rank's host.
  EXPECT_EQ(implicated_hosts(
                inc(1, 10, 2, {"a", "b"}, {"a"}, "failed", "collective", std::vector<int>{0})),
            std::vector<std::string>{"a"});
  // Without one, nobody, even if hosts were filled in.
  EXPECT_TRUE(
      implicated_hosts(inc(1, 10, 2, {"a", "b"}, {"a", "b"}, "failed", "collective", kNoRanks))
          .empty());
  EXPECT_TRUE(implicated_hosts(inc(1, 10, 2, {"a"}, {"a"}, "finished")).empty());
  EXPECT_TRUE(implicated_hosts(inc(1, 10, std::nullopt, {"a"}, {"a"})).empty());  // running
}

TEST(NodeFault, ExcludeHint) {
  const std::vector<std::string> hosts = {"gpu-01.rack_a", "gpu-07", "gpu-01.rack_a"};
  EXPECT_EQ(exclude_hint("slurm", hosts), "sbatch --exclude=gpu-01.rack_a,gpu-07");
  EXPECT_EQ(exclude_hint("slurm:1234", {"h1"}), "sbatch --exclude=h1");
  EXPECT_EQ(exclude_hint("kubernetes", hosts),
            "node affinity: kubernetes.io/hostname NotIn [gpu-01.rack_a, gpu-07]");
  EXPECT_EQ(exclude_hint("k8s", {"h1"}), "node affinity: kubernetes.io/hostname NotIn [h1]");
  EXPECT_EQ(exclude_hint("", hosts), "exclude gpu-01.rack_a, gpu-07 from the job's next placement");
  EXPECT_EQ(exclude_hint("pbs", {"h1"}), "exclude h1 from the job's next placement");
  EXPECT_EQ(exclude_hint("slurm", {}), "");
}

}  // namespace
}  // namespace stepwatch::runbook
