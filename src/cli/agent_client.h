// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch status` and `stepwatch ack` talk to the node's agent when one runs, and read the
// beacons and the store directly when none does. The agent is found at --agent URL, else
// $STEPWATCH_AGENT, else http://127.0.0.1:9465 (the default listen address).
#pragma once

#include <optional>
#include <string>

#include "src/cli/status_view.h"
#include "src/common/result.h"

namespace stepwatch::cli {

// The agent's base URL when one answers /healthz within a short timeout; nullopt when none.
// An explicitly given URL that does not answer is an error rather than a silent fallback.
// On loopback the answer is trusted only from the real agent: every socket listening on the
// port must belong to root or to the user running the CLI (see agent_listener_trusted).
// Otherwise it is an error naming the uid, and nothing (no token) is sent.
Result<std::optional<std::string>> find_agent(const std::string& explicit_url,
                                              const std::string& proc_root = "/proc");

// Whether an agent URL on loopback is served only by root or by `me`: the LISTEN sockets on
// its port, from <proc_root>/net/tcp and tcp6, all have one of those uids. A URL that is not on
// loopback cannot be checked this way and is trusted (a remote agent needs its token anyway).
Status agent_listener_trusted(const std::string& url, uint32_t me, const std::string& proc_root);

// `stepwatch status` through the agent: the agent's GET /api/v1/jobs entry of one job and its
// GET /api/v1/jobs/{id} (either "{}" when not read) as the table of status_view.h. Missing or
// null fields are unknown ("n/a"), never 0.
StatusJob status_job_from_agent(const std::string& summary_json, const std::string& detail_json);
// Prints "from the agent at BASE" and the table of every job (or `job`); 1 when the agent does
// not answer or does not watch `job`.
int status_from_agent(const std::string& base, const std::string& job);

// `stepwatch ack` through the agent (POST /api/v1/jobs/JOB/ack); the token is read from
// $STEPWATCH_AGENT_TOKEN_FILE when set. 0 acked, 1 no open incident, 2 refused or failed.
int ack_through_agent(const std::string& base, const std::string& job, const std::string& by,
                      const std::string& note);

}  // namespace stepwatch::cli
