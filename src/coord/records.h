// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The one boundary every value read from etcd crosses (issue 26: etcd content is input, not
// authority). Whoever may write under the prefix writes what every agent reads, so a value is
//   - bounded in size before it is parsed (kMaxRecordBytes, or its reader's smaller bound);
//   - bounded in nesting depth before it is parsed, and never re-serialized
//     (json_fields::parse_bounded);
//   - then validated by its reader (summary.h, orders.h, etcd_ledger.h, incarnation.h).
// A key that fails any of these is skipped and said once per key and value (BadRecords): a data
// error in one key is never a failure of the session, which only transport and lease errors are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "src/common/json_fields.h"
#include "src/common/result.h"
#include "src/coord/kv.h"

namespace stepwatch::coord {

// No record of ours comes near it; etcd's own limit on a request is 1.5 MiB.
inline constexpr size_t kMaxRecordBytes = 512 * 1024;

// The value of `kv` as a JSON object, or an error naming the key: over `max_bytes`, nested too
// deep, not JSON, or not an object.
Result<json_fields::Json> record_of(const KeyValue& kv, size_t max_bytes = kMaxRecordBytes);

// A whole record: record_of(kv), then read(object) with json_fields' readers (they throw); a
// FieldError becomes "etcd key <key>: not <what>: <message>". Every etcd reader's shell.
Status read_record(const KeyValue& kv, std::string_view what,
                   const std::function<void(const json_fields::Json&)>& read,
                   size_t max_bytes = kMaxRecordBytes);

// The keys skipped because their value did not read: each said once per key and value (its mod
// revision) in one warning, and counted. Any thread.
class BadRecords {
 public:
  // Logs "coord: skipped etcd key <key>: <why>" unless this value of the key was said already.
  void skip(const KeyValue& kv, const Error& why);
  // Values skipped since start, each counted once.
  uint64_t total() const;

 private:
  // A bound on what is remembered: past it, the memory starts again (some keys said twice).
  static constexpr size_t kRemembered = 4096;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> said_;  // key -> the mod revision said
  uint64_t total_ = 0;
};

}  // namespace stepwatch::coord
