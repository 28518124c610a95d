// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: any byte string through decode_beacon. The decoder must never crash, and
// whatever it accepts must satisfy the validation rules of docs/contract.md.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "fuzz/require.h"
#include "src/contract/beacon_reader.h"
#include "src/contract/names.h"

namespace {

using stepwatch::contract::decode_beacon;
using stepwatch::contract::RankSnapshot;
using stepwatch::contract::ReadOptions;

void check_accepted(const RankSnapshot& s) {
  FUZZ_REQUIRE(stepwatch::contract::validate_job_id(s.job).ok());
  FUZZ_REQUIRE(stepwatch::contract::validate_phase(s.phase).ok());
  FUZZ_REQUIRE(stepwatch::contract::validate_host(s.host).ok());
  FUZZ_REQUIRE(s.world_size >= 1 && s.rank >= 0 && s.rank < s.world_size);
  FUZZ_REQUIRE(s.local_rank >= 0 && s.local_rank < s.world_size);
  FUZZ_REQUIRE(s.pid > 0);
  FUZZ_REQUIRE(!s.step || *s.step >= 0);
  FUZZ_REQUIRE(s.recent.size() <= STEPWATCH_RECENT_STEPS);
  FUZZ_REQUIRE(s.recent.size() ==
               (s.step_count < STEPWATCH_RECENT_STEPS ? s.step_count : STEPWATCH_RECENT_STEPS));
  FUZZ_REQUIRE(!s.checkpoint ||
               (s.checkpoint->step >= 0 &&
                stepwatch::contract::validate_checkpoint_id(s.checkpoint->id).ok()));
  FUZZ_REQUIRE(s.created.wall_ns >= 0 && s.created.mono_ns >= 0 && s.step_at.wall_ns >= 0 &&
               s.updated_mono_ns >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto any = decode_beacon(bytes, {}, "fuzz.beacon");
  if (any) check_accepted(*any);
  if (size == STEPWATCH_BEACON_V1_SIZE) {
    // With an expected job: accepted exactly when the record is valid and names that job.
    ReadOptions expect;
    expect.expected_job = "job-1";
    auto matched = decode_beacon(bytes, expect, "fuzz.beacon");
    FUZZ_REQUIRE(matched.ok() == (any.ok() && any->job == "job-1"));
    if (matched) check_accepted(*matched);
    if (any && !matched) FUZZ_REQUIRE(matched.error().code == stepwatch::Errc::kJobMismatch);
    // A broken record fails the same way, unless its job is checked (and differs) first.
    if (!any && !matched) {
      FUZZ_REQUIRE(matched.error().code == any.error().code ||
                   matched.error().code == stepwatch::Errc::kJobMismatch);
    }
  }
  return 0;
}
