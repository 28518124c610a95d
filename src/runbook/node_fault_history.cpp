#include "src/runbook/node_fault_history.h"

#include <algorithm>

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

Status record_ended(store::Store& store, const store::IncarnationRecord& r) {
  Status first = store.record_incarnation(r);
  for (const auto& host : implicated_hosts(r)) {
    store::HostImplication h;
    h.host = host;
    h.job = r.job;
    h.incarnation = r.incarnation;
    h.at_ns = r.ended_ns.value_or(0);
    h.cause = r.cause;
    h.reason = r.end_reason;
    if (auto st = store.record_implication(h); !st && first) first = st;
  }
  return first;
}

Result<NodeFaultReport> read_node_fault(store::Store& store, const std::string& job,
                                        const NodeFaultPolicy& policy, int64_t now_wall_ns) {
  auto history = store.incarnations(job, kHistoryRead);
  if (!history) return history.error();
  auto implications = store.implications(now_wall_ns - policy.cross_job_window_ns);
  if (!implications) return implications.error();
  NodeFaultReport r;
  r.storm = restart_storm(*history, policy, now_wall_ns);
  r.suspects = suspect_hosts(*history, *implications, policy, now_wall_ns);
  r.history = std::move(*history);
  return r;
}

void add_node_fault(PageMessage& m, const NodeFaultReport& report, std::string_view scheduler) {
  if (report.storm) m.evidence.push_back("restart storm: " + report.storm->evidence);
  for (const auto& s : report.suspects)
    m.suspects.push_back({s.host, s.evidence, exclude_hint(scheduler, {s.host})});
}

Status add_node_fault(PageMessage& m, store::Store& store, const std::string& job,
                      const NodeFaultPolicy& policy, std::string_view scheduler,
                      int64_t now_wall_ns) {
  auto report = read_node_fault(store, job, policy, now_wall_ns);
  if (!report) return report.error();
  add_node_fault(m, *report, scheduler);
  return {};
}

}  // namespace stepwatch::runbook
