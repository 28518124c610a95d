// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/spec/keys.h"

#include <fmt/format.h>

#include <algorithm>

#include "src/spec/toml_reader.h"

namespace stepwatch::spec {

namespace {

constexpr std::string_view kRootKeys[] = {"job",
                                          "owner",
                                          "users",
                                          "class",
                                          "world_size",
                                          "expected_interval",
                                          "grace_intervals",
                                          "slow_factor",
                                          "exit_grace",
                                          "poll_interval",
                                          "quiet_budget",
                                          "quiet_floor",
                                          "learn",
                                          "phases",
                                          "auto_preempt",
                                          "log",
                                          "checkpoint",
                                          "runbook",
                                          "slurm",
                                          "kubernetes",
                                          "node_fault"};
constexpr std::string_view kLearnKeys[] = {"warmup_steps", "window"};
constexpr std::string_view kPhaseKeys[] = {"budget", "beats_renew"};
constexpr std::string_view kAutoPreemptKeys[] = {"enabled", "misses"};
constexpr std::string_view kLogKeys[] = {"preset", "step_pattern", "phase_start", "phase_end",
                                         "noise"};
constexpr std::string_view kCheckpointKeys[] = {"dir", "marker", "source"};
constexpr std::string_view kRunbookKeys[] = {
    "ack_timeout",   "ack_hold_limit", "pager",          "collect", "preempt_command",
    "preempt_grace", "resume_command", "restart_budget", "resume",  "resume_owner"};
constexpr std::string_view kSlurmKeys[] = {"requeue", "requeue_exit_code", "scontrol", "scancel",
                                           "command_timeout"};
constexpr std::string_view kKubernetesKeys[] = {"requeue_exit_code"};
constexpr std::string_view kNodeFaultKeys[] = {
    "storm_incarnations",  "storm_window",     "suspect_of_last",
    "suspect_culprit_min", "short_run_count",  "short_run",
    "cross_job_min",       "cross_job_window", "drain"};
constexpr std::string_view kPagerKeys[] = {"kind", "url", "command", "timeout", "retries"};
constexpr std::string_view kCollectKeys[] = {"python_stacks", "native_stacks", "gpu",
                                             "log_lines",     "max_bytes",     "time_limit"};

struct TableKeys {
  Table table;
  std::string_view header;  // as a TOML file spells it; "" for the top level
  std::span<const std::string_view> keys;
};
constexpr TableKeys kTables[] = {
    {Table::kRoot, "", kRootKeys},
    {Table::kLearn, "[learn]", kLearnKeys},
    {Table::kPhase, "[phases.<name>]", kPhaseKeys},
    {Table::kAutoPreempt, "[auto_preempt]", kAutoPreemptKeys},
    {Table::kLog, "[log]", kLogKeys},
    {Table::kCheckpoint, "[checkpoint]", kCheckpointKeys},
    {Table::kRunbook, "[runbook]", kRunbookKeys},
    {Table::kPager, "[[runbook.pager]]", kPagerKeys},
    {Table::kCollect, "[runbook.collect]", kCollectKeys},
    {Table::kSlurm, "[slurm]", kSlurmKeys},
    {Table::kKubernetes, "[kubernetes]", kKubernetesKeys},
    {Table::kNodeFault, "[node_fault]", kNodeFaultKeys},
};

}  // namespace

std::span<const std::string_view> known_keys(Table table) {
  for (const auto& t : kTables) {
    if (t.table == table) return t.keys;
  }
  return {};
}

bool is_known_key(Table table, std::string_view key) {
  auto keys = known_keys(table);
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string unknown_key_message(Table table, std::string_view key) {
  if (!closest(key, known_keys(table)).empty()) return unknown_key_message(key, known_keys(table));
  for (const auto& t : kTables) {
    if (t.table == table || !is_known_key(t.table, key)) continue;
    return t.header.empty() ? fmt::format("unknown key; \"{}\" is a top-level key", key)
                            : fmt::format("unknown key; \"{}\" belongs in {}", key, t.header);
  }
  return "unknown key";
}

}  // namespace stepwatch::spec
