// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The rows of the incident store, as plain structs. Times are wall-clock nanoseconds
// (CLOCK_REALTIME); a time that has not happened yet is nullopt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stepwatch::store {

// One stall (or death) of a job, from the verdict that opened it to its resolution.
struct Incident {
  int64_t id = 0;
  std::string job;
  int64_t incarnation = 0;
  int64_t opened_at_ns = 0;
  std::string state;                   // the verdict state that opened it: "stalled", "dead"
  std::string cause;                   // "collective", "io", "host", "init", ...
  std::string summary;                 // one line for humans (the page's first line)
  std::string verdict_json;            // the verdict as the detector serialised it
  std::optional<int64_t> paged_at_ns;  // set once, by claim_page
  std::string page_result;             // "claimed" until mark_paged records the outcome
  // When a target took the page (or there was none): a claim is not a delivery. A claim
  // without it, after a restart, is delivered again (the incident id is the dedup key).
  std::optional<int64_t> delivered_at_ns;
  std::optional<int64_t> acked_at_ns;
  std::string acked_by;
  std::string ack_note;
  std::optional<int64_t> closed_at_ns;
  std::string resolution;  // "recovered", "preempted", "resumed from step_200", "gave up"

  bool is_open() const { return !closed_at_ns.has_value(); }
  // Claimed (someone set out to page) but no delivery recorded.
  bool page_undelivered() const { return paged_at_ns.has_value() && !delivered_at_ns; }
  // "open", "acked" (open and acknowledged) or "closed".
  std::string_view status() const {
    return closed_at_ns ? "closed" : acked_at_ns ? "acked" : "open";
  }
};

// What the detector knows when it opens an incident.
struct NewIncident {
  std::string job;
  int64_t incarnation = 0;
  int64_t at_ns = 0;
  std::string state;
  std::string cause;
  std::string summary;
  std::string verdict_json;
};

// The incident open_incident returned: the one it created, or the job's already-open one.
struct IncidentRef {
  int64_t id = 0;
  bool created = false;  // false: joined the open incident (for example after a restart)
};

// Action kinds used by the runbook; the column is free text so later kinds need no migration.
namespace action_kind {
inline constexpr std::string_view kPage = "page";
inline constexpr std::string_view kPageFailed = "page-failed";
inline constexpr std::string_view kAck = "ack";
inline constexpr std::string_view kCollect = "collect";
inline constexpr std::string_view kPreempt = "preempt";
inline constexpr std::string_view kCleanup = "cleanup";
inline constexpr std::string_view kResume = "resume";
inline constexpr std::string_view kRestart = "restart";
inline constexpr std::string_view kNote = "note";
// Every kind, sorted by name: /metrics counts each from 0 (docs/metrics.md).
inline constexpr std::string_view kAll[] = {kAck,        kCleanup, kCollect, kNote,  kPage,
                                            kPageFailed, kPreempt, kRestart, kResume};
}  // namespace action_kind

// Something stepwatch did (or tried), with its outcome.
struct Action {
  int64_t id = 0;                      // assigned by record_action
  std::optional<int64_t> incident_id;  // nullopt: not tied to an incident (a restart, a note)
  std::string job;
  int64_t at_ns = 0;
  std::string kind;  // see action_kind
  bool ok = true;
  std::string detail;  // "webhook 200", "artifact /var/.../inc-12", "SIGTERM pgid 4242"
};

// A change of the job's verdict state ("healthy" -> "suspect").
struct Transition {
  int64_t id = 0;  // assigned by record_transition
  std::string job;
  int64_t incarnation = 0;
  int64_t at_ns = 0;
  std::string from_state;
  std::string to_state;
  std::string cause;
  std::string summary;
};

// What a restarted supervisor must remember about its job.
struct SupervisorState {
  std::string job;
  int64_t incarnation = 0;                // the current launch; the next one is incarnation + 1
  int64_t restarts = 0;                   // restarts so far
  int64_t restarts_without_progress = 0;  // consecutive restarts that never completed a step
  std::string checkpoint_id;              // last committed checkpoint ("" when none yet)
  std::optional<int64_t> checkpoint_step;
  std::optional<int64_t> interval_median_ns;  // learned step interval
  std::optional<int64_t> interval_p90_ns;
  int64_t interval_samples = 0;
  int64_t updated_at_ns = 0;
};

// A process seen as part of a job's incarnation: the proof that restart hygiene may kill it.
// (pid, start_ticks) names one process for the life of the boot, even when pids are reused.
struct ProcessRecord {
  std::string job;
  int64_t incarnation = 0;
  int64_t pid = 0;
  uint64_t start_ticks = 0;  // /proc/<pid>/stat field 22
  std::string role;          // "launcher", "rank 3", "child"
  int64_t first_seen_ns = 0;
};

// One launch of a job and how it ended: the history the node-fault rules read
// (src/runbook/node_fault.h). Recorded at start, updated when it ends.
struct IncarnationRecord {
  std::string job;
  int64_t incarnation = 0;
  int64_t started_ns = 0;
  std::optional<int64_t> ended_ns;  // nullopt while it runs
  // "" while running; "finished", "failed", "preempted", "requeued", "gave-up", "lost", ...
  // (free text, one short word). Required together with ended_ns.
  std::string end_reason;
  std::string cause;                       // the verdict's cause ("collective", "io", ...) or ""
  std::vector<int> culprit_ranks;          // the verdict's culprit ranks
  std::vector<std::string> culprit_hosts;  // the hosts of those ranks
  std::vector<std::string> hosts;          // every host it ran on
  std::optional<int64_t> checkpoint_step;  // the committed step it resumed from / reached
  std::string scheduler_id;                // "slurm:1234", "kubernetes:ns/pod", or ""

  bool ended() const { return ended_ns.has_value(); }
};

// A host blamed for one ended incarnation of one job: the cross-job ("lemon") signal. One row
// per (host, job, incarnation); recording it again changes nothing.
struct HostImplication {
  std::string host;
  std::string job;
  int64_t incarnation = 0;
  int64_t at_ns = 0;
  std::string cause;   // the incarnation's cause
  std::string reason;  // one line: "culprit rank 3 (collective)"
};

// A page delivered from this node whose outcome its job's ledger did not take yet: recorded there
// once it does (runbook::PageDeliveries), and meanwhile never sent again from this node.
struct KeptDelivery {
  std::string job;
  int64_t incident_id = 0;
  int64_t incarnation = 0;  // of the job, when it was paged
  int64_t at_ns = 0;
  std::string summary;  // the outcome as it is to be recorded
  bool delivered = false;
};

// How much history a long-running agent keeps per job. Open incidents are never pruned.
struct PruneLimits {
  int64_t keep_closed_incidents = 200;  // newest closed incidents (with their actions)
  int64_t keep_loose_actions = 1000;    // actions without an incident
  int64_t keep_transitions = 2000;
  int64_t keep_process_incarnations = 3;  // processes of the newest N incarnations
  // Besides the counts: closed incidents (closed before this), loose actions and transitions
  // (at before this) go whatever their number. Wall-clock ns; 0: no age limit. Open incidents
  // and their actions stay, however old.
  int64_t older_than_ns = 0;
  // Incarnations: the newest N per job (the node-fault rules read the last few; the rest is
  // for people), and ended ones that ended before older_than_ns. A running one always stays.
  int64_t keep_incarnations = 200;
  // Host implications older than this (counted back from now_ns), or at before older_than_ns,
  // go: the cross-job rule looks back 24 h by default; a week leaves room for a longer window
  // and for people. 0: no max age.
  int64_t implication_max_age_ns = 7LL * 24 * 3600 * 1'000'000'000;
  int64_t now_ns = 0;  // the wall time max ages count back from; 0: the wall clock
};

struct PruneCounts {
  int64_t incidents = 0;
  int64_t actions = 0;
  int64_t transitions = 0;
  int64_t processes = 0;
  int64_t incarnations = 0;
  int64_t implications = 0;
};

}  // namespace stepwatch::store
