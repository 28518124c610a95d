// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// `stepwatch agent --config FILE`: the per-node daemon. Loads agent.toml, opens the store and
// NVML (when present), serves the JSON API and polls every job until SIGINT or SIGTERM.
#pragma once

#include <string>

namespace stepwatch::cli {

// Exit codes: stopped by a signal; bad configuration (or a refused token/listen combination);
// the store, NVML-independent setup or the API port failed.
inline constexpr int kAgentOk = 0;
inline constexpr int kAgentConfigError = 2;
inline constexpr int kAgentStartError = 1;

// new_store (--new-store): an empty (0-byte) stepwatch.db becomes a new store instead of being
// refused (store::OpenOptions::fresh_if_empty).
int run_agent(const std::string& config_path, bool new_store = false);

// `stepwatch agent --check-config`: loads the configuration as run_agent would (errors name the
// file, line and key; the token file is read), says what it sets up, starts nothing. kAgentOk or
// kAgentConfigError.
int check_agent_config(const std::string& config_path);

}  // namespace stepwatch::cli
