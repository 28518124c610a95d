// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The node agent's configuration (agent.toml), loaded and validated in one place. Every field
// has a default, so an empty file is a valid configuration for a loopback-only agent.
// Errors name the file, line and key: "agent.toml:4: poll_interval: must be above zero".
// deploy/agent.toml shows every key; docs/api.md the API it serves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/clock.h"
#include "src/common/result.h"

namespace stepwatch::agent {

inline constexpr int kDefaultPort = 9465;
inline constexpr int64_t kDefaultRestartWaitNs = 2 * 60 * kNsPerSec;  // [coord] restart_wait

// [coord]: multi-node coordination through etcd v3 (docs/multinode.md). Without the section the
// agent is a single-node agent, exactly as before.
struct CoordConfig {
  std::vector<std::string> endpoints;    // etcd client URLs, "http://HOST:PORT", tried in order
  std::string prefix = "/stepwatch/v1";  // every key this cluster's agents write is under it
  // The node lease: a node whose agent stops renewing it (dead, wedged, cut off from etcd) drops
  // out this long after its last renewal; renewals come from the poll loop, every ttl/3.
  int64_t lease_ttl_ns = 10 * kNsPerSec;
  std::string node_name;  // this node in etcd and in verdicts; empty: the short host name
  // A job's summary is published when its ranks' progress changes and at least this often.
  int64_t publish_interval_ns = 5 * kNsPerSec;
  int64_t request_timeout_ns = 2 * kNsPerSec;  // per etcd request and endpoint
  // How long a job's next incarnation waits for a node (its launcher missing, its cleanup not
  // done) before its leader pages that the job cannot restart whole; it waits on after the page.
  int64_t restart_wait_ns = kDefaultRestartWaitNs;
  std::string token_file;  // an etcd auth token (0600), sent with every request
  std::string token;       // read from token_file by load_agent_config
};

struct AgentConfig {
  std::string source;  // the file it came from; empty for defaults
  // Beacon roots to watch; each holds <job>/rank-<n>.beacon (and progress.jsonl).
  std::vector<std::string> beacon_roots = {"/dev/shm/stepwatch"};
  int64_t poll_interval_ns = kNsPerSec;          // one look at every job per interval
  std::string state_dir = "/var/lib/stepwatch";  // incident store (SQLite)
  // Where the JSON API listens: "HOST:PORT" or "[V6]:PORT"; port 0 picks a free one.
  std::string listen = "127.0.0.1:9465";
  std::string listen_host = "127.0.0.1";  // parsed from `listen`
  int listen_port = kDefaultPort;         // parsed from `listen`
  // A job's spec is <specs_dir>/<job>.toml; a job without one gets defaults and learns.
  std::string specs_dir = "/etc/stepwatch/jobs";
  // Bearer token for mutating endpoints (POST .../ack). Required beyond loopback; the file
  // must not be readable or writable by group or others (0600 or stricter).
  std::string token_file;
  std::string token;  // read from token_file by load_agent_config; never from the TOML itself
  // A finished or vanished job stays listed (retired) this long; its history stays in the store.
  int64_t retire_after_ns = 10 * 60 * kNsPerSec;
  std::string proc_root = "/proc";  // where process facts are read (tests use a fake tree)
  bool gpu = true;                  // read GPU evidence through NVML when it loads
  std::string nvml_lib;             // libnvidia-ml to load; empty: the system's
  // Jobs (ids or * ? patterns) the agent may preempt when a stall outlasts the ack timeout, if
  // the job's spec enables auto_preempt and each process is proven to be the job's. Empty (the
  // default): observe and page only.
  std::vector<std::string> preempt_jobs;

  // What one local user's job directories may cost, whoever made them (a user can create any
  // number, with any job id): jobs watched at once, incidents opened in an hour, job log lines
  // in a minute. Beyond them the rest is dropped with one line saying so.
  int max_jobs_per_user = 64;
  int incidents_per_user_per_hour = 60;
  // And one job (a job that loops must not spend its owner's budget for the owner's other jobs).
  int incidents_per_job_per_hour = 12;
  int log_lines_per_user_per_minute = 120;
  // The store is pruned at start and every hour: closed incidents, transitions and loose
  // actions older than keep_history, and older ones still while it holds more than
  // max_store_size. Open incidents are never pruned.
  int64_t keep_history_ns = 30LL * 86400 * kNsPerSec;
  int64_t max_store_size = 256LL << 20;
  std::optional<CoordConfig> coord;  // [coord]; nullopt: single node
};

// Whether `job` matches one of config.preempt_jobs.
bool may_preempt(const AgentConfig& config, const std::string& job);

// Parses and validates the text; every error is reported (one per line of the message).
// Does not read the token file (see load_agent_config).
Result<AgentConfig> parse_agent_config(std::string_view text, const std::string& source_name);

// Reads a token file: refused unless it is a regular file of mode 0600 or stricter; surrounding
// whitespace is dropped and an empty token is refused. Errors name the file and the cause.
Result<std::string> read_token_file(const std::string& path);

// parse_agent_config on the file, then the token file, then the rule that an agent listening
// beyond loopback needs a token. Errors name file:line: key.
Result<AgentConfig> load_agent_config(const std::string& path);

}  // namespace stepwatch::agent
