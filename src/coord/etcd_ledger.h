// The runbook's ledger for a multi-node job, in etcd (multinode.md §5.4): the job leader's
// Incident (runbook/incident.h) reads and writes through it, exactly as a single node's does
// through its SQLite store.
//
//   <prefix>/jobs/<job>/incident         the open incident, JSON; its id is the key's create
//                                        revision (one creator ever wins: CREATE == 0)
//   <prefix>/jobs/<job>/incidents/<id>   a closed one, moved there by the close
//
// Every write is one txn fenced twice: CREATE(the leader's node key) == its revision (a leader
// whose lease lapsed, stopped or partitioned, cannot commit), and MOD(incident) == the revision
// read (nothing written meanwhile, by an ack on another node, say, is overwritten). A fence
// that fails is an error the Incident reports and retries; it never silences a page. Acks come
// from any node (ack()), fenced by MOD only: an ack needs no leadership.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "src/coord/kv.h"
#include "src/coord/session.h"
#include "src/runbook/ledger.h"

namespace stepwatch::coord {

// <prefix>/jobs/<job>/incident: the job's open incident (its id is the key's create revision).
std::string incident_key(std::string_view prefix, std::string_view job);
// <prefix>/jobs/<job>/incidents/<id, 20 digits>: where a closed one stays.
std::string closed_incident_key(std::string_view prefix, std::string_view job, int64_t id);

// Where a job's incident lives and who may write it.
struct LedgerKeys {
  std::string incident;    // <prefix>/jobs/<job>/incident
  std::string closed_dir;  // <prefix>/jobs/<job>/incidents/
  std::string fence_key;   // the leader's node key
  std::string node;        // this node, recorded as who opened or acted
  std::string nodes_dir;   // <prefix>/jobs/<job>/nodes/
  std::string roster;      // <prefix>/jobs/<job>/roster
  std::string set_aside;   // <prefix>/jobs/<job>/set_aside/: records not the cluster's
};
// The job's keys as this node writes them: its fence is its node key under the job.
LedgerKeys ledger_keys(const NodeSession& session, const std::string& job);

class EtcdLedger final : public runbook::IncidentLedger {
 public:
  // `fence`: the create revision of fence_key while this node leads (0: it does not, and every
  // write is refused). etcd must outlive it.
  EtcdLedger(Kv& etcd, std::string job, LedgerKeys keys, std::function<int64_t()> fence);

  Result<std::optional<store::Incident>> open_for(const std::string& job) override;
  Result<store::IncidentRef> open(const store::NewIncident& incident) override;
  Result<std::optional<store::Incident>> get(int64_t id) override;
  Status update(int64_t id, const store::NewIncident& now_says) override;
  Result<bool> claim_page(int64_t id, int64_t at_ns) override;
  Status record_delivery(int64_t id, int64_t at_ns, std::string_view result,
                         bool delivered) override;
  Status close(int64_t id, int64_t at_ns, std::string_view resolution) override;
  Status record_action(const store::Action& action) override;

  // Whether the open incident `id` was acked at or after since_ns (every ack is one of its
  // actions); nullopt when it is not open. One read.
  Result<std::optional<bool>> acked_since(int64_t id, int64_t since_ns);

  const std::string& job() const { return job_; }

 private:
  struct Read;
  // Reads the open incident; nullopt when none (or when its id is not `id`, if given), or when
  // no node of the job opened it (then set aside by open()).
  Result<std::optional<Read>> read(std::optional<int64_t> id);
  // Whether `opened_by` is a node of the job: under a lease now, or in the roster of this run.
  // Anyone who may write under the prefix could put an incident record, acked, to mute a real
  // stall (E4): one no node of the job opened is not joined.
  Result<bool> vouched(const std::string& opened_by);
  // Moves the open record at `kv` aside (fenced), so that a real incident can open.
  Status set_aside(const KeyValue& kv, int64_t fence);
  // Applies `change` to the open incident `id` and writes it, fenced; retried once when the
  // record moved meanwhile. `change` returns false to leave it as it is.
  Status modify(int64_t id, const std::function<bool(store::Incident&, std::string& extra)>& change,
                bool* applied = nullptr);

  Kv& etcd_;
  std::string job_;
  LedgerKeys keys_;
  std::function<int64_t()> fence_;
  std::optional<std::pair<int64_t, bool>> vouched_;  // create revision -> vouched
  std::optional<KeyValue> unvouched_;                // the open record no node opened
};

// Acks the job's open incident in etcd from any node (the API, `stepwatch ack`): nullopt when
// none is open. Fenced by MOD only.
Result<std::optional<store::Incident>> ack_in_etcd(Kv& etcd, const LedgerKeys& keys,
                                                   const std::string& job, int64_t at_ns,
                                                   const std::string& by, const std::string& note);

// The id of the job's open incident in etcd and who opened it (nullopt: none open, or its record
// does not read: said to `bad`). What a node checks an order against before it carries it out.
struct OpenIncident {
  int64_t id = 0;
  std::string opened_by;
};
Result<std::optional<OpenIncident>> open_incident(Kv& etcd, const LedgerKeys& keys,
                                                  BadRecords& bad);

// The job's incidents in etcd (the open one first, then closed ones, newest first).
Result<std::vector<store::Incident>> incidents_in_etcd(Kv& etcd, const LedgerKeys& keys,
                                                       const std::string& job, int limit);

}  // namespace stepwatch::coord
