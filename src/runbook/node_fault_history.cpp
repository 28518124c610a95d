// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
#include "src/runbook/node_fault_history.h"

#include <fmt/format.h>

#include <algorithm>

#include "src/runbook/slurm.h"

namespace stepwatch::runbook {

store::IncarnationRecord ended_incarnation(const std::string& job, int64_t incarnation,
                                           std::string_view reason, const detect::Verdict* v,
                                           const std::string& node, int64_t ended_wall_ns) {
  store::IncarnationRecord r;
  r.job = job;
  r.incarnation = incarnation;
  r.ended_ns = ended_wall_ns;
  r.end_reason = std::string(reason);
  if (v == nullptr) return r;
  r.cause = v->cause == detect::Cause::kNone ? "" : detect::cause_name(v->cause);
  for (const auto& c : v->culprits) {
    r.culprit_ranks.push_back(c.rank);
    const std::string& host = c.host.empty() ? node : c.host;
    if (std::find(r.culprit_hosts.begin(), r.culprit_hosts.end(), host) == r.culprit_hosts.end())
      r.culprit_hosts.push_back(host);
  }
  return r;
}

Status record_ended(HistoryLedger& history, const store::IncarnationRecord& r) {
  Status first = history.record_incarnation(r);
  for (const auto& host : implicated_hosts(r)) {
    store::HostImplication h;
    h.host = host;
    h.job = r.job;
    h.incarnation = r.incarnation;
    h.at_ns = r.ended_ns.value_or(0);
    h.cause = r.cause;
    h.reason = r.end_reason;
    if (auto st = history.record_implication(h); !st && first) first = st;
  }
  return first;
}

Result<NodeFaultReport> read_node_fault(HistoryLedger& history, const std::string& job,
                                        const NodeFaultPolicy& policy, int64_t now_wall_ns) {
  auto job_history = history.incarnations(job, kHistoryRead);
  if (!job_history) return job_history.error();
  auto implications = history.implications(now_wall_ns - policy.cross_job_window_ns);
  if (!implications) return implications.error();
  NodeFaultReport r;
  r.storm = restart_storm(*job_history, policy, now_wall_ns);
  r.suspects = suspect_hosts(*job_history, *implications, policy, now_wall_ns);
  r.history = std::move(*job_history);
  return r;
}

void add_node_fault(PageMessage& m, const NodeFaultReport& report, std::string_view scheduler) {
  if (report.storm) m.evidence.push_back("restart storm: " + report.storm->evidence);
  for (const auto& s : report.suspects)
    m.suspects.push_back({s.host, s.evidence, exclude_hint(scheduler, {s.host})});
}

Status add_node_fault(PageMessage& m, HistoryLedger& history, const std::string& job,
                      const NodeFaultPolicy& policy, std::string_view scheduler,
                      int64_t now_wall_ns) {
  auto report = read_node_fault(history, job, policy, now_wall_ns);
  if (!report) return report.error();
  add_node_fault(m, *report, scheduler);
  return {};
}

void send_storm_page(PageDeliveries& deliveries, const std::vector<spec::Pager>& pagers,
                     PageMessage m, const std::string& job, int64_t incident, int64_t incarnation,
                     const std::string& why, int64_t now_wall_ns) {
  send_after_preempt_page(deliveries, pagers, std::move(m), job, incident, incarnation, "warning",
                          "restart-storm", why, now_wall_ns);
}

void send_after_preempt_page(PageDeliveries& deliveries, const std::vector<spec::Pager>& pagers,
                             PageMessage m, const std::string& job, int64_t incident,
                             int64_t incarnation, const std::string& severity,
                             const std::string& state, const std::string& why,
                             int64_t now_wall_ns) {
  m.severity = severity;
  m.state = state;
  m.summary = why;
  m.incident_id = std::to_string(incident);
  m.incarnation = static_cast<int>(incarnation);
  m.started_wall_ns = now_wall_ns;
  auto record = std::make_shared<IncidentRecord>();
  record->job = job;
  record->id = incident;
  deliveries.start(record, PageDeliveries::Kind::kEscalation, pagers, std::move(m));
}

std::vector<DrainLine> drain_suspects(const SlurmControl& slurm, const NodeFaultReport& report,
                                      const std::string& job, std::set<std::string>& drained) {
  std::vector<DrainLine> out;
  for (const auto& s : report.suspects) {
    if (!drained.insert(s.host).second) continue;
    if (!s.blamed) {
      out.push_back({fmt::format("Slurm node {} not drained: its only evidence is the short-run "
                                 "correlation ({})",
                                 s.host, s.evidence.empty() ? "" : s.evidence.front()),
                     true});
      continue;
    }
    std::string reason = fmt::format("stepwatch {}: {}", job,
                                     s.evidence.empty() ? "suspect host" : s.evidence.front());
    if (reason.size() > 200) reason = reason.substr(0, 197) + "...";
    Status st = slurm.drain(s.host, reason);
    out.push_back(
        {st ? fmt::format("drained Slurm node {} ({})", s.host, reason)
            : fmt::format("could not drain Slurm node {}: {}", s.host, st.error().message),
         st.ok()});
  }
  return out;
}

}  // namespace stepwatch::runbook
