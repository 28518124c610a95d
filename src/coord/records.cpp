// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// One of the few translation units that include nlohmann/json (STYLE rule 11).
#include "src/coord/records.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "src/common/log.h"

namespace stepwatch::coord {

Result<json_fields::Json> record_of(const KeyValue& kv, size_t max_bytes) {
  std::string source = "etcd key " + kv.key;
  if (kv.value.size() > max_bytes) {
    return Error{Errc::kParse, fmt::format("{}: {} bytes, more than the {} a record may hold: "
                                           "refused unparsed",
                                           source, kv.value.size(), max_bytes)};
  }
  return json_fields::parse_object(kv.value, source);
}

Status read_record(const KeyValue& kv, std::string_view what,
                   const std::function<void(const json_fields::Json&)>& read, size_t max_bytes) {
  auto j = record_of(kv, max_bytes);
  if (!j) return j.error();
  auto bad = [&](const std::string& message) {
    return Error{Errc::kParse, fmt::format("etcd key {}: not {}: {}", kv.key, what, message)};
  };
  try {
    read(*j);
  } catch (const json_fields::FieldError& e) {
    return bad(e.message);
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  }
  return {};
}

void BadRecords::skip(const KeyValue& kv, const Error& why) {
  {
    std::lock_guard lock(mu_);
    auto it = said_.find(kv.key);
    if (it != said_.end() && it->second == kv.mod_revision) return;
    if (it == said_.end() && said_.size() >= kRemembered) said_.clear();
    said_[kv.key] = kv.mod_revision;
    ++total_;
  }
  // The error names the key already when a reader made it; else name it here.
  if (why.message.find(kv.key) != std::string::npos) {
    log_warn("coord: skipped {} (revision {})", why.message, kv.mod_revision);
  } else {
    log_warn("coord: skipped etcd key {} (revision {}): {}", kv.key, kv.mod_revision, why.message);
  }
}

uint64_t BadRecords::total() const {
  std::lock_guard lock(mu_);
  return total_;
}

}  // namespace stepwatch::coord
