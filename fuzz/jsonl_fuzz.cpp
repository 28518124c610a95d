// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the JSONL contract. The whole input as one line through
// parse_progress_line, then split into lines and fed to two JsonlFolders (with and without an
// expected job). Nothing may crash; every accepted event and every fold obeys the contract.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz/require.h"
#include "src/contract/jsonl.h"
#include "src/contract/names.h"

namespace {

using stepwatch::contract::JsonlFolder;
using stepwatch::contract::ProgressEvent;
using stepwatch::contract::RankSnapshot;

void check_event(const ProgressEvent& e) {
  FUZZ_REQUIRE(stepwatch::contract::validate_job_id(e.job).ok());
  FUZZ_REQUIRE(e.rank >= 0);
  FUZZ_REQUIRE(e.wall_ns > 0);
  FUZZ_REQUIRE(!e.step || *e.step >= 0);
  FUZZ_REQUIRE(!e.phase || stepwatch::contract::validate_phase(*e.phase).ok());
  FUZZ_REQUIRE(!e.checkpoint || stepwatch::contract::validate_checkpoint_id(*e.checkpoint).ok());
  FUZZ_REQUIRE(!e.checkpoint_step || (e.checkpoint && *e.checkpoint_step >= 0));
  FUZZ_REQUIRE(!e.world_size || (*e.world_size >= 1 && e.rank < *e.world_size));
  FUZZ_REQUIRE(!e.pid || *e.pid > 0);
}

void check_fold(const JsonlFolder& f, const char* expected_job) {
  for (const auto& [rank, s] : f.ranks()) {
    FUZZ_REQUIRE(s.rank == rank);
    FUZZ_REQUIRE(stepwatch::contract::validate_job_id(s.job).ok());
    FUZZ_REQUIRE(expected_job == nullptr || s.job == expected_job);
    FUZZ_REQUIRE(s.step.has_value() == (s.step_count > 0));
    FUZZ_REQUIRE(stepwatch::contract::validate_phase(s.phase).ok());
    FUZZ_REQUIRE(s.beat_at.has_value() == (s.beat_count > 0));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto e = stepwatch::contract::parse_progress_line(text)) check_event(*e);

  JsonlFolder any("fuzz.jsonl");
  JsonlFolder job1("fuzz.jsonl", std::string("job-1"));
  int64_t line_no = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    std::string_view line =
        text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    ++line_no;
    (void)any.feed(line, line_no);
    (void)job1.feed(line, line_no);
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  check_fold(any, nullptr);
  check_fold(job1, "job-1");
  return 0;
}
