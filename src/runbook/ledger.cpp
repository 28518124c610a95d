// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/ledger.h"

#include "src/store/store.h"

namespace stepwatch::runbook {

Result<std::optional<store::Incident>> StoreLedger::open_for(const std::string& job) {
  return store_.open_incident_for(job);
}

Result<store::IncidentRef> StoreLedger::open(const store::NewIncident& incident) {
  return store_.open_incident(incident);
}

Result<std::optional<store::Incident>> StoreLedger::get(int64_t id) {
  return store_.incident(id);
}

Status StoreLedger::update(int64_t id, const store::NewIncident& now_says) {
  return store_.update_incident(id, now_says.state, now_says.cause, now_says.summary,
                                now_says.verdict_json);
}

Result<bool> StoreLedger::claim_page(int64_t id, int64_t at_ns) {
  return store_.claim_page(id, at_ns);
}

Status StoreLedger::record_delivery(int64_t id, int64_t at_ns, std::string_view result,
                                    bool delivered) {
  return store_.mark_paged(id, at_ns, result, delivered);
}

Status StoreLedger::close(int64_t id, int64_t at_ns, std::string_view resolution) {
  return store_.close_incident(id, at_ns, resolution);
}

Status StoreLedger::record_action(const store::Action& action) {
  auto r = store_.record_action(action);
  if (!r) return r.error();
  return {};
}

}  // namespace stepwatch::runbook
