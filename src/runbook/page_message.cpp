// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/page_message.h"

namespace stepwatch::runbook {

PageMessage page_for_verdict(const std::string& job, const std::string& owner,
                             const detect::Verdict& v) {
  PageMessage m;
  m.job = job;
  m.owner = owner;
  m.state = detect::state_name(v.state);
  m.cause = detect::cause_name(v.cause);
  m.summary = v.summary;
  m.last_step = v.last_step;
  m.last_step_age_ns = v.last_step_age_ns;
  m.expected_interval_ns = v.expected_interval_ns;
  for (const auto& c : v.culprits) m.culprits.push_back({c.rank, c.reason, c.host});
  for (const auto& e : v.evidence)
    m.evidence.push_back(page_evidence_line(e.name, e.value, e.rank, e.age_ns));
  return m;
}

}  // namespace stepwatch::runbook
