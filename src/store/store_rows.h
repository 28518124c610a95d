// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// Internal to the store: column lists and row readers shared by store.cpp and store_history.cpp.
// A column list is a macro so it concatenates into the literal SQL that keys the statement cache.
#pragma once

#include <optional>
#include <vector>

#include "src/store/records.h"
#include "src/store/sqlite_db.h"

#define SW_INCIDENT_COLUMNS                                                                \
  "id, job, incarnation, opened_at_ns, state, cause, summary, verdict_json, paged_at_ns, " \
  "page_result, acked_at_ns, acked_by, ack_note, closed_at_ns, resolution, delivered_at_ns"
#define SW_ACTION_COLUMNS "id, incident_id, job, at_ns, kind, ok, detail"
#define SW_TRANSITION_COLUMNS "id, job, incarnation, at_ns, from_state, to_state, cause, summary"
#define SW_STATE_COLUMNS                                                                    \
  "job, incarnation, restarts, restarts_without_progress, checkpoint_id, checkpoint_step, " \
  "interval_median_ns, interval_p90_ns, interval_samples, updated_at_ns"
#define SW_PROCESS_COLUMNS "job, incarnation, pid, start_ticks, role, first_seen_ns"

namespace stepwatch::store {

inline Incident read_incident(const Stmt& s) {
  Incident i;
  i.id = s.int64(0);
  i.job = s.text(1);
  i.incarnation = s.int64(2);
  i.opened_at_ns = s.int64(3);
  i.state = s.text(4);
  i.cause = s.text(5);
  i.summary = s.text(6);
  i.verdict_json = s.text(7);
  i.paged_at_ns = s.opt_int64(8);
  i.page_result = s.text(9);
  i.acked_at_ns = s.opt_int64(10);
  i.acked_by = s.text(11);
  i.ack_note = s.text(12);
  i.closed_at_ns = s.opt_int64(13);
  i.resolution = s.text(14);
  i.delivered_at_ns = s.opt_int64(15);
  return i;
}

inline Action read_action(const Stmt& s) {
  return Action{s.int64(0), s.opt_int64(1),  s.text(2), s.int64(3),
                s.text(4),  s.int64(5) != 0, s.text(6)};
}

inline Transition read_transition(const Stmt& s) {
  return Transition{s.int64(0), s.text(1), s.int64(2), s.int64(3),
                    s.text(4),  s.text(5), s.text(6),  s.text(7)};
}

inline SupervisorState read_state(const Stmt& s) {
  return SupervisorState{s.text(0),      s.int64(1),     s.int64(2),     s.int64(3), s.text(4),
                         s.opt_int64(5), s.opt_int64(6), s.opt_int64(7), s.int64(8), s.int64(9)};
}

inline ProcessRecord read_process(const Stmt& s) {
  return ProcessRecord{s.text(0), s.int64(1), s.int64(2), static_cast<uint64_t>(s.int64(3)),
                       s.text(4), s.int64(5)};
}

template <class T, class Read>
Result<std::optional<T>> read_optional(Stmt& s, Read read) {
  auto row = s.step();
  if (!row) return row.error();
  if (!*row) return std::optional<T>();
  return std::optional<T>(read(s));
}

template <class T, class Read>
Result<std::vector<T>> read_all(Stmt& s, Read read) {
  std::vector<T> out;
  for (;;) {
    auto row = s.step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back(read(s));
  }
}

}  // namespace stepwatch::store
