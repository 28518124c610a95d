// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The JSON a user sees of an incident, of a job and of the agent's health, one schema each,
// whoever serves it: the agent's API (/api/v1/..., /healthz), the supervisor's ack endpoint and
// `stepwatch incidents --json`.
// Fields are listed in docs/api.md. Only json_fwd.hpp here: the .cpp that renders includes the
// full nlohmann header (STYLE rule 11).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"
#include "src/serve/node_fault_view.h"
#include "src/store/records.h"
#include "src/watch/job_state.h"

namespace stepwatch::serve {

// One incident: "id", "job_id", "incarnation", "status" (open/acked/closed), "state", "cause",
// "summary", "verdict" (embedded when the stored text is JSON, else that text; null when none),
// "opened_at", "paged_at", "acked_at", "closed_at" (RFC 3339 UTC seconds, null: not yet) each
// beside its exact "*_ns", "page_result", "acked_by", "ack_note", "resolution"; and "actions"
// ([{id, at, at_ns, kind, ok, detail}], oldest first) only when `actions` is given.
nlohmann::json incident_json(const store::Incident& incident,
                             const std::vector<store::Action>* actions = nullptr);

// A job in GET /api/v1/jobs: its state, owner, last step and its age, expected interval, phase.
// Both views add "cluster" (this node, the leader, every node's summary age and ranks) only for
// a multi-node job: a single node's answer has no such key.
nlohmann::json job_summary_json(const watch::JobState& job);
// GET /api/v1/jobs/{id}: the verdict with every rank's beacon, process and GPU facts.
nlohmann::json job_detail_json(const watch::JobState& job);

// The "node_fault" of GET /api/v1/jobs/{id}: {"suspect_hosts": [{host, evidence, exclude_hint}],
// "restart_storm": null | {incarnations, window_seconds, evidence}, "incarnations": [{incarnation,
// started_at, ended_at, end_reason, cause, culprit_ranks, culprit_hosts, hosts, checkpoint_step,
// scheduler_id}], newest first}.
nlohmann::json node_fault_json(const JobNodeFault& job);
// GET /api/v1/hosts: {"window_seconds", "hosts": [{host, jobs_implicated, implications, suspect,
// evidence}]}, hosts sorted by name.
nlohmann::json hosts_json(const NodeFaultSnapshot& snapshot);

// GET /healthz: failing (503) after kPollFailuresUnhealthy whole polls failed in a row, or while
// the store refuses writes. Lost coordination never fails it: the agent still observes its ranks
// and pages locally; "coord" (only on a multi-node agent) says how coordination stands.
bool agent_failing(const watch::AgentHealth& health);
nlohmann::json agent_health_json(const watch::AgentHealth& health, size_t jobs,
                                 int64_t last_poll_wall_ns);

// The body of an ack, on the agent's route and the supervisor's alike: empty, or a JSON object
// {"by": "name", "note": "text"}, each a string of at most kMaxAckField bytes (or null).
inline constexpr size_t kMaxAckField = 1024;
struct AckBody {
  std::string by;    // empty: the body names nobody
  std::string note;  // free text from the acker
};
// Errors (kParse) say what is wrong with the body and what is allowed.
Result<AckBody> parse_ack_body(std::string_view body);

// 200 of an ack: {"acked": true, "incident": incident_json, "incident_id", "by", "message"}.
nlohmann::json ack_reply_json(const store::Incident& incident, const std::string& by);
// 404 of an ack: {"acked": false, "error": "job J has no open incident"}.
nlohmann::json no_incident_json(const std::string& job);

// JSON text that never throws: bytes that are not UTF-8 (stored text comes from trainers and
// people) are replaced. indent < 0: one line.
std::string dump_json(const nlohmann::json& j, int indent = -1);

}  // namespace stepwatch::serve
