// `stepwatch status` and `stepwatch ack` talk to the node's agent when one runs, and read the
// beacons and the store directly when none does. The agent is found at --agent URL, else
// $STEPWATCH_AGENT, else http://127.0.0.1:9465 (the default listen address).
#pragma once

#include <optional>
#include <string>

#include "src/common/result.h"

namespace stepwatch::cli {

// The agent's base URL when one answers /healthz within a short timeout; nullopt when none.
// An explicitly given URL that does not answer is an error rather than a silent fallback.
Result<std::optional<std::string>> find_agent(const std::string& explicit_url);

// `stepwatch status` through the agent: one line per job and per rank.
int status_from_agent(const std::string& base, const std::string& job);

// `stepwatch ack` through the agent (POST /api/v1/jobs/JOB/ack); the token is read from
// $STEPWATCH_AGENT_TOKEN_FILE when set. 0 acked, 1 no open incident, 2 refused or failed.
int ack_through_agent(const std::string& base, const std::string& job, const std::string& by, const std::string& note);

}  // namespace stepwatch::cli
