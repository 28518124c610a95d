// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Where the runbook keeps what it must not forget about an incident: that it is open, that its
// page was claimed and delivered, that it was acked, how it closed, and what was done. The
// incident state machine (incident.h) reads and writes only through this interface:
//   - StoreLedger: one node's SQLite store (src/store), for `stepwatch run` and the agent;
//   - the multi-node job leader keeps the same records in etcd behind fenced writes.
// Every call can fail (disk full, read-only, corrupt, lost lease). A failure is reported to the
// caller, which pages anyway: a ledger failure never silences a page.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "src/common/result.h"
#include "src/store/records.h"

namespace stepwatch::store {
class Store;
}

namespace stepwatch::runbook {

class IncidentLedger {
 public:
  virtual ~IncidentLedger() = default;

  // The job's open incident, if any.
  virtual Result<std::optional<store::Incident>> open_for(const std::string& job) = 0;
  // Opens an incident, or returns the job's open one untouched (created = false).
  virtual Result<store::IncidentRef> open(const store::NewIncident& incident) = 0;
  virtual Result<std::optional<store::Incident>> get(int64_t id) = 0;
  // What the open incident says, when the verdict changes (stalled -> dead).
  virtual Status update(int64_t id, const store::NewIncident& now_says) = 0;
  // The right to page: true for exactly one caller ever; false when already claimed.
  virtual Result<bool> claim_page(int64_t id, int64_t at_ns) = 0;
  // The page's outcome; `delivered`: a target took it (or there was none to send to).
  virtual Status record_delivery(int64_t id, int64_t at_ns, std::string_view result,
                                 bool delivered) = 0;
  // Closing a closed incident keeps its first resolution.
  virtual Status close(int64_t id, int64_t at_ns, std::string_view resolution) = 0;
  virtual Status record_action(const store::Action& action) = 0;
};

// The ledger in one node's incident store. The store must outlive it; one thread.
class StoreLedger final : public IncidentLedger {
 public:
  explicit StoreLedger(store::Store& store) : store_(store) {}

  Result<std::optional<store::Incident>> open_for(const std::string& job) override;
  Result<store::IncidentRef> open(const store::NewIncident& incident) override;
  Result<std::optional<store::Incident>> get(int64_t id) override;
  Status update(int64_t id, const store::NewIncident& now_says) override;
  Result<bool> claim_page(int64_t id, int64_t at_ns) override;
  Status record_delivery(int64_t id, int64_t at_ns, std::string_view result,
                         bool delivered) override;
  Status close(int64_t id, int64_t at_ns, std::string_view resolution) override;
  Status record_action(const store::Action& action) override;

 private:
  store::Store& store_;
};

}  // namespace stepwatch::runbook
