// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The pager: the first runbook step. A page tells the owner what stepwatch saw (state, cause,
// last step and its age, culprits, evidence) and how to ack, and goes to every target of the
// spec's [[runbook.pager]] list: a JSON webhook, an Alertmanager (API v2), or a local command,
// each a PageSink (page_sink.h: one file per kind). Each target is retried with backoff, the
// same for every kind; a page that cannot be delivered is logged and reported in its
// PageResult, never thrown and never fatal to the supervisor.
//
// The runbook depends on common and spec only: the caller fills PageMessage from its verdict
// (the full verdict travels as the JSON text trace::verdict_to_json wrote).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/common/clock.h"
#include "src/spec/spec.h"

namespace stepwatch::runbook {

struct PageCulprit {
  // As detect::Culprit: {rank, reason} stays valid now that host follows.
  PageCulprit() = default;
  PageCulprit(int r, std::string why, std::string on = {})
      : rank(r), reason(std::move(why)), host(std::move(on)) {}

  int rank = -1;
  std::string reason;  // "behind: step 41 while others are at 42"
  std::string host;    // its node, when the job spans several; empty on a single host
};

// Everything one page carries. Plain values, so the runbook knows nothing of the detector.
// A host the node-fault rules suspect (node_fault.h), as a page names it.
struct PageSuspect {
  std::string host;
  std::vector<std::string> evidence;  // one line per rule that fired
  std::string exclude_hint;           // "sbatch --exclude=n2"; "" when none
};

struct PageMessage {
  std::string job;
  std::string owner;                 // spec `owner`; empty: nobody named
  std::string state;                 // "stalled", "dead", ... (detect::state_name)
  std::string cause;                 // "collective", ... (detect::cause_name); "" or "none": none
  std::string summary;               // one human line (the verdict's summary)
  std::optional<int64_t> last_step;  // highest committed step; empty: none yet
  int64_t last_step_age_ns = -1;     // since the last step; -1: unknown
  int64_t expected_interval_ns = 0;  // 0: not known yet (still learning)
  std::vector<PageCulprit> culprits;
  std::vector<std::string> evidence;  // short lines, see page_evidence_line()
  std::string incident_id;
  int incarnation = 0;
  std::string host;               // where the supervisor runs
  int64_t started_wall_ns = 0;    // when the incident began; 0: now (Alertmanager startsAt)
  std::string ack_command;        // empty: "stepwatch ack <job>"
  std::string verdict_json;       // the full verdict as one JSON object; empty: none
  int64_t ended_wall_ns = 0;      // > 0: the incident closed then (Alertmanager endsAt: resolved)
  std::string severity = "page";  // "warning": a restart storm (Alertmanager label severity)
  std::vector<PageSuspect> suspects;  // hosts the node-fault rules name, with their evidence
};

// "stepwatch ack <job>", the job quoted for a shell when it needs it (or m.ack_command if set).
std::string ack_hint(const PageMessage& m);

// One evidence line: "rank 1 phase = data (1m35s ago)"; rank -1 and age -1 are left out.
std::string page_evidence_line(std::string_view name, std::string_view value, int rank = -1,
                               int64_t age_ns = -1);

// The generic webhook document (also the stdin of a command target). Schema version 1:
//   {
//     "version": 1,
//     "job": str, "owner": str, "state": str, "cause": str ("" or "none": none), "summary": str,
//     "last_step": int | null,
//     "last_step_age_seconds": number | null,      (null: unknown)
//     "expected_interval_seconds": number | null,  (null: still learning)
//     "culprits": [{"rank": int, "reason": str, "host": str (multi-node jobs only)}],
//     "evidence": [str],
//     "incident_id": str, "incarnation": int, "host": str,
//     "started_at": str (RFC 3339, UTC),
//     "ack_command": str,                          ("stepwatch ack JOB")
//     "verdict": object | null                     (the detector's verdict JSON, as written)
//   }
// Field names are stable; new fields may be added, none renamed or removed without a version bump.
std::string page_json(const PageMessage& m);

// The Alertmanager API v2 body for POST /api/v2/alerts: an array with one postableAlert,
//   labels {alertname, job_id, state, cause, severity: "page", owner}, annotations {summary,
//   description, incident_id, incarnation, host, ack_command, last_step}, startsAt.
// alertname is "StepwatchRankDead" for state "dead", otherwise "StepwatchJobStalled".
std::string alertmanager_json(const PageMessage& m);

// The multi-line human text of a page: summary, last step, culprits, evidence, ack hint.
std::string page_text(const PageMessage& m);

// `{url}/api/v2/alerts` (a url that already ends so is kept).
std::string alertmanager_alerts_url(const std::string& base_url);

// The outcome of one delivery attempt.
struct Attempt {
  bool ok = false;
  bool permanent = false;        // retrying cannot help: bad URL, no TLS, HTTP 4xx, no program
  int http_status = 0;           // 0: no HTTP response
  std::optional<int> exit_code;  // command targets that exited
  std::string detail;            // what happened, naming the URL or program
};

// One HTTP(S) POST of a JSON body, bounded by timeout_ns from connect to the last byte read.
// 2xx is ok; 408, 429 and 5xx are worth a retry, other statuses are permanent failures.
// (pager_http.cpp: the only translation unit with HTTP client code.)
Attempt post_json(const std::string& url, const std::string& body, int64_t timeout_ns);

// Whether this build's HTTP client speaks TLS (cpp-httplib built with OpenSSL). Without it an
// https:// target fails with "https not supported in this build".
bool https_supported();

// One attempt of a command target (sink_command.cpp) through run_command (command.h): `input` on
// stdin, `env` added, its process group SIGKILLed (proven) when it outlives timeout_ns. Exit 0 is
// ok; a program that cannot be executed is a permanent failure.
Attempt run_pager_command(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env,
                          const std::string& input, int64_t timeout_ns);

// What happened to the page at one target.
struct PageResult {
  std::string target;  // "webhook http://host/hook", "command /usr/bin/notify"
  spec::PagerKind kind = spec::PagerKind::kWebhook;
  bool ok = false;
  int attempts = 0;              // attempts made (1 + retries used)
  int http_status = 0;           // last HTTP status; 0: none (command, or no response)
  std::optional<int> exit_code;  // command: last exit status; empty: none (killed, not run)
  std::string detail;            // the last attempt's outcome, naming the URL or program
  int64_t elapsed_ns = 0;        // wall time of all attempts and backoffs
};

struct PagerOptions {
  int64_t first_backoff_ns = 500 * kNsPerMs;  // before the 2nd attempt; doubles after each
  int64_t max_backoff_ns = 8 * kNsPerSec;     // backoff cap
  // Waits between attempts; false: give up now (supervisor shutting down). Empty: a real sleep.
  // page_all calls it from one thread per target, so it must be thread-safe.
  std::function<bool(int64_t ns)> sleep;
  // Test seams: replace one delivery attempt of the HTTP sinks (post) and of the command sink
  // (run). Empty: post_json / run_pager_command.
  std::function<Attempt(const std::string& url, const std::string& body, int64_t timeout_ns)> post;
  std::function<Attempt(const std::vector<std::string>& argv,
                        const std::vector<std::pair<std::string, std::string>>& env,
                        const std::string& input, int64_t timeout_ns)>
      run;
};

// The backoff before attempt `attempt + 1` (attempt counts from 1).
int64_t backoff_ns(const PagerOptions& options, int attempt);

// Sends the page to one target through its sink (make_page_sink): 1 + target.retries attempts of
// target.timeout_ns each, with backoff between them.
PageResult page_one(const spec::Pager& target, const PageMessage& m,
                    const PagerOptions& options = {});

// Sends the page to every target at once (one thread each, joined before returning) and returns
// one result per target, in order. No global state: callers run it on their own thread.
std::vector<PageResult> page_all(const std::vector<spec::Pager>& targets, const PageMessage& m,
                                 const PagerOptions& options = {});

}  // namespace stepwatch::runbook
