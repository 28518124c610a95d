// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The reader side of a beacon: torn-read-safe snapshot of a mapped file, and a validating
// decoder that accepts any byte sequence without crashing (it is fuzzed).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "src/common/result.h"
#include "src/contract/snapshot.h"
#include "stepwatch/beacon_v1.h"

namespace stepwatch::contract {

struct ReadOptions {
  std::optional<std::string> expected_job;  // mismatch is Errc::kJobMismatch
  int max_retries = 200;                    // then Errc::kTorn
};

// Validates a consistent copy of a record and turns it into a snapshot. `bytes` may be any
// length and content; errors: kTruncated, kBadMagic, kUnknownVersion, kSizeMismatch, kTorn
// (odd seq in a copy), kInvalidField, kJobMismatch.
Result<RankSnapshot> decode_beacon(std::span<const uint8_t> bytes, const ReadOptions& options = {},
                                   std::string_view path = "beacon");

// A read-only mapping of one beacon file, kept open for repeated reads (the agent's poll).
class BeaconMapping {
 public:
  // Opens without following symlinks; refuses anything but a regular file of the v1 size.
  static Result<BeaconMapping> open(const std::string& path);
  BeaconMapping(BeaconMapping&& other) noexcept;
  BeaconMapping& operator=(BeaconMapping&& other) noexcept;
  ~BeaconMapping();

  // A consistent, validated snapshot (retries while a writer is inside an update).
  Result<RankSnapshot> read(const ReadOptions& options = {}) const;
  // The raw consistent copy (no validation), for tools that show bytes.
  Result<stepwatch_beacon_v1> read_raw(int max_retries = 200) const;
  // The update counters alone (the record's and the sampler block's, summed): unchanged means
  // the record is unchanged.
  Result<uint64_t> sequence() const;
  // The file's current size by path; kNotFound when it is gone or another file took its name.
  Result<uint64_t> size_on_disk() const;

  // Reads survive the file being truncated under the mapping: the fault is caught and reported
  // as kSizeMismatch (the process installs a SIGBUS handler that passes other faults on).

  const std::string& path() const { return path_; }
  uint64_t inode() const { return inode_; }
  uint32_t owner_uid() const { return uid_; }  // of the file when it was opened

 private:
  BeaconMapping() = default;
  // Re-reads the sampler block of a consistent record copy under its own seqlock; false when
  // the file shrank under the mapping.
  bool read_sample_block(stepwatch_beacon_v1& copy) const;
  std::string path_;
  const stepwatch_beacon_v1* map_ = nullptr;
  uint64_t inode_ = 0;
  uint32_t uid_ = 0;
};

// open + read + unmap.
Result<RankSnapshot> read_beacon_file(const std::string& path, const ReadOptions& options = {});

}  // namespace stepwatch::contract
