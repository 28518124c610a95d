// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// A multi-node job's node-fault history in etcd (docs/node-fault.md, "Multi-node jobs"): the
// runbook::HistoryLedger its leader records incarnations and host implications through, exactly
// as a single node does through its SQLite store (runbook::StoreHistory).
//
//   <prefix>/jobs/<job>/history/<incarnation>         store::IncarnationRecord, JSON
//   <prefix>/hosts/<host>/<job>/<incarnation>         store::HostImplication, JSON
//
// <incarnation> is written with 20 digits, so that key order is incarnation order. The hosts/
// keys of every job together are the cross-job (per-host) record: any node reads them.
// Writes are the job leader's, fenced as its incident's are (etcd_ledger.h): CREATE(its node
// key) == its revision, so a leader whose lease lapsed records nothing. An incarnation record
// is merged into the one in etcd (store::merge_incarnation) and written only while that one is
// as read (MOD == the revision read; retried when another write moved it); an implication is
// written once (CREATE == 0), as the store keeps the first. Reads need no fence.
// No lease: the history outlives the job and its nodes. Nothing prunes it (a few hundred bytes
// per incarnation and per blamed host).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "src/coord/kv.h"
#include "src/runbook/node_fault_history.h"

namespace stepwatch::coord {

std::string history_prefix(std::string_view prefix, std::string_view job);  // ends with '/'
std::string history_key(std::string_view prefix, std::string_view job, int64_t incarnation);
std::string hosts_prefix(std::string_view prefix);  // <prefix>/hosts/
std::string implication_key(std::string_view prefix, std::string_view host, std::string_view job,
                            int64_t incarnation);

class EtcdHistory final : public runbook::HistoryLedger {
 public:
  // `prefix`: the cluster's (/stepwatch/v1). `fence_key` and `fence`: the leader's node key and
  // its create revision while this node leads (0: it does not, and every write is refused).
  // etcd must outlive it.
  EtcdHistory(Kv& etcd, std::string prefix, std::string fence_key, std::function<int64_t()> fence);

  Status record_incarnation(const store::IncarnationRecord& record) override;
  Result<std::vector<store::IncarnationRecord>> incarnations(const std::string& job,
                                                             int limit) override;
  Status record_implication(const store::HostImplication& implication) override;
  Result<std::vector<store::HostImplication>> implications(int64_t since_ns) override;

 private:
  Result<Compare> fenced(std::string_view what) const;

  Kv& etcd_;
  std::string prefix_;
  std::string fence_key_;
  std::function<int64_t()> fence_;
};

// The JSON of each record as kept in etcd. A value that does not parse, or a field of the
// wrong type, is an error naming `source` (the key) and the field.
std::string incarnation_record_json(const store::IncarnationRecord& r);
Result<store::IncarnationRecord> incarnation_record_from_json(std::string_view text,
                                                              std::string_view source);
std::string implication_json(const store::HostImplication& i);
Result<store::HostImplication> implication_from_json(std::string_view text,
                                                     std::string_view source);

}  // namespace stepwatch::coord
