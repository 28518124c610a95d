// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/contract/identity.h"

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

#include "src/common/host.h"
#include "src/contract/names.h"

namespace stepwatch::contract {

Result<std::optional<int64_t>> int_var(const GetEnv& getenv, const char* name) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return std::optional<int64_t>{};
  int64_t out = 0;
  const char* end = v + std::strlen(v);
  auto [p, ec] = std::from_chars(v, end, out);
  if (ec != std::errc() || p != end) {
    return Error{Errc::kInvalidArgument, fmt::format("{}=\"{}\" is not an integer", name, v)};
  }
  return std::optional<int64_t>{out};
}

namespace {

// First set variable of a list (torchrun before Slurm), with the name that supplied it.
Result<std::optional<int64_t>> first_var(const GetEnv& getenv,
                                         std::initializer_list<const char*> names,
                                         const char** which) {
  for (const char* n : names) {
    auto r = int_var(getenv, n);
    if (!r) return r.error();
    if (r->has_value()) {
      *which = n;
      return r;
    }
  }
  return std::optional<int64_t>{};
}

}  // namespace

Result<Identity> resolve_identity(const IdentityOverrides& o, const GetEnv& getenv) {
  Identity id;
  if (o.dir && !o.dir->empty()) {
    id.dir = *o.dir;
  } else if (const char* d = getenv("STEPWATCH_DIR"); d != nullptr && *d != '\0') {
    id.dir = d;
  } else {
    id.dir = kDefaultDir;
  }

  if (o.job && !o.job->empty()) {
    id.job = *o.job;
  } else if (const char* j = getenv("STEPWATCH_JOB"); j != nullptr && *j != '\0') {
    id.job = j;
  } else {
    return Error{Errc::kNotFound, "no job id: set STEPWATCH_JOB (or pass job= explicitly)"};
  }
  if (auto st = validate_job_id(id.job); !st) return st.error();

  const char* rank_src = "rank";
  const char* world_src = "world_size";
  const char* local_src = "local_rank";
  std::optional<int64_t> rank, world, local;
  if (o.rank && *o.rank >= 0) {
    rank = *o.rank;
  } else {
    auto r = first_var(getenv, {"RANK", "SLURM_PROCID"}, &rank_src);
    if (!r) return r.error();
    rank = *r;
  }
  if (o.world_size && *o.world_size >= 0) {
    world = *o.world_size;
  } else {
    auto r = first_var(getenv, {"WORLD_SIZE", "SLURM_NTASKS"}, &world_src);
    if (!r) return r.error();
    world = *r;
  }
  if (o.local_rank && *o.local_rank >= 0) {
    local = *o.local_rank;
  } else {
    auto r = first_var(getenv, {"LOCAL_RANK", "SLURM_LOCALID"}, &local_src);
    if (!r) return r.error();
    local = *r;
  }

  if (!rank && world && *world > 1) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("{}={} but no rank: set RANK (torchrun) or SLURM_PROCID (Slurm)",
                             world_src, *world)};
  }
  id.rank = static_cast<int>(rank.value_or(0));
  id.world_size = static_cast<int>(world.value_or(1));
  id.local_rank = static_cast<int>(local.value_or(id.rank));
  if (rank && (*rank < 0 || *rank > 1'000'000)) {
    return Error{Errc::kInvalidArgument, fmt::format("{}={} is out of range", rank_src, *rank)};
  }
  if (world && (*world < 1 || *world > 1'000'000)) {
    return Error{Errc::kInvalidArgument,
                 fmt::format("{}={} must be at least 1", world_src, *world)};
  }
  if (id.rank >= id.world_size) {
    return Error{Errc::kInvalidArgument, fmt::format("{}={} is not below {}={}", rank_src, id.rank,
                                                     world_src, id.world_size)};
  }
  // Checked on the 64-bit value: LOCAL_RANK=4294967296 must not wrap to 0 in the int.
  int64_t local_value = local.value_or(id.rank);
  if (local_value < 0 || local_value >= id.world_size) {
    return Error{Errc::kInvalidArgument, fmt::format("{}={} is out of range for {}={}", local_src,
                                                     local_value, world_src, id.world_size)};
  }

  if (o.incarnation && *o.incarnation >= 0) {
    id.incarnation = static_cast<uint32_t>(*o.incarnation);
  } else {
    auto r = int_var(getenv, "STEPWATCH_INCARNATION");
    if (!r) return r.error();
    if (r->has_value()) {
      if (**r < 0 || **r > 0xffffffffLL) {
        return Error{Errc::kInvalidArgument,
                     fmt::format("STEPWATCH_INCARNATION={} is out of range", **r)};
      }
      id.incarnation = static_cast<uint32_t>(**r);
    }
  }
  id.host = short_hostname();
  return id;
}

Result<Identity> resolve_identity(const IdentityOverrides& overrides) {
  return resolve_identity(overrides, [](const char* n) -> const char* { return std::getenv(n); });
}

}  // namespace stepwatch::contract
