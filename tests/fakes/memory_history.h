// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// An in-memory runbook::HistoryLedger: the node-fault history the rules read, for tests that
// need no store and no etcd. `fail` makes every call fail as a store or etcd would.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/runbook/node_fault_history.h"

namespace stepwatch::test {

class MemoryHistory final : public runbook::HistoryLedger {
 public:
  std::vector<store::IncarnationRecord> records;  // any order (the rules order them)
  std::vector<store::HostImplication> implied;
  std::optional<Error> fail;

  Status record_incarnation(const store::IncarnationRecord& r) override {
    if (fail) return *fail;
    for (auto& have : records) {
      if (have.job == r.job && have.incarnation == r.incarnation) {
        have = r;
        return {};
      }
    }
    records.push_back(r);
    return {};
  }
  Result<std::vector<store::IncarnationRecord>> incarnations(const std::string& job,
                                                             int limit) override {
    if (fail) return *fail;
    std::vector<store::IncarnationRecord> out;
    for (auto it = records.rbegin(); it != records.rend(); ++it) {
      if (it->job == job && static_cast<int>(out.size()) < limit) out.push_back(*it);
    }
    return out;
  }
  Status record_implication(const store::HostImplication& i) override {
    if (fail) return *fail;
    implied.push_back(i);
    return {};
  }
  Result<std::vector<store::HostImplication>> implications(int64_t since_ns) override {
    if (fail) return *fail;
    std::vector<store::HostImplication> out;
    for (const auto& i : implied) {
      if (i.at_ns >= since_ns) out.push_back(i);
    }
    return out;
  }

  // An incarnation of `job` that started at `started_ns`, ended a minute later ("preempted",
  // cause io) with `culprit_host` blamed ("" none).
  void add_ended(const std::string& job, int64_t incarnation, int64_t started_ns,
                 const std::string& culprit_host = "") {
    store::IncarnationRecord r;
    r.job = job;
    r.incarnation = incarnation;
    r.started_ns = started_ns;
    r.ended_ns = started_ns + 60'000'000'000;
    r.end_reason = "preempted";
    r.cause = "io";
    r.hosts = {"a", "b"};
    if (!culprit_host.empty()) {
      r.culprit_ranks = {1};
      r.culprit_hosts = {culprit_host};
      implied.push_back({culprit_host, job, incarnation, *r.ended_ns, "io", "culprit rank 1 (io)"});
    }
    records.push_back(std::move(r));
  }
};

}  // namespace stepwatch::test
