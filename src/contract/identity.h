// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Who is writing: job id and rank identity, from explicit values or the launcher's environment
// (torchrun: RANK/LOCAL_RANK/WORLD_SIZE; Slurm: SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "src/common/result.h"

namespace stepwatch::contract {

struct Identity {
  std::string dir;   // beacon root
  std::string job;   // validated job id
  std::string host;  // short host name
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  uint32_t incarnation = 0;
};

struct IdentityOverrides {
  std::optional<std::string> dir;
  std::optional<std::string> job;
  std::optional<int> rank;
  std::optional<int> local_rank;
  std::optional<int> world_size;
  std::optional<int64_t> incarnation;
};

using GetEnv = std::function<const char*(const char*)>;

// Reads an integer variable: nullopt when unset or empty, an error naming it when malformed.
Result<std::optional<int64_t>> int_var(const GetEnv& getenv, const char* name);

// Resolves the identity; errors name the variable at fault ("RANK=\"x\" is not an integer").
// Errc::kNotFound means no job id; Errc::kInvalidArgument a malformed or inconsistent value.
Result<Identity> resolve_identity(const IdentityOverrides& overrides, const GetEnv& getenv);
Result<Identity> resolve_identity(const IdentityOverrides& overrides);

}  // namespace stepwatch::contract
