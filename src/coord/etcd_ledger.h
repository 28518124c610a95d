// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The runbook's ledger for a multi-node job, in etcd (multinode.md §5.4): the job leader's
// Incident (runbook/incident.h) reads and writes through it, exactly as a single node's does
// through its SQLite store.
//
//   <prefix>/jobs/<job>/incident         the open incident, JSON (one creator ever wins:
//                                        CREATE == 0); its id: incident_id() below
//   <prefix>/jobs/<job>/incidents/<id>   a closed one, moved there by the close
//   <prefix>/epoch                       {"epoch": ms, "by": node}: the etcd history's epoch
//
// Every write is one txn fenced twice: CREATE(the leader's node key) == its revision (a leader
// whose lease lapsed, stopped or partitioned, cannot commit), and MOD(incident) == the revision
// read (nothing written meanwhile, by an ack on another node, say, is overwritten). A fence
// that fails is an error the Incident reports and retries; it never silences a page. Acks come
// from any node (ack()), fenced by MOD only: an ack needs no leadership. So do a page's delivery
// and its page actions: what a node sent, recorded by that node even once it no longer leads
// (a leader whose lease lapsed mid-delivery; review E14), so that it is never sent again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "src/coord/kv.h"
#include "src/coord/session.h"
#include "src/runbook/ledger.h"

namespace stepwatch::coord {

// <prefix>/jobs/<job>/incident: the job's open incident.
std::string incident_key(std::string_view prefix, std::string_view job);

// Incident ids never repeat, even after etcd lost its data (E7). A revision restarts with the
// data, so an id is not a revision alone: an incident record carries the epoch of the etcd
// history it opened in, and its id is epoch * kEpochScale + the record's create revision.
//
// The epoch is <prefix>/epoch: the wall-clock milliseconds when the first incident of that
// history opened (later still, if the opener saw a larger id). A wiped etcd has no epoch key;
// the next incident writes a new one, later than the last, so ids keep growing. They could
// repeat only if the lost history had committed over a million revisions a second since its
// epoch, or the clocks went back. Every id is below 2^53, so JSON readers keep it exact.
// A record written before epochs has none: its id stays its create revision.
inline constexpr int64_t kEpochScale = 1000;
inline constexpr int64_t kMaxEpochMs = 9'000'000'000'000;  // year 2255: ids stay below 2^53
// <prefix>/epoch
std::string epoch_key(std::string_view prefix);
int64_t incident_id(int64_t create_revision, int64_t epoch_ms);
// The id of the incident record at `kv` (its value read bounded, as every record's); an error
// naming the key when the record does not read.
Result<int64_t> incident_id_of(const KeyValue& kv);
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
  std::string epoch;       // <prefix>/epoch
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
  // `may_restore`: restore() or restore_deleted() this leader's open incident `id` if it finds
  // something else there (once: not again in the read that follows a restore).
  Result<std::optional<Read>> read(std::optional<int64_t> id, bool may_restore = true);
  // Whether `opened_by` is a node of the job: under a lease now, or in the roster of this run.
  // Anyone who may write under the prefix could put an incident record, acked, to mute a real
  // stall (E4): one no node of the job opened is not joined.
  Result<bool> vouched(const std::string& opened_by);
  struct Epoch {
    int64_t ms = 0;
    int64_t create_revision = 0;  // of the epoch key: an open is fenced on it
  };
  // The epoch incidents open in now: the stored one, or a new one written (none stored: etcd is
  // new or lost its data; or what is stored is no epoch) no earlier than `at_ns` and past every
  // id this ledger saw.
  Result<Epoch> epoch(int64_t at_ns);
  // Remembers the largest revision seen, so that a new epoch starts past every id seen.
  void saw(int64_t revision, int64_t epoch_ms);
  // Moves the open record at `kv` aside (fenced), so that a real incident can open.
  Status set_aside(const KeyValue& kv, int64_t fence, int64_t epoch_ms);
  // The record at `kv` is no incident of the job's, but this leader's last read there was its
  // open incident: `kv` is set aside and that incident written back as read (its id in it),
  // fenced. false: not restored (this node leads no more, or the key moved meanwhile).
  Result<bool> restore(const KeyValue& kv);
  // The key was deleted while this leader's last read there was its open incident: written back
  // (fenced, created) unless it was closed meanwhile or etcd lost its data (another epoch).
  Result<bool> restore_deleted();
  // Applies `change` to the open incident `id` and writes it, fenced (leader_only: by the
  // leader's fence too, else by MOD alone); retried when the record moved meanwhile. `change`
  // returns false to leave it as it is.
  Status modify(int64_t id, const std::function<bool(store::Incident&, std::string& extra)>& change,
                bool* applied = nullptr, bool leader_only = true);

  Kv& etcd_;
  std::string job_;
  LedgerKeys keys_;
  std::function<int64_t()> fence_;
  struct Vouched {  // whether the record of `id` opened by `opened_by` is the job's (vouched())
    int64_t id = 0;
    std::string opened_by;
    bool ok = false;
  };
  std::optional<Vouched> vouched_;
  int64_t last_id_ = 0;  // the largest id this ledger saw
  // The record at the incident key that is no incident of the job's (no node of the job opened
  // it, or it does not read): set aside when the job's own incident opens.
  std::optional<KeyValue> unvouched_;
  int64_t told_unreadable_ = 0;  // the mod revision of an unreadable record said
  // The job's open incident as this ledger last read or wrote it: what restore() writes back.
  std::shared_ptr<const Read> last_read_;  // (shared: Read is the .cpp's)
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
  int64_t create_revision = 0;  // of its record: an order for it is written later
  std::string opened_by;
  bool delivered = false;  // its page's delivery is recorded
};
// `unreadable`, if given: the mod revision of a record there that does not read (else 0).
Result<std::optional<OpenIncident>> open_incident(Kv& etcd, const LedgerKeys& keys, BadRecords& bad,
                                                  int64_t* unreadable = nullptr);

// The job's incidents in etcd (the open one first, then closed ones, newest first).
Result<std::vector<store::Incident>> incidents_in_etcd(Kv& etcd, const LedgerKeys& keys,
                                                       const std::string& job, int limit);

}  // namespace stepwatch::coord
