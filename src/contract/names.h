// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Names that become paths, labels or operands of a command: job ids, phase names, checkpoint ids,
// node names, Slurm job ids. A beacon, an etcd record or an environment variable is untrusted input
// to a watchdog that may run as root, so every name is validated the same way wherever it is read.
#pragma once

#include <string>
#include <string_view>

#include "src/common/result.h"

namespace stepwatch::contract {

inline constexpr const char* kDefaultDir = "/dev/shm/stepwatch";

// Job ids: 1..63 of [A-Za-z0-9._-], not starting with '.' or '-' (no traversal, safe as a
// Prometheus label and a directory name).
Status validate_job_id(std::string_view job);
// Phase names: 1..31 of [A-Za-z0-9._:/-].
Status validate_phase(std::string_view phase);
// Checkpoint ids: 1..63 printable ASCII bytes, no spaces or quotes.
Status validate_checkpoint_id(std::string_view id);
// Host names: 0..63 printable ASCII bytes.
Status validate_host(std::string_view host);
// Slurm node names as they reach `scontrol update NodeName=`: 1..63 of [A-Za-z0-9._-], not
// starting with '-'. One name names one node: no hostlist ("gpu[1-100]", "a,b"), no "=".
Status validate_node_name(std::string_view node);
// Slurm job ids as they reach `scontrol` and `scancel` (as root, where the agent leads the job):
// digits, or digits_digits for an array task, each at most 10 digits (Slurm's ids are 32-bit).
// Never an option ("--state=RUNNING" would cancel every running job) nor a list of jobs.
Status validate_slurm_job_id(std::string_view id);

std::string job_dir(const std::string& root, std::string_view job);
std::string beacon_path(const std::string& root, std::string_view job, int rank);
std::string jsonl_path(const std::string& root, std::string_view job);

// "rank-12.beacon" -> 12; anything else -> -1.
int rank_from_beacon_name(std::string_view file_name);

}  // namespace stepwatch::contract
