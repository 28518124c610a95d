// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The incident store: SQLite under a state directory, shared by the supervisor (or agent) that
// writes it and the `stepwatch ack` / `stepwatch incidents` processes that read and ack.
//
// Durability. The file is in WAL mode with synchronous=NORMAL: a committed transaction is in the
// WAL (the OS page cache at least) when the call returns, so a process killed with SIGKILL
// right after loses nothing. Only an OS crash or power loss can drop the newest NORMAL commits.
// The incident lifecycle (open, page claim and result, ack, close) commits with
// synchronous=FULL, i.e. the WAL is fsynced before the call returns: those rows decide whether
// someone is paged, and a page claim lost to a power cut would page again after the reboot.
// They are a handful per incident, so the fsyncs cost nothing; transitions, actions, state and
// process records are frequent and stay NORMAL.
//
// Concurrency. Each Store is one connection; use one per thread. Writers take the lock with
// BEGIN IMMEDIATE and wait up to busy_timeout_ms for another process's writer; readers never
// wait for writers (WAL). A lock held past the timeout is Errc::kBusy naming the file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"
#include "src/store/records.h"

namespace stepwatch::store {

class Db;

inline constexpr const char* kDbFileName = "stepwatch.db";

struct OpenOptions {
  bool create = true;          // false: a missing directory or database is Errc::kNotFound
  int busy_timeout_ms = 5000;  // how long a writer waits for another process's writer
  int64_t now_ns = 0;          // recorded with schema migrations; 0: the wall clock
  // An existing stepwatch.db of 0 bytes (truncated: its incidents are gone) is refused as
  // Errc::kTruncated unless this is set; then it becomes a new, empty store. `--new-store`.
  bool fresh_if_empty = false;
};

// What a recorded incarnation becomes when `n` is recorded over it (Store::record_incarnation's
// rule, for every place that keeps incarnations: a field given replaces, one not given keeps).
void merge_incarnation(IncarnationRecord& old, const IncarnationRecord& n);
// What is wrong with a record as it would be kept (an empty job or host name; ended_ns without
// end_reason or the reverse), naming the incarnation; nullopt when nothing.
std::optional<std::string> incarnation_problem(const IncarnationRecord& r);

class Store {
 public:
  // Opens <state_dir>/stepwatch.db, creating the directory (mode 0700) and the database when
  // allowed, switching it to WAL and migrating its schema. Errors name the file or directory
  // and carry SQLite's message; a database from a newer stepwatch is Errc::kUnknownVersion,
  // an empty database file Errc::kTruncated (see OpenOptions::fresh_if_empty).
  static Result<Store> open(const std::string& state_dir, const OpenOptions& options = {});

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  const std::string& path() const;  // the database file

  // ---- incidents ----

  // Opens an incident for the job, or returns the job's open one untouched (created=false):
  // a job has at most one open incident, so a restarted supervisor joins it.
  Result<IncidentRef> open_incident(const NewIncident& incident);
  // The job's open (not closed) incident, if any.
  Result<std::optional<Incident>> open_incident_for(const std::string& job);
  Result<std::optional<Incident>> incident(int64_t id);
  // Updates what the open incident says when the verdict changes (stalled -> dead).
  Status update_incident(int64_t id, std::string_view state, std::string_view cause,
                         std::string_view summary, std::string_view verdict_json);

  // Claims the right to page for this incident: true for exactly one caller, ever, across
  // processes and restarts; false when it was already claimed. Call it before sending the
  // page. A supervisor killed between the claim and the send leaves page_result "claimed";
  // it is not paged again (at most once), and `stepwatch incidents` shows it. A closed
  // incident is never claimed (false); an unknown id is Errc::kNotFound.
  Result<bool> claim_page(int64_t id, int64_t at_ns);
  // Records the page's outcome ("sent: webhook 200", "failed: timeout"). Idempotent: sets
  // paged_at if no claim did, never moves it; the last result wins. `delivered`: a target took
  // the page (sets delivered_at once; a later failed re-delivery does not clear it).
  Status mark_paged(int64_t id, int64_t at_ns, std::string_view result, bool delivered = false);
  // Gives a claim back after a page that certainly failed, so that a retry can claim again.
  Status release_page(int64_t id, std::string_view result);

  // Acknowledges the job's open incident (the first ack's time, name and note are kept; every
  // ack is also recorded as an action). nullopt when the job has no open incident.
  Result<std::optional<Incident>> ack(const std::string& job, int64_t at_ns, std::string_view by,
                                      std::string_view note);
  // Closes the incident. Closing a closed incident is a no-op (the first resolution is kept).
  Status close_incident(int64_t id, int64_t at_ns, std::string_view resolution);

  // Newest first. job "" means every job; limit <= 0 means no limit.
  Result<std::vector<Incident>> incidents(const std::string& job, int limit);

  // ---- actions and transitions ----

  Result<int64_t> record_action(const Action& action);
  Result<std::vector<Action>> actions(int64_t incident_id);                    // oldest first
  Result<std::vector<Action>> job_actions(const std::string& job, int limit);  // newest first
  Result<int64_t> record_transition(const Transition& transition);
  Result<std::vector<Transition>> transitions(const std::string& job, int limit);  // newest first

  // ---- supervisor state ----

  Status save_state(const SupervisorState& state);  // insert or replace the job's row
  Result<std::optional<SupervisorState>> load_state(const std::string& job);

  // ---- processes per incarnation ----

  // Insert, or on the same (job, incarnation, pid, start_ticks) keep first_seen and take a
  // non-empty role.
  Status record_process(const ProcessRecord& process);
  Result<std::vector<ProcessRecord>> processes(const std::string& job);
  Result<std::vector<ProcessRecord>> processes(const std::string& job, int64_t incarnation);
  // The processes of incarnations before `incarnation`: what restart hygiene may kill.
  Result<std::vector<ProcessRecord>> processes_before(const std::string& job, int64_t incarnation);
  Result<int64_t> forget_processes_before(const std::string& job, int64_t incarnation);

  // ---- incarnations and host implications (store_incarnations.cpp) ----

  // Inserts the job's incarnation, or updates the recorded one: a field given (a set optional,
  // a non-empty string or list) replaces the recorded value, one not given keeps it, so an end
  // once recorded is never cleared (a later end replaces it: "failed" then "gave-up"). started_ns
  // is kept from the first record that had one; hosts are the union of every record's, in the
  // order first seen. end_reason and ended_ns come together; job is required.
  Status record_incarnation(const IncarnationRecord& record);
  // The job's incarnations, newest (highest incarnation) first; limit <= 0 means no limit.
  Result<std::vector<IncarnationRecord>> incarnations(const std::string& job, int limit);
  // Records that a host was blamed for a job's incarnation. Idempotent: the first record of a
  // (host, job, incarnation) is kept, a repeat is not an error.
  Status record_implication(const HostImplication& implication);
  // Every host's implications in every job with at_ns >= since_ns, newest first.
  Result<std::vector<HostImplication>> implications(int64_t since_ns);

  // ---- deliveries kept for another ledger (store_incarnations.cpp) ----

  // Keeps (or replaces) the outcome of the page of the job's incident `incident_id`; durable.
  Status keep_delivery(const KeptDelivery& delivery);
  // Forgets it once its ledger took it (none kept: nothing to do).
  Status forget_delivery(const std::string& job, int64_t incident_id);
  // The job's kept deliveries, oldest first.
  Result<std::vector<KeptDelivery>> kept_deliveries(const std::string& job);

  // ---- upkeep ----

  // Deletes history beyond the limits, per job, in one transaction.
  Result<PruneCounts> prune(const PruneLimits& limits);
  // Bytes the database's pages hold (its file size less the free pages, which new rows reuse;
  // the WAL not counted).
  Result<int64_t> used_bytes();

 private:
  explicit Store(std::unique_ptr<Db> db);

  Result<std::vector<ProcessRecord>> process_query(const char* sql, const std::string& job,
                                                   std::optional<int64_t> incarnation);

  std::unique_ptr<Db> db_;
};

}  // namespace stepwatch::store
